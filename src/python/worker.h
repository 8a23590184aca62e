// A job run from Python: on a thread of its own, with the GIL released and SIGINT/SIGTERM blocked
// there (and so in every thread it starts: oneDNN's and OpenMP's), while the calling thread waits
// with Python's own signal handling in place. What the job tells its hooks is queued and handed
// to a Python callable on the calling thread between waits; a KeyboardInterrupt (Ctrl-C in a
// script, "interrupt the kernel" in a notebook) becomes the engine's stop request, so the job
// stops at its next safe point, keeps what it keeps on the command line, and the caller then
// raises KeyboardInterrupt.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "job/hooks.h"

namespace xo::python {

namespace py = pybind11;

// JobHooks that queue what they are told; drain() hands it to Python on the calling thread:
// on_event(kind, payload) with kind "result", "note", "status", "bar", "clear" (payload a str) or
// "epoch" (payload a dict of the record's fields, as results.json names them, plus "epochs" and
// "line", the command line's text for it); "bar" takes a tuple (fraction, text).
class QueuedHooks : public JobHooks {
 public:
  void result(const std::string& text) override { push("result", text); }
  void note(const std::string& line) override { push("note", line); }
  void status(const std::string& text) override { push("status", text); }
  void bar(double fraction, const std::string& text) override;
  void clear() override { push("clear", ""); }
  void epoch(const EpochRecord& record, int64_t epochs, bool scheduled) override;

  // Calls on_event for each queued event, in order (none when on_event is None). Holds the GIL.
  void drain(const py::object& on_event);

 private:
  struct Event {
    std::string kind, text;
    std::optional<EpochRecord> epoch;
    int64_t epochs = 0;
    double fraction = 0;
  };
  void push(const char* kind, const std::string& text);
  std::mutex mutex_;
  std::vector<Event> events_;
};

// Runs `job` (a callable taking no argument) as the header says and returns its result, or
// rethrows what it threw. `interrupted` is set when a KeyboardInterrupt asked it to stop: the job
// then returned what it kept, and the caller raises KeyboardInterrupt (raise_keyboard_interrupt)
// once it has taken that. An exception on_event raised stops the job and is raised here.
template <typename Job>
auto run_job_from_python(Job&& job, QueuedHooks& hooks, const py::object& on_event,
                         bool& interrupted) -> decltype(job());

void raise_keyboard_interrupt();

// The engine jobs running in this process now (run_on_worker's): the stop request is the
// process's, so crossover.dask runs a job here only where none is.
int jobs_running();

// The engine's side of the runner: starts `work` on a thread with the stop signals blocked and
// waits for it, polling Python's signals every tenth of a second.
void run_on_worker(const std::function<void()>& work, QueuedHooks& hooks,
                   const py::object& on_event, bool& interrupted);

template <typename Job>
auto run_job_from_python(Job&& job, QueuedHooks& hooks, const py::object& on_event,
                         bool& interrupted) -> decltype(job()) {
  std::optional<decltype(job())> result;
  std::exception_ptr failure;
  run_on_worker(
      [&] {
        try {
          result.emplace(job());
        } catch (...) {
          failure = std::current_exception();
        }
      },
      hooks, on_event, interrupted);
  if (failure) std::rethrow_exception(failure);
  return std::move(*result);
}

}  // namespace xo::python
