// `train-group` before any work: a trial folder it cannot write in is named with why, before a
// step is trained (each trial's log is opened first, in place of a probe file made and removed).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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

}  // namespace
