// `crossover run`: the default job, the classic disc-2 ... disc-12 depth sweep on every device
// present (or, with --suite classic, that sweep and the Keras networks mnist-mlp, mnist-cnn and
// imdb-lstm), printed as one table and written to results.json / results.csv after every model.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "core/interrupt.h"
#include "data/source.h"
#include "model/model.h"
#include "report/machine.h"
#include "report/results.h"
#include "report/table.h"

namespace xo::cli {
namespace {

struct RunOptions {
  std::vector<std::string> models;
  std::string suite = "disc";
  std::vector<std::string> devices;
  std::optional<int64_t> epochs;
  int threads = 0;
  std::string out = "crossover-results";
};

std::vector<std::string> suite_models(const std::string& suite) {
  std::vector<std::string> names;
  for (int layers = 2; layers <= 12; ++layers) names.push_back(fmt::format("disc-{}", layers));
  if (suite == "classic") {
    for (const char* name : {"mnist-mlp", "mnist-cnn", "imdb-lstm"}) names.push_back(name);
  }
  return names;
}

std::string render_table(const std::vector<SweepRow>& rows) {
  Table table({"model", "layers", "params", "device", "s/100 epochs", "ms/step", "cv", "GFLOP/s",
               "train error", "test accuracy"});
  for (const SweepRow& row : rows) {
    const TrainResult& r = row.result;
    table.add_row(
        {r.model, std::to_string(row.layers), std::to_string(r.params), r.device.id,
         fmt::format("{:.3f}", seconds_per_100_epochs(r)), fmt::format("{:.4f}", r.step_ms.median),
         fmt::format("{:.1f}%", 100.0 * r.step_ms.cv), fmt::format("{:.1f}", r.gflops),
         fmt::format("{:.2f}%", r.final_train_error),
         std::isnan(r.final_test_accuracy) ? std::string("-")
                                           : fmt::format("{:.2f}%", r.final_test_accuracy)});
  }
  return table.render();
}

int run_sweep(const RunOptions& o) {
  const std::vector<std::string> models = o.models.empty() ? suite_models(o.suite) : o.models;
  std::vector<ModelSpec> specs;
  for (const auto& m : models) specs.push_back(resolve_spec(m));  // fail before any training
  std::vector<std::string> devices = o.devices;
  if (devices.empty()) {
    const DeviceList list = list_devices();
    devices = list.available;
    for (const auto& why : list.unavailable_reasons) fmt::print(stderr, "note: {}\n", why);
  }
  const nlohmann::json machine = describe_machine();
  const std::filesystem::path out(o.out);
  std::vector<SweepRow> rows;
  Progress progress;
  bool stopped = false;
  for (const std::string& device : devices) {
    auto backend = make_backend(parse_device(device, o.threads));
    for (ModelSpec spec : specs) {
      if (stopped) break;
      if (o.epochs) spec.train.epochs = *o.epochs;
      Model model(spec, *backend);
      progress.update(fmt::format("[{}/{}] {} on {}: loading data", rows.size() + 1,
                                  specs.size() * devices.size(), spec.name, backend->info().id));
      const DataSplit data = load_data(spec, model.classes());
      model.init(spec.train.seed);
      const std::string label = fmt::format("{} on {}", spec.name, backend->info().id);
      double trained_seconds = 0;
      TrainResult r = train_model(model, data, spec.train, [&](const EpochRecord& e, int64_t n) {
        trained_seconds += e.seconds;
        const double left =
            trained_seconds / static_cast<double>(e.epoch) * static_cast<double>(n - e.epoch);
        progress.update(fmt::format(
            "[{}/{}] {}: epoch {}/{}, loss {:.4f}, error {:.2f}%, ~{:.0f} s left", rows.size() + 1,
            specs.size() * devices.size(), label, e.epoch, n, e.loss, e.train_error, left));
      });
      progress.clear();
      fmt::print(stderr, "{}: {:.4f} ms/step, {:.1f} GFLOP/s, train error {:.2f}%\n", label,
                 r.step_ms.median, r.gflops, r.final_train_error);
      stopped = r.interrupted;
      rows.push_back({std::move(r), weighted_layers(spec)});
      write_sweep(out, rows, machine, false);  // after every model: an interruption keeps them
    }
  }
  write_sweep(out, rows, machine, !stopped);
  fmt::print("{}", render_table(rows));
  fmt::print("results: {}, {}{}\n", (out / "results.json").string(), (out / "results.csv").string(),
             stopped ? " (interrupted: partial)" : "");
  return stopped ? 130 : 0;
}

}  // namespace

Command add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand(
      "run", "The default job: the disc-2 ... disc-12 sweep on every device present");
  sub->add_option("--out", o->out, "Folder for results.json and results.csv")
      ->capture_default_str();
  sub->add_option("--suite", o->suite,
                  "disc: disc-2 ... disc-12; classic: those and mnist-mlp, mnist-cnn, imdb-lstm")
      ->check(CLI::IsMember({"disc", "classic"}))
      ->capture_default_str();
  sub->add_option("--models", o->models, "Models to sweep (replaces the suite's)")->delimiter(',');
  sub->add_option("--devices", o->devices, "Devices (default: every device present)")
      ->delimiter(',');
  sub->add_option("--epochs", o->epochs, "Override every model's epochs")->check(positive_number());
  sub->add_option("--threads", o->threads, "CPU threads (0 = all cores)")
      ->check(non_negative_integer());
  return {sub, [o] { return run_sweep(*o); }};
}

}  // namespace xo::cli
