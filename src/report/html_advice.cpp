// report.html's advisor sections: the recommendation, the predicted step times (always labelled as
// predictions, beside their assumptions), and the cost of a run rented, owned, and when owning
// pays.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/format.h"
#include "report/html_sections.h"

namespace xo::html {
namespace {

std::string predicted_cell(bool predicted) {
  return predicted ? "<span class=\"badge\">predicted</span>"
                   : "<span class=\"badge measured\">measured</span>";
}

std::string hours_cell(double hours) {
  return cell(std::isfinite(hours) ? duration(hours * 3600) : std::string(kMissing));
}

// The ownership assumptions in words, in the order results.json lists them (by key).
std::string cost_assumptions_html(const CostTable& cost) {
  const OwnershipAssumptions& a = cost.assumptions;
  // A value as "before value after", or a dimmed n/a.
  auto figure = [](double v, const char* before, const char* after) {
    return std::isfinite(v) ? escape(before + significant(v, 3, true) + after) : na();
  };
  const std::pair<const char*, std::string> items[] = {
      {"catalog", text_list(cost.catalog)},
      {"electricity", figure(a.electricity_usd_per_kwh, "$", " per kWh")},
      {"host power", figure(a.host_power_w, "", " W")},
      {"use", figure(cost.hours_per_month, "", " hours a month")},
      {"lifetime", figure(a.lifetime_years, "", " years")},
      {"in use", std::isfinite(a.utilisation)
                     ? escape(fraction_percent(a.utilisation)) + " of its lifetime"
                     : na()}};
  std::string out = "<ul class=\"kv\">\n";
  for (const auto& [label, shown] : items)
    out += "<li><span class=\"k\">" + escape(label) + "</span> " + shown + "</li>\n";
  return out + "</ul>\n";
}

// Price sources are long (a page, a quote, a caveat): the tables cite them by number, and a
// numbered list under the tables holds them.
class SourceNotes {
 public:
  // A "price as of" cell: the date, and the number of its source where it has one.
  std::string cite(const std::string& source, const std::string& date) {
    if (source.empty()) return text_cell(date);
    auto it = std::find(sources_.begin(), sources_.end(), source);
    if (it == sources_.end()) it = sources_.insert(sources_.end(), source);
    const std::string note =
        fmt::format("<a href=\"#source-{0}\">[{0}]</a>", it - sources_.begin() + 1);
    return date.empty() ? note : escape(date) + " " + note;
  }

  // The sources cited so far, in the order of their numbers; "" when there are none.
  std::string html() const {
    if (sources_.empty()) return "";
    std::string out = "<p class=\"note\">Price sources:</p>\n<ol class=\"sources\">\n";
    for (size_t i = 0; i < sources_.size(); ++i) {
      out += fmt::format("<li id=\"source-{}\">{}</li>\n", i + 1, escape(sources_[i]));
    }
    return out + "</ol>\n";
  }

 private:
  std::vector<std::string> sources_;
};

// The cloud instances the run could be rented on: its time on each and what it costs there.
std::string renting_html(const CostTable& cost, const DeviceColours& colours,
                         SourceNotes& sources) {
  std::vector<std::vector<std::string>> rows;
  for (const CostTable::Instance& i : cost.instances) {
    rows.push_back({text_cell(i.provider), text_cell(i.name.empty() ? i.id : i.name),
                    device_cell(colours, i.device), hours_cell(i.run_hours),
                    cell(usd(i.on_demand_usd)), cell(usd(i.spot_usd)), predicted_cell(i.predicted),
                    sources.cite(i.source, i.date)});
  }
  if (rows.empty()) return "";
  return "<h3>Renting</h3>\n" + html_table({{"provider"},
                                            {"instance"},
                                            {"device"},
                                            {"run time", true},
                                            {"on demand", true},
                                            {"spot", true},
                                            {"basis"},
                                            {"price as of"}},
                                           rows, "instances");
}

// Multi-device instances with their link: the run data-parallel on all their devices, predicted.
std::string scale_out_html(const CostTable& cost, const DeviceColours& colours) {
  std::vector<std::vector<std::string>> rows;
  for (const CostTable::Instance& i : cost.instances) {
    if (!i.scale_out) continue;
    const CostTable::Instance::ScaleOut& x = *i.scale_out;
    rows.push_back({text_cell(i.provider + " " + (i.name.empty() ? i.id : i.name)),
                    device_cell(colours, i.device), cell(fmt::format("{}", x.devices)),
                    text_cell(fmt::format("{}, {:.0f} GB/s", x.link, x.link_gbs)),
                    cell(duration(x.step_s)), cell(duration(x.allreduce_s)),
                    cell(duration(x.exposed_s)), cell(fmt::format("{:.0f}%", 100 * x.efficiency)),
                    hours_cell(x.run_hours), cell(usd(x.on_demand_usd)), hours_cell(i.run_hours)});
  }
  if (rows.empty()) return "";
  return "<h3>On all of an instance's devices</h3>\n<p class=\"note\">Predicted: each device's "
         "slice of the batch, plus the ring all-reduce of the gradients over the link once "
         "backward has finished, as crossover runs it itself: <code>mpirun -np N crossover train "
         "--device "
         "cuda --reduce nccl</code>, not yet measured on more than one GPU).</p>\n" +
         html_table({{"instance"},
                     {"device"},
                     {"devices", true},
                     {"link"},
                     {"step", true},
                     {"all-reduce", true},
                     {"not hidden", true},
                     {"scaling efficiency", true},
                     {"run time", true},
                     {"on demand", true},
                     {"on one device", true}},
                    rows, "scale-out");
}

// Instances with their network in the catalog: the run data-parallel across 2 and 4 of them.
std::string across_instances_html(const CostTable& cost, const DeviceColours& colours) {
  std::vector<std::vector<std::string>> rows;
  for (const CostTable::Instance& i : cost.instances) {
    for (const CostTable::Instance::ScaleOut& x : i.across) {
      rows.push_back({text_cell(fmt::format("{}x {} {}", x.instances, i.provider,
                                            i.name.empty() ? i.id : i.name)),
                      device_cell(colours, i.device), cell(fmt::format("{}", x.devices)),
                      text_cell(fmt::format("{}, {:.0f} Gbit/s", x.network, x.network_gbit)),
                      cell(duration(x.step_s)), cell(duration(x.allreduce_s)),
                      cell(fmt::format("{:.0f}%", 100 * x.efficiency)), hours_cell(x.run_hours),
                      cell(usd(x.on_demand_usd)), hours_cell(i.run_hours)});
    }
  }
  if (rows.empty()) return "";
  return "<h3>Across several instances</h3>\n<p class=\"note\">Predicted as on one instance, "
         "the ring all-reduce crossing between the instances over their network at its rated "
         "speed (a lower bound on the all-reduce; the same ring model is checked across simulated "
         "hosts at 1 and 10 Gbit/s); not measured on a cloud.</p>\n" +
         html_table({{"instances"},
                     {"device"},
                     {"devices", true},
                     {"network"},
                     {"step", true},
                     {"all-reduce", true},
                     {"scaling efficiency", true},
                     {"run time", true},
                     {"on demand", true},
                     {"on one device", true}},
                    rows, "across-instances");
}

// The devices the run could be trained on when bought: the price, the run's share of it, and the
// hourly cost of capital and power.
std::string owning_html(const CostTable& cost, const DeviceColours& colours, SourceNotes& sources) {
  std::vector<std::vector<std::string>> rows;
  for (const CostTable::Owned& o : cost.ownership) {
    rows.push_back({device_cell(colours, o.device), text_cell(o.name), cell(usd(o.price_usd)),
                    cell(usd(o.run_usd)), cell(usd(o.hourly_capital_usd)),
                    cell(usd(o.hourly_power_usd)), predicted_cell(o.predicted),
                    sources.cite(o.source, o.date)});
  }
  if (rows.empty()) return "";
  return "<h3>Owning</h3>\n" + html_table({{"device"},
                                           {"name"},
                                           {"price", true},
                                           {"per run", true},
                                           {"capital per hour", true},
                                           {"power per hour", true},
                                           {"basis"},
                                           {"price as of"}},
                                          rows, "ownership");
}

// When owning a device beats renting an instance: the monthly hours above which it does, and
// how soon the purchase pays for itself.
std::string break_even_html(const CostTable& cost, const DeviceColours& colours) {
  std::vector<std::vector<std::string>> rows;
  for (const CostTable::BuyOrRent& b : cost.break_even) {
    rows.push_back({device_cell(colours, b.device), text_cell(b.instance),
                    text_cell(pairing_text(b)), cell(plain(b.hours_per_month)),
                    cell(plain(b.payback_months)), cell(plain(b.at_hours_per_month))});
  }
  if (rows.empty()) return "";
  return "<h3>Own or rent</h3>\n" +
         html_table({{"device"},
                     {"rented instance"},
                     {"compared because"},
                     {"break-even hours/month", true},
                     {"payback months", true},
                     {"at hours/month", true}},
                    rows, "break-even") +
         "<p class=\"note\">Break-even: the monthly hours of use above which owning costs less "
         "than renting; payback: months until the purchase pays for itself at the given hours a "
         "month. n/a: never.</p>\n";
}

// A prediction's row: the predicted step beside the measured one where the device was measured
// too, the prediction's error against it, the bound, and the prediction's assumptions; the model
// only where the rows are of several.
std::vector<std::string> prediction_row(const DevicePrediction& p, const DeviceColours& colours,
                                        bool one_model) {
  std::optional<double> measured_ms, error;
  if (p.measured_s && std::isfinite(*p.measured_s)) {
    measured_ms = *p.measured_s * 1e3;
    error = finite(100 * (p.step.seconds - *p.measured_s) / *p.measured_s);
  }
  std::string assumptions;
  for (const std::string& a : p.assumptions) assumptions += "<li>" + escape(a) + "</li>";
  std::vector<std::string> row = {device_cell(colours, p.device), text_cell(p.name)};
  if (!one_model) row.push_back(text_cell(p.model));
  row.insert(
      row.end(),
      {cell(duration_ms(finite(p.step.seconds * 1e3))) + " <span class=\"badge\">predicted</span>",
       measured_ms
           ? cell(duration_ms(measured_ms)) + " <span class=\"badge measured\">measured</span>"
           : na(),
       cell(error ? fmt::format("{:+.1f}%", *error) : std::string(kMissing)),
       cell(p.expected_error
                ? fmt::format("{}±{:.0f}%{}", p.expected_at_least ? "not validated, at least " : "",
                              100 * *p.expected_error,
                              p.expected_worst
                                  ? fmt::format(" (worst {:.0f}%)", 100 * *p.expected_worst)
                                  : "")
                : std::string(kMissing)),
       text_cell(p.profile.empty() ? std::string("roofline") : p.profile), text_cell(p.step.bound),
       assumptions.empty() ? na() : "<ul class=\"assumptions\">" + assumptions + "</ul>"});
  return row;
}

// The validation table: each profiled device's predictions against its measurements, model by
// model in a row's details.
std::string validation_html(const std::vector<ValidationRow>& rows) {
  if (rows.empty()) return "";
  std::vector<std::vector<std::string>> table;
  for (const ValidationRow& r : rows) {
    std::string detail;
    for (const ValidationRow::Entry& e : r.entries) {
      detail += fmt::format("<li>{}: {} predicted, {} measured ({:+.1f}%)</li>", escape(e.model),
                            escape(duration_ms(e.predicted_ms)), escape(duration_ms(e.measured_ms)),
                            100 * e.error());
    }
    table.push_back({text_cell(r.device), text_cell(r.how),
                     r.entries.empty() ? na() : cell(std::to_string(r.entries.size())),
                     r.entries.empty() ? text_cell("unmeasured")
                                       : cell(fmt::format("{:.1f}%", 100 * r.median_abs)),
                     r.entries.empty() ? na() : cell(fmt::format("{:.1f}%", 100 * r.worst_abs)),
                     r.entries.empty()
                         ? text_cell(r.unmeasured)
                         : "<details><summary>models</summary><ul>" + detail + "</ul></details>"});
  }
  return "<p class=\"note\">How far predictions are from measurements: the built-in models on "
         "every device crossover has profiled (data/profiles/), each predicted from its own "
         "profile and from every other device's. <code>crossover validate</code> measures this "
         "machine and prints the same table.</p>\n" +
         html_table({{"device"},
                     {"predicted from"},
                     {"models", true},
                     {"median |error|", true},
                     {"worst |error|", true},
                     {"by model"}},
                    table, "validation");
}

}  // namespace

std::string verdict_html(const Report& report) {
  if (!report.verdict) return "";
  const GpuVerdict& v = *report.verdict;
  std::string out = fmt::format("<p class=\"verdict {}\"><strong>{}</strong></p>\n",
                                v.worth_it ? "yes" : "no", escape(v.sentence));
  if (!v.single_trial.empty()) {
    out += "<p><strong>For one trial alone:</strong> " + escape(v.single_trial) + "</p>\n";
  }
  if (!v.crossover.empty()) out += "<p>" + escape(v.crossover) + "</p>\n";
  if (!v.caution.empty()) {
    out += "<p class=\"note\"><strong>The time here is not to be trusted:</strong> " +
           escape(v.caution) + "</p>\n";
  }
  if (v.trials > 0) {
    out += fmt::format(
        "<p class=\"note\">The run judged is {} trials of the model (a hyper-parameter sweep) "
        "trained as one fused group on each device: each Linear of the trials one kernel, each "
        "trial its own loss and optimizer.</p>\n",
        v.trials);
  }
  out += fmt::format(
      "<p class=\"note\">For {} epochs of {}, the time here is {} ({}). GPU times marked "
      "&ldquo;a lower bound&rdquo; are roofline predictions with no GPU measured here to calibrate "
      "them: the GPU takes at least that long. A GPU counts as worth it from {:.1f}x faster and {} "
      "saved a run.</p>\n",
      v.epochs, escape(v.model), escape(duration(v.here_seconds)),
      v.here_estimated ? "the median step times the steps: no epoch completed"
                       : "measured whole epochs, every step included",
      GpuVerdictThresholds{}.min_speedup,
      escape(duration(GpuVerdictThresholds{}.min_saving_seconds)));
  return out;
}

std::string advice_html(const Report& report) {
  if (!report.advice) return "";
  std::string items;
  for (const std::string& line : *report.advice) {
    if (!line.empty()) items += "<li>" + escape(line) + "</li>\n";
  }
  return items.empty() ? std::string() : "<ul class=\"advice\">\n" + items + "</ul>\n";
}

std::string predictions_html(const Report& report, const DeviceColours& colours) {
  const std::vector<DevicePrediction>& predictions = report.predictions;
  if (predictions.empty()) return "";
  // One model for all (as `crossover advise` writes them): named once, not in every row.
  const std::string& first_model = predictions[0].model;
  bool one_model = !first_model.empty();
  for (const DevicePrediction& p : predictions) one_model &= p.model == first_model;
  std::vector<std::vector<std::string>> rows;
  for (const DevicePrediction& p : predictions)
    rows.push_back(prediction_row(p, colours, one_model));
  std::vector<Column> columns = {{"device"}, {"name"}};
  if (!one_model) columns.push_back({"model"});
  columns.insert(columns.end(), {{"predicted step", true},
                                 {"measured step", true},
                                 {"error", true},
                                 {"expected error", true},
                                 {"from"},
                                 {"bound"},
                                 {"assumptions"}});
  const std::string of_model =
      one_model ? " of <strong>" + escape(first_model) + "</strong>" : std::string();
  const bool profiled = std::any_of(predictions.begin(), predictions.end(),
                                    [](const DevicePrediction& p) { return !p.profile.empty(); });
  const std::string how =
      profiled ? " are <strong>predicted</strong> from device profiles (each kernel of the step "
                 "timed on a measured device, scaled to this one by the rate that bounds it, plus "
                 "the fixed costs the engine pays), not measured. <em>expected error</em> is the "
                 "median error of that kind of prediction in the validation table below; where "
                 "the device was also measured here, <em>error</em> is this prediction's own.</p>\n"
               : " are <strong>predicted</strong> by the roofline model (FLOPs and bytes per "
                 "layer at the device's rates, plus fixed costs), not measured; where the device "
                 "was also measured here, the error is the prediction's against the "
                 "measurement.</p>\n";
  return "<p class=\"note\">These step times" + of_model + how +
         html_table(columns, rows, "predictions") + validation_html(report.validation);
}

std::string cost_html(const Report& report, const DeviceColours& colours) {
  if (!report.cost) return "";
  const CostTable& cost = *report.cost;
  std::string out;
  if (!cost.model.empty() || cost.epochs > 0) {
    out += "<p>The cost of training <strong>" + text_cell(cost.model) + "</strong> for " +
           cell(exact_count(static_cast<double>(cost.epochs))) + " epochs.</p>\n";
  }
  out += cost_assumptions_html(cost);
  SourceNotes sources;  // numbered in the order the tables cite them
  out += renting_html(cost, colours, sources);
  out += scale_out_html(cost, colours);
  out += across_instances_html(cost, colours);
  out += owning_html(cost, colours, sources);
  out += sources.html();
  return out + break_even_html(cost, colours);
}

}  // namespace xo::html
