#include "report/train_text.h"

#include <fmt/format.h>

#include <cmath>

#include "core/format.h"

namespace xo {
namespace {

// ", test accuracy 97.10% (10000 samples)", or the loss where no accuracy is measured (mse); ""
// without the split.
std::string split_figures(const char* split, double loss, double accuracy, int64_t samples) {
  if (std::isnan(loss) && std::isnan(accuracy)) return "";
  return std::isnan(accuracy)
             ? fmt::format(", {} loss {:.6f} ({} samples)", split, loss, samples)
             : fmt::format(", {} accuracy {:.2f}% ({} samples)", split, accuracy, samples);
}

// "final loss 0.123456, train error 3.20%, test accuracy ..." (or that no epoch completed), then
// the splits' figures.
std::string final_figures(const TrainResult& r) {
  std::string text = r.epochs.empty() ? std::string("no epoch completed")
                                      : fmt::format("final loss {:.6f}", r.final_loss);
  if (!r.epochs.empty() && !std::isnan(r.final_train_error))
    text += fmt::format(", train error {:.2f}%", r.final_train_error);
  return text +
         split_figures("validation", r.final_val_loss, r.final_val_accuracy, r.validation_samples) +
         split_figures("test", r.final_test_loss, r.final_test_accuracy, r.test_samples);
}

// " on 2 hosts (2 ranks each)"; "" on one machine.
std::string on_hosts(const TrainResult& r) {
  if (r.hosts <= 1) return "";
  return r.hosts * r.ranks_per_host == r.ranks
             ? fmt::format(" on {} hosts ({} rank{} each)", r.hosts, r.ranks_per_host,
                           r.ranks_per_host == 1 ? "" : "s")
             : fmt::format(" on {} hosts (at most {} ranks on one)", r.hosts, r.ranks_per_host);
}

// How the ranks of a data-parallel run summed their gradients; "" on one process.
std::string ranks_figures(const TrainResult& r) {
  if (r.ranks <= 1) return "";
  const std::string bytes = byte_size(static_cast<double>(r.reduced_bytes));
  if (r.reduce_mode == "shared") {
    return fmt::format(
        " per rank, {} ranks{} (summing {} of gradients per step in {}, each rank its "
        "part within its optimizer pass: {:.4f} ms; waiting for the slowest rank {:.4f} ms)",
        r.ranks, on_hosts(r), bytes,
        r.hosts > 1 ? "each host's shared memory, then across the hosts" : "shared memory",
        r.optimizer_ms, r.communicate_ms);
  }
  std::string model;
  if (std::isfinite(r.predicted_communicate_ms)) {
    model = fmt::format(
        "; the ring model over the link measured between them ({:.3g} GB/s, "
        "{:.3g} us a message){}: {:.4f} ms",
        r.link_gbs, r.link_latency_us,
        std::isfinite(r.staging_ms)
            ? fmt::format(" with the copies to the host and back ({:.4f} ms measured)",
                          r.staging_ms)
            : "",
        r.predicted_communicate_ms);
  }
  return fmt::format(
      " per rank, {} ranks{} (summing {} of gradients per step {}: {:.4f} ms beyond "
      "backward{})",
      r.ranks, on_hosts(r), bytes, r.reduce_mode, r.communicate_ms, model);
}

// How the run ended, where that is not simply at its last epoch.
std::string ending(const TrainResult& r, int64_t planned_epochs) {
  if (r.interrupted) return " (interrupted)";
  if (r.paused)
    return fmt::format(" (paused after epoch {} of {})", epochs_completed(r), planned_epochs);
  if (r.resumed_at_step > 0)
    return fmt::format(" (resumed from its checkpoint at step {})", r.resumed_at_step);
  return "";
}

// ", bf16 on AVX-512 BF16": a CPU's precision where it is not f32, with the unit that runs it.
std::string cpu_precision(const DeviceInfo& d) {
  if (d.precision == "f32") return "";
  for (const auto& [key, value] : d.details) {
    if (key == "bf16 unit") return fmt::format(", {} on {}", d.precision, value);
  }
  return ", " + d.precision;
}

}  // namespace

std::string train_header(const ModelSpec& spec, int64_t parameters, const DeviceInfo& d, int ranks,
                         const DataSplit& data) {
  const std::string where =
      d.kind == DeviceKind::Cpu
          ? fmt::format("{}{} thread{}{}", ranks > 0 ? fmt::format("{} ranks of ", ranks) : "",
                        d.threads, d.threads == 1 ? "" : "s", cpu_precision(d))
          : d.precision;
  std::string text = fmt::format(
      "{}: {} parameters, {} lr {:.6g} on {} ({}, {}); data: {}\n", terminal_safe(spec.name),
      parameters, optimizer_type_name(spec.train.optimizer.type), spec.train.optimizer.lr, d.id,
      d.name, where, data.train.description);
  if (!spec.init.empty()) text += fmt::format("initial weights: {}\n", terminal_safe(spec.init));
  if (data.validation.samples > 0) {
    text += fmt::format("validation: {}; training on the first {}\n", data.validation.description,
                        data.train.samples);
  }
  if (!spec.data.test.empty()) {
    text +=
        fmt::format("test: {} ({} samples)\n", terminal_safe(spec.data.test), data.test.samples);
  }
  return text;
}

std::string epoch_line(const EpochRecord& e, int64_t epochs, bool scheduled) {
  // What was measured, nothing else: a regression has no error or accuracy, a split that is not
  // there no figures. A scheduled rate changes between epochs: each line says which one it used.
  std::string figures = scheduled ? fmt::format("lr {:.6g}  ", e.lr) : std::string();
  figures += fmt::format("loss {:.6f}", e.loss);
  if (!std::isnan(e.train_error)) figures += fmt::format("  train error {:6.2f}%", e.train_error);
  if (!std::isnan(e.val_loss)) figures += fmt::format("  val loss {:.4f}", e.val_loss);
  if (!std::isnan(e.val_accuracy))
    figures += fmt::format("  val accuracy {:6.2f}%", e.val_accuracy);
  if (!std::isnan(e.test_loss)) figures += fmt::format("  test loss {:.4f}", e.test_loss);
  if (!std::isnan(e.test_accuracy))
    figures += fmt::format("  test accuracy {:6.2f}%", e.test_accuracy);
  return fmt::format("epoch {:>{}}/{}  {}  {:.3f} ms\n", e.epoch, fmt::formatted_size("{}", epochs),
                     epochs, figures, e.seconds * 1e3);
}

std::string train_summary(const TrainResult& r, int64_t planned_epochs) {
  return fmt::format(
      "{}: {}, {:.4f} ms/step (median of {}, p10-p90 {:.4f}-{:.4f}), {:.1f} GFLOP/s, {:.0f} "
      "samples/s, {:.2f} s training, {} shard{}{}{}{}\n",
      r.model, final_figures(r), r.step_ms.median, r.step_ms.count, r.step_ms.p10, r.step_ms.p90,
      r.gflops, r.samples_per_second, r.train_seconds, r.shards, r.shards == 1 ? "" : "s",
      r.fused_trials > 1
          ? fmt::format(", one of {} fused trials (each step trains all of them)", r.fused_trials)
          : ranks_figures(r),
      r.recorded_step ? ", replayed as one CUDA Graph" : "", ending(r, planned_epochs));
}

}  // namespace xo
