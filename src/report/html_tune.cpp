// report.html of `crossover tune`: the best trial first, the trials against their cost with the
// Pareto front, each trial's learning curve, the trials table, halving's decisions, the measured
// choice of trials at once and the search priced elsewhere, in the report page's style.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/format.h"
#include "report/html_parts.h"
#include "report/svg.h"
#include "report/tune_json.h"
#include "report/tune_text.h"

namespace xo {
namespace {

using html::escape;

constexpr double kWidth = 900, kLeft = 78, kRight = 28, kTop = 14, kPlotHeight = 320, kBottom = 54;
constexpr double kPlotRight = kWidth - kRight;
constexpr const char* kTrialColour = "#4C78A8";
constexpr const char* kFrontColour = "#E45756";
constexpr const char* kFaintColour = "#9aa3b2";

bool is_accuracy(const std::string& metric) { return metric.find("accuracy") != std::string::npos; }

std::string metric_label(const std::string& metric) {
  return is_accuracy(metric) ? metric + " (%)" : metric;
}

// The curve's figure that the objective names.
double curve_value(const CurvePoint& c, const std::string& metric) {
  if (metric == "val_accuracy") return c.val_accuracy_percent;
  if (metric == "val_loss") return c.val_loss;
  if (metric == "test_accuracy") return c.test_accuracy_percent;
  if (metric == "test_loss") return c.test_loss;
  return c.loss;
}

std::string values_text(const TrialRecord& t) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : t.values) parts.push_back(fmt::format("{}={}", k, v));
  return fmt::format("{}", fmt::join(parts, " "));
}

struct Plot {
  html::Scale sx, sy;
};

std::string frame_svg(const Plot& p, const html::TickFormat& x_format,
                      const html::TickFormat& y_format, const std::string& x_title,
                      const std::string& y_title) {
  std::string out = "<g class=\"grid\">\n";
  for (const html::Tick& t : html::linear_ticks(p.sx, 8, x_format)) {
    out +=
        html::vertical_line(p.sx(t.value), kTop, kTop + kPlotHeight, t.major ? "major" : "minor");
    if (!t.label.empty())
      out += html::text_at(p.sx(t.value), kTop + kPlotHeight + 17, "middle", t.label);
  }
  for (const html::Tick& t : html::linear_ticks(p.sy, 6, y_format)) {
    out += html::horizontal_line(p.sy(t.value), kLeft, kPlotRight, t.major ? "major" : "minor");
    if (!t.label.empty()) out += html::text_at(kLeft - 7, p.sy(t.value) + 4, "end", t.label);
  }
  out += html::plot_frame(kLeft, kTop, kPlotRight - kLeft, kPlotHeight) + "</g>\n";
  out += html::axis_title((kLeft + kPlotRight) / 2, kTop + kPlotHeight + kBottom - 8, x_title);
  out += fmt::format(
      "<text class=\"axis-label\" transform=\"translate(16 {}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      html::px(kTop + kPlotHeight / 2), escape(y_title));
  return out;
}

// The trials whose objective no cheaper trial beats, cheapest first.
std::vector<size_t> pareto_front(const TuneRecord& r, const std::vector<size_t>& drawn) {
  std::vector<size_t> by_cost = drawn;
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) {
    return r.trials[a].process_seconds < r.trials[b].process_seconds;
  });
  std::vector<size_t> front;
  for (size_t i : by_cost) {
    const double v = r.trials[i].objective;
    if (front.empty() || (r.higher_is_better ? v > r.trials[front.back()].objective
                                             : v < r.trials[front.back()].objective)) {
      front.push_back(i);
    }
  }
  return front;
}

std::string trials_chart(const TuneRecord& r) {
  std::vector<size_t> drawn;
  for (size_t i = 0; i < r.trials.size(); ++i) {
    if (std::isfinite(r.trials[i].objective) && r.trials[i].process_seconds > 0) drawn.push_back(i);
  }
  if (drawn.empty()) return "";
  double x0 = 0, x1 = 0, y0 = INFINITY, y1 = -INFINITY;
  for (size_t i : drawn) {
    x1 = std::max(x1, r.trials[i].process_seconds);
    y0 = std::min(y0, r.trials[i].objective);
    y1 = std::max(y1, r.trials[i].objective);
  }
  if (y1 <= y0) y1 = y0 + std::max(1e-9, std::fabs(y0) * 0.01 + 1e-9);
  const double height = kTop + kPlotHeight + kBottom;
  Plot p{html::make_scale(x0, x1, false, kLeft, kPlotRight, true),
         html::make_scale(y0, y1, false, kTop + kPlotHeight, kTop)};
  std::string out = html::svg_open(
      "trials", kWidth, height,
      fmt::format("{} of each trial against its process time, the Pareto front in red",
                  r.objective),
      "id=\"trials-chart\"");
  out += frame_svg(
      p, [](double v) { return duration(v, true); },
      [](double v) { return significant(v, 3, true); },
      "trial process time (start-up, training, evaluation)", metric_label(r.objective));
  const std::vector<size_t> front = pareto_front(r, drawn);
  std::string path;
  for (size_t n = 0; n < front.size(); ++n) {
    const TrialRecord& t = r.trials[front[n]];
    const double x = p.sx(t.process_seconds), y = p.sy(t.objective);
    path += n == 0 ? fmt::format("M{} {}", html::px(x), html::px(y))
                   : fmt::format(" H{} V{}", html::px(x), html::px(y));
  }
  if (front.size() > 1) {
    out += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", path,
                       kFrontColour);
  }
  for (size_t i : drawn) {
    const TrialRecord& t = r.trials[i];
    const bool on_front = std::find(front.begin(), front.end(), i) != front.end();
    out += fmt::format(
        "<circle class=\"trial{}\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"><title>{}</title>"
        "</circle>\n",
        on_front ? " front" : "", html::px(p.sx(t.process_seconds)), html::px(p.sy(t.objective)),
        t.id == r.best ? 6 : 4, on_front ? kFrontColour : kTrialColour,
        escape(fmt::format("{} {}: {} {} in {}", t.id, values_text(t), r.objective,
                           significant(t.objective, 4), duration(t.process_seconds))));
    if (t.id == r.best) {
      out += html::text_at(p.sx(t.process_seconds) + 8, p.sy(t.objective) - 8, "start",
                           t.id + " (best)");
    }
  }
  return out + "</svg>\n";
}

std::string curves_chart(const TuneRecord& r) {
  int64_t epochs = 0;
  double y0 = INFINITY, y1 = -INFINITY;
  for (const TrialRecord& t : r.trials) {
    for (const CurvePoint& c : t.curve) {
      const double v = curve_value(c, r.objective);
      if (!std::isfinite(v)) continue;
      epochs = std::max(epochs, c.epoch);
      y0 = std::min(y0, v);
      y1 = std::max(y1, v);
    }
  }
  if (epochs == 0) return "";
  if (y1 <= y0) y1 = y0 + std::max(1e-9, std::fabs(y0) * 0.01 + 1e-9);
  const double height = kTop + kPlotHeight + kBottom;
  Plot p{
      html::make_scale(epochs > 1 ? 1 : 0, static_cast<double>(epochs), false, kLeft, kPlotRight),
      html::make_scale(y0, y1, false, kTop + kPlotHeight, kTop)};
  std::string out = html::svg_open("curves", kWidth, height,
                                   fmt::format("{} per epoch, one line per trial", r.objective),
                                   "id=\"curves-chart\"");
  out += frame_svg(
      p, [](double v) { return significant(v, 3, true); },
      [](double v) { return significant(v, 3, true); }, "epoch", metric_label(r.objective));
  // The best trial last, on top.
  std::vector<const TrialRecord*> order;
  for (const TrialRecord& t : r.trials) {
    if (t.id != r.best) order.push_back(&t);
  }
  for (const TrialRecord& t : r.trials) {
    if (t.id == r.best) order.push_back(&t);
  }
  for (const TrialRecord* t : order) {
    std::string points;
    int n = 0;
    for (const CurvePoint& c : t->curve) {
      const double v = curve_value(c, r.objective);
      if (!std::isfinite(v)) continue;
      points += fmt::format("{}{},{}", n++ ? " " : "", html::px(p.sx(static_cast<double>(c.epoch))),
                            html::px(p.sy(v)));
    }
    if (n == 0) continue;
    const bool best = t->id == r.best;
    out += fmt::format(
        "<polyline class=\"curve\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" "
        "opacity=\"{}\"><title>{}</title></polyline>\n",
        points, best ? kFrontColour : kTrialColour, best ? 2.5 : 1.2, best ? 1 : 0.55,
        escape(fmt::format("{} {}", t->id, values_text(*t))));
    // Where a curve ends (a trial halving stopped after one epoch is only this point).
    const size_t last = points.rfind(' ');
    const std::string end = last == std::string::npos ? points : points.substr(last + 1);
    const size_t comma = end.find(',');
    out += fmt::format("<circle class=\"curve-end\" cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>\n",
                       end.substr(0, comma), end.substr(comma + 1),
                       best ? kFrontColour : kTrialColour);
  }
  return out + "</svg>\n";
}

std::string trials_table(const TuneRecord& r) {
  std::vector<html::Column> columns = {{"#", true}, {"trial", false}};
  if (!r.trials.empty()) {
    for (const auto& [k, v] : r.trials.front().values) columns.push_back({escape(k), false});
  }
  for (const html::Column& c : std::vector<html::Column>{
           {escape(metric_label(r.objective)), true},
           {"epochs", true},
           {"status", false},
           {"device", false},
           {"at once", true},
           {"train time", true},
           {"process time", true},
           {"median step", true},
           {r.dollars_instance.empty() ? std::string("$")
                                       : "$ on " + escape(r.dollars_instance) + " (predicted)",
            true}}) {
    columns.push_back(c);
  }
  std::vector<std::vector<std::string>> rows;
  int place = 0;
  for (size_t i : trials_by_objective(r)) {
    const TrialRecord& t = r.trials[i];
    std::vector<std::string> row = {std::to_string(++place),
                                    escape(t.id) + (t.id == r.best ? " <span class=\"badge "
                                                                     "measured\">best</span>"
                                                                   : "")};
    for (const auto& [k, v] : t.values) row.push_back(escape(v));
    row.push_back(html::cell(std::isfinite(t.objective) ? significant(t.objective, 4) : ""));
    row.push_back(std::to_string(t.epochs));
    row.push_back(
        escape(trial_status_name(t.status)) +
        (t.error.empty() ? "" : "<br><span class=\"note\">" + escape(t.error) + "</span>") +
        (t.resumed_differently.empty()
             ? ""
             : "<br><span class=\"note\">not bit-identical to an uninterrupted run: " +
                   escape(t.resumed_differently) + "</span>"));
    const std::string group =
        t.group.empty() ? "" : fmt::format(", fused: {} of {}", t.group, t.fused);
    row.push_back(t.device.empty() ? html::na()
                  : t.threads > 0  ? escape(fmt::format("{} ({} thread{}{})", t.device, t.threads,
                                                       t.threads == 1 ? "" : "s", group))
                                   : escape(t.device));
    row.push_back(std::to_string(t.concurrent));
    row.push_back(html::cell(t.train_seconds > 0 ? duration(t.train_seconds) : ""));
    row.push_back(html::cell(t.process_seconds > 0 ? duration(t.process_seconds) : ""));
    row.push_back(html::cell(std::isfinite(t.step_ms) ? duration_ms(t.step_ms) : ""));
    row.push_back(html::cell(std::isfinite(t.dollars) ? usd(t.dollars) : ""));
    rows.push_back(std::move(row));
  }
  return "<div class=\"scroll\">" + html::html_table(columns, rows, "runs") + "</div>\n";
}

std::string cost_table(const TuneRecord& r) {
  if (r.cost.empty()) {
    return r.cost_note.empty() ? "" : "<p class=\"note\">" + escape(r.cost_note) + "</p>\n";
  }
  std::vector<html::Column> columns = {{"instance", false}, {"device", false}, {"$/h", true}};
  for (const SearchCostLine::Plan& p : r.cost.front().plans) {
    columns.push_back(
        {fmt::format("{} instance{}: wall", p.instances, p.instances == 1 ? "" : "s"), true});
    columns.push_back({"$", true});
  }
  std::vector<std::vector<std::string>> rows;
  for (const SearchCostLine& l : r.cost) {
    std::vector<std::string> row = {
        escape(l.instance),
        escape(l.device) + (l.devices > 1 ? fmt::format(" ×{}", l.devices) : std::string()),
        html::cell(usd(l.price_per_hour))};
    for (const SearchCostLine::Plan& p : l.plans) {
      row.push_back(html::cell((l.lower_bound ? "≥ " : "") + duration(p.wall_seconds)));
      row.push_back(html::cell(usd(p.dollars)));
    }
    rows.push_back(std::move(row));
  }
  return "<div class=\"scroll\">" + html::html_table(columns, rows) + "</div>\n<p class=\"note\">" +
         escape(r.cost_note) + "</p>\n";
}

std::string machine_html(const nlohmann::json& machine) {
  if (!machine.is_object()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [k, v] : machine.items()) {
    if (v.is_string())
      rows.push_back({escape(k), escape(v.get<std::string>())});
    else if (v.is_number())
      rows.push_back({escape(k), escape(v.dump())});
  }
  if (rows.empty()) return "";
  return html::html_table({{"", false}, {"", false}}, rows, "machine");
}

// What the trials' times are: shares of a fused group's, or taken beside other trials.
std::string timing_notes(const TuneRecord& r) {
  int fused = 0, concurrent = 0;
  for (const TrialRecord& t : r.trials) {
    fused += !t.group.empty();
    concurrent += t.concurrent > 1;
  }
  std::string notes;
  if (fused > 0) {
    notes += fmt::format(
        "<p class=\"note\">{} trials trained fused, each in a group of trials trained as one "
        "model (<code>--fuse</code>): their step and training times are their share of their "
        "group's.</p>\n",
        fused);
  }
  if (concurrent > 0) {
    notes += fmt::format(
        "<p class=\"note\">{} trials ran beside others on a shared device: their times are those "
        "of a shared device (the <i>at once</i> column); <code>crossover sweep</code> compares "
        "speeds one model at a time.</p>\n",
        concurrent);
  }
  return notes;
}

}  // namespace

std::string render_tune_html(const TuneRecord& r, const nlohmann::json& machine) {
  std::vector<html::PageSection> sections;
  const TrialRecord* best = nullptr;
  for (const TrialRecord& t : r.trials) {
    if (t.id == r.best) best = &t;
  }
  std::string summary;
  if (best) {
    summary = fmt::format(
        "<div class=\"verdict yes\">Best: <b>{}</b> ({}) with {} {} after {} epochs.</div>\n",
        escape(best->id), escape(values_text(*best)), escape(r.objective),
        escape(significant(best->objective, 4)), best->epochs);
    summary +=
        "<p>Its spec is <code>best.toml</code> beside this page, naming its trained weights, "
        "<code>best.safetensors</code> (where they were saved) as its initial weights: "
        "<code>crossover train best.toml</code> trains on from them.</p>\n";
  } else {
    summary = "<div class=\"verdict no\">No trial has finished yet.</div>\n";
  }
  summary += fmt::format(
      "<ul class=\"kv\"><li><span class=\"k\">trials</span> {} ({})</li><li><span "
      "class=\"k\">objective</span> {} ({} is better)</li><li><span class=\"k\">wall</span> "
      "{}</li><li><span class=\"k\">trial processes</span> {}</li>{}</ul>\n",
      r.trials.size(), escape(r.mode), escape(r.objective), r.higher_is_better ? "higher" : "lower",
      escape(duration(r.wall_seconds)), escape(duration(r.device_seconds)),
      r.ranks > 1 ? fmt::format("<li><span class=\"k\">MPI ranks</span> {}</li>", r.ranks) : "");
  summary += timing_notes(r);
  sections.push_back({"best", "Best trial", summary});
  if (std::string chart = trials_chart(r); !chart.empty()) {
    sections.push_back(
        {"trials", "Trials against cost",
         chart + "<p class=\"note\">Each dot is a trial; the red step line is the Pareto front: "
                 "no cheaper trial did better.</p>\n"});
  }
  if (std::string chart = curves_chart(r); !chart.empty()) {
    sections.push_back({"curves", "Learning curves", chart});
  }
  sections.push_back({"table", "All trials", trials_table(r)});
  if (!r.decisions.empty()) {
    std::string list = "<ul>\n";
    for (const HalvingDecision& d : r.decisions)
      list += "<li>" + escape(decision_text(d)) + "</li>\n";
    sections.push_back({"halving", "Successive halving", list + "</ul>\n"});
  }
  if (!r.parallel.empty()) {
    std::string list = "<ul>\n";
    for (const ParallelChoice& c : r.parallel)
      list += "<li>" + escape(parallel_text(c)) + "</li>\n";
    sections.push_back({"parallel", "Trials at once", list + "</ul>\n"});
  }
  if (std::string cost = cost_table(r); !cost.empty()) {
    sections.push_back({"cost", "The search elsewhere", cost, true});
  }
  if (std::string m = machine_html(machine); !m.empty()) {
    sections.push_back({"machine", "Machine", m});
  }
  const std::string title = fmt::format("crossover tune: {}", r.model);
  std::string header = "<header>\n<h1>" + escape(title) + "</h1>\n";
  if (r.interrupted) {
    header +=
        "<div class=\"banner partial\">partial: interrupted — the search stopped before it "
        "finished; the same command goes on from here.</div>\n";
  }
  header += "<nav>";
  for (const html::PageSection& s : sections)
    header += fmt::format("<a href=\"#{}\">{}</a>", s.id, s.title);
  header += "</nav>\n</header>\n";
  return html::html_page(title, header, sections, kTuneSchema);
}

}  // namespace xo
