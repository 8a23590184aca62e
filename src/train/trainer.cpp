#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/interrupt.h"
#include "core/random.h"

namespace xo {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The checks a data set must pass before it meets a model.
void check_data(const Model& model, const Dataset& data) {
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
  // Token ids index the embedding table: one out of range would read outside it.
  if (const int64_t vocab = model.token_vocab(); vocab > 0) {
    for (size_t i = 0; i < data.x.size(); ++i) {
      const float id = data.x[i];
      if (!(id >= 0 && id < static_cast<float>(vocab)) ||
          id != static_cast<float>(static_cast<int64_t>(id))) {
        throw UserError(fmt::format(
            "data '{}': sample {}, position {} holds {}, not a token id in [0, {}) (the vocab of "
            "model '{}')",
            data.description, i / data.features, i % data.features, id, vocab, model.spec().name));
      }
    }
  }
}

// Mean loss and accuracy of the model on a data set, in batches of `batch` (no dropout).
struct Evaluation {
  double loss = 0, accuracy = 0;
};

class Evaluator {
 public:
  // Big batches run faster, up to a point; the activations of one batch are bounded so that a
  // wide CNN does not hold a gigabyte for its test pass (`crossover train mnist-cnn --epochs 1`:
  // 1000 samples per batch peaked at 1.35 GB RSS for the whole run, ~190 at 0.95 GB, with the same
  // test loss and no slower).
  static constexpr int64_t kMaxBatch = 1000;
  static constexpr double kActivationBudgetBytes = 64.0 * 1024 * 1024;
  static int64_t batch_for(const Model& model, int64_t samples) {
    double per_sample = 0;
    for (const Node& n : model.nodes()) per_sample += sizeof(float) * static_cast<double>(n.out_size);
    const auto fit = static_cast<int64_t>(kActivationBudgetBytes / std::max(per_sample, 1.0));
    return std::clamp<int64_t>(std::min(fit, kMaxBatch), 1, std::max<int64_t>(samples, 1));
  }

  Evaluator(const Model& model, const Dataset& data) : model_(model), data_(data) {
    Backend& be = model.backend();
    batch_ = batch_for(model, data.samples);
    x_ = be.allocate(sizeof(float) * data.x.size());
    y_ = be.allocate(sizeof(int32_t) * data.y.size());
    be.upload(x_.as<float>(), data.x.data(), x_.bytes());
    be.upload(y_.as<int32_t>(), data.y.data(), y_.bytes());
    stats_ = be.allocate(sizeof(LossStats));
    // Normalizer 1: the loss sums over the samples, divided by their count below.
    full_.emplace(model, batch_, false, 1, 1);
    if (const int64_t tail = data.samples % batch_) partial_.emplace(model, tail, false, 1, 1);
  }

  Evaluation run() {
    Backend& be = model_.backend();
    auto* stats = stats_.as<LossStats>();
    be.fill_zero(stats, sizeof(LossStats));
    const int64_t f = data_.features;
    for (int64_t start = 0; start < data_.samples; start += batch_) {
      Network& net = start + batch_ <= data_.samples ? *full_ : *partial_;
      net.evaluate(x_.as<float>() + start * f, y_.as<int32_t>() + start, stats);
    }
    LossStats host{};
    be.synchronize();
    be.download(&host, stats, sizeof(host));
    return {host.loss_sum / host.samples, 100.0 * host.correct / host.samples};
  }

 private:
  const Model& model_;
  const Dataset& data_;
  int64_t batch_ = 0;
  DeviceBuffer x_, y_, stats_;
  std::optional<Network> full_, partial_;
};

// Times each node of an unsharded plan over `steps` steps on the first batch (gradients are
// computed, the optimizer is not applied), keeping per-node medians.
void profile_nodes(Model& model, const DeviceBuffer& x, const DeviceBuffer& y, int64_t batch,
                   int steps, TrainResult& r) {
  Backend& be = model.backend();
  Network net(model, batch, true, 1);
  DeviceBuffer stats = be.allocate(sizeof(LossStats));
  // Profiled steps run the forward pass in training mode, which moves BatchNorm's running
  // statistics: they are put back afterwards, so the trained model is that of the epochs alone.
  std::vector<float> state(static_cast<size_t>(model.state_size()));
  if (!state.empty()) be.download(state.data(), model.state(), sizeof(float) * state.size());
  struct Restore {
    Backend& be;
    const Model& model;
    const std::vector<float>& state;
    ~Restore() {
      if (!state.empty()) be.upload(model.state(), state.data(), sizeof(float) * state.size());
    }
  } restore{be, model, state};
  const size_t nodes = model.nodes().size();
  std::vector<std::vector<double>> fwd(nodes), bwd(nodes);
  std::vector<double> loss;
  Network::StepProfile p;
  for (int i = 0; i < steps + 2; ++i) {
    if (stop_requested()) return;
    net.profile_step(x.as<float>(), y.as<int32_t>(), stats.as<LossStats>(), p);
    if (i < 2) continue;  // warm-up
    for (size_t k = 0; k < nodes; ++k) {
      fwd[k].push_back(p.forward_ms[k]);
      bwd[k].push_back(p.backward_ms[k]);
    }
    loss.push_back(p.loss_ms);
  }
  r.profiled_steps = steps;
  r.node_forward_ms.resize(nodes);
  r.node_backward_ms.resize(nodes);
  for (size_t k = 0; k < nodes; ++k) {
    r.node_forward_ms[k] = summarize(fwd[k]).median;
    r.node_backward_ms[k] = summarize(bwd[k]).median;
  }
  r.loss_ms = summarize(loss).median;
}

}  // namespace

TrainResult train_model(Model& model, const Dataset& data, const TrainSpec& train,
                        const EpochCallback& on_epoch, const ExecutionOptions& exec) {
  return train_model(model, DataSplit{data, {}}, train, on_epoch, exec);
}

TrainResult train_model(Model& model, const DataSplit& split, const TrainSpec& train,
                        const EpochCallback& on_epoch, const ExecutionOptions& exec) {
  const Dataset& data = split.train;
  check_data(model, data);
  if (split.test.samples > 0) check_data(model, split.test);
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
  std::optional<Evaluator> evaluator;
  if (split.test.samples > 0) evaluator.emplace(model, split.test);
  DeviceBuffer stats_buffer = be.allocate(sizeof(LossStats));
  auto* stats = stats_buffer.as<LossStats>();
  // Batches are selected on the device (Backend::next_batch) when shuffled, and when the step is
  // recorded: a recorded step must find its batch without the host.
  DeviceBuffer order, batch_x, batch_y, position;
  std::vector<int32_t> host_order;
  if (train.shuffle || exec.record_step) {
    order = be.allocate(sizeof(int32_t) * n);
    batch_x = be.allocate(sizeof(float) * batch * f);
    batch_y = be.allocate(sizeof(int32_t) * batch);
    position = be.allocate(sizeof(int64_t));
    host_order.resize(n);
    std::iota(host_order.begin(), host_order.end(), 0);
    be.upload(order.as<int32_t>(), host_order.data(), order.bytes());
  }
  // Four timestamps per step (start, batch selected, loss and gradients, optimizer), taken in the
  // device's queue and read at the end of the epoch: the host waits only there.
  auto clock = be.clock(static_cast<int>(4 * steps_per_epoch));
  // One training step on the batch at *position (select) or at row `first` (in place); with
  // mark >= 0 it stamps marks mark + 1 (batch selected) and mark + 2 (gradients computed).
  auto run_step = [&](Network& net, bool select, int64_t first, int mark) {
    const float* src = x.as<float>() + first * f;
    const int32_t* labels = y.as<int32_t>() + first;
    if (select) {
      be.next_batch(x.as<float>(), y.as<int32_t>(), order.as<int32_t>(), position.as<int64_t>(),
                    net.batch(), f, batch_x.as<float>(), batch_y.as<int32_t>());
      src = batch_x.as<float>();
      labels = batch_y.as<int32_t>();
    }
    if (mark >= 0) clock->mark(mark + 1);
    net.train_step(src, labels, stats);
    if (mark >= 0) clock->mark(mark + 2);
    optimizer->step(model.params(), model.grads());
  };
  std::unique_ptr<RecordedWork> recorded;
  if (exec.record_step && full_steps > 0) {
    recorded = be.capture([&] { run_step(full, true, 0, -1); });
  }
  const bool select = train.shuffle || recorded != nullptr;
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
  r.test_samples = split.test.samples;
  r.shards = full.shards();
  r.recorded_step = recorded != nullptr;
  r.flops_per_step = model.train_flops(batch);
  r.setup_seconds = ms_between(setup_start, Clock::now()) / 1e3;

  std::vector<double> step_ms, data_ms, fb_ms, opt_ms;
  step_ms.reserve(static_cast<size_t>(train.epochs * steps_per_epoch));
  data_ms.reserve(step_ms.capacity());
  fb_ms.reserve(step_ms.capacity());
  opt_ms.reserve(step_ms.capacity());
  int64_t steps_taken = 0;
  bool step_limit = false;
  for (int64_t epoch = 1; epoch <= train.epochs && !r.interrupted && !step_limit; ++epoch) {
    if (exec.max_steps > 0 && steps_taken >= exec.max_steps) break;
    if (train.shuffle) {
      // Fisher-Yates with the seeded generator: the same order on every machine.
      std::iota(host_order.begin(), host_order.end(), 0);
      for (int64_t i = n - 1; i > 0; --i) {
        std::swap(host_order[i], host_order[shuffle_rng.below(static_cast<uint64_t>(i + 1))]);
      }
      be.upload(order.as<int32_t>(), host_order.data(), order.bytes());
    }
    if (select) be.fill_zero(position.as<int64_t>(), sizeof(int64_t));
    be.fill_zero(stats, sizeof(LossStats));
    int64_t done = 0;  // steps of this epoch completed
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      if (stop_requested()) {
        r.interrupted = true;
        break;
      }
      const int m = static_cast<int>(4 * s);
      clock->mark(m);
      if (recorded && s < full_steps) {
        recorded->replay();
      } else {
        run_step(s < full_steps ? full : *partial, select, s * batch, m);
      }
      clock->mark(m + 3);
      ++done;
      ++steps_taken;
      if (exec.max_steps > 0 && steps_taken >= exec.max_steps && s + 1 < steps_per_epoch) {
        step_limit = true;  // a partial epoch is not reported as an epoch
        break;
      }
    }
    // The epoch's timestamps; the partial batch is left out of the medians (it would skew them).
    double epoch_ms = 0;
    for (int64_t s = 0; s < done; ++s) {
      const int m = static_cast<int>(4 * s);
      const double ms = clock->ms_between(m, m + 3);
      epoch_ms += ms;
      if (s >= full_steps) continue;
      step_ms.push_back(ms);
      if (!recorded) {
        data_ms.push_back(clock->ms_between(m, m + 1));
        fb_ms.push_back(clock->ms_between(m + 1, m + 2));
        opt_ms.push_back(clock->ms_between(m + 2, m + 3));
      }
    }
    if (step_limit) break;
    if (r.interrupted) break;
    LossStats host{};
    be.download(&host, stats, sizeof(host));
    EpochRecord rec{epoch,          host.loss_sum, 100.0 * (1.0 - host.correct / host.samples),
                    epoch_ms / 1e3, kNoValue,      kNoValue};
    if (evaluator) {
      const Evaluation e = evaluator->run();
      rec.test_loss = e.loss;
      rec.test_accuracy = e.accuracy;
    }
    if (!std::isfinite(rec.loss) && r.diverged_epoch == 0) r.diverged_epoch = epoch;
    r.epochs.push_back(rec);
    r.train_seconds += rec.seconds;
    if (on_epoch) on_epoch(rec, train.epochs);
  }
  be.synchronize();
  if (!r.epochs.empty()) {
    r.final_loss = r.epochs.back().loss;
    r.final_train_error = r.epochs.back().train_error;
    r.final_test_loss = r.epochs.back().test_loss;
    r.final_test_accuracy = r.epochs.back().test_accuracy;
  }
  // The first step pays for first-touch page faults and cold caches: it is the warm-up.
  for (auto* v : {&step_ms, &data_ms, &fb_ms, &opt_ms}) {
    if (v->size() > 1) v->erase(v->begin());
  }
  r.step_ms = summarize(step_ms);
  r.data_ms = recorded ? kNoValue : summarize(data_ms).median;
  r.forward_backward_ms = recorded ? kNoValue : summarize(fb_ms).median;
  r.optimizer_ms = recorded ? kNoValue : summarize(opt_ms).median;
  r.steps_taken = steps_taken;
  if (r.step_ms.median > 0) {
    r.gflops = r.flops_per_step / (r.step_ms.median * 1e-3) / 1e9;
    r.samples_per_second = static_cast<double>(batch) / (r.step_ms.median * 1e-3);
  }
  if (exec.profile_steps > 0 && !r.interrupted) profile_nodes(model, x, y, batch, exec.profile_steps, r);
  return r;
}

}  // namespace xo
