// The folder lock (file.h): one job writes into a folder at a time; a second is refused at once,
// told who holds it.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/file.h"

namespace xo {

namespace {

// What the lock file says about its holder, for the message of the process it refuses.
constexpr size_t kLockNoteMax = 4096;

// "pid 1234: crossover run ..." from a lock file's "pid 1234\ncommand crossover run ...\n";
// empty when the holder has not written it yet.
std::string lock_holder(int fd) {
  std::string note(kLockNoteMax, '\0');
  const ssize_t n = ::pread(fd, note.data(), note.size(), 0);
  note.resize(n > 0 ? static_cast<size_t>(n) : 0);
  std::string pid, command;
  size_t at = 0;
  while (at < note.size()) {
    const size_t end = std::min(note.find('\n', at), note.size());
    const std::string_view line(note.data() + at, end - at);
    if (line.substr(0, 4) == "pid ") pid = line.substr(4);
    if (line.substr(0, 8) == "command ") command = line.substr(8);
    at = end + 1;
  }
  if (pid.empty()) return "";
  return command.empty() ? fmt::format("pid {}", pid) : fmt::format("pid {}: {}", pid, command);
}

}  // namespace

FolderLock::FolderLock(const std::filesystem::path& folder, std::string_view holder,
                       std::string_view what) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    throw UserError(
        fmt::format("{} {}: cannot create folder: {}", what, folder.string(), ec.message()));
  }
  const std::filesystem::path file = folder / kFolderLockName;
  // O_NOFOLLOW: a symlink planted in the folder cannot make us create or truncate a file
  // elsewhere; O_NONBLOCK: a FIFO planted there cannot hang the open.
  fd_ =
      ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
  struct stat st;
  if (fd_ >= 0 && (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))) {
    ::close(fd_);
    fd_ = -1;
    errno = EINVAL;
  }
  if (fd_ < 0) {
    throw UserError(fmt::format("{} {}: cannot create its lock file {}: {}", what, folder.string(),
                                file.string(), std::strerror(errno)));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const std::string other = lock_holder(fd_);
      ::close(fd_);
      fd_ = -1;
      throw UserError(fmt::format(
          "{} {}: another crossover{} is writing into this folder now; two jobs in one folder "
          "would mix their files: wait for it to end, or choose another {}",
          what, folder.string(), other.empty() ? "" : fmt::format(" ({})", other), what));
    }
    // A file system without locks (some network mounts): the job goes on, unguarded, and says so.
    unsupported_ = fmt::format(
        "{}: cannot be locked ({}): nothing stops another job from writing "
        "into it at the same time",
        folder.string(), std::strerror(err));
    ::close(fd_);
    fd_ = -1;
    return;
  }
  // The holder's note, for a process refused while this one runs. Best effort: the lock itself is
  // the flock, which the kernel drops when this process ends however it ends.
  const std::string note = fmt::format("pid {}\ncommand {}\n", ::getpid(), holder);
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd_, note.data(), note.size(), 0);
  }
}

FolderLock::~FolderLock() {
  // Closing drops the flock. The file stays: removing it would let a process that opened it just
  // before lock a file no longer in the folder while a third locks a new one.
  if (fd_ >= 0) ::close(fd_);
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), unsupported_(std::move(other.unsupported_)) {}

}  // namespace xo
