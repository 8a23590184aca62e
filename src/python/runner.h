// A search's jobs run by a Python object (crossover.dask.DaskRunner: a Dask cluster's workers)
// instead of this machine's processes: the search (tune/search.h) calls it from the job's thread,
// which takes the GIL for each call. The object's protocol:
//   slots                   [(device, threads, host), ...]: one job at a time each
//   start(slot, args, log)  runs `crossover ARGS` for the slot, its output appended to `log`
//   collect()               [(slot, exit code, seconds), ...]: the jobs ended since the last call,
//                           their trials' files back in their folders
//   wait(seconds)           returns when a job ends, or after `seconds`
//   interrupt()             asks every running job to save its checkpoints and end
//   changes()               ([(device, threads, host), ...] of slots that joined since the last
//                           call, [indices of slots gone]): a worker joined or left the cluster
//   close()                 the search is over
// An exception it raises ends the search as a UserError with its text.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tune/slots.h"

namespace xo::python {

namespace py = pybind11;

class PyJobRunner final : public JobRunner {
 public:
  // With the GIL held: reads `remote.slots`.
  explicit PyJobRunner(py::object remote);
  ~PyJobRunner() override;  // takes the GIL to let go of the object
  PyJobRunner(const PyJobRunner&) = delete;
  PyJobRunner& operator=(const PyJobRunner&) = delete;

  const std::vector<Slot>& slots() const override { return slots_; }
  bool busy(size_t slot) const override { return busy_.at(slot); }
  void start(size_t slot, const std::vector<std::string>& args,
             const std::filesystem::path& log) override;
  std::vector<Ended> collect_ended() override;
  void wait_for_end(std::chrono::milliseconds at_most) const override;
  void interrupt() override;
  void release_workers() override;
  void refresh() override;
  bool gone(size_t slot) const override { return gone_.at(slot); }

 private:
  void add_slot(const py::handle& s);
  py::object remote_;
  std::vector<Slot> slots_;
  std::vector<bool> busy_, gone_;
};

}  // namespace xo::python
