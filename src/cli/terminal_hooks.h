// The terminal as a job's hooks (job/hooks.h): outcomes on standard output, notes on standard
// error, the status and the progress bar on one line of standard error rewritten in place (only
// on a terminal), cleared before anything else is printed.
#pragma once

#include <string>

#include "cli/progress.h"
#include "job/hooks.h"

namespace xo::cli {

class TerminalHooks : public JobHooks {
 public:
  void result(const std::string& text) override;
  void note(const std::string& line) override;
  void status(const std::string& text) override { progress_.update(text); }
  void bar(double fraction, const std::string& text) override { progress_.bar(fraction, text); }
  void clear() override { progress_.clear(); }

 private:
  Progress progress_;
};

}  // namespace xo::cli
