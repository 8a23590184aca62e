// The report document and the training result as JSON. Each record has one writer and one reader
// here, next to each other, so that a field added to one is seen missing from the other.
#include "report/report_json.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "advisor/scale_out.h"
#include "core/error.h"
#include "core/json_depth.h"
#include "report/json_fields.h"
#include "report/json_in.h"

namespace xo {
namespace {

using json = nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// JSON has no NaN: a value that is not finite is written as null.
json optional_number(const std::optional<double>& v) { return v ? number_or_null(*v) : json(); }
json optional_text(const std::optional<std::string>& v) { return v ? json(*v) : json(); }
json optional_numbers(const std::vector<std::optional<double>>& v) {
  json out = json::array();
  for (const auto& x : v) out.push_back(optional_number(x));
  return out;
}

// ---------------------------------------------------------------------------------------------
// The training result (crossover.train/2; a report's run holds the same fields).
//
// The conventions since schema 2 (crossover 0.2.0): losses are means per sample, as Keras and
// PyTorch report them; a figure in percent says so in its name (`_percent`), a fraction in [0, 1]
// in its (`_fraction`). Schema 1 named percentages as plain `train_error`, `test_accuracy`, … and
// summed the training loss over the epoch's batches; its files are read with those names and their
// training loss turned into a mean (exact where every batch was full, which schema 1 could not
// tell apart from the partial batch's share otherwise).

// The key a figure has in a file of `schema` (1 or 2): schema 1's name, else schema 2's.
const char* key(int schema, const char* v1, const char* v2) { return schema == 1 ? v1 : v2; }

// An epoch's figures. Where there is no test or validation split its two keys are absent (a
// regression's accuracy is null: not measured); files written before learning-rate schedules have
// no rate.
template <typename Io, typename E>
void epoch_fields(Io& io, E& e, int schema) {
  if constexpr (Io::kReading) e.test_loss = e.test_accuracy = e.lr = kNaN;
  io.value("epoch", e.epoch);
  io.nullable("loss", e.loss);
  io.nullable(key(schema, "train_error", "train_error_percent"), e.train_error);
  io.value("seconds", e.seconds);
  io.nullable_since("lr", e.lr);
  if (Io::kReading || !std::isnan(e.test_loss) || !std::isnan(e.test_accuracy)) {
    io.nullable_since("test_loss", e.test_loss);
    io.nullable_since(key(schema, "test_accuracy", "test_accuracy_percent"), e.test_accuracy);
  }
  if (Io::kReading || !std::isnan(e.val_loss) || !std::isnan(e.val_accuracy)) {  // Keras's names
    io.nullable_since("val_loss", e.val_loss);
    io.nullable_since("val_accuracy_percent", e.val_accuracy);
  }
}

template <typename Io, typename S>
void timing_fields(Io& io, S& s) {
  io.value("count", s.count);
  for (auto [name, v] : {std::pair{"median", &s.median},
                         {"mean", &s.mean},
                         {"min", &s.min},
                         {"max", &s.max},
                         {"p10", &s.p10},
                         {"p90", &s.p90},
                         {"cv", &s.cv}}) {
    io.nullable(name, *v);
  }
}

constexpr std::initializer_list<const char*> kDeviceInfoKeys = {"kind", "name", "threads",
                                                                "library", "precision"};

// The device a run trained on: its kind, name, threads, libraries and precision, and whatever
// details the backend gave (a GPU's clock, say) as further texts.
template <typename Io, typename D>
void device_info_fields(Io& io, D& d) {
  if constexpr (Io::kReading) {
    d.kind = io.in().kind("kind");
  } else {
    io.value("kind", std::string(device_kind_name(d.kind)));
  }
  io.value("name", d.name);
  io.value("threads", d.threads);
  io.value("library", d.library);
  io.value("precision", d.precision);
  if constexpr (Io::kReading) {
    d.details = io.in().other_texts(kDeviceInfoKeys);
  } else {
    for (const auto& [k, v] : d.details) io.value(k.c_str(), v);
  }
}

// What ended a run early: a loss that was not finite (null: it did not), early stopping (null:
// the run had none), and the checkpoints.
template <typename Io, typename R>
void ending_fields(Io& io, R& r) {
  io.value("interrupted", r.interrupted);
  io.value("diverged_epoch", r.diverged_epoch);
  const bool diverged = io.optional_object("stopped_diverged", r.stopped_diverged, [&](auto& d) {
    d.derived("epoch", r.diverged_epoch);  // read from diverged_epoch
    d.value("from_step", r.diverged_from);
    d.value("step", r.diverged_step);
    d.nullable("last_finite_loss", r.last_finite_loss);
    d.value("last_finite_epoch", r.last_finite_epoch);
    d.value("last_finite_step", r.last_finite_step);
  });
  if constexpr (Io::kReading) r.stopped_diverged = diverged;
  io.optional_object("early_stopping", !r.early_stopping_monitor.empty(), [&](auto& e) {
    e.value("monitor", r.early_stopping_monitor);
    e.value("patience", r.early_stopping_patience);
    e.value("min_delta", r.early_stopping_min_delta);
    e.value("stopped_early", r.stopped_early);
    e.value("best_epoch", r.best_epoch);
    e.nullable("best_value", r.best_value);
    e.value("restored_best", r.restored_best);
  });
  io.object_since("checkpoints", [&](auto& c) {
    c.value("resumed_at_step", r.resumed_at_step);
    c.since("paused", r.paused);
    c.value("written", r.checkpoints_written);
    c.value("step_loop_wait_ms", r.checkpoint_wait_ms);
  });
}

// The step's time: its spread, the headline median (also inside step_ms: the reader checks it is
// there, and a lenient read of a document without it keeps step_ms's), the work and the rates,
// the step's phases (null inside a recorded step, timed as a whole) and, across MPI ranks, the
// gradient bytes each rank summed per step and how (null on one process).
template <typename Io, typename R>
void speed_fields(Io& io, R& r) {
  io.nullable_object("step_ms", [&](auto& t) { timing_fields(t, r.step_ms); });
  if constexpr (Io::kReading) {
    const double median = io.in().nullable("median_step_ms");
    if (io.in().has("median_step_ms")) r.step_ms.median = median;
  } else {
    io.nullable("median_step_ms", r.step_ms.median);
  }
  io.value("flops_per_step", r.flops_per_step);
  io.nullable("gflops", r.gflops);
  io.nullable("samples_per_second", r.samples_per_second);
  io.value("train_seconds", r.train_seconds);
  io.value("setup_seconds", r.setup_seconds);
  io.since("ranks", r.ranks);  // since data-parallel training (0.2.x)
  io.optional_object("step_phases_ms", true, [&](auto& p) {
    p.nullable("data", r.data_ms);
    p.nullable("forward_backward", r.forward_backward_ms);
    p.nullable("communicate", r.communicate_ms);
    p.nullable("optimizer", r.optimizer_ms);
  });
  io.optional_object("data_parallel", r.ranks > 1, [&](auto& d) {
    d.value("reduced_bytes_per_step", r.reduced_bytes);
    d.value("reduce", r.reduce_mode);
    // As nccl-tests: bytes x 2(n-1)/n over the communicate phase, where that phase is the whole
    // sum (after-backward); null where backward or the optimizer's pass (shared) holds part of it.
    d.derived("bus_gbs", number_or_null(communicate_bus_gbs(r.reduced_bytes, r.ranks,
                                                            r.communicate_ms, r.reduce_mode)));
  });
}

// The fields of a TrainResult shared by crossover.train/2 and a report's run; `epochs` is the key
// of the epoch records. Schema 1 (reading only) named percentages plainly and summed the epoch's
// training loss: its files are read with those names and the loss made a mean.
template <typename Io, typename R>
void result_fields(Io& io, R& r, const char* epochs, int schema) {
  io.since("steps_taken", r.steps_taken);  // in a train file since 0.2.0
  io.value("model", r.model);
  io.value("origin", r.origin);
  io.value("data", r.data);
  io.value("params", r.params);
  io.value("device", r.device.id);
  io.object("device_info", [&](auto& d) { device_info_fields(d, r.device); });
  io.value("batch", r.batch);
  io.value("samples", r.samples);
  io.value("steps_per_epoch", r.steps_per_epoch);
  io.value("shards", r.shards);
  io.derived("precision", r.device.precision);  // the device's, for the file's readers
  io.value("recorded_step", r.recorded_step);   // the step replayed as one CUDA Graph
  io.array(epochs, r.epochs, [&](auto& e_io, auto& e) { epoch_fields(e_io, e, schema); });
  io.nullable("final_loss", r.final_loss);
  io.nullable(key(schema, "final_train_error", "final_train_error_percent"), r.final_train_error);
  // Since the stuck-model check (late 0.1.1).
  io.nullable_since(key(schema, "majority_class_error", "majority_class_error_percent"),
                    r.majority_class_error);
  io.value("test_samples", r.test_samples);
  io.nullable("final_test_loss", r.final_test_loss);  // null without a test set
  io.nullable(key(schema, "final_test_accuracy", "final_test_accuracy_percent"),
              r.final_test_accuracy);
  if (schema >= 2) {  // schema 1 had no validation split
    io.value("validation_samples", r.validation_samples);
    io.nullable("final_val_loss", r.final_val_loss);
    io.nullable("final_val_accuracy_percent", r.final_val_accuracy);
  }
  speed_fields(io, r);
  ending_fields(io, r);
  if constexpr (Io::kReading) {
    if (schema == 1 && r.steps_per_epoch > 0) {
      const double steps = static_cast<double>(r.steps_per_epoch);
      r.final_loss /= steps;
      for (EpochRecord& e : r.epochs) e.loss /= steps;
    }
  }
}

json result_json(const TrainResult& r, const char* epochs) {
  json j;
  JsonWriter w(j);
  result_fields(w, r, epochs, 2);
  return j;
}

TrainResult read_result(const JsonIn& in, const char* epochs, int schema) {
  TrainResult r;
  JsonReader reader(in);
  result_fields(reader, r, epochs, schema);
  return r;
}

// ---------------------------------------------------------------------------------------------
// A report's run: the result, what was measured around it, and its analysis.

json utilisation_json(const Utilisation& u) {
  const bool gpu = !u.gpu_percent.empty();
  json cores = json::array();
  for (const auto& c : u.cpu_core_percent) cores.push_back(c);
  return {{"interval_s", u.interval_s},
          {"samples", u.samples},
          {"t_s", u.t_s},
          {"cpu_percent", u.cpu_percent},
          {"cpu_core_percent", cores},
          {"rss_mib", u.rss_mib},
          {"gpu_percent", gpu ? optional_numbers(u.gpu_percent) : json()},
          {"gpu_memory_mib", gpu ? optional_numbers(u.gpu_memory_mib) : json()},
          {"gpu_power_w", gpu ? optional_numbers(u.gpu_power_w) : json()},
          {"gpu_sm_clock_mhz", gpu ? optional_numbers(u.gpu_sm_clock_mhz) : json()},
          {"mean_cpu_percent", optional_number(u.mean_cpu_percent)},
          {"mean_gpu_percent", optional_number(u.mean_gpu_percent)},
          {"mean_other_cores", optional_number(u.mean_other_cores)},
          {"max_rss_mib", u.max_rss_mib}};
}

Utilisation read_utilisation(const JsonIn& in) {
  Utilisation u;
  u.interval_s = in.number("interval_s");
  u.samples = in.integer("samples");
  u.t_s = in.numbers("t_s");
  u.cpu_percent = in.numbers("cpu_percent");
  u.cpu_core_percent = in.number_rows("cpu_core_percent");
  u.rss_mib = in.numbers("rss_mib");
  u.gpu_percent = in.optional_numbers("gpu_percent");
  u.gpu_memory_mib = in.optional_numbers("gpu_memory_mib");
  u.gpu_power_w = in.optional_numbers("gpu_power_w");
  u.gpu_sm_clock_mhz = in.optional_numbers("gpu_sm_clock_mhz");
  u.mean_cpu_percent = in.optional_number("mean_cpu_percent");
  u.mean_gpu_percent = in.optional_number("mean_gpu_percent");
  // Since 0.1.1's busy-machine check; earlier files have no such figure.
  if (in.has("mean_other_cores")) u.mean_other_cores = in.optional_number("mean_other_cores");
  u.max_rss_mib = in.number("max_rss_mib");
  return u;
}

json run_json(const ReportRun& run) {
  const RunRecord& row = run.run;
  const RunAnalysis& a = run.analysis;
  const TrainResult& r = row.result;
  json j = result_json(r, "epoch_log");
  j["epochs"] = r.epochs.size();
  j["layers"] = row.layers;
  j["axis"] = row.axis.empty() ? json() : json{{"name", row.axis}, {"value", row.axis_value}};
  j["seconds_per_epoch"] = a.seconds_per_epoch;
  j["seconds_per_100_epochs"] = 100 * a.seconds_per_epoch;
  j["per_epoch_estimated"] = a.per_epoch_estimated;
  j["steps_taken"] = r.steps_taken;
  j["peak_gflops"] = optional_number(a.peak_gflops);
  j["peak_fraction"] = optional_number(a.peak_fraction);
  j["roofline_step_ms"] = optional_number(a.roofline_step_ms);
  j["roofline_error_percent"] = optional_number(a.roofline_error_percent);
  j["roofline_bound"] = optional_text(a.roofline_bound);
  j["phases_ms"] = json();
  j["layers_profile"] = json();
  if (a.phases) {
    json layers = json::array();
    for (const LayerProfile& l : a.layers_profile) {
      layers.push_back({{"name", l.name},
                        {"forward_ms", l.forward_ms},
                        {"backward_ms", l.backward_ms},
                        {"flops", l.flops},
                        {"bytes", l.bytes},
                        {"gflops", l.gflops},
                        {"peak_fraction", optional_number(l.peak_fraction)},
                        {"bound", optional_text(l.bound)}});
    }
    j["layers_profile"] = layers;
    j["profiled_steps"] = r.profiled_steps;
    j["phases_ms"] = {{"data", optional_number(a.phases->data_ms)},
                      {"forward", a.phases->forward_ms},
                      {"backward", a.phases->backward_ms},
                      {"optimizer", optional_number(a.phases->optimizer_ms)}};
  }
  j["loop_phases_ms"] = {{"data", optional_number(a.loop_phases.data_ms)},
                         {"forward_backward", optional_number(a.loop_phases.forward_backward_ms)},
                         {"optimizer", optional_number(a.loop_phases.optimizer_ms)}};
  j["utilisation"] = row.utilisation ? utilisation_json(*row.utilisation) : json();
  j["peak_rss_mib"] = row.peak_rss_mib;
  j["mean_cpu_percent"] =
      row.utilisation ? optional_number(row.utilisation->mean_cpu_percent) : json();
  j["mean_gpu_percent"] =
      row.utilisation ? optional_number(row.utilisation->mean_gpu_percent) : json();
  // Other processes were busy on this run's CPUs: its timings are not the machine's.
  j["timings_contaminated"] = row.utilisation && timings_contaminated(*row.utilisation);
  j["step_flops"] = row.cost.flops;
  j["step_bytes"] = row.cost.bytes;
  j["spec_toml"] = row.spec_toml;
  j["data_hash"] = row.data_hash;
  j["params_hash"] = row.params_hash;
  j["final_loss"] = number_or_null(r.final_loss);
  if (r.epochs.empty()) {  // measured steps only (--steps): no epoch finished, nothing to report
    j["final_loss"] = json();
    j["final_train_error"] = json();
  }
  return j;
}

// `hashes`: the document has a manifest (0.1.1 and later), so every run has its data's and final
// parameters' hashes; older files have neither.
ReportRun read_run(const JsonIn& in, bool hashes, int schema) {
  ReportRun out;
  RunRecord& row = out.run;
  RunAnalysis& a = out.analysis;
  row.result = read_result(in, "epoch_log", schema);
  TrainResult& r = row.result;
  row.layers = in.integer("layers");
  if (const auto axis = in.object("axis", /*optional=*/true)) {
    row.axis = axis->text("name");
    row.axis_value = axis->number("value");
  }
  a.seconds_per_epoch = in.nullable("seconds_per_epoch");
  in.nullable("seconds_per_100_epochs");  // 100 x seconds_per_epoch: checked, not kept
  a.per_epoch_estimated = in.flag("per_epoch_estimated");
  r.steps_taken = in.integer("steps_taken");
  a.peak_gflops = in.optional_number("peak_gflops");
  a.peak_fraction = in.optional_number("peak_fraction");
  a.roofline_step_ms = in.optional_number("roofline_step_ms");
  a.roofline_error_percent = in.optional_number("roofline_error_percent");
  a.roofline_bound = in.optional_text("roofline_bound");
  if (const auto phases = in.object("phases_ms", /*optional=*/true)) {
    StepPhases p;
    p.data_ms = phases->optional_number("data");
    p.forward_ms = phases->nullable("forward");
    p.backward_ms = phases->nullable("backward");
    p.optimizer_ms = phases->optional_number("optimizer");
    a.phases = p;
    r.profiled_steps = in.has("profiled_steps") ? in.integer("profiled_steps") : 0;
  }
  for (const JsonIn& l : in.objects("layers_profile", /*optional=*/true)) {
    LayerProfile p;
    p.name = l.text("name");
    p.forward_ms = l.nullable("forward_ms");
    p.backward_ms = l.nullable("backward_ms");
    p.flops = l.nullable("flops");
    p.bytes = l.nullable("bytes");
    p.gflops = l.nullable("gflops");
    p.peak_fraction = l.optional_number("peak_fraction");
    p.bound = l.optional_text("bound");
    a.layers_profile.push_back(std::move(p));
  }
  if (const auto loop = in.object("loop_phases_ms", /*optional=*/true)) {
    a.loop_phases = {loop->optional_number("data"), loop->optional_number("forward_backward"),
                     loop->optional_number("optimizer")};
  }
  r.data_ms = a.loop_phases.data_ms.value_or(kNaN);
  r.forward_backward_ms = a.loop_phases.forward_backward_ms.value_or(kNaN);
  r.optimizer_ms = a.loop_phases.optimizer_ms.value_or(kNaN);
  if (const auto u = in.object("utilisation", /*optional=*/true))
    row.utilisation = read_utilisation(*u);
  row.peak_rss_mib = in.nullable("peak_rss_mib");
  in.optional_number("mean_cpu_percent");  // copies of the utilisation's: checked, not kept
  in.optional_number("mean_gpu_percent");
  if (in.has("timings_contaminated")) in.flag("timings_contaminated");  // derived: checked
  row.cost.flops = in.number("step_flops");
  row.cost.bytes = in.number("step_bytes");
  row.cost.batch = r.batch;
  row.spec_toml = in.text("spec_toml");
  if (hashes || in.has("data_hash")) row.data_hash = in.text("data_hash");
  if (hashes || in.has("params_hash")) row.params_hash = in.text("params_hash");
  return out;
}

std::string run_name(size_t i, const json& run) {
  const auto text = [&](const char* key) {
    const auto it = run.find(key);
    return it != run.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string model = text("model"), device = text("device");
  if (model.empty()) return fmt::format("runs[{}]", i);
  return device.empty() ? fmt::format("run '{}'", model)
                        : fmt::format("run '{}' on {}", model, device);
}

// ---------------------------------------------------------------------------------------------
// The other records.

}  // namespace

namespace {

// The machine a document was written on.
template <typename Io, typename M>
void machine_fields(Io& io, M& m) {
  io.value("cpu", m.cpu);
  if constexpr (Io::kReading) {
    const auto cpus = io.in().optional_number("logical_cpus");
    if (cpus && std::isfinite(*cpus)) m.logical_cpus = static_cast<int64_t>(*cpus);
  } else {
    io.value("logical_cpus", m.logical_cpus ? json(*m.logical_cpus) : json());
  }
  io.value("avx512", m.avx512);
  io.optional_number("memory_gib", m.memory_gib);
  io.value("os", m.os);
  io.value("hostname", m.hostname);
  io.value("compiler", m.compiler);
  io.value("flags", m.flags);
  io.value("cpu_cores", m.cpu_cores);
  io.object("libraries", [&](auto& l) {
    if constexpr (Io::kReading) {
      m.libraries = l.in().other_texts({});
    } else {
      for (const auto& [name, version] : m.libraries) l.value(name.c_str(), version);
    }
  });
  if constexpr (Io::kReading) {
    m.nvidia_driver = io.in().optional_text("nvidia_driver").value_or("");  // null: no driver
  } else {
    io.value("nvidia_driver", m.nvidia_driver);
  }
  io.texts("gpus", m.gpus);
  io.value("crossover", m.crossover);
  io.value("date", m.date);
  io.texts("devices", m.devices);
  io.texts("devices_unavailable", m.devices_unavailable);
}

}  // namespace

json to_json(const MachineInfo& m) {
  json j;
  JsonWriter w(j);
  machine_fields(w, m);
  return j;
}

namespace {

MachineInfo read_machine(const JsonIn& in) {
  MachineInfo m;
  JsonReader r(in);
  machine_fields(r, m);
  return m;
}

json pairs_json(const std::vector<std::pair<std::string, std::string>>& pairs) {
  json j = json::object();
  for (const auto& [k, v] : pairs) j[k] = v;
  return j;
}

json manifest_json(const Manifest& m) {
  const BuildInfo& b = m.build;
  const ExecutionSettings& s = m.settings;
  return {{"crossover", b.version},
          {"commit", b.commit},
          {"build",
           {{"type", b.type},
            {"compiler", b.compiler},
            {"cxx_flags", b.cxx_flags},
            {"cuda", b.cuda},
            {"cuda_architectures", b.cuda_architectures}}},
          {"libraries", pairs_json(m.libraries)},
          {"device_libraries", pairs_json(m.device_libraries)},
          {"command_line", m.command_line},
          {"settings",
           {{"devices", s.devices},
            {"epochs", s.epochs ? json(*s.epochs) : json()},
            {"max_steps", s.max_steps},
            {"threads", s.threads},
            {"profile_steps", s.profile_steps},
            {"precision", s.precision},
            {"record_step", s.record_step}}}};
}

Manifest read_manifest(const JsonIn& in) {
  Manifest m;
  BuildInfo& b = m.build;
  b.version = in.text("crossover");
  b.commit = in.text("commit");
  if (const auto build = in.object("build")) {
    b.type = build->text("type");
    b.compiler = build->text("compiler");
    b.cxx_flags = build->text("cxx_flags");
    b.cuda = build->flag("cuda");
    b.cuda_architectures = build->text("cuda_architectures");
  }
  if (const auto libraries = in.object("libraries")) m.libraries = libraries->other_texts({});
  if (const auto devices = in.object("device_libraries"))
    m.device_libraries = devices->other_texts({});
  m.command_line = in.text("command_line");
  if (const auto settings = in.object("settings")) {
    ExecutionSettings& s = m.settings;
    s.devices = settings->texts("devices");
    s.epochs = settings->optional_integer("epochs");
    s.max_steps = settings->integer("max_steps");
    s.threads = settings->int_integer("threads");
    s.profile_steps = settings->int_integer("profile_steps");
    s.precision = settings->text("precision");
    s.record_step = settings->flag("record_step");
  }
  return m;
}

DevicePeaks read_peaks(const JsonIn& in) {
  DevicePeaks p;
  p.device = in.text("device");
  p.name = in.text("name");
  p.threads = in.int_integer("threads");
  p.matmul_gflops = in.nullable("matmul_gflops");
  p.matmul_n = in.integer("matmul_n");
  p.bandwidth_gbs = in.nullable("bandwidth_gbs");
  p.step_overhead_us = in.nullable("step_overhead_us");
  p.layer_overhead_us = in.nullable("layer_overhead_us");
  p.probed = in.text("probed");
  p.cached = in.flag("cached");
  return p;
}

json sweep_json(const SweepRecord& s) {
  json series = json::array();
  for (const SweepLine& line : s.series) {
    json points = json::array();
    for (const SweepPoint& p : line.points) {
      points.push_back({{"axis_value", p.axis_value},
                        {"params", p.params},
                        {"seconds_per_100_epochs", p.seconds}});
    }
    series.push_back({{"device", line.device},
                      {"predicted", line.predicted},
                      {"note", line.note},
                      {"points", points}});
  }
  json crossovers = json::array();
  for (const Crossover& c : s.crossovers) {
    crossovers.push_back({{"faster", c.faster},
                          {"slower", c.slower},
                          {"axis_value", c.axis_value},
                          {"params", c.params},
                          {"between", {c.below_axis, c.above_axis}}});
  }
  json out = {{"axis", s.axis}, {"x", s.x}, {"series", series}, {"crossovers", crossovers}};
  if (!s.scaling.empty()) {
    json scaling = json::array();
    for (const ScalingPoint& p : s.scaling) {
      scaling.push_back({{"ranks", p.ranks},
                         {"step_ms", p.step_ms},
                         {"samples_per_second", p.samples_per_second},
                         {"communicate_ms", number_or_null(p.communicate_ms)},
                         {"reduced_bytes_per_step", p.reduced_bytes},
                         {"bus_gbs", number_or_null(p.bus_gbs)},
                         {"efficiency", number_or_null(p.efficiency)}});
    }
    out["scaling"] = scaling;
  }
  return out;
}

SweepRecord read_sweep(const JsonIn& in, int schema) {
  SweepRecord s;
  s.axis = in.text("axis");
  s.x = in.text("x");
  for (const JsonIn& line : in.objects("series")) {
    SweepLine l;
    l.device = line.text("device");
    l.predicted = line.flag("predicted");
    if (schema >= 2) l.note = line.text("note");
    for (const JsonIn& p : line.objects("points")) {
      l.points.push_back(
          {p.nullable("axis_value"), p.nullable("params"), p.nullable("seconds_per_100_epochs")});
    }
    s.series.push_back(std::move(l));
  }
  for (const JsonIn& c : in.objects("crossovers")) {
    Crossover x;
    x.faster = c.text("faster");
    x.slower = c.text("slower");
    x.axis_value = c.nullable("axis_value");
    x.params = c.nullable("params");
    const std::vector<double> between = c.numbers("between");
    if (between.size() == 2) {
      x.below_axis = between[0];
      x.above_axis = between[1];
    } else {
      c.fail("between", "two numbers", nullptr);
      x.below_axis = x.above_axis = kNaN;
    }
    s.crossovers.push_back(std::move(x));
  }
  // Since the sweep along ranks (0.2.x).
  if (in.has("scaling")) {
    for (const JsonIn& p : in.objects("scaling")) {
      ScalingPoint point;
      point.ranks = p.int_integer("ranks");
      point.step_ms = p.number("step_ms");
      point.samples_per_second = p.number("samples_per_second");
      point.communicate_ms = p.nullable("communicate_ms");
      point.reduced_bytes = p.integer("reduced_bytes_per_step");
      point.bus_gbs = p.nullable("bus_gbs");
      point.efficiency = p.nullable("efficiency");
      s.scaling.push_back(point);
    }
  }
  return s;
}

}  // namespace

json validation_json(const ValidationRow& v) {
  json entries = json::array();
  for (const ValidationRow::Entry& e : v.entries) {
    entries.push_back({{"model", e.model},
                       {"predicted_ms", e.predicted_ms},
                       {"measured_ms", e.measured_ms},
                       {"error", e.error()},
                       {"unprofiled", e.unprofiled}});
  }
  return {{"device", v.device},
          {"name", v.name},
          {"from", v.from},
          {"own", v.own},
          {"holdout", holdout_name(v.holdout)},
          {"how", v.how},
          {"entries", entries},
          {"median_abs_error", v.entries.empty() ? json() : json(v.median_abs)},
          {"worst_abs_error", v.entries.empty() ? json() : json(v.worst_abs)},
          {"measurement_spread", v.spread},
          {"unmeasured", v.unmeasured}};
}

namespace {

ValidationRow read_validation(const JsonIn& in) {
  ValidationRow v;
  v.device = in.text("device");
  v.name = in.text("name");
  v.from = in.text("from");
  v.own = in.flag("own");
  // Files before the leave-one-model-out rows: an own row is the own profile, any other another
  // device's.
  v.holdout = v.own ? Holdout::None : Holdout::Device;
  if (in.has("holdout")) {
    const std::string h = in.text("holdout");  // an unknown name keeps the default above
    for (const Holdout k : {Holdout::None, Holdout::Model, Holdout::Device}) {
      if (h == holdout_name(k)) v.holdout = k;
    }
  }
  v.how = in.text("how");
  for (const JsonIn& e : in.objects("entries")) {
    ValidationRow::Entry entry{e.text("model"), e.number("predicted_ms"), e.number("measured_ms")};
    if (e.has("unprofiled")) entry.unprofiled = e.int_integer("unprofiled");
    e.optional_number("error");  // from the two times: checked, not kept
    v.entries.push_back(entry);
  }
  v.median_abs = in.optional_number("median_abs_error").value_or(0);
  v.worst_abs = in.optional_number("worst_abs_error").value_or(0);
  v.spread = in.optional_number("measurement_spread").value_or(0);
  v.unmeasured = in.text("unmeasured");
  return v;
}

json prediction_json(const DevicePrediction& p) {
  json j = {{"device", p.device},
            {"name", p.name},
            {"kind", device_kind_name(p.kind)},
            {"local", p.local},
            {"model", p.model},
            {"step_ms", p.step.seconds * 1e3},
            {"flops_ms", p.step.flops_seconds * 1e3},
            {"bytes_ms", p.step.bytes_seconds * 1e3},
            {"overhead_ms", p.step.overhead_seconds * 1e3},
            {"bound", p.step.bound},
            {"measured_step_ms", json()},
            {"measured_epoch_s", optional_number(p.measured_epoch_s)},
            {"lower_bound", p.lower_bound},
            {"profile", p.profile},
            {"expected_error", optional_number(p.expected_error)},
            {"expected_worst_error", optional_number(p.expected_worst)},
            {"expected_error_at_least", p.expected_at_least},
            {"error_percent", json()},
            {"assumptions", p.assumptions}};
  if (p.measured_s) {
    j["measured_step_ms"] = *p.measured_s * 1e3;
    j["error_percent"] = 100 * (p.step.seconds - *p.measured_s) / *p.measured_s;
  }
  return j;
}

DevicePrediction read_prediction(const JsonIn& in, int schema) {
  DevicePrediction p;
  p.device = in.text("device");
  p.name = in.text("name");
  p.kind = in.kind("kind");
  p.local = in.flag("local");
  p.model = in.text("model");
  p.step.seconds = in.nullable("step_ms") / 1e3;
  p.step.flops_seconds = in.nullable("flops_ms") / 1e3;
  p.step.bytes_seconds = in.nullable("bytes_ms") / 1e3;
  p.step.overhead_seconds = in.nullable("overhead_ms") / 1e3;
  p.step.bound = in.text("bound");
  if (const auto measured = in.optional_number("measured_step_ms")) p.measured_s = *measured / 1e3;
  if (schema >= 2) {
    p.measured_epoch_s = in.optional_number("measured_epoch_s");
    p.lower_bound = in.flag("lower_bound");
  }
  // Files before the device profiles (0.2) have neither.
  if (in.has("profile")) p.profile = in.text("profile");
  if (in.has("expected_error")) p.expected_error = in.optional_number("expected_error");
  if (in.has("expected_worst_error")) {
    p.expected_worst = in.optional_number("expected_worst_error");
  }
  if (in.has("expected_error_at_least")) p.expected_at_least = in.flag("expected_error_at_least");
  in.optional_number("error_percent");  // from step_ms and measured_step_ms: checked, not kept
  p.assumptions = in.texts("assumptions");
  return p;
}

json scale_out_json(const CostTable::Instance::ScaleOut& x) {
  return {{"devices", x.devices},     {"link", x.link},
          {"link_gbs", x.link_gbs},   {"step_s", x.step_s},
          {"compute_s", x.compute_s}, {"allreduce_s", x.allreduce_s},
          {"exposed_s", x.exposed_s}, {"efficiency", x.efficiency},
          {"run_hours", x.run_hours}, {"on_demand_usd", x.on_demand_usd}};
}

json cost_json(const CostTable& c) {
  json j;
  j["model"] = c.model;
  j["epochs"] = c.epochs;
  j["steps_per_epoch"] = c.steps_per_epoch;
  j["assumptions"] = {{"lifetime_years", c.assumptions.lifetime_years},
                      {"utilisation_fraction", c.assumptions.utilisation},
                      {"electricity_usd_per_kwh", c.assumptions.electricity_usd_per_kwh},
                      {"host_power_w", c.assumptions.host_power_w},
                      {"hours_per_month", c.hours_per_month},
                      {"catalog", c.catalog}};
  j["local"] = json::array();
  for (const CostTable::Local& l : c.local) {
    j["local"].push_back({{"device", l.device}, {"name", l.name}, {"run_hours", l.run_hours}});
  }
  j["instances"] = json::array();
  for (const CostTable::Instance& i : c.instances) {
    j["instances"].push_back({{"id", i.id},
                              {"provider", i.provider},
                              {"name", i.name},
                              {"device", i.device},
                              {"device_count", i.device_count},
                              {"region", i.region},
                              {"on_demand_usd_per_hour", i.on_demand_usd_per_hour},
                              {"run_hours", i.run_hours},
                              {"on_demand_usd", i.on_demand_usd},
                              {"spot_usd", optional_number(i.spot_usd)},
                              {"predicted", i.predicted},
                              {"source", i.source},
                              {"date", i.date},
                              {"scale_out", i.scale_out ? scale_out_json(*i.scale_out) : json()}});
  }
  j["ownership"] = json::array();
  for (const CostTable::Owned& o : c.ownership) {
    j["ownership"].push_back({{"device", o.device},
                              {"name", o.name},
                              {"price_usd", o.price_usd},
                              {"run_hours", o.run_hours},
                              {"run_usd", o.run_usd},
                              {"hourly_capital_usd", o.hourly_capital_usd},
                              {"hourly_power_usd", o.hourly_power_usd},
                              {"predicted", o.predicted},
                              {"source", o.source},
                              {"date", o.date}});
  }
  j["break_even"] = json::array();
  for (const CostTable::BuyOrRent& b : c.break_even) {
    j["break_even"].push_back({{"device", b.device},
                               {"name", b.name},
                               {"instance", b.instance},
                               {"same_device", b.same_device},
                               {"rent_usd_per_owned_hour", b.rent_usd_per_owned_hour},
                               {"hours_per_month", optional_number(b.hours_per_month)},
                               {"payback_months", optional_number(b.payback_months)},
                               {"at_hours_per_month", b.at_hours_per_month}});
  }
  return j;
}

CostTable read_cost(const JsonIn& in, int schema) {
  CostTable c;
  c.model = in.text("model");
  c.epochs = in.integer("epochs");
  c.steps_per_epoch = in.integer("steps_per_epoch");
  if (const auto a = in.object("assumptions")) {
    c.assumptions.lifetime_years = a->nullable("lifetime_years");
    c.assumptions.utilisation = a->nullable(key(schema, "utilisation", "utilisation_fraction"));
    c.assumptions.electricity_usd_per_kwh = a->nullable("electricity_usd_per_kwh");
    c.assumptions.host_power_w = a->nullable("host_power_w");
    c.hours_per_month = a->nullable("hours_per_month");
    c.catalog = a->texts("catalog");
  }
  for (const JsonIn& l : in.objects("local")) {
    c.local.push_back({l.text("device"), l.text("name"), l.nullable("run_hours")});
  }
  for (const JsonIn& i : in.objects("instances")) {
    CostTable::Instance x;
    x.id = i.text("id");
    x.provider = i.text("provider");
    x.name = i.text("name");
    x.device = i.text("device");
    x.device_count = i.int_integer("device_count");
    x.region = i.text("region");
    x.on_demand_usd_per_hour = i.nullable("on_demand_usd_per_hour");
    x.run_hours = i.nullable("run_hours");
    x.on_demand_usd = i.nullable("on_demand_usd");
    x.spot_usd = i.optional_number("spot_usd");
    x.predicted = i.flag("predicted");
    x.source = i.text("source");
    x.date = i.text("date");
    // Since data-parallel predictions (0.2.x); null for a single-device instance.
    if (const auto so = i.has("scale_out") ? i.object("scale_out", true) : std::nullopt) {
      CostTable::Instance::ScaleOut y;
      y.devices = so->int_integer("devices");
      y.link = so->text("link");
      y.link_gbs = so->nullable("link_gbs");
      y.step_s = so->nullable("step_s");
      y.compute_s = so->nullable("compute_s");
      y.allreduce_s = so->nullable("allreduce_s");
      y.exposed_s = so->nullable("exposed_s");
      y.efficiency = so->nullable("efficiency");
      y.run_hours = so->nullable("run_hours");
      y.on_demand_usd = so->nullable("on_demand_usd");
      x.scale_out = y;
    }
    c.instances.push_back(std::move(x));
  }
  for (const JsonIn& o : in.objects("ownership")) {
    CostTable::Owned x;
    x.device = o.text("device");
    x.name = o.text("name");
    x.price_usd = o.nullable("price_usd");
    x.run_hours = o.nullable("run_hours");
    x.run_usd = o.nullable("run_usd");
    x.hourly_capital_usd = o.nullable("hourly_capital_usd");
    x.hourly_power_usd = o.nullable("hourly_power_usd");
    x.predicted = o.flag("predicted");
    x.source = o.text("source");
    x.date = o.text("date");
    c.ownership.push_back(std::move(x));
  }
  for (const JsonIn& b : in.objects("break_even")) {
    CostTable::BuyOrRent x;
    x.device = b.text("device");
    x.name = b.text("name");
    x.instance = b.text("instance");
    x.same_device = b.flag("same_device");
    x.rent_usd_per_owned_hour = b.nullable("rent_usd_per_owned_hour");
    x.hours_per_month = b.optional_number("hours_per_month");
    x.payback_months = b.optional_number("payback_months");
    x.at_hours_per_month = b.nullable("at_hours_per_month");
    c.break_even.push_back(std::move(x));
  }
  return c;
}

json verdict_json(const GpuVerdict& v) {
  json gpu;
  if (v.gpu) {
    const GpuOption& g = *v.gpu;
    gpu = {{"how", g.how},
           {"id", g.id},
           {"name", g.name},
           {"device", g.device},
           {"seconds", g.seconds},
           {"usd", optional_number(g.usd)},
           {"predicted", g.predicted},
           {"lower_bound", g.lower_bound}};
  }
  return {{"model", v.model},
          {"epochs", v.epochs},
          {"here", v.here},
          {"here_seconds", v.here_seconds},
          {"here_estimated", v.here_estimated},
          {"gpu", gpu},
          {"worth_it", v.worth_it},
          {"sentence", v.sentence},
          {"crossover", v.crossover},
          {"caution", v.caution}};
}

GpuVerdict read_verdict(const JsonIn& in) {
  GpuVerdict v;
  v.model = in.text("model");
  v.epochs = in.integer("epochs");
  v.here = in.text("here");
  v.here_seconds = in.nullable("here_seconds");
  v.here_estimated = in.flag("here_estimated");
  if (const auto g = in.object("gpu", /*optional=*/true)) {
    GpuOption o;
    o.how = g->text("how");
    o.id = g->text("id");
    o.name = g->text("name");
    o.device = g->text("device");
    o.seconds = g->nullable("seconds");
    o.usd = g->optional_number("usd");
    o.predicted = g->flag("predicted");
    o.lower_bound = g->flag("lower_bound");
    v.gpu = o;
  }
  v.worth_it = in.flag("worth_it");
  v.sentence = in.text("sentence");
  v.crossover = in.text("crossover");
  v.caution = in.text("caution");
  return v;
}

}  // namespace

namespace {

template <typename Io, typename D>
void train_document_fields(Io& io, D& d) {
  result_fields(io, d.result, "epochs", 2);
  io.object_since("machine", [&](auto& m) { machine_fields(m, d.machine); });
  io.optional_number_since("mean_other_cores", d.mean_other_cores);
  io.since("timings_contaminated", d.timings_contaminated);
}

}  // namespace

json to_json(const TrainDocument& d) {
  json j;
  JsonWriter w(j);
  train_document_fields(w, d);
  j["schema"] = kTrainSchema;
  return j;
}

json to_json(const TrainResult& r) {
  json j = result_json(r, "epochs");
  j["schema"] = kTrainSchema;
  return j;
}

json to_json(const Report& report) {
  json j;
  j["schema"] = kReportSchema;
  j["kind"] = report.kind;
  j["title"] = report.title;
  j["created"] = report.created;
  j["complete"] = report.complete;
  j["machine"] = report.machine ? to_json(*report.machine) : json();
  if (report.manifest) j["manifest"] = manifest_json(*report.manifest);
  j["peaks"] = json::array();
  for (const DevicePeaks& p : report.peaks) j["peaks"].push_back(to_json(p));
  j["runs"] = json::array();
  for (const ReportRun& run : report.runs) j["runs"].push_back(run_json(run));
  if (report.sweep) j["sweep"] = sweep_json(*report.sweep);
  if (!report.predictions.empty()) {
    j["predictions"] = json::array();
    for (const DevicePrediction& p : report.predictions)
      j["predictions"].push_back(prediction_json(p));
  }
  if (!report.validation.empty()) {
    j["validation"] = json::array();
    for (const ValidationRow& v : report.validation) j["validation"].push_back(validation_json(v));
  }
  if (report.cost) j["cost"] = cost_json(*report.cost);
  if (report.verdict) j["verdict"] = verdict_json(*report.verdict);
  if (report.advice) j["advice"] = *report.advice;
  return j;
}

Report read_report(const json& doc, const std::string& origin, ReadMode mode) {
  const JsonSource source{origin, mode};
  const auto found = doc.find("schema");  // end() for a document that is not an object
  const std::string name =
      found != doc.end() && found->is_string() ? found->get<std::string>() : "";
  const bool is_report = name == kReportSchema || name == kReportSchemaV1;
  // A lenient read of a document without a schema takes it as the current one.
  const int schema = name == kReportSchemaV1 ? 1 : 2;
  if (!is_report && mode == ReadMode::Strict) {
    throw UserError(fmt::format("{}: not a crossover results.json (expected schema '{}')", origin,
                                kReportSchema));
  }
  const JsonIn in(doc, "", source);
  Report r;
  r.kind = in.text("kind");
  r.title = in.text("title");
  r.created = in.text("created");
  // Required like every field written; a lenient read of a document without it (a hand-made one)
  // does not call it partial.
  r.complete = mode == ReadMode::Lenient && !in.has("complete") ? true : in.flag("complete");
  if (const auto machine = in.object("machine", /*optional=*/true))
    r.machine = read_machine(*machine);
  for (const JsonIn& p : in.objects("peaks")) r.peaks.push_back(read_peaks(p));
  // Files before 0.1.1 have no manifest (and no hashes in their runs); a file with one must
  // have a whole one.
  const bool with_manifest = in.has("manifest");
  if (with_manifest) {
    if (const auto manifest = in.object("manifest")) r.manifest = read_manifest(*manifest);
  }
  for (const JsonIn& run : in.objects("runs", run_name))
    r.runs.push_back(read_run(run, with_manifest, schema));
  if (in.has("sweep")) {
    if (const auto sweep = in.object("sweep")) r.sweep = read_sweep(*sweep, schema);
  }
  if (in.has("predictions")) {
    for (const JsonIn& p : in.objects("predictions"))
      r.predictions.push_back(read_prediction(p, schema));
  }
  if (in.has("validation")) {
    for (const JsonIn& v : in.objects("validation")) r.validation.push_back(read_validation(v));
  }
  if (in.has("cost")) {
    if (const auto cost = in.object("cost")) r.cost = read_cost(*cost, schema);
  }
  if (in.has("verdict")) {
    if (const auto verdict = in.object("verdict")) r.verdict = read_verdict(*verdict);
  }
  if (in.has("advice")) r.advice = in.texts("advice");
  return r;
}

nlohmann::json parse_report_json(const std::string& text, const std::string& origin) {
  check_json_depth(text, origin);
  return json::parse(text, nullptr, false);
}

TrainDocument read_train_document(const std::string& text, const std::string& origin) {
  const json doc = parse_report_json(text, origin);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("schema") ||
      doc["schema"] != kTrainSchema) {
    throw UserError(fmt::format("{}: not a crossover train --json file (expected schema '{}')",
                                origin, kTrainSchema));
  }
  const JsonSource source{origin, ReadMode::Strict};
  const JsonIn in(doc, "", source);
  TrainDocument d;
  JsonReader r(in);
  train_document_fields(r, d);
  return d;
}

TrainResult read_train_result(const std::string& text, const std::string& origin) {
  return read_train_document(text, origin).result;
}

}  // namespace xo
