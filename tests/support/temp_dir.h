// A fresh folder for a test's files, removed with everything in it when the object goes, so that
// files from an earlier run or from a test running beside it never leak in.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace xo::testing {

class TempDir {
 public:
  // A new folder "<prefix>-XXXXXX" (mkdtemp: unique even across parallel test processes) under
  // GoogleTest's temporary folder (TEST_TMPDIR, else the system's).
  explicit TempDir(const std::string& prefix) {
    std::string name =
        (std::filesystem::path(::testing::TempDir()) / (prefix + "-XXXXXX")).string();
    if (mkdtemp(name.data()) == nullptr) {
      throw std::filesystem::filesystem_error("cannot create a temporary folder", name,
                                              std::error_code(errno, std::generic_category()));
    }
    path_ = name;
  }
  ~TempDir() {
    std::error_code ignored;  // a destructor never throws; a folder left behind is harmless
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace xo::testing
