// Reading whole files (file.h): regular files only, never waiting on a FIFO or a device, their
// size checked before a byte is read.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/file.h"

namespace xo {

// What a file that is not a regular one is, for a message.
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

namespace {

// Closes a file descriptor when it goes out of scope.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() { ::close(fd); }
};

// `path` opened for reading as read_file and read_regular_file open it: without blocking, so that
// a FIFO or a device is refused by its kind and never waited on; with `follow` false a symbolic
// link is refused too. Returns the descriptor and the file's status.
int open_regular(const std::filesystem::path& path, bool follow, struct stat& st) {
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0 && errno == ELOOP && !follow) {
    throw UserError(
        fmt::format("{}: a symbolic link, not read (expected a regular file)", path.string()));
  }
  if (fd < 0) {
    throw UserError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  }
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    throw UserError(fmt::format("{}: cannot read: {}", path.string(), std::strerror(error)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(fmt::format("{}: {}, not read (expected a regular file)", path.string(),
                                file_type_name(st.st_mode)));
  }
  return fd;
}

// A whole regular file (see read_file and read_regular_file): opened without blocking, so that a
// FIFO or a device is refused by its kind and never waited on; with `follow` false a symbolic link
// is refused too; its size checked against `expected_size` before a byte is read.
std::string read_whole(const std::filesystem::path& path, bool follow,
                       std::optional<uint64_t> expected_size) {
  struct stat st {};
  const FileDescriptor closer{open_regular(path, follow, st)};
  const int fd = closer.fd;
  auto check_size = [&](uint64_t size) {
    if (expected_size && size != *expected_size) {
      throw UserError(
          fmt::format("{}: {} bytes, expected {}", path.string(), size, *expected_size));
    }
  };
  check_size(static_cast<uint64_t>(st.st_size));
  // One allocation of the file's size (a model file is tens of megabytes: a growing buffer would
  // copy it over and over), then the bytes in chunks to the end, which also reads files whose size
  // the system does not know (/proc).
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  std::vector<char> chunk(size_t{1} << 16);
  for (;;) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw UserError(fmt::format("{}: read failed: {}", path.string(), std::strerror(errno)));
    }
    if (n == 0) break;
    bytes.append(chunk.data(), static_cast<size_t>(n));
  }
  check_size(bytes.size());  // it changed while it was read
  return bytes;
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
  struct stat st {};
  const FileDescriptor closer{open_regular(path, true, st)};
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;  // mmap refuses a length of 0
  data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, closer.fd, 0);
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    throw UserError(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

std::string read_file(const std::filesystem::path& path) {
  return read_whole(path, true, std::nullopt);
}

std::string read_regular_file(const std::filesystem::path& path,
                              std::optional<uint64_t> expected_size) {
  return read_whole(path, false, expected_size);
}

}  // namespace xo
