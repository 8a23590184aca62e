// crossover._crossover: the Python module's C++ half. Each function reads its Python arguments,
// calls one job of src/job/ (the functions the command line calls) and returns what it gave as
// Python objects: results as the same JSON text the CLI writes, weights as NumPy arrays.
// python/crossover/ wraps it in Keras's and scikit-learn's conventions. No Python runs in a step.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/file.h"
#include "core/interrupt.h"
#include "data/source.h"
#include "io/json_fields.h"
#include "io/onnx.h"
#include "io/safetensors.h"
#include "job/devices.h"
#include "job/measuring.h"
#include "job/predict.h"
#include "job/train.h"
#include "job/train_group.h"
#include "job/tune.h"
#include "model/model.h"
#include "model/onnx_import.h"
#include "model/spec.h"
#include "optim/optimizer.h"
#include "python/arrays.h"
#include "python/runner.h"
#include "python/worker.h"
#include "report/report_json.h"
#include "report/result_fields.h"
#include "train/plan.h"

namespace xo::python {
namespace {

// A model as Python holds it: its spec and its state (PyTorch's names), the initialisation the
// spec gives at first, then what each fit left. Every job makes its own device's copy.
struct PyModel {
  ModelSpec spec;
  std::vector<NamedTensor> weights;
};

// The spec's own initial state: its seed's draw, or the weights it names.
std::vector<NamedTensor> initial_weights(const ModelSpec& spec) {
  const std::unique_ptr<Backend> cpu = make_backend(parse_device("cpu", 1));
  Model model(spec, *cpu);
  initialize(model);
  return model.export_params();
}

PyModel make_model(ModelSpec spec) {
  std::vector<NamedTensor> weights = initial_weights(spec);
  return PyModel{std::move(spec), std::move(weights)};
}

// The classes its labels index (0: a regression), as Model::classes says.
int64_t classes_of(const ModelSpec& spec) {
  if (spec.loss == LossType::BinaryCrossEntropy) return 2;
  if (spec.loss == LossType::MeanSquaredError) return 0;
  return model_layout(spec).outputs;
}

// The model on `device`, holding the Python model's state.
struct DeviceModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};
DeviceModel on_device(const PyModel& m, const std::string& device, int threads) {
  DeviceModel d;
  d.backend = make_backend(parse_device(device, threads));
  d.model = std::make_unique<Model>(m.spec, *d.backend);
  d.model->init(m.spec.train.seed);
  d.model->import_params(m.weights, m.spec.name);
  return d;
}

// Each layer as `summary()` lists it: its type, the shape of one sample after it, its parameters.
py::list layers(const PyModel& m) {
  const std::vector<std::vector<int64_t>> shapes = infer_shapes(m.spec);
  py::list rows;
  std::vector<int64_t> in = m.spec.input;
  for (size_t i = 0; i < m.spec.layers.size(); ++i) {
    int64_t params = 0;
    for (const ParamShape& p : layer_parameters(m.spec.layers[i], in)) {
      params += std::accumulate(p.shape.begin(), p.shape.end(), int64_t{1}, std::multiplies<>());
    }
    rows.append(py::make_tuple(layer_type_name(m.spec.layers[i].type), shapes[i], params));
    in = shapes[i];
  }
  return rows;
}

// fit(optimizer="adam"): torch.optim's defaults for that optimizer, as `crossover train
// --optimizer` takes them (the spec's own where it names the same kind).
void use_optimizer(TrainSpec& train, const std::string& name) {
  std::vector<std::string> names;
  for (OptimizerType type : kOptimizerTypes) {
    names.emplace_back(optimizer_type_name(type));
    if (name != names.back()) continue;
    if (type != train.optimizer.type) train.optimizer = torch_defaults(type);
    return;
  }
  throw UserError(fmt::format("fit(optimizer='{}'): unknown optimizer (expected one of: {})", name,
                              fmt::join(names, ", ")));
}

// What fit() is asked beyond its data: where and how to train, and its checkpoints.
struct FitSettings {
  std::string optimizer;  // a torch.optim name: its defaults in place of the spec's optimizer
  std::string device = "cpu", precision = "f32";
  int threads = 0;
  std::string checkpoint_dir, checkpoint_every = "60s";
  bool resume = false, restart = false, verbose = true;
};

// Trains the model on the arrays (validation: arrays, a fraction held out, or none); its state is
// what training left, also when a KeyboardInterrupt stopped it (raised once the state is taken).
// Returns the run's result as `crossover train --json` writes it.
std::string fit(PyModel& m, const py::array& x, const py::array& y, const py::object& val_x,
                const py::object& val_y, double validation_split, const std::string& train_toml,
                const FitSettings& s, const py::object& on_event) {
  ModelSpec spec = m.spec;
  if (!s.optimizer.empty()) use_optimizer(spec.train, s.optimizer);
  if (!train_toml.empty()) apply_train_settings(spec, train_toml, "fit()");
  const int64_t classes = classes_of(spec);
  DataSplit split;
  split.train = borrow_samples(x, y, spec, classes, "fit()");
  if (!val_x.is_none()) {
    split.validation = borrow_samples(val_x.cast<py::array>(), val_y.cast<py::array>(), spec,
                                      classes, "fit(validation_data=)");
  } else if (validation_split > 0) {
    split_validation(split, validation_split, "fit(validation_split=)");
  }
  TrainJob job;
  job.model = spec;
  job.device = s.device;
  job.precision = s.precision;
  job.threads = s.threads;
  job.quiet = !s.verbose;
  job.arrays = &split;
  job.weights = m.weights;
  job.keep_weights = true;
  job.checkpoint.every = s.checkpoint_dir.empty() ? "off" : s.checkpoint_every;
  job.checkpoint.dir = s.checkpoint_dir;
  job.checkpoint.resume = s.resume;
  job.checkpoint.restart = s.restart;
  QueuedHooks hooks;
  bool interrupted = false;
  TrainOutcome outcome =
      run_job_from_python([&] { return train_job(job, hooks); }, hooks, on_event, interrupted);
  if (!outcome.weights.empty()) m.weights = std::move(outcome.weights);
  if (interrupted || outcome.run.result.interrupted) raise_keyboard_interrupt();
  return train_document(outcome.run).dump();
}

// Loss and accuracy (percent; NaN for a regression) over the arrays, no dropout, no gradient.
py::dict evaluate(const PyModel& m, const py::array& x, const py::array& y,
                  const std::string& device, int threads) {
  const Dataset data = borrow_samples(x, y, m.spec, classes_of(m.spec), "evaluate()");
  QueuedHooks hooks;
  bool interrupted = false;
  const Evaluation e = run_job_from_python(
      [&] {
        DeviceModel d = on_device(m, device, threads);
        Evaluator evaluator(*d.model, data);
        return evaluator.run();
      },
      hooks, py::none(), interrupted);
  if (interrupted || !e.complete) raise_keyboard_interrupt();
  py::dict figures;
  figures["loss"] = e.loss;
  figures["accuracy_percent"] = e.accuracy;
  return figures;
}

// The predictions for every row: (values [rows, columns], labels [rows] or None).
py::tuple predict(const PyModel& m, const py::array& x, const std::string& device, int threads) {
  const Dataset rows = borrow_inputs(x, m.spec, "predict()");
  QueuedHooks hooks;
  bool interrupted = false;
  std::optional<Predictions> p = run_job_from_python(
      [&] {
        DeviceModel d = on_device(m, device, threads);
        return predict_rows(*d.model, rows);
      },
      hooks, py::none(), interrupted);
  if (interrupted || !p) raise_keyboard_interrupt();
  py::array_t<double> values(std::vector<py::ssize_t>{p->rows, p->columns});
  std::copy(p->values.begin(), p->values.end(), values.mutable_data());
  if (p->labels.empty()) return py::make_tuple(values, py::none());
  py::array_t<int32_t> labels(p->rows);
  std::copy(p->labels.begin(), p->labels.end(), labels.mutable_data());
  return py::make_tuple(values, labels);
}

// What a measuring job from Python is asked beyond its model and arrays.
struct MeasureCall {
  int64_t epochs = 0;                // 0: the spec's
  std::vector<std::string> devices;  // empty: every device here
  std::string out;                   // empty: crossover-results/ (or a dated folder)
  bool overwrite = false;
  std::string call;  // the Python call, as the manifest records it
};

// The model with its state as the measuring jobs take it, and the arrays they train on.
ModelSpec measured_spec(const PyModel& m, int64_t epochs) {
  ModelSpec spec = m.spec;
  if (epochs > 0) spec.train.epochs = epochs;
  spec.init_weights = std::make_shared<const std::vector<NamedTensor>>(m.weights);
  return spec;
}
MeasureOptions measure_options(const MeasureCall& c, const DataSplit& split) {
  MeasureOptions o;
  o.arrays = &split;
  o.settings.devices = c.devices;
  o.out = c.out;
  o.overwrite = c.overwrite;
  o.command_line = c.call;
  return o;
}
// A measuring job's report: (the folder it was written to, its results.json text).
py::tuple written(const JobOutcome& outcome) {
  return py::make_tuple(outcome.out.string(), to_json(outcome.report).dump());
}

// `crossover advise` on the arrays: the model measured on every device here (or `devices`),
// predicted and priced elsewhere, the verdict. None where a stop came before any run finished.
py::object advise(const PyModel& m, const py::array& x, const py::array& y, const MeasureCall& c,
                  const py::object& on_event) {
  AdviseJob job;
  job.given = measured_spec(m, c.epochs);
  DataSplit split;
  split.train = borrow_samples(x, y, *job.given, classes_of(job.given.value()), "advise()");
  const AdviseJob defaults;
  job.measure = measure_options(c, split);
  job.measure.settings.max_steps = defaults.measure.settings.max_steps;
  job.measure.settings.node_time_steps = defaults.measure.settings.node_time_steps;
  QueuedHooks hooks;
  bool interrupted = false;
  std::optional<JobOutcome> outcome =
      run_job_from_python([&] { return advise_job(job, hooks); }, hooks, on_event, interrupted);
  if (interrupted && (!outcome || outcome->stopped)) raise_keyboard_interrupt();
  if (!outcome) return py::none();
  return written(*outcome);
}

// `crossover sweep` on the arrays: the model grown along `vary` ("width=64,128,256") on every
// device here, the crossover where one device overtakes the other.
py::tuple sweep(const PyModel& m, const py::array& x, const py::array& y, const std::string& vary,
                const MeasureCall& c, const py::object& on_event) {
  MeasureJob job;
  job.given = measured_spec(m, c.epochs);
  job.vary = vary;
  DataSplit split;
  split.train = borrow_samples(x, y, *job.given, classes_of(job.given.value()), "sweep()");
  job.measure = measure_options(c, split);
  QueuedHooks hooks;
  bool interrupted = false;
  JobOutcome outcome =
      run_job_from_python([&] { return sweep_job(job, hooks); }, hooks, on_event, interrupted);
  if (interrupted && outcome.stopped) raise_keyboard_interrupt();
  return written(outcome);
}

// `crossover tune`'s flags, from crossover.tune(); the package has written the samples (and a
// validation set) and the model's weights to safetensors files in the search's folder, since the
// trials are processes of the crossover command (`program`, installed beside the package).
struct TuneCall {
  std::string data, test_data, init, program;
  double validation_split = 0;
  std::vector<std::string> vary, devices;
  int64_t samples = 0, min_epochs = 1, factor = 3, epochs = 0;  // epochs 0: the spec's
  uint64_t seed = 0;
  std::string objective, out = "crossover-tune", checkpoint_every = "60s", precision = "f32";
  bool halving = false, restart = false, quiet = false;
  int parallel = 0, fuse = kFuseAuto, threads = 0, instances = 4;
  std::string call;  // the Python call, as the search's lock records it
};

// `crossover tune` on the model: returns results.json's text as the search left it, or raises
// KeyboardInterrupt where a Ctrl-C stopped it (its finished trials kept; the same call goes on).
// `runner`: crossover.dask's runner, where the trials' jobs run (None: on this machine).
std::string tune(const PyModel& m, const TuneCall& c, const py::object& on_event,
                 const py::object& runner, const py::object& x, const py::object& y,
                 const py::object& val_x, const py::object& val_y) {
  // The arrays the data files hold, for the search's planning (SearchOptions::data).
  std::optional<DataSplit> arrays;
  if (!x.is_none()) {
    const int64_t classes = classes_of(m.spec);
    arrays.emplace();
    arrays->train =
        borrow_samples(x.cast<py::array>(), y.cast<py::array>(), m.spec, classes, "tune()");
    if (!val_x.is_none()) {
      arrays->test = borrow_samples(val_x.cast<py::array>(), val_y.cast<py::array>(), m.spec,
                                    classes, "tune(validation_data=)");
    }
    split_validation(*arrays, c.validation_split, "tune(validation_split=)");
  }
  std::optional<PyJobRunner> remote;
  if (!runner.is_none()) remote.emplace(runner);
  TuneJob job;
  job.runner = remote ? &*remote : nullptr;
  ModelSpec spec = m.spec;
  spec.data = DataSpec{};
  spec.data.source = "safetensors:" + c.data;
  if (!c.test_data.empty()) spec.data.test = "safetensors:" + c.test_data;
  spec.data.validation_split = c.validation_split;
  spec.init = c.init;
  spec.init_weights.reset();
  job.given = std::move(spec);
  SearchOptions& s = job.search;
  s.spec = m.spec.name;
  s.vary = c.vary;
  s.samples = c.samples;
  s.seed = c.seed;
  s.objective = c.objective;
  s.halving = c.halving;
  s.min_epochs = c.min_epochs;
  s.factor = c.factor;
  if (c.epochs > 0) s.epochs = c.epochs;
  s.parallel = c.parallel;
  s.fuse = c.fuse;
  s.threads = c.threads;
  s.devices = c.devices;
  s.out = c.out;
  s.restart = c.restart;
  s.instances = c.instances;
  s.checkpoint_every = c.checkpoint_every;
  s.precision = c.precision;
  s.command_line = c.call;
  s.data = arrays ? &*arrays : nullptr;
  job.quiet = c.quiet;
  job.program = c.program;
  QueuedHooks hooks;
  bool interrupted = false;
  const TuneRecord r =
      run_job_from_python([&] { return tune_job(job, hooks); }, hooks, on_event, interrupted);
  if (interrupted && r.interrupted) raise_keyboard_interrupt();
  return read_file(std::filesystem::path(c.out) / "results.json");
}

// What a job run for crossover.dask says, as the command would print it (its outcomes, then its
// notes on lines of their own), kept for the job's log.
class TextHooks final : public JobHooks {
 public:
  void result(const std::string& text) override { add(text); }
  void note(const std::string& line) override { add(line + "\n"); }
  std::string take() {
    std::lock_guard lock(mutex_);
    return std::move(text_);
  }

 private:
  void add(const std::string& text) {
    std::lock_guard lock(mutex_);
    text_ += text;
  }
  std::mutex mutex_;
  std::string text_;
};

// `crossover train-group DIR...` in this process: a Dask worker running a search's job
// (crossover.dask). Returns (its exit code, what the command would have printed), ending as the
// command ends (core/exit_codes.h's failure_of); stop_job() from another thread stops it as
// Ctrl-C stops the command (its checkpoints kept, exit code 130).
py::tuple train_group(const TrainGroupJob& job) {
  QueuedHooks unused;
  TextHooks said;
  bool interrupted = false;
  const int code = run_job_from_python(
      [&] {
        try {
          return train_group_job(job, said);
        } catch (...) {
          const Failure f = failure_of(std::current_exception(), "crossover train-group");
          said.note(f.line);
          return f.code;
        }
      },
      unused, py::none(), interrupted);
  return py::make_tuple(code, said.take());
}

// `crossover devices`: (the devices as JSON text, a list of {device_info, peaks or null}; why the
// others are not there).
py::tuple devices(bool probe, bool reprobe) {
  QueuedHooks hooks;
  bool interrupted = false;
  const DevicesOutcome found = run_job_from_python([&] { return devices_job(probe, reprobe); },
                                                   hooks, py::none(), interrupted);
  if (interrupted) raise_keyboard_interrupt();
  nlohmann::json list = nlohmann::json::array();
  for (const DeviceEntry& e : found.devices) {
    nlohmann::json entry = fields_json(e.info, result_fields::device_info);
    entry["id"] = e.info.id;
    entry["peaks"] =
        e.peaks ? fields_json(*e.peaks, [](auto& io, auto& p) { peaks_fields(io, p, true); })
                : nlohmann::json();
    list.push_back(std::move(entry));
  }
  return py::make_tuple(list.dump(), found.unavailable);
}

void translate_errors() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemory& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const UserError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Interrupted& e) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    }
  });
}

// The model's state replaced by `tensors`: every tensor of the model at its exact shape, nothing
// else (errors name `origin` and the tensor).
void replace_weights(PyModel& m, const std::vector<NamedTensor>& tensors,
                     const std::string& origin) {
  const std::unique_ptr<Backend> cpu = make_backend(parse_device("cpu", 1));
  Model check(m.spec, *cpu);
  check.import_params(tensors, origin);
  m.weights = check.export_params();
}

PyModel load_model(const std::string& name_or_path) {
  return make_model(resolve_spec(name_or_path));
}

PyModel toml_model(const std::string& text, const std::string& origin) {
  return make_model(parse_spec(text, origin));
}

PyModel onnx_model(const py::bytes& data, const std::string& origin) {
  OnnxImport imported = import_onnx(parse_onnx(std::string(data), origin));
  imported.spec.init_weights =
      std::make_shared<const std::vector<NamedTensor>>(std::move(imported.weights));
  return make_model(std::move(imported.spec));
}

void save_weights(const PyModel& m, const std::string& path) {
  save_safetensors(path, m.weights,
                   {{"format", "pt"}, {"model", m.spec.name}, {"producer", "crossover"}});
}

std::string fit_method(PyModel& m, const py::array& x, const py::array& y, const py::object& val_x,
                       const py::object& val_y, double validation_split,
                       const std::string& train_toml, const std::string& optimizer,
                       const std::string& device, const std::string& precision, int threads,
                       const std::string& checkpoint_dir, const std::string& checkpoint_every,
                       bool resume, bool restart, bool verbose, const py::object& on_event) {
  const FitSettings s{optimizer,        device, precision, threads, checkpoint_dir,
                      checkpoint_every, resume, restart,   verbose};
  return fit(m, x, y, val_x, val_y, validation_split, train_toml, s, on_event);
}

void bind_model(py::module_& m) {
  py::class_<PyModel>(m, "Model")
      .def(py::init(&load_model), py::arg("name_or_path"))
      .def_static("from_toml", &toml_model, py::arg("text"), py::arg("origin"))
      .def_static("from_onnx", &onnx_model, py::arg("data"), py::arg("origin"))
      .def_property_readonly("name", [](const PyModel& self) { return self.spec.name; })
      .def_property_readonly("origin", [](const PyModel& self) { return self.spec.origin; })
      .def_property_readonly("input_shape", [](const PyModel& self) { return self.spec.input; })
      .def_property_readonly("classes", [](const PyModel& self) { return classes_of(self.spec); })
      .def_property_readonly("loss", [](const PyModel& self) { return loss_name(self.spec.loss); })
      .def_property_readonly("params",
                             [](const PyModel& self) { return parameter_count(self.spec); })
      .def_property_readonly("notes", [](const PyModel& self) { return self.spec.notes; })
      .def("toml", [](const PyModel& self) { return to_toml(self.spec); })
      .def("layers", &layers)
      .def("state_dict", [](const PyModel& self) { return to_state_dict(self.weights); })
      .def(
          "load_state_dict",
          [](PyModel& self, const py::dict& state) {
            replace_weights(self, from_state_dict(state), "load_state_dict()");
          },
          py::arg("state"))
      .def("save", &save_weights, py::arg("path"))
      .def(
          "load",
          [](PyModel& self, const std::string& path) {
            replace_weights(self, load_safetensors(path), path);
          },
          py::arg("path"))
      .def("fit", &fit_method, py::arg("x"), py::arg("y"), py::arg("val_x"), py::arg("val_y"),
           py::arg("validation_split"), py::arg("train_toml"), py::arg("optimizer"),
           py::arg("device"), py::arg("precision"), py::arg("threads"), py::arg("checkpoint_dir"),
           py::arg("checkpoint_every"), py::arg("resume"), py::arg("restart"), py::arg("verbose"),
           py::arg("on_event"))
      .def("evaluate", &evaluate, py::arg("x"), py::arg("y"), py::arg("device"), py::arg("threads"))
      .def("predict", &predict, py::arg("x"), py::arg("device"), py::arg("threads"));
}

}  // namespace
}  // namespace xo::python

PYBIND11_MODULE(_crossover, m) {
  namespace py = pybind11;
  using namespace xo;
  using namespace xo::python;
  m.doc() = "crossover's engine (the C++ half of the `crossover` package: use that)";
  translate_errors();
  m.attr("version") = CROSSOVER_VERSION;
  bind_model(m);
  py::class_<MeasureCall>(m, "MeasureCall")
      .def(py::init<>())
      .def_readwrite("epochs", &MeasureCall::epochs)
      .def_readwrite("devices", &MeasureCall::devices)
      .def_readwrite("out", &MeasureCall::out)
      .def_readwrite("overwrite", &MeasureCall::overwrite)
      .def_readwrite("call", &MeasureCall::call);
  m.def("advise", &advise, py::arg("model"), py::arg("x"), py::arg("y"), py::arg("call"),
        py::arg("on_event"));
  m.def("sweep", &sweep, py::arg("model"), py::arg("x"), py::arg("y"), py::arg("vary"),
        py::arg("call"), py::arg("on_event"));
  py::class_<TuneCall>(m, "TuneCall")
      .def(py::init<>())
      .def_readwrite("data", &TuneCall::data)
      .def_readwrite("test_data", &TuneCall::test_data)
      .def_readwrite("init", &TuneCall::init)
      .def_readwrite("program", &TuneCall::program)
      .def_readwrite("validation_split", &TuneCall::validation_split)
      .def_readwrite("vary", &TuneCall::vary)
      .def_readwrite("devices", &TuneCall::devices)
      .def_readwrite("samples", &TuneCall::samples)
      .def_readwrite("min_epochs", &TuneCall::min_epochs)
      .def_readwrite("factor", &TuneCall::factor)
      .def_readwrite("epochs", &TuneCall::epochs)
      .def_readwrite("seed", &TuneCall::seed)
      .def_readwrite("objective", &TuneCall::objective)
      .def_readwrite("out", &TuneCall::out)
      .def_readwrite("checkpoint_every", &TuneCall::checkpoint_every)
      .def_readwrite("precision", &TuneCall::precision)
      .def_readwrite("halving", &TuneCall::halving)
      .def_readwrite("restart", &TuneCall::restart)
      .def_readwrite("quiet", &TuneCall::quiet)
      .def_readwrite("parallel", &TuneCall::parallel)
      .def_readwrite("fuse", &TuneCall::fuse)
      .def_readwrite("threads", &TuneCall::threads)
      .def_readwrite("instances", &TuneCall::instances)
      .def_readwrite("call", &TuneCall::call);
  m.def("tune", &tune, py::arg("model"), py::arg("call"), py::arg("on_event"),
        py::arg("runner") = py::none(), py::arg("x") = py::none(), py::arg("y") = py::none(),
        py::arg("val_x") = py::none(), py::arg("val_y") = py::none());
  py::class_<TrainGroupJob>(m, "TrainGroupJob")
      .def(py::init<>())
      .def_readwrite("dirs", &TrainGroupJob::dirs)
      .def_readwrite("device", &TrainGroupJob::device)
      .def_readwrite("threads", &TrainGroupJob::threads)
      .def_readwrite("precision", &TrainGroupJob::precision)
      .def_readwrite("quiet", &TrainGroupJob::quiet)
      .def_readwrite("pause_after", &TrainGroupJob::pause_after)
      .def_readwrite("checkpoint_every", &TrainGroupJob::checkpoint_every)
      .def_readwrite("resume", &TrainGroupJob::resume)
      .def_readwrite("on_nan", &TrainGroupJob::on_nan);
  m.def("train_group", &train_group, py::arg("job"));
  m.def("stop_job", &request_stop,
        "Asks the job running in this process to stop at its next safe point, as Ctrl-C does");
  m.def("jobs_running", &jobs_running, "The engine jobs running in this process now");
  m.def("builtin_models", &builtin_spec_names);
  m.def("devices", &devices, py::arg("probe"), py::arg("reprobe"));
}
