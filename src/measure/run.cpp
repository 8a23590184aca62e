#include "measure/run.h"

#include <cstdlib>
#include <string>

#include "data/source.h"
#include "measure/sampler.h"
#include "model/cost.h"
#include "model/model.h"
#include "train/memory.h"

namespace xo {

RunRecord measure_run(Backend& backend, const ModelSpec& spec, const MeasureSettings& settings,
                      const EpochCallback& on_epoch) {
  check_model_memory(spec, backend);
  Model model(spec, backend);
  const DataSplit data = load_data(spec.data, data_request(spec, model.classes()));
  initialize(model);
  reset_peak_resident();  // the peak memory below is this run's
  // NVML numbers GPUs as CUDA does when CUDA_VISIBLE_DEVICES is unset (the usual case).
  int gpu_index = -1;
  const DeviceInfo& device = backend.info();
  if (device.kind == DeviceKind::Gpu) {
    const auto colon = device.id.find(':');
    gpu_index = colon == std::string::npos ? 0 : std::atoi(device.id.c_str() + colon + 1);
  }
  Sampler sampler(settings.sample_interval_s, gpu_index);
  sampler.start();
  ExecutionOptions exec;
  exec.profile_steps = settings.profile_steps;
  exec.max_steps = settings.max_steps;
  exec.record_step = settings.record_step;
  exec.checkpoint = settings.checkpoint;
  exec.stop_on_nan = settings.stop_on_nan;
  exec.data_parallel = settings.data_parallel;
  TrainResult result = train_model(model, data, spec.train, on_epoch, exec);
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
  run.peak_rss_mib = peak_resident_mib();
  run.result = std::move(result);
  return run;
}

}  // namespace xo
