#include "core/file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // std::rename
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace xo {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  // One allocation of the file's size (a model file is tens of megabytes: a growing buffer would
  // copy it over and over), then the bytes in chunks, which also reads files of no known size.
  std::string bytes;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) bytes.reserve(static_cast<size_t>(size));
  std::vector<char> chunk(size_t{1} << 16);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    bytes.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw UserError(fmt::format("{}: read failed", path.string()));
  return bytes;
}

namespace {

// Writes all of `bytes` to `fd`, through short writes and interrupted calls; false with errno set
// when the system refuses (ENOSPC on a full disk, EDQUOT over a quota, EFBIG over a file size
// limit, EIO).
bool write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

// Makes a rename in `folder` survive a crash: the rename is an entry of the folder, which the
// file's own fsync does not write. A file system that cannot sync a folder (EINVAL), or a folder
// this process may write but not open, keeps the rename as well as it can; other failures are
// errors.
void sync_folder(const std::filesystem::path& folder, const std::filesystem::path& target) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL || errno == ENOTSUP;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    throw UserError(fmt::format(
        "{}: written, but its folder could not be synced ({}): the new version may not survive a "
        "crash",
        target.string(), std::strerror(err)));
  }
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    throw UserError(
        fmt::format("{}: cannot create folder: {}", path.parent_path().string(), ec.message()));
  }
  // What a failure leaves: the previous version untouched (the new bytes go to a temporary beside
  // it, renamed over it only once they are all on the disk), or no file at all.
  const bool had_previous = std::filesystem::exists(path, ec);
  auto failed = [&](const char* what, int err) {
    return UserError(fmt::format(
        "{}: {}: {}; {}", path.string(), what, std::strerror(err),
        had_previous ? "the previous version of the file is kept" : "no file was written"));
  };
  const std::string tmp = fmt::format("{}.tmp.{}", path.string(), ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw failed("cannot write", errno);
  // close() reports a failed write-back on some file systems (NFS), so its answer counts too.
  bool ok = write_all(fd, bytes) && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw failed("cannot write", err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    throw failed("cannot rename the new version into place", err);
  }
  sync_folder(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."), path);
}

void check_writable_path(const std::filesystem::path& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(fmt::format("{} {}: a folder (expected a file to write)", what, path.string()));
  }
  std::filesystem::path folder = std::filesystem::absolute(path, ec).parent_path();
  while (!folder.empty() && !std::filesystem::exists(folder, ec) && folder != folder.root_path()) {
    folder = folder.parent_path();
  }
  if (!std::filesystem::is_directory(folder, ec)) {
    throw UserError(fmt::format("{} {}: {} is not a folder", what, path.string(), folder.string()));
  }
  if (::access(folder.c_str(), W_OK) != 0) {
    throw UserError(fmt::format("{} {}: cannot write in {} ({})", what, path.string(),
                                folder.string(), std::strerror(errno)));
  }
}

std::filesystem::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::filesystem::path(xdg) / "crossover";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::filesystem::path(home) / ".cache" / "crossover";
  }
  return std::filesystem::temp_directory_path() / "crossover";
}

}  // namespace xo
