#include "train/checkpoint_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/error.h"

namespace xo {

CheckpointFolderLock::CheckpointFolderLock(const std::filesystem::path& dir,
                                           const std::string& flag, CheckpointFolder folder)
    : dir_(dir) {
  const std::string named = (flag.empty() ? "checkpoint folder" : flag) + " " + dir.string();
  std::error_code ec;
  created_ = std::filesystem::create_directories(dir, ec) && folder == CheckpointFolder::Remove;
  if (ec) {
    throw UserError(fmt::format("{}: cannot create the folder: {}", named, ec.message()));
  }
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    throw UserError(fmt::format("{}: cannot open the folder: {}", named, std::strerror(errno)));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  ::close(fd_);
  fd_ = -1;
  if (err != EWOULDBLOCK) return;  // no locks on this file system (some network mounts)
  throw UserError(fmt::format(
      "{}: another crossover is training into this folder now (two runs there would prune "
      "each other's checkpoints and take them for their own): wait for it to end{}",
      named, flag.empty() ? "" : ", or choose another " + flag));
}

CheckpointFolderLock::~CheckpointFolderLock() {
  if (fd_ >= 0) ::close(fd_);
  if (created_) ::rmdir(dir_.c_str());  // only where empty
}

}  // namespace xo
