// `crossover validate`: predictions against measurements. A device here (the CPU by default) is
// profiled (or its cached profile read), the built-in models are measured on it, and every device
// with measured steps (this one and the profiles crossover ships, data/profiles/) is predicted
// from its own profile and from every other: the leave-one-out table, with the median and worst
// absolute error. `--write-profile` writes this device's profile and measurements as a
// data/profiles file.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <utility>

#include "advisor/validation.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/file.h"
#include "measure/profile.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "report/terminal.h"

namespace xo::cli {

namespace {

struct ValidateOptions {
  ValidationSettings settings;
  std::string write_profile, markdown, json;
  bool shipped_only = false;  // measure nothing: the table of the shipped profiles
};

// The validation table of `profiles` written as the options ask, printed with `header`.
void report_validation(const std::vector<ValidationRow>& rows, const ValidateOptions& o,
                       const std::string& header) {
  fmt::print("{}{}\n{}", header, validation_text(rows), calibration_text(calibrate(rows)));
  if (!o.markdown.empty()) {
    write_file_atomic(o.markdown,
                      validation_markdown(rows) + "\n" + calibration_text(calibrate(rows), true));
  }
  if (!o.json.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const ValidationRow& r : rows) j.push_back(validation_json(r));
    write_file_atomic(o.json, j.dump(1) + "\n");
  }
}

int run_validate(const ValidateOptions& o) {
  for (const std::string* path : {&o.write_profile, &o.markdown, &o.json}) {
    if (!path->empty()) check_writable_path(*path, "output file");
  }
  if (o.shipped_only) {
    if (!o.write_profile.empty() || !o.settings.models.empty() || o.settings.reprofile) {
      throw UserError(
          "--shipped-only measures nothing: it takes no --write-profile, --models or --reprofile");
    }
    report_validation(validate_profiles(shipped_profiles()), o,
                      "The shipped profiles (data/profiles/), nothing measured here.\n");
    return kExitOk;
  }
  auto be = make_backend(parse_device(o.settings.device, o.settings.threads));
  Progress progress;
  ValidationHooks hooks;
  hooks.machine = machine_line(describe_machine());
  hooks.read_train = [](const std::filesystem::path& json) {
    const TrainResult result = read_train_result(read_file(json), json.string());
    return std::pair{result.step_ms.median, result.batch};
  };
  hooks.progress = [&](double fraction, const std::string& text) { progress.bar(fraction, text); };
  const std::optional<Validation> v = validate_here(*be, o.settings, hooks);
  progress.clear();
  if (!v) return kExitInterrupted;
  report_validation(v->rows, o, fmt::format("{} is this machine, measured now.\n", v->here.id));
  if (!o.write_profile.empty()) write_file_atomic(o.write_profile, to_json(v->here).dump(1) + "\n");
  return kExitOk;
}

}  // namespace

Command add_validate(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* sub = app.add_subcommand(
      "validate",
      "Predicted step times against measured ones: a device here profiled and the built-in "
      "models measured on it, and every shipped device profile, each predicted from its own "
      "profile and from the others");
  sub->add_option("--device", o->settings.device,
                  "The device to profile and measure (cpu, cuda:N)");
  add_threads_option(sub, o->settings.threads);
  sub->add_option("--steps", o->settings.steps, "Training steps measured per model")
      ->check(CLI::Range(int64_t{5}, int64_t{1'000'000}));
  sub->add_option("--repeat", o->settings.repeat,
                  "Runs per model (the fastest of their median steps)")
      ->check(CLI::Range(1, 100));
  sub->add_option("--models", o->settings.models, "Built-in models to measure (default: all)")
      ->delimiter(',');
  sub->add_flag("--reprofile", o->settings.reprofile,
                "Measure the profile again rather than read the cache");
  sub->add_option("--write-profile", o->write_profile,
                  "Write this machine's profile and measurements (a data/profiles/ file)");
  sub->add_option("--markdown", o->markdown, "Write the table, model by model, as Markdown");
  sub->add_option("--json", o->json, "Write the table as JSON");
  sub->add_flag("--shipped-only", o->shipped_only,
                "Measure nothing: the table of the profiles crossover ships (data/profiles/)");
  return {sub, [o] { return run_validate(*o); }};
}

}  // namespace xo::cli
