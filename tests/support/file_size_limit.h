// A full disk, simulated: this process's file size limit (RLIMIT_FSIZE) lowered, so that a write
// past it fails with EFBIG as one on a full disk fails with ENOSPC, with SIGXFSZ (which would kill
// the process) ignored. The limit and the signal's disposition are put back when the guard goes,
// also when the test fails.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

namespace xo::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    if (::getrlimit(RLIMIT_FSIZE, &saved_) != 0) fail("getrlimit");
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    if (::sigaction(SIGXFSZ, &ignore, &saved_action_) != 0) fail("sigaction");
    rlimit lowered = saved_;
    // Only the soft limit: lowering the hard one could not be undone without privileges.
    lowered.rlim_cur = std::min(bytes, saved_.rlim_max);
    if (::setrlimit(RLIMIT_FSIZE, &lowered) != 0) {
      ::sigaction(SIGXFSZ, &saved_action_, nullptr);
      fail("setrlimit");
    }
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::sigaction(SIGXFSZ, &saved_action_, nullptr);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  [[noreturn]] static void fail(const char* call) {
    throw std::runtime_error(std::string("FileSizeLimit: ") + call + ": " + std::strerror(errno));
  }
  rlimit saved_{};
  struct sigaction saved_action_ {};
};

}  // namespace xo::testing
