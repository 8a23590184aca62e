#include "python/runner.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <exception>
#include <tuple>
#include <utility>

#include "core/error.h"

namespace xo::python {

namespace {

// Calls `method` of the runner's object with the GIL held (`use` takes it, and returns nothing of
// Python's); what Python raised becomes a UserError naming the method (the search's thread cannot
// carry a Python exception out).
template <typename Use>
auto call(const py::object& remote, const char* method, Use&& use) {
  py::gil_scoped_acquire gil;
  try {
    return use(remote.attr(method));
  } catch (const std::exception& e) {  // raised in Python, or an answer of the wrong type
    throw UserError(fmt::format("the search's runner ({}): {}", method, e.what()));
  }
}

}  // namespace

PyJobRunner::PyJobRunner(py::object remote) : remote_(std::move(remote)) {
  for (const py::handle s : remote_.attr("slots")) add_slot(s);
  if (slots_.empty()) throw UserError("the search's runner has no slot (no worker to run on)");
}

// A slot (device, threads, host) at the end; its index tells it apart as a rank does.
void PyJobRunner::add_slot(const py::handle& s) {
  const auto [device, threads, host] = s.cast<std::tuple<std::string, int, std::string>>();
  slots_.push_back({static_cast<int>(slots_.size()), device, threads, host});
  busy_.push_back(false);
  gone_.push_back(false);
}

void PyJobRunner::refresh() {
  call(remote_, "changes", [&](const py::object& f) {
    const py::tuple changes = f();
    for (const py::handle s : changes[0]) add_slot(s);
    for (const py::handle i : changes[1]) gone_.at(i.cast<size_t>()) = true;
  });
}

PyJobRunner::~PyJobRunner() {
  py::gil_scoped_acquire gil;
  remote_ = py::object();
}

void PyJobRunner::start(size_t slot, const std::vector<std::string>& args,
                        const std::filesystem::path& log) {
  call(remote_, "start", [&](const py::object& f) { f(slot, args, log.string()); });
  busy_.at(slot) = true;
}

std::vector<JobRunner::Ended> PyJobRunner::collect_ended() {
  const auto ended = call(remote_, "collect", [](const py::object& f) {
    return f().cast<std::vector<std::tuple<size_t, int, double>>>();
  });
  std::vector<Ended> out;
  for (const auto& [slot, code, seconds] : ended) {
    if (slot >= slots_.size() || !busy_[slot]) {
      throw UserError(fmt::format("the search's runner (collect): slot {} ended no job", slot));
    }
    busy_[slot] = false;
    out.push_back({slot, code, seconds});
  }
  return out;
}

void PyJobRunner::wait_for_end(std::chrono::milliseconds at_most) const {
  call(remote_, "wait",
       [&](const py::object& f) { f(std::chrono::duration<double>(at_most).count()); });
}

void PyJobRunner::interrupt() {
  call(remote_, "interrupt", [](const py::object& f) { f(); });
}

void PyJobRunner::release_workers() {
  call(remote_, "close", [](const py::object& f) { f(); });
}

}  // namespace xo::python
