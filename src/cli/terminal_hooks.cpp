#include "cli/terminal_hooks.h"

#include <fmt/format.h>

#include <cstdio>

namespace xo::cli {

void TerminalHooks::result(const std::string& text) {
  progress_.clear();
  fmt::print("{}", text);
  std::fflush(stdout);
}

void TerminalHooks::note(const std::string& line) {
  progress_.clear();
  fmt::print(stderr, "{}\n", line);
}

}  // namespace xo::cli
