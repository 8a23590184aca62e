// `crossover predict SPEC --init WEIGHTS --data FILE`: a trained model's predictions for rows
// (Keras's model.predict), as CSV in the rows' order: a classifier's predicted class and each
// class's probability (the softmax of its outputs; the sigmoid of a binary one's), a regression's
// value. The rows are a CSV's, labelled or not, or a source's training rows; forward only, in
// batches, no dropout.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/terminal_hooks.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "data/rows.h"
#include "job/predict.h"
#include "model/model.h"

namespace xo::cli {
namespace {

struct PredictOptions {
  std::string spec;
  DataFlags data;  // --data and --init (predict has no test split)
  std::string out;
  std::string device = "cpu";
  int threads = 0;
};

// The CSV's header: the predicted class then each class's probability, or the regression's value.
std::string header(const Model& model, int64_t columns) {
  if (model.regression()) return "prediction\n";
  if (model.loss_kind() == LossKind::BinaryCrossEntropy) return "class,p1\n";
  std::string h = "class";
  for (int64_t c = 0; c < columns; ++c) h += fmt::format(",p{}", c);
  return h + "\n";
}

// A line per row: a class and probabilities that round-trip as float32 (9 significant digits), or
// the regression's value.
std::string predictions_csv(const Model& model, const Predictions& p) {
  std::string csv = header(model, p.columns);
  for (int64_t r = 0; r < p.rows; ++r) {
    const double* values = &p.values[static_cast<size_t>(r * p.columns)];
    if (model.regression()) {
      csv += fmt::format("{:.9g}\n", values[0]);
      continue;
    }
    csv += fmt::format("{}", p.labels[static_cast<size_t>(r)]);
    for (int64_t c = 0; c < p.columns; ++c) csv += fmt::format(",{:.9g}", values[c]);
    csv += '\n';
  }
  return csv;
}

int run_predict(const PredictOptions& o) {
  if (!o.out.empty()) check_writable_path(o.out, "--out");
  TerminalHooks hooks;
  const ModelSpec spec = trained_spec_with("predict", o.spec, o.data, hooks);
  const std::unique_ptr<Backend> backend = make_backend(parse_device(o.device, o.threads));
  Model model(spec, *backend);
  const Dataset rows = load_rows(spec.data, data_request(spec, model.classes()));
  initialize(model, "");
  const std::optional<Predictions> predictions = predict_rows(model, rows);
  if (!predictions) {
    fmt::print(stderr, "crossover: predict stopped (Ctrl-C): nothing written\n");
    return kExitInterrupted;
  }
  // The predictions alone on standard output (for a pipe); what they are on standard error.
  const std::string what =
      fmt::format("{}: {} rows predicted with weights {} on {} ({})", terminal_safe(spec.name),
                  group_digits(rows.samples), terminal_safe(spec.init), backend->info().id,
                  terminal_safe(rows.description));
  const std::string csv = predictions_csv(model, *predictions);
  if (o.out.empty()) {
    fmt::print("{}", csv);
    fmt::print(stderr, "{}\n", what);
  } else {
    write_file_atomic(o.out, csv);
    fmt::print("{}: {}\n", what, terminal_safe(o.out));
  }
  return kExitOk;
}

}  // namespace

Command add_predict(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* sub = app.add_subcommand(
      "predict",
      "A trained model's predictions for rows (Keras's model.predict): --init its weights, --data "
      "the rows; CSV out, a class and its probabilities (or the value) per row");
  sub->add_option("spec", o->spec, "The model: a built-in name, a TOML spec or an ONNX model")
      ->required();
  sub->add_option("--data", o->data.data,
                  "The rows to predict in place of the spec's [data] source: a CSV file (the "
                  "model's feature columns, with or without the label last) or a source "
                  "(fashion-mnist, idx:DIR, …: its training rows)");
  sub->add_option("--init", o->data.init,
                  "The trained weights: a safetensors file (`train --save`) or an ONNX model, in "
                  "place of the spec's model.init");
  sub->add_option("--out", o->out,
                  "Write the predictions to this CSV file (default: standard output)");
  sub->add_option("--device", o->device, "cpu, cpu:bf16 (the CPU at bf16), cuda, cuda:N or auto")
      ->capture_default_str();
  add_threads_option(sub, o->threads);
  return {sub, [o] { return run_predict(*o); }};
}

}  // namespace xo::cli
