#include "advisor/replay.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace xo {
namespace {

void add_setup(RunComparison& c, const char* what, const std::string& recorded,
               const std::string& replayed) {
  if (recorded != replayed) c.setup.push_back({what, recorded, replayed});
}

void add_hash(RunComparison& c, Figure figure, const std::string& recorded,
              const std::string& replayed) {
  FigureComparison f;
  f.figure = figure;
  f.verdict = recorded == replayed ? Verdict::Identical : Verdict::Different;
  f.recorded_hash = recorded;
  f.replayed_hash = replayed;
  c.figures.push_back(std::move(f));
}

void add_value(RunComparison& c, Figure figure, int64_t epoch, double recorded, double replayed,
               double tolerance) {
  c.figures.push_back(
      {figure, epoch, compare_values(recorded, replayed, tolerance), recorded, replayed, {}, {}});
}

}  // namespace

const char* figure_name(Figure f) {
  switch (f) {
    case Figure::Data:
      return "data";
    case Figure::Parameters:
      return "final parameters";
    case Figure::Epochs:
      return "epochs";
    case Figure::Loss:
      return "loss";
    case Figure::TrainError:
      return "train error";
    case Figure::ValLoss:
      return "validation loss";
    case Figure::ValAccuracy:
      return "validation accuracy";
    case Figure::TestLoss:
      return "test loss";
    case Figure::TestAccuracy:
      return "test accuracy";
  }
  return "?";
}

Verdict RunComparison::verdict() const {
  Verdict worst = Verdict::Identical;
  for (const FigureComparison& f : figures) worst = std::max(worst, f.verdict);
  return worst;
}

bool RunComparison::data_differs() const {
  return std::any_of(figures.begin(), figures.end(), [](const FigureComparison& f) {
    return f.figure == Figure::Data && f.verdict == Verdict::Different;
  });
}

Verdict compare_values(double recorded, double replayed, double tolerance) {
  if (std::bit_cast<uint64_t>(recorded) == std::bit_cast<uint64_t>(replayed)) {
    return Verdict::Identical;
  }
  if (std::isnan(recorded) && std::isnan(replayed)) return Verdict::Identical;
  if (!std::isfinite(recorded) || !std::isfinite(replayed)) return Verdict::Different;
  const double scale = std::max(std::abs(recorded), std::abs(replayed));
  return std::abs(replayed - recorded) <= tolerance * scale ? Verdict::WithinTolerance
                                                            : Verdict::Different;
}

RunComparison compare_runs(const RunRecord& recorded, const RunRecord& replayed, double tolerance) {
  const TrainResult& a = recorded.result;
  const TrainResult& b = replayed.result;
  RunComparison c;
  c.model = a.model;
  c.device = a.device.id;
  c.recorded_interrupted = a.interrupted;
  c.recorded_step_ms = a.step_ms.median;
  c.replayed_step_ms = b.step_ms.median;

  add_setup(c, "device", a.device.name, b.device.name);
  add_setup(c, "libraries", a.device.library, b.device.library);
  add_setup(c, "threads", std::to_string(a.device.threads), std::to_string(b.device.threads));
  add_setup(c, "batch shards", std::to_string(a.shards), std::to_string(b.shards));
  add_setup(c, "precision", a.device.precision, b.device.precision);
  add_setup(c, "step recorded as a CUDA Graph", a.recorded_step ? "yes" : "no",
            b.recorded_step ? "yes" : "no");

  if (!recorded.data_hash.empty())
    add_hash(c, Figure::Data, recorded.data_hash, replayed.data_hash);
  if (!a.interrupted) {
    if (!recorded.params_hash.empty()) {
      add_hash(c, Figure::Parameters, recorded.params_hash, replayed.params_hash);
    }
    add_value(c, Figure::Epochs, 0, static_cast<double>(epochs_completed(a)),
              static_cast<double>(epochs_completed(b)), 0);
  }
  const bool test = a.test_samples > 0 || b.test_samples > 0;
  const bool validation = a.validation_samples > 0 || b.validation_samples > 0;
  // Epoch by epoch where both kept the epoch's record (a long run's records thin out alike).
  const size_t epochs = std::min(a.epochs.size(), b.epochs.size());
  for (size_t i = 0; i < epochs; ++i) {
    const EpochRecord &x = a.epochs[i], &y = b.epochs[i];
    if (x.epoch != y.epoch) continue;
    add_value(c, Figure::Loss, x.epoch, x.loss, y.loss, tolerance);
    add_value(c, Figure::TrainError, x.epoch, x.train_error, y.train_error, tolerance);
    if (validation) {
      add_value(c, Figure::ValLoss, x.epoch, x.val_loss, y.val_loss, tolerance);
      add_value(c, Figure::ValAccuracy, x.epoch, x.val_accuracy, y.val_accuracy, tolerance);
    }
    if (test) {
      add_value(c, Figure::TestLoss, x.epoch, x.test_loss, y.test_loss, tolerance);
      add_value(c, Figure::TestAccuracy, x.epoch, x.test_accuracy, y.test_accuracy, tolerance);
    }
  }
  return c;
}

}  // namespace xo
