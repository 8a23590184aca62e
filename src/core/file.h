// File helpers: whole-file reads, atomic writes (a temporary beside the target, then a rename), so
// an interrupted run never leaves a half-written result, and the lock of an output folder.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xo {

// Reads a whole file (a symbolic link is followed); throws UserError naming the path if it cannot
// be opened or read, or is not a regular file (a FIFO, a device, a socket or a folder is refused
// by its kind without waiting for a writer).
std::string read_file(const std::filesystem::path& path);

// A whole file read as read_file reads it (refused where read_file refuses it), its bytes mapped
// from the page cache instead of copied (MAP_POPULATE: mapped at once, not page by page): a data
// set of hundreds of megabytes loads without a copy, and every process that maps it shares one
// copy in memory. The bytes stay valid while the object lives. A file that another program
// truncates while it is mapped ends the process (SIGBUS) where a byte past its new end is read:
// crossover's own files are replaced by a rename (write_file_atomic), never truncated, so a mapped
// one keeps its bytes. An empty file maps to no bytes.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// What a file that is not a regular one is ("a folder", "a FIFO", ...), for a message.
const char* file_type_name(mode_t mode);

// Reads a whole file that must be a regular file, not reached through a symbolic link, of
// `expected_size` bytes where that is given: opened without following a link and without
// blocking (a FIFO never holds the read up), checked with fstat before a byte is read. Throws
// UserError naming the path and what it is instead (a link, a FIFO, a device, a folder, a file of
// another size).
std::string read_regular_file(const std::filesystem::path& path,
                              std::optional<uint64_t> expected_size = std::nullopt);

// Writes `bytes` to `path` atomically: creates parent folders, writes a temporary beside it with
// an unpredictable name (`path` + ".tmp." + 12 random letters, created with O_EXCL | O_NOFOLLOW,
// so a planted file or symlink is never written through), syncs it, renames it over `path` and
// syncs the folder, so that a crash leaves the old version or the new one. On failure (a full
// disk, a quota, a file size limit) the temporary is removed, the previous version stays as it
// was, and the UserError names the path, the system's reason and whether a previous version is
// kept.
//
// What is not a regular file is written in place, never replaced: "-" is standard output; a path
// to this process's own stdout or stderr (/dev/stdout, or the file the shell redirected it to) is
// written through it; a character device (a terminal, /dev/null) or a FIFO, or a symlink to one,
// is opened and written (a FIFO's open waits for a reader, as the shell's does). A symlink to a
// regular file (or to a name not yet created) is followed: the file it leads to is replaced and
// the link stays, as editors do; a link that another user owns in a sticky world-writable folder
// (/tmp) is refused, as the kernel's fs.protected_symlinks refuses it. A folder, a socket or a
// block device is refused.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Several files written as write_file_atomic writes each (each on its own: after a crash its old
// version or its new one), with their waits for the disk overlapped: every temporary written and
// its write-back started, then each synced, then each renamed into place, then each folder synced
// once. A fused group's trials' results and weights, a search's files. commit() throws the
// UserError of the first file that fails; the files renamed before it stay, the others keep their
// previous versions.
class AtomicWrites {
 public:
  // How long a new version must last. Durable: it survives a crash once commit() returns.
  // Rewritten: files their writer writes again whenever it starts (a search's trial specs), which
  // only need a reader never to see a partial one: renamed into place, not synced.
  enum class Keep { Durable, Rewritten };
  explicit AtomicWrites(Keep keep = Keep::Durable) : keep_(keep) {}

  void add(std::filesystem::path path, std::string bytes);      // as write_file_atomic
  void replace(std::filesystem::path path, std::string bytes);  // as replace_file_atomic
  void commit();
  bool empty() const { return files_.empty(); }

  struct File {
    std::filesystem::path path;
    std::string bytes;
    bool own = false;  // replace(): whatever is there replaced, never followed
  };

 private:
  std::vector<File> files_;
  Keep keep_;
};

// The same temporary and rename for a file crossover owns (a checkpoint): whatever is at `path` (a
// symbolic link, a FIFO, a device node) is replaced by the new regular file, never followed or
// opened; a folder is refused.
void replace_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Where crossover is about to have a file of its own written at `path` (a trial's log, result or
// weights, which a child process writes): anything there that is not a regular file (a symbolic
// link planted while it was stopped, a FIFO, a device node, a socket) is removed first, never
// followed or opened; a folder is refused.
void remove_unless_regular(const std::filesystem::path& path);
// A folder crossover writes its own files into (a trial's): a link or file planted in its place is
// removed, never followed; then the folder and those above it are created where missing.
void own_folder(const std::filesystem::path& path);
// The same removal alone, for a folder the process that writes into it creates when it first does
// (a trial's checkpoints: a short trial never writes one).
void remove_unless_folder(const std::filesystem::path& path);

// Checks before any work that write_file_atomic(path) can succeed: the path is not a folder, its
// folder (or the nearest existing one above it) is a writable folder, the missing folders are
// created, and a file can be made in the last one (a probe, removed: root passes every permission
// check, and a read-only file system refuses what the bits allow); a device or FIFO is writable;
// "-" always is. Throws UserError naming `what` (a flag) and the path. `probed`, where given,
// holds the folders a probe file was already made in (several files of one folder: one probe).
void check_writable_path(const std::filesystem::path& path, std::string_view what,
                         std::vector<std::filesystem::path>* probed = nullptr);

// The lock file of an output folder (see FolderLock).
inline constexpr std::string_view kFolderLockName = ".crossover.lock";

// An exclusive lock on an output folder, held while the object lives: FOLDER/.crossover.lock,
// created with O_NOFOLLOW and locked with flock(LOCK_EX | LOCK_NB), so that two jobs writing the
// same folder at once (whose files would interleave) are refused at once. flock, not a pid file:
// the kernel drops the lock when the process ends however it ends, so a killed job never blocks
// the next one. The file holds the holder's pid and command, for the message of a refused job.
class FolderLock {
 public:
  // Creates `folder` if need be and locks it. Throws UserError naming `what` (the flag, e.g.
  // "--out"), the folder and, where the lock file says, the other process's pid and command.
  // `holder` is this process's command line, written into the lock file.
  FolderLock(const std::filesystem::path& folder, std::string_view holder, std::string_view what);
  ~FolderLock();
  FolderLock(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  FolderLock& operator=(FolderLock&&) = delete;

  // Why the folder is not locked (a file system without flock); empty when the lock is held.
  const std::string& unsupported() const { return unsupported_; }

 private:
  int fd_ = -1;
  std::string unsupported_;
};

// Where crossover caches what it derived (tokenised corpora, measured peaks): $XDG_CACHE_HOME/
// crossover, else $HOME/.cache/crossover, else the system's temporary folder.
std::filesystem::path default_cache_dir();

}  // namespace xo
