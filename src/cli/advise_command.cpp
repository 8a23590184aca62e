// `crossover advise SPEC` and `crossover cost RESULTS.json|SPEC`: the spec measured on every device
// here, predicted on the catalog's devices, the cost of a run on each cloud instance and on owned
// hardware, and (advise) a short recommendation. Every figure is measured or a labelled prediction.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/terminal_hooks.h"
#include "core/format.h"
#include "job/measuring.h"
#include "report/terminal.h"

namespace xo::cli {
namespace {

int run_advise(AdviseJob o, bool verbose) {
  o.measure.command_line = recorded_command_line();
  TerminalHooks hooks;
  const std::optional<JobOutcome> outcome = advise_job(o, hooks);
  if (!outcome) return kExitInterrupted;  // stopped before any run finished
  const Report& report = outcome->report;
  // advise answers in one screen (the verdict, the advice, where the rest is); `cost`, and advise
  // with --verbose, print every table.
  const bool everything = !o.advise || verbose;
  if (report.verdict) fmt::print("{}", wrap(verdict_text(*report.verdict)));
  if (everything) {
    fmt::print("{}", predictions_text(report));
    fmt::print("{}", cost_text(*report.cost));
  }
  if (report.advice) {
    fmt::print("\nAdvice for {}:\n{}", terminal_safe(o.spec), wrap(advice_text(*report.advice)));
  }
  if (!outcome->out.empty()) {  // a spec measured here, its report written
    fmt::print("\nreport: {}{}{}\n", terminal_safe((outcome->out / "report.html").string()),
               outcome->stopped ? " (interrupted: partial)" : "",
               everything ? "" : " (every device's prediction, the costs and buying: --verbose)");
  }
  return outcome->exit_code();
}

Command add(CLI::App& app, const char* name, const char* help, bool advise) {
  auto o = std::make_shared<AdviseJob>();
  o->advise = advise;
  auto verbose = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("spec", o->spec,
                  advise ? "A built-in name or a TOML spec"
                         : "A results.json from run/sweep/advise, or a spec to measure now")
      ->required();
  if (!advise)
    sub->add_option("--model", o->model, "Which run of a results.json (default: the last)");
  if (advise) {
    sub->add_option("--trials", o->trials,
                    "Advise on a sweep of K trials of the model (a hyper-parameter search) "
                    "trained as one fused group: groups of 1, 4, 16, ... and K measured on every "
                    "device here, the catalog's devices predicted, the verdict for K trials and "
                    "for one")
        ->check(CLI::Range(2, 4096));
    sub->add_flag("--verbose,-v", *verbose,
                  "Print every device's prediction, the validation of the predictions, the cost "
                  "table and buying against renting, not only the verdict and the advice");
  }
  add_measure_options(sub, o->measure, true);
  add_cost_options(sub, o->cost);
  return {sub, [o, verbose] { return run_advise(*o, *verbose); }};
}

}  // namespace

Command add_advise(CLI::App& app) {
  return add(app, "advise",
             "Measure a spec here, predict it on the catalog's hardware, and recommend where to "
             "train it (--steps 100 by default)",
             true);
}

Command add_cost(CLI::App& app) {
  return add(app, "cost",
             "What a run costs on each cloud instance and on owned hardware, and when buying "
             "pays off",
             false);
}

}  // namespace xo::cli
