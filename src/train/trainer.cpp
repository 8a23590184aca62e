#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/interrupt.h"
#include "core/random.h"

namespace xo {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

TrainResult train_model(Model& model, const Dataset& data, const TrainSpec& train,
                        const EpochCallback& on_epoch, const ExecutionOptions& exec) {
  if (data.features != model.input_features()) {
    throw UserError(fmt::format("data '{}' has {} features per sample, model '{}' expects {}",
                                data.description, data.features, model.spec().name,
                                model.input_features()));
  }
  if (data.classes > model.classes()) {
    throw UserError(fmt::format("data '{}' has {} classes, model '{}' predicts only {}",
                                data.description, data.classes, model.spec().name,
                                model.classes()));
  }
  if (train.batch <= 0 || train.epochs <= 0) {
    throw UserError(
        fmt::format("batch ({}) and epochs ({}) must be positive", train.batch, train.epochs));
  }
  Backend& be = model.backend();
  const auto setup_start = Clock::now();
  const int64_t n = data.samples, f = data.features;
  const int64_t batch = std::min(train.batch, n);
  const int64_t full_steps = n / batch, tail = n % batch;
  const int64_t steps_per_epoch = full_steps + (tail ? 1 : 0);

  // Everything the loop touches is allocated here: the data set on the device, the plans for the
  // full batch and the last partial one, the optimizer state and the loss statistics.
  DeviceBuffer x = be.allocate(sizeof(float) * data.x.size());
  DeviceBuffer y = be.allocate(sizeof(int32_t) * data.y.size());
  be.upload(x.as<float>(), data.x.data(), x.bytes());
  be.upload(y.as<int32_t>(), data.y.data(), y.bytes());
  Network full(model, batch, true, exec.shards);
  std::optional<Network> partial;
  if (tail) partial.emplace(model, tail, true, std::min<int64_t>(exec.shards, tail));
  auto optimizer = be.optimizer(train.optimizer, model.flat_size());
  DeviceBuffer stats_buffer = be.allocate(sizeof(LossStats));
  auto* stats = stats_buffer.as<LossStats>();
  DeviceBuffer order, batch_x, batch_y;
  std::vector<int32_t> host_order;
  if (train.shuffle) {
    order = be.allocate(sizeof(int32_t) * n);
    batch_x = be.allocate(sizeof(float) * batch * f);
    batch_y = be.allocate(sizeof(int32_t) * batch);
    host_order.resize(n);
  }
  Rng shuffle_rng(train.seed ^ 0x5eed5eed5eedULL);  // a stream apart from the init's
  be.synchronize();

  TrainResult r;
  r.model = model.spec().name;
  r.origin = model.spec().origin;
  r.data = data.description;
  r.params = model.parameter_count();
  r.device = be.info();
  r.batch = batch;
  r.samples = n;
  r.steps_per_epoch = steps_per_epoch;
  r.shards = full.shards();
  r.flops_per_step = model.train_flops(batch);
  r.setup_seconds = ms_between(setup_start, Clock::now()) / 1e3;

  std::vector<double> step_ms;
  step_ms.reserve(static_cast<size_t>(train.epochs * steps_per_epoch));
  for (int64_t epoch = 1; epoch <= train.epochs && !r.interrupted; ++epoch) {
    if (train.shuffle) {
      // Fisher-Yates with the seeded generator: the same order on every machine.
      std::iota(host_order.begin(), host_order.end(), 0);
      for (int64_t i = n - 1; i > 0; --i) {
        std::swap(host_order[i], host_order[shuffle_rng.below(static_cast<uint64_t>(i + 1))]);
      }
      be.upload(order.as<int32_t>(), host_order.data(), order.bytes());
    }
    be.fill_zero(stats, sizeof(LossStats));
    double epoch_ms = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      if (stop_requested()) {
        r.interrupted = true;
        break;
      }
      Network& net = s < full_steps ? full : *partial;
      const auto t0 = Clock::now();
      const float* src = x.as<float>() + s * batch * f;
      const int32_t* labels = y.as<int32_t>() + s * batch;
      if (train.shuffle) {
        be.gather_rows(x.as<float>(), y.as<int32_t>(), order.as<int32_t>() + s * batch, net.batch(),
                       f, batch_x.as<float>(), batch_y.as<int32_t>());
        src = batch_x.as<float>();
        labels = batch_y.as<int32_t>();
      }
      net.train_step(src, labels, stats);
      optimizer->step(model.params(), model.grads());
      be.synchronize();
      const double ms = ms_between(t0, Clock::now());
      epoch_ms += ms;
      if (s < full_steps) step_ms.push_back(ms);  // the partial batch would skew the median
    }
    if (r.interrupted) break;
    LossStats host{};
    be.download(&host, stats, sizeof(host));
    EpochRecord rec{epoch, host.loss_sum, 100.0 * (1.0 - host.correct / host.samples),
                    epoch_ms / 1e3};
    if (!std::isfinite(rec.loss) && r.diverged_epoch == 0) r.diverged_epoch = epoch;
    r.epochs.push_back(rec);
    r.train_seconds += rec.seconds;
    if (on_epoch) on_epoch(rec, train.epochs);
  }
  if (!r.epochs.empty()) {
    r.final_loss = r.epochs.back().loss;
    r.final_train_error = r.epochs.back().train_error;
  }
  // The first step pays for first-touch page faults and cold caches: it is the warm-up.
  if (step_ms.size() > 1) step_ms.erase(step_ms.begin());
  r.step_ms = summarize(step_ms);
  if (r.step_ms.median > 0) {
    r.gflops = r.flops_per_step / (r.step_ms.median * 1e-3) / 1e9;
    r.samples_per_second = static_cast<double>(batch) / (r.step_ms.median * 1e-3);
  }
  return r;
}

}  // namespace xo
