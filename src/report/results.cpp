#include "report/results.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/file.h"
#include "report/html.h"

namespace xo {

nlohmann::json to_json(const TrainResult& r) {
  nlohmann::json j;
  j["schema"] = kTrainSchema;
  j["model"] = r.model;
  j["origin"] = r.origin;
  j["data"] = r.data;
  j["params"] = r.params;
  j["device"] = r.device.id;
  j["device_info"] = {{"kind", r.device.kind},
                      {"name", r.device.name},
                      {"threads", r.device.threads},
                      {"library", r.device.library},
                      {"precision", r.device.precision}};
  for (const auto& [k, v] : r.device.details) j["device_info"][k] = v;
  j["batch"] = r.batch;
  j["samples"] = r.samples;
  j["steps_per_epoch"] = r.steps_per_epoch;
  j["shards"] = r.shards;
  j["precision"] = r.device.precision;
  j["recorded_step"] = r.recorded_step;  // the step replayed as one CUDA Graph
  j["epochs"] = nlohmann::json::array();
  for (const EpochRecord& e : r.epochs) {
    nlohmann::json epoch = {{"epoch", e.epoch},
                            {"loss", e.loss},
                            {"train_error", e.train_error},
                            {"seconds", e.seconds}};
    if (!std::isnan(e.test_accuracy)) {
      epoch["test_loss"] = e.test_loss;
      epoch["test_accuracy"] = e.test_accuracy;
    }
    j["epochs"].push_back(std::move(epoch));
  }
  j["final_loss"] = r.final_loss;
  j["final_train_error"] = r.final_train_error;
  j["test_samples"] = r.test_samples;
  // null without a test set (JSON has no NaN).
  j["final_test_loss"] =
      std::isnan(r.final_test_loss) ? nlohmann::json() : nlohmann::json(r.final_test_loss);
  j["final_test_accuracy"] =
      std::isnan(r.final_test_accuracy) ? nlohmann::json() : nlohmann::json(r.final_test_accuracy);
  j["median_step_ms"] = r.step_ms.median;
  j["step_ms"] = {{"count", r.step_ms.count}, {"median", r.step_ms.median},
                  {"mean", r.step_ms.mean},   {"min", r.step_ms.min},
                  {"max", r.step_ms.max},     {"p10", r.step_ms.p10},
                  {"p90", r.step_ms.p90},     {"cv", r.step_ms.cv}};
  j["flops_per_step"] = r.flops_per_step;
  j["gflops"] = r.gflops;
  j["samples_per_second"] = r.samples_per_second;
  j["train_seconds"] = r.train_seconds;
  j["setup_seconds"] = r.setup_seconds;
  j["interrupted"] = r.interrupted;
  j["diverged_epoch"] = r.diverged_epoch;
  return j;
}

int64_t weighted_layers(const ModelSpec& spec) {
  int64_t n = 0;
  std::vector<int64_t> in = spec.input;
  const auto shapes = infer_shapes(spec);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    n += !layer_parameters(spec.layers[i], in).empty();
    in = shapes[i];
  }
  return n;
}

double seconds_per_epoch(const TrainResult& r, bool* estimated) {
  const bool measured = !r.epochs.empty();
  if (estimated) *estimated = !measured;
  if (measured) return r.train_seconds / static_cast<double>(r.epochs.size());
  return r.step_ms.median * static_cast<double>(r.steps_per_epoch) / 1e3;
}

double seconds_per_100_epochs(const TrainResult& r) { return 100.0 * seconds_per_epoch(r); }

namespace {

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// Which term bounds a layer that took `ms`: its FLOPs or its bytes at the measured peaks, or
// neither (the time is far above both: fixed costs such as dispatch and synchronisation).
std::string layer_bound(double flops, double bytes, double ms, const DevicePeaks& p) {
  const double tf = flops / (p.matmul_gflops * 1e9), tb = bytes / (p.bandwidth_gbs * 1e9);
  if (std::max(tf, tb) < 0.2 * ms * 1e-3) return "overhead";
  return tf >= tb ? "FLOPs" : "bytes";
}

}  // namespace

nlohmann::json run_json(const SweepRow& row, const DevicePeaks* peaks) {
  const TrainResult& r = row.result;
  nlohmann::json j = to_json(r);
  j.erase("schema");
  j["epoch_log"] = j["epochs"];
  j["epochs"] = r.epochs.size();
  j["layers"] = row.layers;
  j["axis"] = row.axis.empty() ? nlohmann::json()
                               : nlohmann::json{{"name", row.axis}, {"value", row.axis_value}};
  bool estimated = false;
  const double per_epoch = seconds_per_epoch(r, &estimated);
  j["seconds_per_epoch"] = per_epoch;
  j["seconds_per_100_epochs"] = 100 * per_epoch;
  j["per_epoch_estimated"] = estimated;
  j["steps_taken"] = r.steps_taken;
  const double peak = peaks ? peaks->matmul_gflops : 0;
  j["peak_gflops"] = peak > 0 ? nlohmann::json(peak) : nlohmann::json();
  j["peak_fraction"] = peak > 0 ? nlohmann::json(r.gflops / peak) : nlohmann::json();
  // What the probe's roofline predicts for this run (efficiency 1): the error shows how far the
  // model of a device one does not have would be off here.
  j["roofline_step_ms"] = nlohmann::json();
  j["roofline_error_percent"] = nlohmann::json();
  j["roofline_bound"] = nlohmann::json();
  if (peaks && peak > 0 && !row.cost.layers.empty()) {
    const StepPrediction p = predict_step(row.cost, probed_rates(*peaks));
    j["roofline_step_ms"] = p.seconds * 1e3;
    if (r.step_ms.median > 0) {
      j["roofline_error_percent"] = 100 * (p.seconds * 1e3 - r.step_ms.median) / r.step_ms.median;
    }
    j["roofline_bound"] = p.bound;
  }
  j["phases_ms"] = nlohmann::json();
  j["layers_profile"] = nlohmann::json();
  if (r.profiled_steps > 0) {
    double forward = r.loss_ms, backward = 0;
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerCost& l : row.cost.layers) {
      const double f = r.node_forward_ms[l.node], b = r.node_backward_ms[l.node];
      forward += f;
      backward += b;
      const double ms = f + b;
      const double gflops = ms > 0 ? l.flops / (ms * 1e-3) / 1e9 : 0;
      nlohmann::json e = {{"name", l.name},        {"forward_ms", f},  {"backward_ms", b},
                          {"flops", l.flops},      {"bytes", l.bytes}, {"gflops", gflops},
                          {"peak_fraction", nlohmann::json()}, {"bound", nlohmann::json()}};
      if (peaks && peak > 0) {
        e["peak_fraction"] = gflops / peak;
        e["bound"] = layer_bound(l.flops, l.bytes, ms, *peaks);
      }
      layers.push_back(std::move(e));
    }
    j["layers_profile"] = layers;
    j["profiled_steps"] = r.profiled_steps;
    j["phases_ms"] = {{"data", number_or_null(r.data_ms)},
                      {"forward", forward},
                      {"backward", backward},
                      {"optimizer", number_or_null(r.optimizer_ms)}};
  }
  // The loop's own split (its forward + backward runs sharded where the backend shards).
  // A recorded step (one CUDA Graph) is timed as a whole: its phases are null.
  j["loop_phases_ms"] = {{"data", number_or_null(r.data_ms)},
                         {"forward_backward", number_or_null(r.forward_backward_ms)},
                         {"optimizer", number_or_null(r.optimizer_ms)}};
  j["utilisation"] = row.utilisation;
  j["peak_rss_mib"] = row.peak_rss_mib;
  j["mean_cpu_percent"] = row.utilisation.is_object() ? row.utilisation.value("mean_cpu_percent", nlohmann::json()) : nlohmann::json();
  j["mean_gpu_percent"] = row.utilisation.is_object() ? row.utilisation.value("mean_gpu_percent", nlohmann::json()) : nlohmann::json();
  j["step_flops"] = row.cost.flops;
  j["step_bytes"] = row.cost.bytes;
  j["spec_toml"] = row.spec_toml;
  j["final_loss"] = number_or_null(r.final_loss);
  if (r.epochs.empty()) {  // measured steps only (--steps): no epoch finished, nothing to report
    j["final_loss"] = nlohmann::json();
    j["final_train_error"] = nlohmann::json();
  }
  return j;
}

std::string runs_csv(const nlohmann::json& report) {
  std::string csv =
      "model,layers,params,device,axis,axis_value,epochs,seconds_per_epoch,seconds_per_100_epochs,"
      "ms_per_step,step_cv,gflops,peak_fraction,final_loss,final_train_error,final_test_accuracy,"
      "peak_rss_mib,mean_cpu_percent\n";
  auto num = [](const nlohmann::json& v) {
    return v.is_number() ? fmt::format("{:.6g}", v.get<double>()) : std::string();
  };
  // Model names come from spec files: quote them as RFC 4180 asks.
  auto text = [](const std::string& v) {
    if (v.find_first_of(",\"\n") == std::string::npos) return v;
    std::string q = "\"";
    for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const nlohmann::json& r : report.value("runs", nlohmann::json::array())) {
    const nlohmann::json axis = r.value("axis", nlohmann::json());
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", text(r.value("model", "")),
        num(r["layers"]), num(r["params"]), text(r.value("device", "")),
        axis.is_object() ? axis.value("name", "") : "",
        axis.is_object() ? num(axis["value"]) : "", num(r["epochs"]), num(r["seconds_per_epoch"]),
        num(r["seconds_per_100_epochs"]), num(r["median_step_ms"]), num(r["step_ms"]["cv"]),
        num(r["gflops"]), num(r["peak_fraction"]), num(r["final_loss"]),
        num(r["final_train_error"]), num(r["final_test_accuracy"]), num(r["peak_rss_mib"]),
        num(r["mean_cpu_percent"]));
  }
  return csv;
}

void write_report(const std::filesystem::path& out_dir, const nlohmann::json& report) {
  write_file_atomic(out_dir / "results.json", report.dump(2) + "\n");
  write_file_atomic(out_dir / "results.csv", runs_csv(report));
  write_html_report(out_dir / "report.html", report);
}

}  // namespace xo
