// The headless-Chromium check of report pages: finding the browser, running it, and telling the
// page's own messages from the browser's noise.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace xo::testing {

namespace fs = std::filesystem;

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string find_chromium() {
  if (access("/usr/bin/chromium", X_OK) == 0) return "/usr/bin/chromium";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir) / "chromium";
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

struct Ran {
  int status = -1;
  std::string out, err;
  double seconds = 0;
};

// Runs `command` through the shell with stderr captured in `err_file`.
inline Ran run_shell(const std::string& command, const fs::path& err_file) {
  Ran ran;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen((command + " 2> " + shell_quote(err_file.string())).c_str(), "r");
  if (!pipe) return ran;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) ran.out.append(buf, n);
  const int status = pclose(pipe);
  ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ran.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ifstream err(err_file);
  ran.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  return ran;
}

// stderr lines that come from the page (console messages, uncaught errors, the file's URL), not
// Chromium's own noise about D-Bus, the GPU or the sandbox.
inline std::vector<std::string> page_messages(const std::string& err, const std::string& url) {
  std::vector<std::string> lines;
  std::stringstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (line.find("CONSOLE") != std::string::npos || line.find("Uncaught") != std::string::npos ||
        line.find(url) != std::string::npos) {
      lines.push_back(line);
    }
  }
  return lines;
}

}  // namespace xo::testing
