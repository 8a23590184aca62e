#include "measure/run.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "data/source.h"
#include "measure/sampler.h"
#include "model/cost.h"
#include "model/model.h"
#include "train/data_parallel.h"
#include "train/memory.h"

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

}  // namespace

RunRecord measure_run(Backend& backend, const ModelSpec& spec, const MeasureSettings& settings,
                      const RunHooks& hooks) {
  check_model_memory(spec, backend);
  Model model(spec, backend);
  const DataSplit data = load_data(spec.data, data_request(spec, model.classes()));
  initialize(model, settings.init);
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
  run.cost = step_cost(model, result.batch);
  run.utilisation = sampler.timeline();
  discount_own_ranks(*run.utilisation, settings, backend);
  run.peak_rss_mib = peak_resident_mib();
  run.result = std::move(result);
  if (hooks.trained) hooks.trained(model);
  return run;
}

}  // namespace xo
