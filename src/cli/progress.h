// The progress line of a long job on stderr (progress.cpp).
#pragma once

#include <cstddef>
#include <string>

namespace xo::cli {

// A progress line on stderr, shown only when stderr is a terminal.
class Progress {
 public:
  Progress();
  ~Progress();
  void update(const std::string& text);
  // A bar for `fraction` (0..1) of the whole job, then the text.
  void bar(double fraction, const std::string& text);
  void clear();

 private:
  bool tty_;
  size_t last_width_ = 0;
};

}  // namespace xo::cli
