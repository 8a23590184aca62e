#include "python/worker.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "core/interrupt.h"
#include "io/json_fields.h"
#include "report/train_text.h"
#include "train/epoch_fields.h"

namespace xo::python {

void QueuedHooks::push(const char* kind, const std::string& text) {
  std::lock_guard lock(mutex_);
  events_.push_back({kind, text, std::nullopt, 0, 0});
}

void QueuedHooks::bar(double fraction, const std::string& text) {
  std::lock_guard lock(mutex_);
  events_.push_back({"bar", text, std::nullopt, 0, fraction});
}

void QueuedHooks::epoch(const EpochRecord& record, int64_t epochs, bool scheduled) {
  std::lock_guard lock(mutex_);
  events_.push_back({"epoch", epoch_line(record, epochs, scheduled), record, epochs, 0});
}

void QueuedHooks::drain(const py::object& on_event) {
  std::vector<Event> events;
  {
    std::lock_guard lock(mutex_);
    events.swap(events_);
  }
  if (on_event.is_none()) return;
  const py::module_ json = py::module_::import("json");
  for (const Event& e : events) {
    if (e.epoch) {
      nlohmann::json record = fields_json(
          *e.epoch, [](auto& io, auto& r) { epoch_fields(io, r, EpochDocument::kResult); });
      record["epochs"] = e.epochs;
      record["line"] = e.text;  // as the command line prints it
      on_event(e.kind, json.attr("loads")(record.dump()));
    } else if (e.kind == "bar") {
      on_event(e.kind, py::make_tuple(e.fraction, e.text));
    } else {
      on_event(e.kind, e.text);
    }
  }
}

void raise_keyboard_interrupt() {
  PyErr_SetNone(PyExc_KeyboardInterrupt);
  throw py::error_already_set();
}

namespace {
std::atomic<int> g_jobs{0};
}  // namespace

int jobs_running() { return g_jobs.load(); }

void run_on_worker(const std::function<void()>& work, QueuedHooks& hooks,
                   const py::object& on_event, bool& interrupted) {
  struct Counted {
    Counted() { ++g_jobs; }
    ~Counted() { --g_jobs; }
    Counted(const Counted&) = delete;
    Counted& operator=(const Counted&) = delete;
  } counted;
  clear_stop_request();
  interrupted = false;
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread worker([&] {
    block_stop_signals();
    work();  // catches what the job throws itself (run_job_from_python)
    done.set_value();
  });
  // Waits for the worker to end, the GIL released meanwhile.
  auto join = [&] {
    py::gil_scoped_release release;
    worker.join();
  };
  try {
    for (;;) {
      bool ended = false;
      {
        py::gil_scoped_release release;
        ended = finished.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready;
      }
      hooks.drain(on_event);
      if (ended) break;
      if (!interrupted && PyErr_CheckSignals() != 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) throw py::error_already_set();
        PyErr_Clear();  // raised again once the job has stopped and its state is taken
        interrupted = true;
        request_stop();
      }
    }
  } catch (...) {  // on_event raised, or a signal handler did: stop the job, then raise it
    request_stop();
    join();
    clear_stop_request();
    throw;
  }
  join();
  hooks.drain(on_event);
  clear_stop_request();
}

}  // namespace xo::python
