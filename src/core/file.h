// File helpers: whole-file reads and atomic writes (write to a temporary beside the target, then
// rename), so an interrupted run never leaves a half-written result.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace xo {

// Reads a whole file; throws UserError naming the path if it cannot be opened or read.
std::string read_file(const std::filesystem::path& path);

// Writes `bytes` to `path` atomically: creates parent folders, writes `path` + ".tmp.<pid>",
// syncs it, renames it over `path` and syncs the folder, so that a crash leaves the old version or
// the new one. On failure (a full disk, a quota, a file size limit) the temporary is removed, the
// previous version stays as it was, and the UserError names the path, the system's reason and
// whether a previous version is kept.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Checks before any work that write_file_atomic(path) can succeed as far as permissions go: the
// path is not a folder, and its folder (or the nearest existing one above it, which the write
// creates the rest of) is a writable folder. Throws UserError naming `what` (a flag) and the path.
void check_writable_path(const std::filesystem::path& path, std::string_view what);

// Where crossover caches what it derived (tokenised corpora, measured peaks): $XDG_CACHE_HOME/
// crossover, else $HOME/.cache/crossover, else the system's temporary folder.
std::filesystem::path default_cache_dir();

}  // namespace xo
