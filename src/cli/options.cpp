#include "cli/options.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "cli/commands.h"
#include "core/error.h"

namespace xo::cli {

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        // strtod reads "inf" and "1e999" as infinite: no setting means anything with them.
        if (end == text.c_str() || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
          return "expected a positive number, got '" + text + "'";
        }
        return "";
      },
      "POSITIVE");
}

CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (end == text.c_str() || *end != '\0' || v < 0) {
          return "expected 0 or a positive integer, got '" + text + "'";
        }
        return "";
      },
      "INT>=0");
}

void add_checkpoint_options(CLI::App* sub, CheckpointFlags& f, bool for_train) {
  sub->add_option("--checkpoint-every", f.every,
                  "Save the training state every N steps or every so long (500steps, 90s, 5min, "
                  "1h) and on Ctrl-C/SIGTERM, so that an interrupted run resumes where it was; off "
                  "saves nothing")
      ->capture_default_str();
  if (for_train) {
    sub->add_option("--checkpoint-dir", f.dir,
                    "Folder for the checkpoints (default: crossover-checkpoints/MODEL)");
    sub->add_flag("--resume", f.resume,
                  "Continue from the checkpoint in the checkpoint folder (bit-identical to a run "
                  "never stopped)");
    // A search's trial: its first run has no checkpoint, a rerun continues it. Not for people:
    // --resume with nothing to resume is refused, never silently started over.
    sub->add_flag("--resume-if-any", f.resume_if_any)->group("");
    sub->add_flag("--restart", f.restart,
                  "Discard the checkpoint an unfinished run left and start afresh");
  } else {
    sub->add_flag("--restart", f.restart,
                  "Discard what an unfinished job left in --out (its finished models and "
                  "checkpoints) and start afresh; without it the job continues where it stopped");
  }
  sub->add_option("--on-nan", f.on_nan,
                  "When the loss becomes NaN or infinite: stop (keeping the last good checkpoint) "
                  "or continue")
      ->check(CLI::IsMember({"stop", "continue"}))
      ->capture_default_str();
}

void add_data_options(CLI::App* sub, DataFlags& f) {
  sub->add_option("--data", f.data,
                  "Train on this data in place of the spec's [data] source: a CSV file (features, "
                  "then the label) or a source (fashion-mnist, idx:DIR, imdb:DIR, imdb-synthetic, "
                  "disc)");
  sub->add_option("--test-data", f.test_data,
                  "The test split from this CSV file (the training data's columns), in place of "
                  "the spec's data.test");
  sub->add_option("--init", f.init,
                  "Initial weights from a safetensors file (PyTorch names) or an ONNX model, in "
                  "place of the spec's model.init");
}

void add_measure_options(CLI::App* sub, MeasureOptions& o, bool with_steps) {
  sub->add_option("--out", o.out,
                  "Folder for results.json, results.csv and report.html (default: "
                  "crossover-results, or a new dated folder beside it when that holds a finished "
                  "job)");
  sub->add_flag("--overwrite", o.overwrite,
                "Replace the finished job in --out (without it, a finished job is never "
                "overwritten)");
  sub->add_option("--devices", o.settings.devices,
                  "Devices (default: every device present, and cpu:bf16 beside cpu where the CPU "
                  "has AMX or AVX-512 BF16 and bf16 changes the model's products)")
      ->delimiter(',');
  sub->add_option("--epochs", o.settings.epochs, "Override every model's epochs")
      ->check(positive_number());
  if (with_steps) {
    sub->add_option("--steps", o.settings.max_steps,
                    "Measure at most N training steps per model (time per epoch is then the "
                    "median step times the steps per epoch, and says so)")
        ->check(non_negative_integer());
  }
  add_threads_option(sub, o.settings.threads);
  sub->add_flag("--reprobe", o.reprobe, "Measure each device's peaks again (they are cached)");
  add_gpu_options(sub, o.settings.precision, o.settings.record_step);
  add_checkpoint_options(sub, o.checkpoint, false);
  add_data_options(sub, o.data);
}

void add_threads_option(CLI::App* sub, int& threads, bool per_trial) {
  if (per_trial) {
    sub->add_option("--threads", threads,
                    "CPU threads per trial (default: the cores shared among the trials at once)")
        ->check(positive_number());
    return;
  }
  sub->add_option("--threads", threads,
                  "CPU threads (0 = the cores this process may run on, shared among the ranks on "
                  "its machine)")
      ->check(non_negative_integer());
}

void add_precision_option(CLI::App* sub, std::string& precision) {
  sub->add_option("--precision", precision,
                  "matmul and convolution arithmetic: f32 (default), tf32 (GPU tensor cores; "
                  "the CPU runs it as f32) or bf16 (GPU tensor cores, the CPU's AMX or AVX-512 "
                  "BF16; f32 master weights, gradients and optimizer)")
      ->capture_default_str();  // checked by parse_precision, whose error names the choices
}

void add_gpu_options(CLI::App* sub, std::string& precision, bool& record_step) {
  add_precision_option(sub, precision);
  sub->add_flag("!--no-graph", record_step,
                "Launch every kernel of a GPU step from the host instead of replaying the step "
                "as one CUDA Graph (shows what the graph buys)");
}

void add_cost_options(CLI::App* sub, CostOptions& o) {
  sub->add_option("--catalog", o.catalogs,
                  "A catalog file merged over the shipped data/catalog.toml (same id replaces)");
  sub->add_option("--price", o.prices,
                  "Override a price: INSTANCE=USD_PER_HOUR, INSTANCE.spot=USD_PER_HOUR or "
                  "DEVICE=PURCHASE_USD");
  OwnershipAssumptions& a = o.advice.ownership;
  sub->add_option("--lifetime-years", a.lifetime_years, "Years owned hardware is written off over")
      ->capture_default_str();
  sub->add_option("--utilisation", a.utilisation,
                  "Fraction of its lifetime owned hardware is in use, in (0, 1]")
      ->capture_default_str();
  sub->add_option("--electricity-price", a.electricity_usd_per_kwh, "USD per kWh")
      ->capture_default_str();
  sub->add_option("--host-power", a.host_power_w, "Watts of the machine around an owned GPU")
      ->capture_default_str();
  sub->add_option("--hours-per-month", o.advice.hours_per_month,
                  "Use per month at which payback times are given")
      ->check(positive_number())
      ->capture_default_str();
}

}  // namespace xo::cli
