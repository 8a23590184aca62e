// Links planted where a search and its trials write: `train-group` run by hand and `tune` into a
// folder whose `trials` is a link write nothing outside their folders (before, a result.json
// linked to a file outside replaced that file, and a planted OUT/trials sent every trial's files
// elsewhere). And a trial folder `train-group` cannot write in is named before any work (each
// trial's log is opened first, in place of a probe file made and removed).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/file.h"
#include "support/cli.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using xo::testing::run_cli;

constexpr char kSpec[] = R"([model]
name = "tiny"
input = [2]
layers = [ { type = "linear", out = 4 }, { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
batch = 10
epochs = 3
[data]
source = "disc"
samples = 40
)";

// Every file under `dir`, with its content: what must stay as it was.
std::string everything_in(const fs::path& dir) {
  std::string all;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    all += e.path().string() + "\n";
    if (e.is_regular_file()) all += xo::read_file(e.path()) + "\n";
  }
  return all;
}

TEST(PlantedLinks, TrainGroupWritesNothingThroughLinksInATrialsFolder) {
  const xo::testing::TempDir dir("planted-group");
  const fs::path outside = dir.path() / "outside";
  fs::create_directories(outside / "folder");
  std::ofstream(outside / "victim.txt") << "keep me\n";
  std::ofstream(outside / "weights.txt") << "keep me too\n";
  std::ofstream(outside / "log.txt") << "and me\n";
  const std::string before = everything_in(outside);

  const fs::path trial = dir.path() / "t01";
  fs::create_directories(trial);
  std::ofstream(trial / "spec.toml") << kSpec;
  fs::create_symlink(outside / "victim.txt", trial / "result.json");
  fs::create_symlink(outside / "weights.txt", trial / "weights.safetensors");
  fs::create_symlink(outside / "log.txt", trial / "log.txt");
  fs::create_directory_symlink(outside / "folder", trial / "checkpoints");

  const auto r =
      run_cli("train-group t01 --threads 1 --checkpoint-every 1steps --pause-after 1", dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(everything_in(outside), before) << "a file outside the trial's folder changed";
  for (const char* name : {"result.json", "weights.safetensors", "log.txt"}) {
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(trial / name))) << name;
  }
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(trial / "checkpoints")));
}

TEST(PlantedLinks, TrainGroupRefusesATrialNamedTwice) {
  const xo::testing::TempDir dir("group-twice");
  fs::create_directories(dir.path() / "t01");
  std::ofstream(dir.path() / "t01" / "spec.toml") << kSpec;
  const auto r = run_cli("train-group t01 ./t01 --threads 1", dir.path());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("is named twice"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "t01" / "result.json"));
}

TEST(PlantedLinks, TuneWritesNoTrialThroughAPlantedTrialsLink) {
  const xo::testing::TempDir dir("planted-trials");
  const fs::path elsewhere = dir.path() / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directories(dir.path() / "out");
  fs::create_directory_symlink(elsewhere, dir.path() / "out" / "trials");
  std::ofstream(dir.path() / "spec.toml") << kSpec;
  const auto r = run_cli("tune spec.toml --vary lr=0.1,0.2 --out out --quiet", dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::is_empty(elsewhere)) << everything_in(elsewhere);
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(dir.path() / "out" / "trials")));
  EXPECT_TRUE(fs::exists(dir.path() / "out" / "trials" / "t01" / "result.json"));
}

// A folder made immutable while this lives (no file may be made in it, by root either: the
// bits of chmod do not stop root); set() is false where the file system or the process cannot.
class ImmutableFolder {
 public:
  explicit ImmutableFolder(const fs::path& dir)
      : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0 || ::ioctl(fd_, FS_IOC_GETFLAGS, &flags_) != 0) return;
    int immutable = flags_ | FS_IMMUTABLE_FL;
    set_ = ::ioctl(fd_, FS_IOC_SETFLAGS, &immutable) == 0;
  }
  ~ImmutableFolder() {
    if (set_) ::ioctl(fd_, FS_IOC_SETFLAGS, &flags_);
    if (fd_ >= 0) ::close(fd_);
  }
  ImmutableFolder(const ImmutableFolder&) = delete;
  ImmutableFolder& operator=(const ImmutableFolder&) = delete;
  bool set() const { return set_; }

 private:
  int fd_ = -1;
  int flags_ = 0;
  bool set_ = false;
};

TEST(TrainGroup, NamesATrialFolderItCannotWriteInBeforeTraining) {
  const xo::testing::TempDir dir("group-unwritable");
  const fs::path trial = dir.path() / "t01";
  fs::create_directories(trial);
  std::ofstream(trial / "spec.toml") << kSpec;
  const ImmutableFolder locked(trial);
  if (!locked.set()) {
    GTEST_SKIP() << "this file system or process cannot make " << trial
                 << " immutable (FS_IOC_SETFLAGS: ext4 and CAP_LINUX_IMMUTABLE)";
  }
  const auto r = run_cli("train-group t01 --threads 1 --checkpoint-every off", dir.path());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("train-group: t01: cannot write a trial's files there"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("final loss"), std::string::npos) << "it trained: " << r.output;
}

// A finished trial's checkpoint folder (made to lock it for the group's run) stays, empty: a
// search makes them by the thousand, and on ext4 without a journal each one removed slows every
// inode made near it for a minute. A group run again over the same folders trains as the first.
TEST(TrainGroup, AFinishedTrialKeepsItsCheckpointFolderEmpty) {
  const xo::testing::TempDir dir("group-kept-folder");
  for (const char* t : {"t01", "t02"}) {
    fs::create_directories(dir.path() / t);
    std::ofstream(dir.path() / t / "spec.toml") << kSpec;
  }
  for (int run = 0; run < 2; ++run) {
    const auto r = run_cli("train-group t01 t02 --threads 1 --checkpoint-every 60s", dir.path());
    ASSERT_EQ(r.status, 0) << r.output;
    for (const char* t : {"t01", "t02"}) {
      const fs::path checkpoints = dir.path() / t / "checkpoints";
      EXPECT_TRUE(fs::is_directory(checkpoints)) << t << ", run " << run;
      EXPECT_TRUE(fs::is_empty(checkpoints)) << t << ", run " << run;
      EXPECT_TRUE(fs::exists(dir.path() / t / "result.json")) << t << ", run " << run;
    }
  }
}

}  // namespace
