// A failure of the machine is not the trial's: a full disk ends a search's trials as failed by the
// machine (exit code 7, the file and the cause named), and once the disk has room the same command
// trains them again, where before they stayed `failed` for good. The disk is a real one: a tmpfs
// of 1 MiB mounted for the test (root only; skipped, saying why, elsewhere), too small for any
// trial's weights (1 MiB each) but not for the search's own records.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using xo::testing::run_cli;

// A tmpfs of `bytes` at `dir` for as long as the object lives.
class SmallDisk {
 public:
  SmallDisk(const fs::path& dir, size_t bytes) : dir_(dir) {
    fs::create_directories(dir);
    const std::string options = "size=" + std::to_string(bytes);
    mounted_ = ::mount("xo-small-disk", dir.c_str(), "tmpfs", 0, options.c_str()) == 0;
    if (!mounted_) why_ = std::strerror(errno);
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  // The same disk made `bytes` large, its files kept: the room a user makes.
  bool grow(size_t bytes) const {
    const std::string options = "size=" + std::to_string(bytes);
    return ::mount("xo-small-disk", dir_.c_str(), "tmpfs", MS_REMOUNT, options.c_str()) == 0;
  }

 private:
  fs::path dir_;
  bool mounted_ = false;
  std::string why_;
};

// An MLP of 263,000 parameters on the disc set: its weights alone fill the small disk.
constexpr char kWideSpec[] = R"([model]
name = "wide"
input = [2]
layers = [ { type = "linear", out = 512 }, { type = "relu" }, { type = "linear", out = 512 },
           { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
batch = 100
epochs = 1
[data]
source = "disc"
samples = 200
)";

nlohmann::json results(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

TEST(MachineFailure, TrialsAFullDiskFailedAreTrainedAgainOnceItHasRoom) {
  const xo::testing::TempDir dir("machine-failure");
  std::ofstream(dir.path() / "wide.toml") << kWideSpec;
  const SmallDisk disk(dir.path() / "disk", 1 << 20);
  if (!disk.mounted()) GTEST_SKIP() << "no tmpfs could be mounted here: " << disk.why();
  const std::string search =
      "tune wide.toml --vary lr=0.1,0.2 --epochs 1 --fuse off --parallel 1 --threads 1 "
      "--out disk/search";
  const auto full = run_cli(search, dir.path());
  ASSERT_EQ(full.status, 0) << full.output;  // the search ran; its trials did not
  const auto first = results(dir.path() / "disk/search/results.json");
  ASSERT_EQ(first["trials"].size(), 2u) << full.output;
  for (const auto& t : first["trials"]) {
    EXPECT_EQ(t["status"], "failed") << t.dump();
    EXPECT_TRUE(t.value("machine_failed", false)) << t.dump();
    const std::string error = t["error"];
    EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
    EXPECT_NE(error.find("the same command retries it"), std::string::npos) << error;
  }
  // A trial's own process said which file and why, and ended with the machine's exit code.
  const auto alone =
      run_cli("train wide.toml --threads 1 --checkpoint-every off --save disk/alone.safetensors",
              dir.path());
  EXPECT_EQ(alone.status, 7) << alone.output;
  EXPECT_NE(alone.output.find("disk/alone.safetensors"), std::string::npos) << alone.output;

  ASSERT_TRUE(disk.grow(64 << 20)) << std::strerror(errno);
  const auto again = run_cli(search, dir.path());
  ASSERT_EQ(again.status, 0) << again.output;
  const auto second = results(dir.path() / "disk/search/results.json");
  for (const auto& t : second["trials"]) {
    EXPECT_EQ(t["status"], "finished") << t.dump();
    EXPECT_FALSE(t.value("machine_failed", false)) << t.dump();
    EXPECT_EQ(t["epochs"], 1) << t.dump();
  }
  EXPECT_TRUE(fs::exists(dir.path() / "disk/search/best.safetensors"));
}

}  // namespace
