// What a job tells the person who started it while it runs. The jobs (job/) compute and decide
// what to say; a front end decides where it goes: the terminal (cli/terminal_hooks.h) or a Python
// caller. Every hook does nothing by default, so a caller that wants silence passes JobHooks{}.
#pragma once

#include <cstdint>
#include <string>

#include "train/trainer.h"

namespace xo {

class JobHooks {
 public:
  virtual ~JobHooks() = default;
  // An outcome the job was asked for ("disc-4: stopped early after epoch 7: ..."), text with its
  // own line ends: the terminal prints it on standard output.
  virtual void result(const std::string& /*text*/) {}
  // A note, a warning or why something stopped, one line without its end: standard error.
  virtual void note(const std::string& /*line*/) {}
  // What the job is doing now ("probing the peaks of cpu..."), replaced by the next status.
  virtual void status(const std::string& /*text*/) {}
  // How far the whole job is (0..1) and what it is doing.
  virtual void bar(double /*fraction*/, const std::string& /*text*/) {}
  // The status line is done with: the next output starts on a clean line.
  virtual void clear() {}
  // An epoch of a trained model ended (`epochs`: the run's planned epochs; `scheduled`: a rate
  // schedule sets each epoch's learning rate, so record.lr is worth showing).
  virtual void epoch(const EpochRecord& /*record*/, int64_t /*epochs*/, bool /*scheduled*/) {}
};

}  // namespace xo
