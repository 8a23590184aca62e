// Atomic, durable writes (file.h): a file replaced whole or not at all, never through a link
// someone planted; several files committed together; paths checked before any work.
#include "core/file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>  // std::rename
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"

namespace xo {

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

// Where the bytes for a path go. Files are replaced through a temporary; what is not a regular
// file (a terminal, a pipe, /dev/null, this process's own output) is written in place, since
// replacing it would put a regular file where the user pointed at a device or a reader.
struct Target {
  enum class Kind { Replace, InPlace, StandardOutput };
  Kind kind = Kind::Replace;
  std::filesystem::path path;  // for Replace, the file the symlinks lead to
  int fd = -1;                 // for StandardOutput: 1 or 2
};

// The bound the kernel puts on symlinks followed in one lookup (MAXSYMLINKS).
constexpr int kMaxSymlinkHops = 40;

bool same_file(const struct stat& a, int fd) {
  struct stat b;
  return ::fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Refuses a symlink that another user planted in a sticky, world-writable folder (/tmp), the case
// the kernel's fs.protected_symlinks refuses when opening: following it would let that user choose
// which of our files is replaced.
void check_link_owner(const std::filesystem::path& link, const struct stat& link_st,
                      const std::filesystem::path& original) {
  const std::filesystem::path folder = link.has_parent_path() ? link.parent_path() : ".";
  struct stat dir;
  if (::stat(folder.c_str(), &dir) != 0) return;
  const bool shared = (dir.st_mode & S_ISVTX) && (dir.st_mode & S_IWOTH);
  if (shared && link_st.st_uid != ::geteuid() && link_st.st_uid != dir.st_uid) {
    throw UserError(fmt::format(
        "{}: a symlink owned by another user in the shared folder {}: not followed (it could "
        "point anywhere); remove it or write elsewhere",
        original.string(), folder.string()));
  }
}

// Classifies `path`: "-" is standard output; a path that leads to this process's standard output
// or error (/dev/stdout, or the file the shell redirected it to) is written through that stream,
// at its position; a character device or a FIFO (or a symlink to one) is opened and written in
// place; anything else is replaced atomically, and a symlink to a regular file (or to a name not
// yet created) is followed so that the file it points to is replaced and the link stays, as
// editors do. Folders, sockets and block devices are refused.
Target classify(const std::filesystem::path& path) {
  if (path == "-") return {Target::Kind::StandardOutput, path, STDOUT_FILENO};
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    // /dev/stdout is a link through /proc whose name for a pipe is no path: compare the files.
    for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
      if (same_file(st, fd)) return {Target::Kind::StandardOutput, path, fd};
    }
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return {Target::Kind::InPlace, path, -1};
    if (S_ISDIR(st.st_mode)) {
      throw UserError(fmt::format("{}: a folder (expected a file to write)", path.string()));
    }
    if (!S_ISREG(st.st_mode)) {
      throw UserError(fmt::format("{}: neither a regular file nor a terminal or pipe: not written",
                                  path.string()));
    }
  }
  std::filesystem::path p = path;
  for (int hop = 0; hop <= kMaxSymlinkHops; ++hop) {
    struct stat lst;
    if (::lstat(p.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return {Target::Kind::Replace, p};
    check_link_owner(p, lst, path);
    std::vector<char> target(static_cast<size_t>(lst.st_size > 0 ? lst.st_size : 255) + 1);
    const ssize_t n = ::readlink(p.c_str(), target.data(), target.size());
    if (n < 0) {
      throw UserError(fmt::format("{}: cannot read the symlink {}: {}", path.string(), p.string(),
                                  std::strerror(errno)));
    }
    const std::filesystem::path next(std::string(target.data(), static_cast<size_t>(n)));
    p = next.is_absolute() || !p.has_parent_path() ? next : p.parent_path() / next;
  }
  throw UserError(fmt::format("{}: {}", path.string(), std::strerror(ELOOP)));
}

// Writes to a device, a FIFO or our own output where it is: no temporary, no truncation (a
// terminal has none, and a redirected stdout keeps what was printed before). Blocks, as the shell
// does, until a FIFO has a reader.
void write_in_place(const Target& target, std::string_view bytes) {
  // What was printed through stdio goes first, so that the output keeps its order.
  std::fflush(stdout);
  std::fflush(stderr);
  int fd = target.fd;
  if (fd < 0) {
    do {
      fd = ::open(target.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      throw_for_errno(errno, fmt::format("{}: cannot open for writing: {}", target.path.string(),
                                         std::strerror(errno)));
    }
  }
  const bool ok = write_all(fd, bytes);
  const int err = errno;
  if (target.fd < 0) ::close(fd);
  if (!ok) {
    throw_for_errno(
        err, fmt::format("{}: cannot write: {}",
                         target.path == "-" ? std::string("standard output") : target.path.string(),
                         std::strerror(err)));
  }
}

// About 71 random bits in 12 letters and digits: a temporary's name nobody can guess ahead of time,
// so nobody can plant a symlink there (O_EXCL | O_NOFOLLOW refuse one anyway; the unpredictable
// name keeps a planted file from making the write fail).
std::string random_suffix() {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char raw[12];
  size_t got = 0;
  while (got < sizeof raw) {
    const ssize_t n = ::getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_internal("getrandom", std::strerror(errno), __FILE__, __LINE__);
    got += static_cast<size_t>(n);
  }
  std::string s;
  for (const unsigned char c : raw) s += kAlphabet[c % kAlphabet.size()];
  return s;
}

// Creates a fresh temporary beside `path` ("NAME.tmp.RANDOM"): never an existing file, never
// through a symlink. Permissions are those of any new file (0666 less the umask, 0644 by default);
// write_file_atomic gives it those of the file it replaces. Returns -1 with errno set.
int create_temporary(const std::filesystem::path& path, std::string& tmp) {
  constexpr int kAttempts = 100;  // a name taken 100 times in a row is no accident: give up
  for (int i = 0; i < kAttempts; ++i) {
    tmp = fmt::format("{}.tmp.{}", path.string(), random_suffix());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

}  // namespace

namespace {

// A replacement under way: the new bytes in a temporary beside `path`, not yet in its place.
struct Replacement {
  std::filesystem::path path;
  std::string named;  // how messages name the file
  std::string tmp;
  int fd = -1;  // the temporary's, until it is synced
  bool had_previous = false;

  // A MachineFailure where the machine failed the write (a full disk, …), else a UserError.
  [[noreturn]] void fail(const char* what, int err) const {
    throw_for_errno(err, fmt::format("{}: {}: {}; {}", named, what, std::strerror(err),
                                     had_previous ? "the previous version of the file is kept"
                                                  : "no file was written"));
  }
  // What a failure leaves: the previous version untouched, or no file at all.
  void abandon() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (!tmp.empty()) ::unlink(tmp.c_str());
    tmp.clear();
  }
};

// The new bytes to a temporary beside `path`, their write-back to the disk started where it is to
// be durable (not waited for: `sync_replacement` does).
Replacement write_replacement(const std::filesystem::path& path, const std::string& named,
                              std::string_view bytes, bool durable = true) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    throw_for_errno(ec.value(), fmt::format("{}: cannot create folder: {}",
                                            path.parent_path().string(), ec.message()));
  }
  Replacement r{path, named, {}, -1, false};
  struct stat previous {};
  r.had_previous = ::lstat(path.c_str(), &previous) == 0;
  r.fd = create_temporary(path, r.tmp);
  if (r.fd < 0) {
    r.tmp.clear();
    r.fail("cannot write", errno);
  }
  // A replaced file keeps its permissions (a private 0600 file stays private); set-id bits never
  // carry over.
  if (r.had_previous && ::stat(path.c_str(), &previous) == 0)
    ::fchmod(r.fd, previous.st_mode & 0777);
  if (!write_all(r.fd, bytes)) {
    const int err = errno;
    r.abandon();
    r.fail("cannot write", err);
  }
  // Started now, so that several files' writes reach the disk together; an error shows at fsync.
  if (durable) ::sync_file_range(r.fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  return r;
}

// The temporary synced (where it is to be durable) and closed (close() reports a failed
// write-back on some file systems, NFS, so its answer counts too).
void sync_replacement(Replacement& r, bool durable = true) {
  bool ok = !durable || ::fsync(r.fd) == 0;
  int err = errno;
  if (::close(r.fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  r.fd = -1;
  if (!ok) {
    r.abandon();
    r.fail("cannot write", err);
  }
}

// rename() replaces the name, never what a symlink there points to.
void move_into_place(Replacement& r) {
  if (std::rename(r.tmp.c_str(), r.path.c_str()) != 0) {
    const int err = errno;
    r.abandon();
    r.fail("cannot rename the new version into place", err);
  }
  r.tmp.clear();
}

// The most threads a commit waits for the disk on.
constexpr size_t kSyncThreads = 4;

// `each` on every item; for more than two, on up to kSyncThreads threads: a file system commits
// the fsyncs it is given together in fewer journal transactions (ext4, a fused group's 32 files in
// 16 folders: docs/benchmarks.md, "A fused search's serial costs"). The first error is thrown once
// every thread has ended.
template <typename T, typename F>
void sync_together(std::vector<T>& items, F each) {
  const size_t threads = items.size() > 2 ? std::min(kSyncThreads, items.size()) : 1;
  std::vector<std::exception_ptr> errors(threads);
  auto slice = [&](size_t t) {
    try {
      for (size_t i = t; i < items.size(); i += threads) each(items[i]);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  size_t started = 1;  // slice 0 is this thread's
  for (; started < threads; ++started) {
    try {
      pool.emplace_back(slice, started);
    } catch (const std::system_error&) {
      break;  // no thread to be had: the rest on this one
    }
  }
  slice(0);
  for (size_t t = started; t < threads; ++t) slice(t);
  for (std::thread& th : pool) th.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::filesystem::path folder_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

// The new bytes to a temporary beside `path`, synced, renamed over it: what a failure leaves is the
// previous version untouched or no file at all. `named` is how messages name the file.
void replace_atomically(const std::filesystem::path& path, const std::string& named,
                        std::string_view bytes) {
  Replacement r = write_replacement(path, named, bytes);
  sync_replacement(r);
  move_into_place(r);
  sync_folder(folder_of(path), path);
}

// A file crossover owns is replaced whatever is at its path, but a folder.
void refuse_folder(const std::filesystem::path& path) {
  if (struct stat st{}; ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UserError(fmt::format("{}: a folder, not replaced by a file", path.string()));
  }
}

// A followed symlink is named with the file it leads to, which is the one replaced.
std::string named_target(const std::filesystem::path& path_in, const Target& target) {
  return target.path == path_in
             ? path_in.string()
             : fmt::format("{} (a link to {})", path_in.string(), target.path.string());
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path_in, std::string_view bytes) {
  const Target target = classify(path_in);
  if (target.kind != Target::Kind::Replace) return write_in_place(target, bytes);
  replace_atomically(target.path, named_target(path_in, target), bytes);
}

void AtomicWrites::add(std::filesystem::path path, std::string bytes) {
  files_.push_back({std::move(path), std::move(bytes), false});
}

void AtomicWrites::replace(std::filesystem::path path, std::string bytes) {
  files_.push_back({std::move(path), std::move(bytes), true});
}

namespace {

// Each file's new bytes in a temporary beside it, in the order added; a file that is not a regular
// one (a terminal, a pipe) written in place. The temporaries are written on several threads where
// there are many (creating a file waits on the file system's journal: docs/benchmarks.md, "A
// search's own costs and groups of one"); the first file, in order, that fails throws its error,
// every temporary removed and the files in place before it written.
std::vector<Replacement> write_temporaries(const std::vector<AtomicWrites::File>& files,
                                           bool durable) {
  std::vector<Target> targets(files.size());
  std::vector<size_t> through_temporary;
  std::vector<std::exception_ptr> failed(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      if (files[i].own) refuse_folder(files[i].path);
      targets[i] =
          files[i].own ? Target{Target::Kind::Replace, files[i].path, -1} : classify(files[i].path);
      if (targets[i].kind == Target::Kind::Replace) through_temporary.push_back(i);
    } catch (...) {
      failed[i] = std::current_exception();
      break;
    }
  }
  std::vector<std::optional<Replacement>> written(files.size());
  sync_together(through_temporary, [&](size_t i) {
    try {
      const std::string named =
          files[i].own ? files[i].path.string() : named_target(files[i].path, targets[i]);
      written[i] = write_replacement(targets[i].path, named, files[i].bytes, durable);
    } catch (...) {
      failed[i] = std::current_exception();
    }
  });
  const size_t first_failed = static_cast<size_t>(
      std::find_if(failed.begin(), failed.end(), [](const auto& e) { return bool(e); }) -
      failed.begin());
  try {
    for (size_t i = 0; i < first_failed; ++i) {
      if (!written[i]) write_in_place(targets[i], files[i].bytes);
    }
    if (first_failed < files.size()) std::rethrow_exception(failed[first_failed]);
  } catch (...) {
    for (std::optional<Replacement>& r : written) {
      if (r) r->abandon();
    }
    throw;
  }
  std::vector<Replacement> out;
  for (std::optional<Replacement>& r : written) {
    if (r) out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

namespace {

// The most files a commit writes at once: each holds a descriptor from its temporary's creation to
// its sync, and a search's 2,000 trial specs written together once failed under the common limit
// of 1,024 open files ("Too many open files").
constexpr size_t kFilesAtOnce = 256;

}  // namespace

void AtomicWrites::commit() {
  const bool durable = keep_ == Keep::Durable;
  std::vector<File> all = std::move(files_);
  files_.clear();
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> folders;  // and a file
  for (size_t first = 0; first < all.size(); first += kFilesAtOnce) {
    const size_t last = std::min(all.size(), first + kFilesAtOnce);
    const std::vector<File> some(
        std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(first)),
        std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(last)));
    std::vector<Replacement> pending;
    try {
      pending = write_temporaries(some, durable);
      sync_together(pending, [durable](Replacement& r) { sync_replacement(r, durable); });
      for (Replacement& r : pending) move_into_place(r);
    } catch (...) {
      for (Replacement& r : pending) r.abandon();
      throw;
    }
    for (const Replacement& r : pending) {
      if (!durable) break;
      std::filesystem::path folder = folder_of(r.path);
      const bool seen = std::any_of(folders.begin(), folders.end(),
                                    [&](const auto& f) { return f.first == folder; });
      if (!seen) folders.emplace_back(std::move(folder), r.path);
    }
  }
  sync_together(folders, [](const auto& f) { sync_folder(f.first, f.second); });
}

void replace_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  refuse_folder(path);
  replace_atomically(path, path.string(), bytes);
}

void remove_unless_regular(const std::filesystem::path& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  if (S_ISDIR(st.st_mode)) {
    throw UserError(fmt::format("{}: a folder, where crossover writes a file", path.string()));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw UserError(fmt::format("{}: {}, which crossover cannot remove to write its file: {}",
                                path.string(), file_type_name(st.st_mode), std::strerror(errno)));
  }
}

void remove_unless_folder(const std::filesystem::path& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && ::unlink(path.c_str()) != 0 &&
      errno != ENOENT) {
    throw UserError(fmt::format("{}: {} where crossover makes its folder, not removable: {}",
                                path.string(), file_type_name(st.st_mode), std::strerror(errno)));
  }
}

void own_folder(const std::filesystem::path& path) {
  remove_unless_folder(path);
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    throw UserError(fmt::format("{}: cannot create the folder: {}", path.string(), ec.message()));
  }
}

void check_writable_path(const std::filesystem::path& path_in, std::string_view what,
                         std::vector<std::filesystem::path>* probed) {
  Target target;
  try {
    target = classify(path_in);
  } catch (const UserError& e) {
    throw UserError(fmt::format("{} {}", what, e.what()));
  }
  if (target.kind == Target::Kind::StandardOutput) return;
  if (target.kind == Target::Kind::InPlace) {
    if (::access(path_in.c_str(), W_OK) != 0) {
      throw UserError(fmt::format("{} {}: cannot write to it ({})", what, path_in.string(),
                                  std::strerror(errno)));
    }
    return;
  }
  const std::filesystem::path& path = target.path;
  std::error_code ec;
  std::filesystem::path folder = std::filesystem::absolute(path, ec).parent_path();
  while (!folder.empty() && !std::filesystem::exists(folder, ec) && folder != folder.root_path()) {
    folder = folder.parent_path();
  }
  if (!std::filesystem::is_directory(folder, ec)) {
    throw UserError(
        fmt::format("{} {}: {} is not a folder", what, path_in.string(), folder.string()));
  }
  if (::access(folder.c_str(), W_OK) != 0) {
    throw UserError(fmt::format("{} {}: cannot write in {} ({})", what, path_in.string(),
                                folder.string(), std::strerror(errno)));
  }
  // Permissions are not the whole answer: root passes access() everywhere, and a read-only or
  // virtual file system (/proc) refuses what the bits allow. The folders the write would create
  // are created now, and a probe file is made and removed in the last one.
  const std::filesystem::path parent = std::filesystem::absolute(path, ec).parent_path();
  if (!std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      throw UserError(fmt::format("{} {}: cannot create the folder {} ({})", what, path_in.string(),
                                  parent.string(), ec.message()));
    }
  }
  if (probed) {
    if (std::find(probed->begin(), probed->end(), parent) != probed->end()) return;
    probed->push_back(parent);
  }
  std::string probe = (parent / ".crossover-write-check-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    throw UserError(fmt::format("{} {}: cannot write in {} ({})", what, path_in.string(),
                                parent.string(), std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace xo
