// The fields of a training result (TrainResult), listed once (io/json_fields.h): the
// `crossover train --json` document (crossover.train/2) and each run of a report
// (crossover.report/2) write and read them through these lists.
//
// The conventions since schema 2 (crossover 0.2.0): losses are means per sample, as Keras and
// PyTorch report them; a figure in percent says so in its name (`_percent`), a fraction in [0, 1]
// in its (`_fraction`). Schema 1 named percentages as plain `train_error`, `test_accuracy`, … and
// summed the training loss over the epoch's batches; its files are read with those names and their
// training loss turned into a mean (exact where every batch was full, which schema 1 could not
// tell apart from the partial batch's share otherwise). The writer writes schema 2.
#pragma once

#include <cmath>
#include <initializer_list>

#include "advisor/scale_out.h"
#include "io/json_fields.h"
#include "train/epoch_fields.h"
#include "train/trainer.h"

namespace xo::result_fields {

// The key a figure has in a file of `schema` (1 or 2): schema 1's name, else schema 2's.
inline const char* key(int schema, const char* v1, const char* v2) { return schema == 1 ? v1 : v2; }

inline constexpr auto timing = [](auto& io, auto& s) {
  io.integer("count", s.count);
  io.nullable("median", s.median);
  io.nullable("mean", s.mean);
  io.nullable("min", s.min);
  io.nullable("max", s.max);
  io.nullable("p10", s.p10);
  io.nullable("p90", s.p90);
  io.nullable("cv", s.cv);
};

// An epoch's record, as the checkpoint lists it too (train/epoch_fields.h).
template <class Io, class E>
void epoch(Io& io, E& e, int schema) {
  epoch_fields(io, e, schema == 1 ? EpochDocument::kResultSchema1 : EpochDocument::kResult);
}

inline constexpr std::initializer_list<const char*> kDeviceInfoKeys = {"kind", "name", "threads",
                                                                       "library", "precision"};

// The device's facts, its `details` as keys of their own beside them.
inline constexpr auto device_info = [](auto& io, auto& d) {
  io.named("kind", d.kind);
  io.text("name", d.name);
  io.integer("threads", d.threads);
  io.text("library", d.library);
  io.text("precision", d.precision);
  if constexpr (kReads<decltype(io)>) {
    d.details = io.in.other_texts(kDeviceInfoKeys);
  } else {
    for (const auto& [k, v] : d.details) io.j[k] = v;
  }
};

// The step's phases, medians (null inside a recorded step, timed as a whole).
inline constexpr auto step_phases = [](auto& io, auto& r) {
  io.nullable("data", r.data_ms);
  io.nullable("forward_backward", r.forward_backward_ms);
  io.nullable("communicate", r.communicate_ms);
  io.nullable("optimizer", r.optimizer_ms);
};

// Data-parallel training across MPI ranks: per step the gradient bytes each rank summed.
inline constexpr auto data_parallel = [](auto& io, auto& r) {
  io.integer("reduced_bytes_per_step", r.reduced_bytes);
  io.text("reduce", r.reduce_mode);
  // Since multi-host runs (0.2.x): where the ranks were, and the scale-out model's all-reduce over
  // the link measured for the job, beside the communicate phase it predicts.
  if (io.present("hosts")) {
    io.integer("hosts", r.hosts);
    io.integer("ranks_per_host", r.ranks_per_host);
    io.nullable("communicate_ms", r.communicate_ms);
    io.nullable("predicted_communicate_ms", r.predicted_communicate_ms);
    io.nullable("link_latency_us", r.link_latency_us);
    io.nullable("link_gbs", r.link_gbs);
  }
  // Since the host-staged path's model (0.2.x).
  if (io.present("staging_ms")) io.nullable("staging_ms", r.staging_ms);
  // As nccl-tests: bytes x 2(n-1)/n over the communicate phase, where that phase is the whole sum
  // (after-backward); null where backward or the optimizer's pass (shared) holds part of it.
  // Derived: written, not read.
  if constexpr (!kReads<decltype(io)>) {
    io.nullable("bus_gbs",
                communicate_bus_gbs(r.reduced_bytes, r.ranks, r.communicate_ms, r.reduce_mode));
  }
};

// Where a loss that was not finite stopped training.
inline constexpr auto stopped_diverged = [](auto& io, auto& r) {
  if constexpr (!kReads<decltype(io)>) io.integer("epoch", r.diverged_epoch);  // a copy
  io.integer("from_step", r.diverged_from);
  io.integer("step", r.diverged_step);
  io.nullable("last_finite_loss", r.last_finite_loss);
  io.integer("last_finite_epoch", r.last_finite_epoch);
  io.integer("last_finite_step", r.last_finite_step);
};

// [train.early_stopping]'s outcome.
inline constexpr auto early_stopping = [](auto& io, auto& r) {
  io.text("monitor", r.early_stopping_monitor);
  io.integer("patience", r.early_stopping_patience);
  io.number("min_delta", r.early_stopping_min_delta);
  io.flag("stopped_early", r.stopped_early);
  io.integer("best_epoch", r.best_epoch);
  io.nullable("best_value", r.best_value);
  io.flag("restored_best", r.restored_best);
};

inline constexpr auto checkpoints = [](auto& io, auto& r) {
  io.integer("resumed_at_step", r.resumed_at_step);
  // Why the run is not bit-identical to one never stopped ("" where it is; absent before 0.2.x).
  if (io.present("resumed_differently")) io.text("resumed_differently", r.resumed_differently);
  if (io.present("paused")) io.flag("paused", r.paused);
  io.integer("written", r.checkpoints_written);
  io.number("step_loop_wait_ms", r.checkpoint_wait_ms);
};

// What the run was: model, data, device, batch, and its parallelism.
template <class Io, class R>
void setup(Io& io, R& r) {
  // Written here since 0.2.0 (before, only in a report's runs, read by read_run).
  if (io.present("steps_taken")) io.integer("steps_taken", r.steps_taken);
  io.text("model", r.model);
  io.text("origin", r.origin);
  io.text("data", r.data);
  io.integer("params", r.params);
  io.text("device", r.device.id);
  io.object("device_info", r.device, device_info);
  io.integer("batch", r.batch);
  io.integer("samples", r.samples);
  io.integer("steps_per_epoch", r.steps_per_epoch);
  io.integer("shards", r.shards);
  if constexpr (!Io::kReading) io.text("precision", r.device.precision);  // device_info's copy
  io.flag("recorded_step", r.recorded_step);  // the step launched as one CUDA Graph
  // Since data-parallel training (0.2.x); earlier files trained on one process.
  if (io.present("ranks")) io.integer("ranks", r.ranks);
  // Since fused trials (0.2.x): the trials its fused group trained at once (1: alone); its step
  // times and epoch seconds are the group's.
  if (io.present("fused_trials")) io.integer("fused_trials", r.fused_trials);
  if (io.present("step_phases_ms")) io.object_or_null("step_phases_ms", true, r, step_phases);
  if (io.present("data_parallel"))
    io.object_or_null("data_parallel", !r.reduce_mode.empty(), r, data_parallel);
}

// The figures at the end: losses and accuracies (null without a test set), the step's time.
template <class Io, class R>
void outcome(Io& io, R& r, int schema) {
  io.nullable("final_loss", r.final_loss);
  io.nullable(key(schema, "final_train_error", "final_train_error_percent"), r.final_train_error);
  // Since the stuck-model check (late 0.1.1); earlier files have no such figure.
  const char* majority = key(schema, "majority_class_error", "majority_class_error_percent");
  if (io.present(majority)) io.nullable(majority, r.majority_class_error);
  io.integer("test_samples", r.test_samples);
  io.nullable("final_test_loss", r.final_test_loss);
  io.nullable(key(schema, "final_test_accuracy", "final_test_accuracy_percent"),
              r.final_test_accuracy);
  if (schema >= 2) {  // schema 1 had no validation split
    io.integer("validation_samples", r.validation_samples);
    io.nullable("final_val_loss", r.final_val_loss);
    io.nullable("final_val_accuracy_percent", r.final_val_accuracy);
  }
  io.object_or_null("step_ms", true, r.step_ms, timing);
  // The headline figure, also inside step_ms: the reader checks it is there (a lenient read of a
  // document without it keeps step_ms's).
  double median = r.step_ms.median;
  io.nullable("median_step_ms", median);
  if constexpr (Io::kReading) {
    if (io.present("median_step_ms")) r.step_ms.median = median;
  }
}

// The whole result; `epochs` is the key of the epoch records ("epochs" in crossover.train/2,
// "epoch_log" in a report's run).
template <class Io, class R>
void result(Io& io, R& r, const char* epochs, int schema) {
  setup(io, r);
  io.objects(epochs, r.epochs, [schema](auto& e_io, auto& e) { epoch(e_io, e, schema); });
  outcome(io, r, schema);
  io.number("flops_per_step", r.flops_per_step);
  io.nullable("gflops", r.gflops);
  io.nullable("samples_per_second", r.samples_per_second);
  io.number("train_seconds", r.train_seconds);
  io.number("setup_seconds", r.setup_seconds);
  io.flag("interrupted", r.interrupted);
  io.integer("diverged_epoch", r.diverged_epoch);
  // Files written before checkpoints existed (crossover 0.1.0) have neither of these; null: the
  // run did not diverge.
  if (io.present("stopped_diverged") &&
      io.object_or_null("stopped_diverged", r.stopped_diverged, r, stopped_diverged)) {
    if constexpr (Io::kReading) r.stopped_diverged = true;
  }
  // Files written before early stopping have no such key; null: the run had none.
  if (io.present("early_stopping")) {
    io.object_or_null("early_stopping", !r.early_stopping_monitor.empty(), r, early_stopping);
  }
  if (io.present("checkpoints")) io.object("checkpoints", r, checkpoints);
  // A schema 1 file summed the training loss over the epoch's steps: a mean by them.
  if constexpr (Io::kReading) {
    if (schema == 1 && r.steps_per_epoch > 0) {
      for (EpochRecord& e : r.epochs) e.loss /= static_cast<double>(r.steps_per_epoch);
      r.final_loss /= static_cast<double>(r.steps_per_epoch);
    }
  }
}

}  // namespace xo::result_fields
