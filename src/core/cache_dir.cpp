// Where crossover caches what it measures (file.h: default_cache_dir).
#include <cstdlib>

#include "core/file.h"

namespace xo {

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
