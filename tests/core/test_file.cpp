// Atomic file writes on a full disk (simulated with a file size limit): the previous version stays
// whole, no temporary is left behind, and the error names the file, the reason and what was kept.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
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

}  // namespace
}  // namespace xo
