// `crossover models` and `crossover devices`: what can be trained, and where.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "model/model.h"
#include "report/results.h"
#include "report/table.h"

namespace xo::cli {

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !(v > 0)) {
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

Progress::Progress() : tty_(isatty(STDERR_FILENO) != 0) {}
Progress::~Progress() { clear(); }

void Progress::update(const std::string& text) {
  if (!tty_) return;
  const size_t pad = last_width_ > text.size() ? last_width_ - text.size() : 0;
  fmt::print(stderr, "\r{}{}", text, std::string(pad, ' '));
  std::fflush(stderr);
  last_width_ = text.size();
}

void Progress::bar(double fraction, const std::string& text) {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kWidth + 0.5);
  update(fmt::format("[{}{}] {:3.0f}% {}", std::string(static_cast<size_t>(filled), '#'),
                     std::string(static_cast<size_t>(kWidth - filled), '.'),
                     100 * std::clamp(fraction, 0.0, 1.0), text));
}

void Progress::clear() {
  if (!tty_ || last_width_ == 0) return;
  fmt::print(stderr, "\r{}\r", std::string(last_width_, ' '));
  std::fflush(stderr);
  last_width_ = 0;
}

namespace {

int run_models() {
  Table table({"name", "layers", "params", "optimizer", "batch", "epochs", "data"});
  for (const auto& name : builtin_spec_names()) {
    const ModelSpec s = *builtin_spec(name);
    table.add_row({name, std::to_string(weighted_layers(s)), std::to_string(parameter_count(s)),
                   fmt::format("{} lr {}", s.train.optimizer.type, s.train.optimizer.lr),
                   std::to_string(s.train.batch), std::to_string(s.train.epochs), s.data.source});
  }
  fmt::print("{}", table.render());
  fmt::print("Spec files for these are in specs/; `crossover train FILE.toml` trains your own.\n");
  return 0;
}

int run_devices() {
  const DeviceList list = list_devices();
  for (const auto& id : list.available) {
    auto backend = make_backend(parse_device(id, 0));
    const DeviceInfo& d = backend->info();
    fmt::print("{}: {}\n  threads: {}\n  library: {}\n", d.id, d.name, d.threads, d.library);
    for (const auto& [k, v] : d.details) fmt::print("  {}: {}\n", k, v);
  }
  for (const auto& why : list.unavailable_reasons) fmt::print("not available: {}\n", why);
  return 0;
}

}  // namespace

Command add_models(CLI::App& app) {
  return {app.add_subcommand("models", "List the built-in model specs"),
          [] { return run_models(); }};
}

Command add_devices(CLI::App& app) {
  return {app.add_subcommand("devices", "List the devices this build can train on here"),
          [] { return run_devices(); }};
}

}  // namespace xo::cli
