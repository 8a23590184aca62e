// An epoch's record (EpochRecord) listed once (io/json_fields.h) for the documents that hold a
// run's epochs: a result (report/result_fields.h: `train --json` and each run of a report) and a
// checkpoint (train/checkpoint_json.cpp).
#pragma once

#include <cmath>

#include "train/trainer.h"

namespace xo {

// The documents an epoch's record is in, by the names and the figures they write.
enum class EpochDocument {
  // A result of schema 1 (crossover 0.1): percentages named as plain `train_error`, … (the
  // conventions of each schema: report/result_fields.h).
  kResultSchema1,
  // A result: percentages named `_percent`; a figure that is not finite is null.
  kResult,
  // A checkpoint: a result's names, and every figure exact (`io.exact`), so that a resumed run
  // goes on from the very same doubles, NaN and the infinities included.
  kCheckpoint,
  // A checkpoint written before it shared this list (crossover.checkpoint/2 of 0.2.x): read only.
  // Percentages named as plain `train_error`, `test_accuracy` and `val_accuracy`.
  kCheckpointBeforeSharing,
};

template <class Io, class E>
void epoch_fields(Io& io, E& e, EpochDocument doc) {
  using enum EpochDocument;
  const bool exact = doc == kCheckpoint || doc == kCheckpointBeforeSharing;
  const bool plain = doc == kResultSchema1 || doc == kCheckpointBeforeSharing;
  auto figure = [&](const char* key, auto& v) {
    if (exact) {
      io.exact(key, v);
    } else {
      io.nullable(key, v);
    }
  };
  auto figure_or_absent = [&](const char* key, auto& v) {
    if (exact) {
      io.exact_or_absent(key, v);
    } else {
      io.nullable_or_absent(key, v);
    }
  };
  io.integer("epoch", e.epoch);
  figure("loss", e.loss);
  figure(plain ? "train_error" : "train_error_percent", e.train_error);
  if (exact) {
    io.exact("seconds", e.seconds);
  } else {
    io.number("seconds", e.seconds);
  }
  // Where there is the split (a regression's accuracy is null: not measured); absent without.
  if (Io::kReading || !std::isnan(e.test_loss) || !std::isnan(e.test_accuracy)) {
    figure_or_absent("test_loss", e.test_loss);
    figure_or_absent(plain ? "test_accuracy" : "test_accuracy_percent", e.test_accuracy);
  }
  if (Io::kReading || !std::isnan(e.val_loss) || !std::isnan(e.val_accuracy)) {  // Keras's names
    figure_or_absent("val_loss", e.val_loss);
    // Results named it with `_percent` from the first (it came after schema 2).
    figure_or_absent(doc == kCheckpointBeforeSharing ? "val_accuracy" : "val_accuracy_percent",
                     e.val_accuracy);
  }
  // Files written before learning-rate schedules have no rate per epoch.
  figure_or_absent("lr", e.lr);
}

}  // namespace xo
