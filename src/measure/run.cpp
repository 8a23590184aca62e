#include "measure/run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "data/source.h"
#include "measure/sampler.h"
#include "model/model.h"
#include "model/work.h"
#include "train/data_parallel.h"
#include "train/memory.h"
#include "train/trials.h"

namespace xo {
namespace {

// NVML numbers GPUs as CUDA does when CUDA_VISIBLE_DEVICES is unset (the usual case); -1 for a
// CPU, whose sampler reads no GPU.
int nvml_index(const DeviceInfo& device) {
  if (device.kind != DeviceKind::Gpu) return -1;
  const auto colon = device.id.find(':');
  return colon == std::string::npos ? 0 : std::atoi(device.id.c_str() + colon + 1);
}

// The ranks of a data-parallel group that share this machine share its cores: the other ranks'
// load is this run's, not other processes'.
void discount_own_ranks(Utilisation& load, const MeasureSettings& settings, const Backend& be) {
  const DataParallel* group = settings.exec.data_parallel;
  if (!group || !load.mean_other_cores) return;
  const int others = group->world().local_size() - 1;
  *load.mean_other_cores =
      std::max(0.0, *load.mean_other_cores - static_cast<double>(others * be.info().threads));
}

// What names a data set: its source and sizes, and the seed where the source generates it.
std::string data_key(const DataSpec& d, const DataRequest& r) {
  const bool generated = d.source == "disc" || d.source == "imdb-synthetic";
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", d.source, d.samples, d.test_samples, d.test,
                     d.validation_split, fmt::join(r.input, "x"), r.vocab, generated ? r.seed : 0);
}

}  // namespace

RunRecord measure_run(Backend& backend, const ModelSpec& spec, const MeasureSettings& settings,
                      const RunHooks& hooks) {
  check_model_memory(spec, backend);
  Model model(spec, backend);
  DataSplit loaded;
  if (!settings.data) loaded = load_data(spec.data, data_request(spec, model.classes()));
  const DataSplit& data = settings.data ? *settings.data : loaded;
  initialize(model, settings.init);
  if (!settings.init_weights.empty()) model.import_params(settings.init_weights, spec.name);
  if (hooks.ready) hooks.ready(model, data);
  reset_peak_resident();  // the peak memory below is this run's
  Sampler sampler(settings.sample_interval_s, nvml_index(backend.info()));
  sampler.start();
  TrainResult result = train_model(model, data, spec.train, hooks.epoch, settings.exec);
  sampler.stop();
  RunRecord run;
  run.layers = weighted_layers(spec);
  run.spec_toml = to_toml(spec);
  run.data_hash = data_fingerprint(data);
  // The profile steps after training apply no update and put BatchNorm's statistics back, so
  // this is the hash of the parameters the epochs left.
  run.params_hash = model.parameter_hash();
  run.work = step_work(model, result.batch);
  run.utilisation = sampler.timeline();
  discount_own_ranks(*run.utilisation, settings, backend);
  run.peak_rss_mib = peak_resident_mib();
  run.result = std::move(result);
  if (hooks.trained) hooks.trained(model);
  return run;
}

std::vector<RunRecord> measure_fused(Backend& backend, std::vector<FusedRun>& runs,
                                     const MeasureSettings& settings) {
  XO_ASSERT(!runs.empty());
  std::vector<std::unique_ptr<Model>> models;
  for (const FusedRun& r : runs) {
    check_model_memory(r.spec, backend);
    models.push_back(std::make_unique<Model>(r.spec, backend));
  }
  // Each data set once: trials whose data differ (a generated source's seed) share the rest.
  std::map<std::string, DataSplit> splits;
  std::vector<const DataSplit*> split_of;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (settings.data) {  // the caller's, for every trial
      split_of.push_back(settings.data);
      continue;
    }
    const ModelSpec& spec = runs[i].spec;
    const DataRequest request = data_request(spec, models[i]->classes());
    auto [at, fresh] = splits.try_emplace(data_key(spec.data, request));
    if (fresh) at->second = load_data(spec.data, request);
    split_of.push_back(&at->second);
  }
  std::vector<FusedTrial> trials;
  for (size_t i = 0; i < runs.size(); ++i) {
    initialize(*models[i], settings.init);
    if (runs[i].hooks.ready) runs[i].hooks.ready(*models[i], *split_of[i]);
    trials.push_back({models[i].get(), runs[i].spec.train, runs[i].hooks.epoch, runs[i].checkpoint,
                      split_of[i]});
  }
  reset_peak_resident();
  Sampler sampler(settings.sample_interval_s, nvml_index(backend.info()));
  sampler.start();
  FusedOptions options;
  options.stop_on_nan = settings.exec.stop_on_nan;
  options.pause_after_epochs = settings.exec.pause_after_epochs;
  options.max_steps = settings.exec.max_steps;
  // Each data set hashed once, for the trials' checkpoints and their records alike.
  DataFingerprints fingerprints;
  options.fingerprints = &fingerprints;
  std::vector<TrainResult> results = train_fused(trials, *split_of[0], options);
  sampler.stop();
  const Utilisation load = sampler.timeline();
  std::vector<RunRecord> records;
  for (size_t i = 0; i < runs.size(); ++i) {
    RunRecord run;
    run.layers = weighted_layers(runs[i].spec);
    run.spec_toml = to_toml(runs[i].spec);
    run.data_hash = fingerprints.of(*split_of[i]);
    run.params_hash = models[i]->parameter_hash();
    run.work = step_work(*models[i], results[i].batch);
    run.utilisation = load;
    run.peak_rss_mib = peak_resident_mib();
    run.result = std::move(results[i]);
    if (runs[i].hooks.trained) runs[i].hooks.trained(*models[i]);
    records.push_back(std::move(run));
  }
  return records;
}

}  // namespace xo
