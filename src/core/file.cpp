#include "core/file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace xo {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw UserError(fmt::format("{}: read failed", path.string()));
  return buf.str();
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    throw UserError(
        fmt::format("{}: cannot create folder: {}", path.parent_path().string(), ec.message()));
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path.string(), ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw UserError(fmt::format("{}: cannot write: {}", tmp, std::strerror(errno)));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() &&
                  std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int err = errno;
  std::fclose(f);
  if (!ok) {
    std::remove(tmp.c_str());
    throw UserError(fmt::format("{}: write failed: {}", tmp, std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_err = errno;
    std::remove(tmp.c_str());
    throw UserError(
        fmt::format("{}: cannot rename into place: {}", path.string(), std::strerror(rename_err)));
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
