// `crossover predict SPEC --init WEIGHTS --data FILE`: a trained model's predictions for rows
// (Keras's model.predict), as CSV in the rows' order: a classifier's predicted class and each
// class's probability (the softmax of its outputs; the sigmoid of a binary one's), a regression's
// value. The rows are a CSV's, labelled or not, or a source's training rows; forward only, in
// batches, no dropout.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/terminal_hooks.h"
#include "cli/options.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "core/interrupt.h"
#include "data/rows.h"
#include "model/model.h"
#include "train/plan.h"

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
std::string header(const Model& model) {
  if (model.regression()) return "prediction\n";
  if (model.loss_kind() == LossKind::BinaryCrossEntropy) return "class,p1\n";
  std::string h = "class";
  for (int64_t c = 0; c < model.outputs(); ++c) h += fmt::format(",p{}", c);
  return h + "\n";
}

// One row's line from its outputs: a class and probabilities that round-trip as float32 (9
// significant digits), or the regression's value.
void append_row(std::string& csv, const Model& model, const float* outputs) {
  const int64_t n = model.outputs();
  if (model.regression()) {
    csv += fmt::format("{:.9g}\n", outputs[0]);
    return;
  }
  if (model.loss_kind() == LossKind::BinaryCrossEntropy) {
    const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(outputs[0])));
    csv += fmt::format("{},{:.9g}\n", p >= 0.5 ? 1 : 0, p);
    return;
  }
  const float* top = std::max_element(outputs, outputs + n);
  double sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += std::exp(static_cast<double>(outputs[c] - *top));
  csv += fmt::format("{}", top - outputs);
  for (int64_t c = 0; c < n; ++c) {
    csv += fmt::format(",{:.9g}", std::exp(static_cast<double>(outputs[c] - *top)) / sum);
  }
  csv += '\n';
}

// The model's outputs for every row, in batches of evaluation_batch's size: the CSV's text, or
// none when a stop request (Ctrl-C) came between batches.
std::optional<std::string> predict_rows(const Model& model, const Dataset& rows) {
  Backend& be = model.backend();
  const int64_t batch = evaluation_batch(model, rows.samples);
  Network full(model, NetworkOptions{.batch = batch, .training = false, .shards = 1});
  std::optional<Network> tail;  // the last, partial batch's
  if (const int64_t rest = rows.samples % batch) {
    tail.emplace(model, NetworkOptions{.batch = rest, .training = false, .shards = 1});
  }
  const DeviceBuffer x = to_device(be, rows.x);
  std::vector<float> out(static_cast<size_t>(batch * model.outputs()));
  std::string csv = header(model);
  for (int64_t start = 0; start < rows.samples; start += batch) {
    if (stop_requested()) return std::nullopt;
    Network& net = start + batch <= rows.samples ? full : *tail;
    const float* y = net.forward(x.as<float>() + start * rows.features);
    be.synchronize();
    be.download(out.data(), y, sizeof(float) * net.batch() * model.outputs());
    for (int64_t r = 0; r < net.batch(); ++r) append_row(csv, model, &out[r * model.outputs()]);
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
  const std::optional<std::string> csv = predict_rows(model, rows);
  if (!csv) {
    fmt::print(stderr, "crossover: predict stopped (Ctrl-C): nothing written\n");
    return kExitInterrupted;
  }
  // The predictions alone on standard output (for a pipe); what they are on standard error.
  const std::string what =
      fmt::format("{}: {} rows predicted with weights {} on {} ({})", terminal_safe(spec.name),
                  group_digits(rows.samples), terminal_safe(spec.init), backend->info().id,
                  terminal_safe(rows.description));
  if (o.out.empty()) {
    fmt::print("{}", *csv);
    fmt::print(stderr, "{}\n", what);
  } else {
    write_file_atomic(o.out, *csv);
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
  sub->add_option("--device", o->device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  add_threads_option(sub, o->threads);
  return {sub, [o] { return run_predict(*o); }};
}

}  // namespace xo::cli
