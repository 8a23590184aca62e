// Atomic file writes on a full disk (simulated with a file size limit): the previous version stays
// whole, no temporary is left behind, and the error names the file, the reason and what was kept.
// Writes that a planted symlink cannot redirect; special targets (stdout, a FIFO, a device, links
// to them) written in place; the output folder's lock.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "support/expect_error.h"
#include "support/file_size_limit.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

constexpr rlim_t kLimit = 4096;  // bytes a "disk" takes before it is full

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  return names;
}

TEST(WriteFileAtomic, CreatesFoldersAndReplacesTheFile) {
  const testing::TempDir temp("write-atomic");
  const fs::path file = temp / "a" / "b" / "out.txt";
  write_file_atomic(file, "first");
  EXPECT_EQ(read_file(file), "first");
  write_file_atomic(file, "second, longer");
  EXPECT_EQ(read_file(file), "second, longer");
  EXPECT_EQ(names_in(file.parent_path()), std::vector<std::string>{"out.txt"});
}

// Several files at once (a fused group's results and weights): each written in full in its
// folder, a link followed by add() and replaced by replace(), no temporary left.
// Durable (synced) or only renamed into place (files rewritten at every start): the same files.
TEST(AtomicWrites, WritesEveryFileInItsFolderAsTheSingleCallsWould) {
  for (const AtomicWrites::Keep keep :
       {AtomicWrites::Keep::Durable, AtomicWrites::Keep::Rewritten}) {
    const testing::TempDir temp("atomic-writes");
    const fs::path target = temp / "elsewhere.txt";
    write_file_atomic(target, "old");
    fs::create_directories(temp / "t1");
    fs::create_symlink(target, temp / "t1" / "followed");
    fs::create_symlink(target, temp / "t1" / "replaced");
    write_file_atomic(temp / "t1" / "result.json", "before");
    AtomicWrites w(keep);
    EXPECT_TRUE(w.empty());
    w.add(temp / "t1" / "result.json", "one");
    w.add(temp / "t2" / "deep" / "result.json", std::string(100000, 'x'));
    w.add(temp / "t1" / "followed", "through the link");
    w.replace(temp / "t1" / "replaced", "a file of its own");
    EXPECT_FALSE(w.empty());
    w.commit();
    EXPECT_TRUE(w.empty());
    EXPECT_EQ(read_file(temp / "t1" / "result.json"), "one");
    EXPECT_EQ(read_file(temp / "t2" / "deep" / "result.json"), std::string(100000, 'x'));
    EXPECT_EQ(read_file(target), "through the link");
    EXPECT_TRUE(fs::is_symlink(temp / "t1" / "followed"));
    EXPECT_FALSE(fs::is_symlink(temp / "t1" / "replaced"));
    EXPECT_EQ(read_file(temp / "t1" / "replaced"), "a file of its own");
    std::vector<std::string> t1 = names_in(temp / "t1");
    std::sort(t1.begin(), t1.end());
    EXPECT_EQ(t1, (std::vector<std::string>{"followed", "replaced", "result.json"}));
    EXPECT_EQ(names_in(temp / "t2" / "deep"), std::vector<std::string>{"result.json"});
  }
}

// A fused group's outputs: two files in each of 16 folders, synced on several threads; each file
// lands whole with its own bytes, and no temporary is left.
TEST(AtomicWrites, ManyFilesInManyFoldersLandWhole) {
  const testing::TempDir temp("atomic-writes-many");
  AtomicWrites w;
  for (int t = 0; t < 16; ++t) {
    const fs::path dir = temp / fmt::format("t{:02}", t);
    w.add(dir / "result.json", fmt::format("result {}", t));
    w.add(dir / "weights.safetensors", std::string(1000 + t, static_cast<char>('a' + t)));
  }
  w.commit();
  for (int t = 0; t < 16; ++t) {
    const fs::path dir = temp / fmt::format("t{:02}", t);
    EXPECT_EQ(read_file(dir / "result.json"), fmt::format("result {}", t));
    EXPECT_EQ(read_file(dir / "weights.safetensors"),
              std::string(1000 + t, static_cast<char>('a' + t)));
    std::vector<std::string> names = names_in(dir);
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"result.json", "weights.safetensors"}));
  }
}

// A file that cannot be written stops the commit before any file is replaced where it fails while
// writing (every file keeps its previous version, no temporary is left), and names the file.
TEST(AtomicWrites, AFailureBeforeTheRenamesKeepsEveryPreviousVersion) {
  const testing::TempDir temp("atomic-writes-fail");
  write_file_atomic(temp / "a.json", "previous a");
  fs::create_directories(temp / "b.json");  // a folder where a file is replaced: refused
  AtomicWrites w;
  w.add(temp / "a.json", "new a");
  w.replace(temp / "b.json", "new b");
  testing::expect_user_error([&] { w.commit(); },
                             {(temp / "b.json").string(), "a folder, not replaced by a file"});
  EXPECT_EQ(read_file(temp / "a.json"), "previous a");
  std::vector<std::string> names = names_in(temp.path());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.json", "b.json"}));
  // A full disk while writing the second: the same.
  AtomicWrites full;
  full.add(temp / "a.json", "new a");
  full.add(temp / "c.json", std::string(2 * kLimit, 'x'));
  {
    const testing::FileSizeLimit limit(kLimit);
    testing::expect_user_error(
        [&] { full.commit(); },
        {(temp / "c.json").string(), std::strerror(EFBIG), "no file was written"});
  }
  EXPECT_EQ(read_file(temp / "a.json"), "previous a");
  names = names_in(temp.path());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.json", "b.json"}));
}

// Many files, their temporaries written on several threads: of two that fail, the first added is
// named whichever thread met it first, and every file keeps its previous version, no temporary
// left in any folder.
TEST(AtomicWrites, TheFirstOfManyFailuresInOrderIsNamed) {
  const testing::TempDir temp("atomic-writes-many-fail");
  AtomicWrites w;
  for (int t = 0; t < 12; ++t) {
    const fs::path dir = temp / fmt::format("t{:02}", t);
    write_file_atomic(dir / "result.json", "previous");
    if (t == 5 || t == 9) fs::create_directories(dir / "weights.safetensors");
    w.add(dir / "result.json", fmt::format("result {}", t));
    w.replace(dir / "weights.safetensors", "weights");
  }
  testing::expect_user_error([&] { w.commit(); }, {(temp / "t05" / "weights.safetensors").string(),
                                                   "a folder, not replaced by a file"});
  for (int t = 0; t < 12; ++t) {
    const fs::path dir = temp / fmt::format("t{:02}", t);
    EXPECT_EQ(read_file(dir / "result.json"), "previous");
    std::vector<std::string> names = names_in(dir);
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, t == 5 || t == 9
                         ? (std::vector<std::string>{"result.json", "weights.safetensors"})
                         : std::vector<std::string>{"result.json"});
  }
  // A full disk for the 7th file's temporary (the others' are smaller than the limit): the same.
  AtomicWrites full;
  for (int t = 0; t < 12; ++t) {
    const fs::path dir = temp / fmt::format("t{:02}", t);
    full.add(dir / "result.json", t == 7 || t == 10 ? std::string(2 * kLimit, 'x') : "new");
  }
  {
    const testing::FileSizeLimit limit(kLimit);
    testing::expect_user_error([&] { full.commit(); }, {(temp / "t07" / "result.json").string(),
                                                        std::strerror(EFBIG), "previous version"});
  }
  for (int t = 0; t < 12; ++t) {
    const fs::path dir = temp / fmt::format("t{:02}", t);
    EXPECT_EQ(read_file(dir / "result.json"), "previous");
    EXPECT_EQ(names_in(dir).size(), t == 5 || t == 9 ? 2u : 1u);
  }
}

TEST(WriteFileAtomic, AReplacedFileKeepsItsPermissions) {
  const testing::TempDir temp("write-atomic");
  const fs::path file = temp / "private.json";
  write_file_atomic(file, "first");
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  write_file_atomic(file, "second");
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_file(file), "second");
}

TEST(WriteFileAtomic, AFullDiskKeepsThePreviousVersionAndSaysSo) {
  const testing::TempDir temp("write-full");
  const fs::path file = temp / "results.json";
  write_file_atomic(file, "{\"previous\": true}\n");
  {
    const testing::FileSizeLimit full(kLimit);
    testing::expect_user_error([&] { write_file_atomic(file, std::string(2 * kLimit, 'x')); },
                               {file.string(), "cannot write", std::strerror(EFBIG),
                                "the previous version of the file is kept"});
  }
  EXPECT_EQ(read_file(file), "{\"previous\": true}\n");
  EXPECT_EQ(names_in(temp.path()), std::vector<std::string>{"results.json"});  // no temporary
}

TEST(WriteFileAtomic, AFullDiskWithoutAPreviousVersionLeavesNoFile) {
  const testing::TempDir temp("write-full-new");
  const fs::path file = temp / "results.csv";
  {
    const testing::FileSizeLimit full(kLimit);
    testing::expect_user_error([&] { write_file_atomic(file, std::string(2 * kLimit, 'x')); },
                               {file.string(), std::strerror(EFBIG), "no file was written"});
  }
  EXPECT_TRUE(names_in(temp.path()).empty());
}

TEST(WriteFileAtomic, AFullDiskKeepsThePreviousWeights) {
  const testing::TempDir temp("safetensors-full");
  const fs::path file = temp / "w.safetensors";
  const std::vector<NamedTensor> before = {{"0.weight", {2, 2}, {1, 2, 3, 4}}};
  save_safetensors(file, before);
  const std::string saved = read_file(file);
  {
    const testing::FileSizeLimit full(kLimit);
    const std::vector<NamedTensor> bigger = {
        {"0.weight", {1024, 2}, std::vector<float>(2048, 0.5f)}};
    testing::expect_user_error(
        [&] { save_safetensors(file, bigger); },
        {file.string(), std::strerror(EFBIG), "the previous version of the file is kept"});
  }
  EXPECT_EQ(read_file(file), saved);
  const auto back = load_safetensors(file);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].data, before[0].data);
  EXPECT_EQ(names_in(temp.path()), std::vector<std::string>{"w.safetensors"});
}

bool is_link(const fs::path& p) { return fs::is_symlink(fs::symlink_status(p)); }

TEST(WriteFileAtomic, APlantedSymlinkAtTheOldTemporaryNameIsNeverFollowed) {
  const testing::TempDir temp("write-planted");
  const fs::path victim = temp / "victim.txt";
  write_file_atomic(victim, "precious\n");
  const fs::path file = temp / "results.json";
  // The name the temporary had before (PATH.tmp.PID): another user could plant a link there.
  const fs::path planted = fs::path(fmt::format("{}.tmp.{}", file.string(), ::getpid()));
  fs::create_symlink(victim, planted);
  write_file_atomic(file, "new\n");
  write_file_atomic(file, "newer\n");
  EXPECT_EQ(read_file(victim), "precious\n");
  EXPECT_TRUE(is_link(planted));
  EXPECT_FALSE(is_link(file));
  EXPECT_EQ(read_file(file), "newer\n");
  // Nothing else left beside them: the temporaries had other names and were renamed.
  auto names = names_in(temp.path());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"results.json", planted.filename().string(), "victim.txt"}));
}

TEST(WriteFileAtomic, AFifoWithAReaderGetsTheBytesAndStaysAFifo) {
  const testing::TempDir temp("write-fifo");
  const fs::path fifo = temp / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const std::string bytes = std::string(200'000, 'x') + "end\n";  // more than a pipe holds
  std::string received;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_CLOEXEC);
    char buf[4096];
    for (ssize_t n; fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0;) {
      received.append(buf, static_cast<size_t>(n));
    }
    if (fd >= 0) ::close(fd);
  });
  write_file_atomic(fifo, bytes);
  reader.join();
  EXPECT_EQ(received, bytes);
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
  EXPECT_EQ(names_in(temp.path()), std::vector<std::string>{"pipe"});
}

// Standard output redirected to a file for the length of a test, as a shell's `> FILE` does.
class CapturedStdout {
 public:
  explicit CapturedStdout(const fs::path& file) {
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ::dup2(fd, STDOUT_FILENO);
    ::close(fd);
  }
  ~CapturedStdout() {
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  CapturedStdout(const CapturedStdout&) = delete;
  CapturedStdout& operator=(const CapturedStdout&) = delete;

 private:
  int saved_ = -1;
};

TEST(WriteFileAtomic, DashAndDevStdoutWriteToStandardOutputInPlace) {
  const testing::TempDir temp("write-stdout");
  const fs::path captured = temp / "stdout.txt";
  struct stat before;
  {
    const CapturedStdout redirect(captured);
    ASSERT_EQ(::stat(captured.c_str(), &before), 0);
    std::printf("printed first\n");  // still in stdio's buffer: it must come out first
    write_file_atomic("-", "{\"dash\": 1}\n");
    // /dev/stdout leads to the very file the shell opened: written through it, never replaced
    // (a replacement would cut the stream off from everything printed after it).
    write_file_atomic("/dev/stdout", "{\"dev\": 2}\n");
    std::printf("printed last\n");
  }
  EXPECT_EQ(read_file(captured), "printed first\n{\"dash\": 1}\n{\"dev\": 2}\nprinted last\n");
  struct stat after;
  ASSERT_EQ(::stat(captured.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(names_in(temp.path()), std::vector<std::string>{"stdout.txt"});
  check_writable_path("-", "--json");
  check_writable_path("/dev/stdout", "--json");
}

TEST(WriteFileAtomic, ADeviceOrALinkToOneIsWrittenNotReplaced) {
  const testing::TempDir temp("write-device");
  write_file_atomic("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  const fs::path link = temp / "sink";
  fs::create_symlink("/dev/null", link);
  write_file_atomic(link, "discarded too");
  EXPECT_TRUE(is_link(link));
  EXPECT_EQ(fs::read_symlink(link), "/dev/null");
  check_writable_path(link, "--json");
}

// The check before any work creates the folders a write needs and writes a probe there, so that
// what permission bits allow but the file system refuses (root on /proc) fails before training,
// not after it; the probe leaves nothing behind.
TEST(CheckWritablePath, CreatesTheFoldersAndProbesTheFileSystem) {
  const testing::TempDir temp("writable");
  const fs::path deep = temp / "a" / "b" / "w.safetensors";
  check_writable_path(deep, "--save");
  EXPECT_TRUE(fs::is_directory(temp / "a" / "b"));
  EXPECT_TRUE(names_in(temp / "a" / "b").empty());
  testing::expect_user_error([] { check_writable_path("/proc/crossover-nope/w.json", "--json"); },
                             {"--json /proc/crossover-nope/w.json: cannot create the folder"});
  testing::expect_user_error([] { check_writable_path("/proc/w.json", "--json"); },
                             {"--json /proc/w.json: cannot write in /proc"});
}

// Several files of one folder (a fused group's results and weights): the folder probed once, and
// every path still checked (a folder where a file goes is refused though its folder was probed).
TEST(CheckWritablePath, AFolderProbedOnceForSeveralFiles) {
  const testing::TempDir temp("writable-once");
  std::vector<fs::path> probed;
  check_writable_path(temp / "t01" / "result.json", "a trial's result", &probed);
  check_writable_path(temp / "t01" / "weights.safetensors", "a trial's weights", &probed);
  check_writable_path(temp / "t02" / "result.json", "a trial's result", &probed);
  EXPECT_EQ(probed,
            (std::vector<fs::path>{fs::absolute(temp / "t01"), fs::absolute(temp / "t02")}));
  fs::create_directories(temp / "t01" / "log.txt");
  testing::expect_user_error(
      [&] { check_writable_path(temp / "t01" / "log.txt", "a trial's log", &probed); },
      {"a trial's log", "log.txt"});
  testing::expect_user_error([&] { check_writable_path("/proc/w.json", "--json", &probed); },
                             {"--json /proc/w.json: cannot write in /proc"});
}

TEST(WriteFileAtomic, ASymlinkToAFileReplacesTheFileAndKeepsTheLink) {
  const testing::TempDir temp("write-link");
  const fs::path real = temp / "data" / "results.json";
  write_file_atomic(real, "old\n");
  const fs::path link = temp / "latest.json";
  fs::create_symlink(fs::path("data") / "results.json", link);  // relative, as people make them
  write_file_atomic(link, "new\n");
  EXPECT_TRUE(is_link(link));
  EXPECT_EQ(read_file(real), "new\n");
  EXPECT_EQ(names_in(real.parent_path()), std::vector<std::string>{"results.json"});
  // A link to a name not yet written: the file is created where it points.
  const fs::path dangling = temp / "next.json";
  fs::create_symlink(temp / "data" / "next.json", dangling);
  write_file_atomic(dangling, "created\n");
  EXPECT_TRUE(is_link(dangling));
  EXPECT_EQ(read_file(temp / "data" / "next.json"), "created\n");
  // A loop is an error, not a hang.
  fs::create_symlink(temp / "b", temp / "a");
  fs::create_symlink(temp / "a", temp / "b");
  testing::expect_user_error([&] { write_file_atomic(temp / "a", "x"); },
                             {(temp / "a").string(), std::strerror(ELOOP)});
}

TEST(WriteFileAtomic, ALinkAnotherUserPlantedInASharedFolderIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a symlink to another user";
  const testing::TempDir temp("write-shared");
  const fs::path shared = temp / "tmp";
  fs::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);  // as /tmp: sticky, world-writable
  const fs::path victim = temp / "victim.txt";
  write_file_atomic(victim, "precious\n");
  const fs::path planted = shared / "results.json";
  fs::create_symlink(victim, planted);
  constexpr uid_t kOtherUser = 54321;
  ASSERT_EQ(::lchown(planted.c_str(), kOtherUser, kOtherUser), 0) << std::strerror(errno);
  testing::expect_user_error([&] { write_file_atomic(planted, "overwritten\n"); },
                             {planted.string(), "owned by another user", "not followed"});
  EXPECT_EQ(read_file(victim), "precious\n");
}

TEST(FolderLock, ASecondLockOnTheFolderIsRefusedUntilTheFirstIsGone) {
  const testing::TempDir temp("lock");
  const fs::path out = temp / "out";  // created by the lock
  {
    const FolderLock first(out, "crossover run --models disc-12", "--out");
    EXPECT_TRUE(first.unsupported().empty());
    EXPECT_TRUE(fs::is_regular_file(out / std::string(kFolderLockName)));
    testing::expect_user_error(
        [&] { const FolderLock second(out, "crossover sweep", "--out"); },
        {"--out " + out.string(), "another crossover",
         fmt::format("pid {}: crossover run --models disc-12", ::getpid()), "another --out"});
  }
  const FolderLock again(out, "crossover sweep", "--out");  // the first one is released
  EXPECT_TRUE(again.unsupported().empty());
}

TEST(FolderLock, APlantedSymlinkAsTheLockFileIsNotFollowed) {
  const testing::TempDir temp("lock-planted");
  const fs::path victim = temp / "victim.txt";
  write_file_atomic(victim, "precious\n");
  const fs::path out = temp / "out";
  fs::create_directory(out);
  fs::create_symlink(victim, out / std::string(kFolderLockName));
  testing::expect_user_error([&] { const FolderLock lock(out, "crossover run", "--out"); },
                             {out.string(), "lock file", std::strerror(ELOOP)});
  EXPECT_EQ(read_file(victim), "precious\n");
}

}  // namespace
}  // namespace xo
