#include "report/tune_text.h"

#include <fmt/format.h>

#include <cmath>

#include "core/format.h"
#include "report/table.h"

namespace xo {
namespace {

std::string ordinal(int n) {
  const int tens = n % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : n % 10 == 1              ? "st"
                       : n % 10 == 2              ? "nd"
                       : n % 10 == 3              ? "rd"
                                                  : "th";
  return fmt::format("{}{}", n, suffix);
}

std::string epochs_text(int64_t n) { return fmt::format("{} epoch{}", n, n == 1 ? "" : "s"); }

std::string figure(double v) { return std::isfinite(v) ? significant(v, 4) : "-"; }

std::string best_of(int top, const char* verb) {
  return top == 1 ? fmt::format("the best one {}", verb[0] == 'g' ? "goes on" : "went on")
                  : fmt::format("the best {} {}", top, verb);
}

}  // namespace

std::string decision_text(const HalvingDecision& d) {
  if (d.promoted) {
    return fmt::format("{} promoted to {}: {} of {} at {} ({})", d.trial, epochs_text(d.to_epochs),
                       ordinal(d.place), d.of, epochs_text(d.at_epochs), best_of(d.top, "go on"));
  }
  return fmt::format("{} stopped at {}: {} of {} ({})", d.trial, epochs_text(d.at_epochs),
                     ordinal(d.place), d.of, best_of(d.top, "went on"));
}

std::string parallel_text(const ParallelChoice& c) {
  if (c.fused > 0) {
    std::string out = fmt::format("fused groups of up to {} trials on {}, {} group{} at a time",
                                  c.fused, c.device, c.k, c.k == 1 ? "" : "s");
    if (!c.measured) return out;
    std::vector<std::string> groups;
    for (const ParallelOption& o : c.options)
      groups.push_back(fmt::format("{} fused {:.0f} samples/s", o.k, o.samples_per_second));
    return fmt::format("{} (measured: {})", out, fmt::join(groups, "; "));
  }
  std::string out = fmt::format("{} at once on {}", c.k, c.device);
  if (c.short_search) return out + " (not measured: a search shorter than measuring it would take)";
  if (!c.measured) return out + " (as asked)";
  std::vector<std::string> options;
  for (const ParallelOption& o : c.options) {
    options.push_back(
        fmt::format("{} x {} {:.0f} samples/s", o.k,
                    o.threads > 0 ? fmt::format("{} thread{}", o.threads, o.threads == 1 ? "" : "s")
                                  : std::string("process"),
                    o.samples_per_second));
  }
  return fmt::format("{} (measured fastest: {})", out, fmt::join(options, "; "));
}

namespace {

// The trials, best first: each one's values, objective, epochs, status, device and time (and
// price where the search was priced).
std::string trials_table_text(const TuneRecord& r) {
  std::vector<std::string> headers = {"#", "trial"};
  if (!r.trials.empty()) {
    for (const auto& [k, v] : r.trials.front().values) headers.push_back(k);
  }
  const bool priced = !r.dollars_instance.empty();
  for (const char* h : {"epochs", "status", "device", "time"}) headers.emplace_back(h);
  headers.insert(headers.begin() + static_cast<std::ptrdiff_t>(headers.size() - 4), r.objective);
  if (priced) headers.push_back(fmt::format("$ on {}", r.dollars_instance));
  Table table(headers);
  int place = 0;
  for (size_t i : trials_by_objective(r)) {
    const TrialRecord& t = r.trials[i];
    std::vector<std::string> row = {std::to_string(++place), t.id};
    for (const auto& [k, v] : t.values) row.push_back(terminal_safe(v));
    // ~: not bit-identical to an uninterrupted run (its cause under the table).
    row.push_back(figure(t.objective) + (t.resumed_differently.empty() ? "" : " ~"));
    row.push_back(std::to_string(t.epochs));
    row.push_back(trial_status_name(t.status));
    const std::string group = t.group.empty() ? ""
                                              : fmt::format(", group {}: {} trials fused",
                                                            terminal_safe(t.group), t.fused);
    row.push_back(t.device.empty() ? "-"
                  : t.threads > 0  ? fmt::format("{} ({}t{})", t.device, t.threads, group)
                                   : t.device);
    row.push_back(t.process_seconds > 0 ? duration(t.process_seconds) : "-");
    if (priced) row.push_back(std::isfinite(t.dollars) ? usd(t.dollars) : "-");
    table.add_row(std::move(row));
  }
  return table.render();
}

// The same search priced on the cheapest instances, each at 1, 2, … of them.
std::string search_cost_text(const TuneRecord& r) {
  const size_t shown = std::min<size_t>(r.cost.size(), 6);
  std::vector<std::string> h = {"the same search on", "$/h"};
  for (const SearchCostLine::Plan& p : r.cost.front().plans) {
    h.push_back(fmt::format("{} instance{}", p.instances, p.instances == 1 ? "" : "s"));
  }
  Table cost(h);
  for (size_t i = 0; i < shown; ++i) {
    const SearchCostLine& l = r.cost[i];
    std::vector<std::string> row = {terminal_safe(l.instance), usd(l.price_per_hour)};
    for (const SearchCostLine::Plan& p : l.plans) {
      row.push_back(fmt::format("{}{} {}", l.lower_bound ? ">= " : "", duration(p.wall_seconds),
                                usd(p.dollars)));
    }
    cost.add_row(std::move(row));
  }
  return cost.render() +
         fmt::format("({} cheapest of {} instances, predicted; results.json has all)\n", shown,
                     r.cost.size());
}

}  // namespace

std::string tune_table_text(const TuneRecord& r) {
  std::string out =
      fmt::format("{}: {} trials by {} ({} is better){}\n", terminal_safe(r.model), r.trials.size(),
                  r.objective, r.higher_is_better ? "higher" : "lower",
                  r.best.empty() ? "" : fmt::format("; best {}", r.best));
  out += trials_table_text(r);
  for (const TrialRecord& t : r.trials) {
    if (!t.error.empty()) out += fmt::format("{}: {}\n", t.id, terminal_safe(t.error));
    if (!t.resumed_differently.empty()) {
      out += fmt::format("{} ~ not bit-identical to an uninterrupted run: {}\n", t.id,
                         terminal_safe(t.resumed_differently));
    }
  }
  if (!r.decisions.empty()) {
    out += "\nhalving:\n";
    for (const HalvingDecision& d : r.decisions) out += fmt::format("  {}\n", decision_text(d));
  }
  if (!r.parallel.empty()) {
    out += "\ntrials at once:\n";
    for (const ParallelChoice& c : r.parallel)
      out += fmt::format("  {}\n", terminal_safe(parallel_text(c)));
    out +=
        "  (trials that ran beside others were timed on a shared device: `crossover sweep` "
        "compares speeds)\n";
  }
  out += fmt::format("\nsearch: {} wall, {} of trial processes\n", duration(r.wall_seconds),
                     duration(r.device_seconds));
  if (!r.cost.empty()) {
    out += '\n' + search_cost_text(r);
  } else if (!r.cost_note.empty()) {
    out += fmt::format("{}\n", terminal_safe(r.cost_note));
  }
  return out;
}

}  // namespace xo
