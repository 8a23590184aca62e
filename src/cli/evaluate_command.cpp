// `crossover evaluate SPEC --init WEIGHTS --data FILE`: a trained model's loss and accuracy on data
// (Keras's model.evaluate): every split the data has (the rows of --data, the test split, the
// validation split), in batches, no dropout, no gradient.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/terminal_hooks.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "data/source.h"
#include "model/model.h"
#include "train/plan.h"

namespace xo::cli {
namespace {

struct EvaluateOptions {
  std::string spec;
  DataFlags data;
  std::string device = "cpu";
  int threads = 0;
  std::string json;
};

// One split's figures, as printed and as written.
struct SplitFigures {
  std::string split;        // "data", "test" or "validation"
  std::string description;  // the data set's own ("csv: new.csv (200 rows, 2 features)")
  int64_t samples = 0;
  Evaluation figures;
};

std::string figures_text(const SplitFigures& s, bool regression) {
  std::string text = fmt::format("loss {:.6f}", s.figures.loss);
  if (!regression && std::isfinite(s.figures.accuracy)) {
    text += fmt::format(", accuracy {:.2f}%", s.figures.accuracy);
  }
  return text;
}

int run_evaluate(const EvaluateOptions& o) {
  if (!o.json.empty()) check_writable_path(o.json, "--json");
  TerminalHooks hooks;
  const ModelSpec spec = trained_spec_with("evaluate", o.spec, o.data, hooks);
  const std::unique_ptr<Backend> backend = make_backend(parse_device(o.device, o.threads));
  Model model(spec, *backend);
  const DataSplit data = load_data(spec.data, data_request(spec, model.classes()));
  initialize(model, "");
  std::vector<SplitFigures> splits;
  for (const auto& [name, set] : {std::pair<const char*, const Dataset*>{"data", &data.train},
                                  {"validation", &data.validation},
                                  {"test", &data.test}}) {
    if (set->samples <= 0) continue;
    Evaluator evaluator(model, *set);
    const Evaluation e = evaluator.run();
    if (!e.complete) {
      fmt::print(stderr, "crossover: evaluate stopped (Ctrl-C) during the {} split\n", name);
      return kExitInterrupted;
    }
    splits.push_back({name, set->description, set->samples, e});
  }
  fmt::print("{}: {} parameters, weights {}, on {}\n", terminal_safe(spec.name),
             group_digits(model.parameter_count()), terminal_safe(spec.init), backend->info().id);
  for (const SplitFigures& s : splits) {
    fmt::print("  {}: {} ({} samples: {})\n", s.split, figures_text(s, model.regression()),
               s.samples, terminal_safe(s.description));
  }
  if (!o.json.empty()) {
    nlohmann::json j = {{"schema", "crossover.evaluate/1"},
                        {"model", spec.name},
                        {"weights", spec.init},
                        {"device", backend->info().id},
                        {"splits", nlohmann::json::array()}};
    for (const SplitFigures& s : splits) {
      nlohmann::json split = {{"split", s.split},
                              {"data", s.description},
                              {"samples", s.samples},
                              {"loss", s.figures.loss}};
      if (!model.regression() && std::isfinite(s.figures.accuracy)) {
        split["accuracy_percent"] = s.figures.accuracy;
      }
      j["splits"].push_back(split);
    }
    write_file_atomic(o.json, j.dump(2) + "\n");
  }
  return kExitOk;
}

}  // namespace

Command add_evaluate(CLI::App& app) {
  auto o = std::make_shared<EvaluateOptions>();
  CLI::App* sub = app.add_subcommand(
      "evaluate",
      "A trained model's loss and accuracy on data (Keras's model.evaluate): --init its weights, "
      "--data the rows");
  sub->add_option("spec", o->spec, "The model: a built-in name, a TOML spec or an ONNX model")
      ->required();
  add_data_options(sub, o->data);
  sub->add_option("--device", o->device, "cpu, cpu:bf16 (the CPU at bf16), cuda, cuda:N or auto")
      ->capture_default_str();
  add_threads_option(sub, o->threads);
  sub->add_option("--json", o->json, "Write the figures as JSON to this file");
  return {sub, [o] { return run_evaluate(*o); }};
}

}  // namespace xo::cli
