// The progress line of a long job on stderr (progress.h): shown only on a terminal, one
// line rewritten in place, cut to the terminal's width.
#include "cli/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

#include "core/format.h"

namespace xo::cli {

Progress::Progress() : tty_(isatty(STDERR_FILENO) != 0) {}
Progress::~Progress() { clear(); }

void Progress::update(const std::string& text_in) {
  if (!tty_) return;
  // One line: cut to the terminal's width, so that \r returns to its start. terminal_safe (which
  // leaves escaped text as it is) keeps a name's control characters from moving the cursor.
  std::string text = terminal_safe(text_in);
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 1 && text.size() >= w.ws_col) {
    text.resize(w.ws_col - 1);
  }
  const size_t pad = last_width_ > text.size() ? last_width_ - text.size() : 0;
  fmt::print(stderr, "\r{}{}", text, std::string(pad, ' '));
  std::fflush(stderr);
  last_width_ = text.size();
}

void Progress::bar(double fraction, const std::string& text) {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kWidth + 0.5);
  update(fmt::format("[{}{}] {:3.0f}% {}", std::string(static_cast<size_t>(filled), '#'),
                     std::string(static_cast<size_t>(kWidth - filled), '.'),
                     100 * std::clamp(fraction, 0.0, 1.0), text));
}

void Progress::clear() {
  if (!tty_ || last_width_ == 0) return;
  fmt::print(stderr, "\r{}\r", std::string(last_width_, ' '));
  std::fflush(stderr);
  last_width_ = 0;
}

}  // namespace xo::cli
