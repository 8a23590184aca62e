#include "report/results.h"

#include <fmt/format.h>

#include <cmath>

#include "core/file.h"

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
                      {"library", r.device.library}};
  for (const auto& [k, v] : r.device.details) j["device_info"][k] = v;
  j["batch"] = r.batch;
  j["samples"] = r.samples;
  j["steps_per_epoch"] = r.steps_per_epoch;
  j["shards"] = r.shards;
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

double seconds_per_100_epochs(const TrainResult& r) {
  return r.epochs.empty() ? 0.0 : r.train_seconds * 100.0 / static_cast<double>(r.epochs.size());
}

std::string sweep_csv(const std::vector<SweepRow>& rows) {
  std::string csv =
      "model,layers,params,device,epochs,seconds_per_100_epochs,ms_per_step,step_cv,gflops,"
      "final_loss,final_train_error\n";
  for (const SweepRow& row : rows) {
    const TrainResult& r = row.result;
    csv +=
        fmt::format("{},{},{},{},{},{:.6g},{:.6g},{:.4f},{:.6g},{:.6g},{:.4f}\n", r.model,
                    row.layers, r.params, r.device.id, r.epochs.size(), seconds_per_100_epochs(r),
                    r.step_ms.median, r.step_ms.cv, r.gflops, r.final_loss, r.final_train_error);
  }
  return csv;
}

void write_sweep(const std::filesystem::path& out_dir, const std::vector<SweepRow>& rows,
                 const nlohmann::json& machine, bool complete) {
  nlohmann::json j;
  j["schema"] = kRunSchema;
  j["complete"] = complete;
  j["machine"] = machine;
  j["results"] = nlohmann::json::array();
  for (const SweepRow& row : rows) {
    nlohmann::json r = to_json(row.result);
    r["layers"] = row.layers;
    r["seconds_per_100_epochs"] = seconds_per_100_epochs(row.result);
    j["results"].push_back(std::move(r));
  }
  write_file_atomic(out_dir / "results.json", j.dump(2) + "\n");
  write_file_atomic(out_dir / "results.csv", sweep_csv(rows));
}

}  // namespace xo
