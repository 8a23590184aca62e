#include "report/tune_json.h"

#include <fmt/format.h>

#include "core/json_depth.h"
#include "report/csv.h"
#include "report/json_in.h"
#include "report/report_json.h"

namespace xo {
namespace {

using json = nlohmann::json;

// The unit a curve figure and an objective are written in: percent for accuracies.
std::string objective_key(const std::string& metric) {
  return metric.find("accuracy") != std::string::npos ? metric + "_percent" : metric;
}

json curve_json(const CurvePoint& c) {
  return {{"epoch", c.epoch},
          {"loss", number_or_null(c.loss)},
          {"val_loss", number_or_null(c.val_loss)},
          {"val_accuracy_percent", number_or_null(c.val_accuracy_percent)},
          {"test_loss", number_or_null(c.test_loss)},
          {"test_accuracy_percent", number_or_null(c.test_accuracy_percent)},
          {"seconds", c.seconds}};
}

json trial_json(const TrialRecord& t) {
  json values = json::array();
  for (const auto& [k, v] : t.values) values.push_back({{"key", k}, {"value", v}});
  json rungs = json::array();
  for (double v : t.rung_objective) rungs.push_back(number_or_null(v));
  json curve = json::array();
  for (const CurvePoint& c : t.curve) curve.push_back(curve_json(c));
  return {{"id", t.id},
          {"values", values},
          {"status", trial_status_name(t.status)},
          {"device", t.device},
          {"threads", t.threads},
          {"rank", t.rank},
          {"params", t.params},
          {"epochs", t.epochs},
          {"steps", t.steps},
          {"objective", number_or_null(t.objective)},
          {"rung_objective", rungs},
          {"curve", curve},
          {"train_seconds", t.train_seconds},
          {"process_seconds", t.process_seconds},
          {"step_ms", number_or_null(t.step_ms)},
          {"concurrent", t.concurrent},
          {"dollars", number_or_null(t.dollars)},
          {"error", t.error}};
}

TrialRecord read_trial(const JsonIn& in) {
  TrialRecord t;
  t.id = in.text("id");
  for (const JsonIn& v : in.objects("values"))
    t.values.emplace_back(v.text("key"), v.text("value"));
  const std::string status = in.text("status");
  const auto parsed = parse_trial_status(status);
  if (!parsed) {
    throw UserError(fmt::format("{}: status: unknown trial status '{}'", in.where(), status));
  }
  t.status = *parsed;
  t.device = in.text("device");
  t.threads = in.int_integer("threads");
  t.rank = in.int_integer("rank");
  t.params = in.integer("params");
  t.epochs = in.integer("epochs");
  t.steps = in.integer("steps");
  t.objective = in.nullable("objective");
  for (const auto& v : in.optional_numbers("rung_objective"))
    t.rung_objective.push_back(v.value_or(std::numeric_limits<double>::quiet_NaN()));
  for (const JsonIn& c : in.objects("curve")) {
    CurvePoint p;
    p.epoch = c.integer("epoch");
    p.loss = c.nullable("loss");
    p.val_loss = c.nullable("val_loss");
    p.val_accuracy_percent = c.nullable("val_accuracy_percent");
    p.test_loss = c.nullable("test_loss");
    p.test_accuracy_percent = c.nullable("test_accuracy_percent");
    p.seconds = c.number("seconds");
    t.curve.push_back(p);
  }
  t.train_seconds = in.number("train_seconds");
  t.process_seconds = in.number("process_seconds");
  t.step_ms = in.nullable("step_ms");
  t.concurrent = in.int_integer("concurrent");
  t.dollars = in.nullable("dollars");
  t.error = in.text("error");
  return t;
}

}  // namespace

json to_json(const TuneRecord& r, const MachineInfo& machine) {
  json j = to_json(r);
  j["machine"] = to_json(machine);
  return j;
}

json to_json(const TuneRecord& r) {
  json j;
  j["schema"] = r.schema;
  j["model"] = r.model;
  j["spec_toml"] = r.spec_toml;
  j["vary"] = r.vary;
  j["mode"] = r.mode;
  j["samples"] = r.samples;
  j["seed"] = r.seed;
  j["objective"] = r.objective;
  j["objective_unit"] = objective_key(r.objective);
  j["higher_is_better"] = r.higher_is_better;
  j["max_epochs"] = r.max_epochs;
  j["halving"] = r.halving
                     ? json{{"min_epochs", r.halving->min_epochs}, {"factor", r.halving->factor}}
                     : json();
  j["rungs"] = r.rungs;
  j["trials"] = json::array();
  for (const TrialRecord& t : r.trials) j["trials"].push_back(trial_json(t));
  j["decisions"] = json::array();
  for (const HalvingDecision& d : r.decisions) {
    j["decisions"].push_back({{"trial", d.trial},
                              {"promoted", d.promoted},
                              {"at_epochs", d.at_epochs},
                              {"to_epochs", d.to_epochs},
                              {"place", d.place},
                              {"of", d.of},
                              {"top", d.top}});
  }
  j["parallel"] = json::array();
  for (const ParallelChoice& c : r.parallel) {
    json options = json::array();
    for (const ParallelOption& o : c.options) {
      options.push_back({{"k", o.k},
                         {"threads", o.threads},
                         {"samples_per_second", o.samples_per_second},
                         {"per_trial_samples_per_second", o.per_trial}});
    }
    j["parallel"].push_back(
        {{"device", c.device}, {"k", c.k}, {"measured", c.measured}, {"options", options}});
  }
  j["ranks"] = r.ranks;
  j["wall_seconds"] = r.wall_seconds;
  j["device_seconds"] = r.device_seconds;
  j["best"] = r.best;
  j["cost"] = json::array();
  for (const SearchCostLine& l : r.cost) {
    json plans = json::array();
    for (const SearchCostLine::Plan& p : l.plans) {
      plans.push_back(
          {{"instances", p.instances}, {"wall_seconds", p.wall_seconds}, {"dollars", p.dollars}});
    }
    j["cost"].push_back({{"instance", l.instance},
                         {"device", l.device},
                         {"devices", l.devices},
                         {"usd_per_hour", l.price_per_hour},
                         {"lower_bound", l.lower_bound},
                         {"plans", plans}});
  }
  j["cost_note"] = r.cost_note;
  j["dollars_instance"] = r.dollars_instance;
  j["interrupted"] = r.interrupted;
  return j;
}

TuneRecord read_tune_record(const std::string& text, const std::string& origin) {
  check_json_depth(text, origin);
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("schema") ||
      doc["schema"] != kTuneSchema) {
    throw UserError(fmt::format("{}: not the results of crossover tune (expected schema '{}')",
                                origin, kTuneSchema));
  }
  const JsonSource source{origin, ReadMode::Strict};
  const JsonIn in(doc, "", source);
  TuneRecord r;
  r.model = in.text("model");
  r.spec_toml = in.text("spec_toml");
  r.vary = in.texts("vary");
  r.mode = in.text("mode");
  r.samples = in.integer("samples");
  const int64_t seed = in.integer("seed");
  r.seed = static_cast<uint64_t>(seed);
  r.objective = in.text("objective");
  r.higher_is_better = in.flag("higher_is_better");
  r.max_epochs = in.integer("max_epochs");
  if (const auto h = in.object("halving", /*optional=*/true))
    r.halving = HalvingSettings{h->integer("min_epochs"), h->integer("factor")};
  for (double e : in.numbers("rungs")) r.rungs.push_back(static_cast<int64_t>(e));
  for (const JsonIn& t : in.objects("trials")) r.trials.push_back(read_trial(t));
  for (const JsonIn& d : in.objects("decisions")) {
    r.decisions.push_back({d.text("trial"), d.flag("promoted"), d.integer("at_epochs"),
                           d.integer("to_epochs"), d.int_integer("place"), d.int_integer("of"),
                           d.int_integer("top")});
  }
  for (const JsonIn& c : in.objects("parallel")) {
    ParallelChoice choice{c.text("device"), c.int_integer("k"), c.flag("measured"), {}};
    for (const JsonIn& o : c.objects("options")) {
      choice.options.push_back({o.int_integer("k"), o.int_integer("threads"),
                                o.number("samples_per_second"),
                                o.numbers("per_trial_samples_per_second")});
    }
    r.parallel.push_back(std::move(choice));
  }
  r.ranks = in.int_integer("ranks");
  r.wall_seconds = in.number("wall_seconds");
  r.device_seconds = in.number("device_seconds");
  r.best = in.text("best");
  for (const JsonIn& l : in.objects("cost")) {
    SearchCostLine line;
    line.instance = l.text("instance");
    line.device = l.text("device");
    line.devices = l.int_integer("devices");
    line.price_per_hour = l.number("usd_per_hour");
    line.lower_bound = l.flag("lower_bound");
    for (const JsonIn& p : l.objects("plans")) {
      line.plans.push_back(
          {p.int_integer("instances"), p.number("wall_seconds"), p.number("dollars")});
    }
    r.cost.push_back(std::move(line));
  }
  r.cost_note = in.text("cost_note");
  r.dollars_instance = in.text("dollars_instance");
  r.interrupted = in.flag("interrupted");
  return r;
}

std::string tune_csv(const TuneRecord& r) {
  std::string out = "rank,trial,status";
  std::vector<std::string> keys;
  if (!r.trials.empty()) {
    for (const auto& [k, v] : r.trials.front().values) keys.push_back(k);
  }
  for (const std::string& k : keys) out += fmt::format(",{}", csv_text(k));
  out += fmt::format(
      ",{},epochs,device,threads,rank_mpi,concurrent,train_seconds,process_seconds,step_ms,"
      "dollars,error\n",
      objective_key(r.objective));
  int place = 0;
  for (size_t i : trials_by_objective(r)) {
    const TrialRecord& t = r.trials[i];
    out += fmt::format("{},{},{}", ++place, csv_text(t.id), trial_status_name(t.status));
    for (const auto& [k, v] : t.values) out += fmt::format(",{}", csv_text(v));
    out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{}\n", csv_number(t.objective), t.epochs,
                       csv_text(t.device), t.threads, t.rank, t.concurrent,
                       csv_number(t.train_seconds), csv_number(t.process_seconds),
                       csv_number(t.step_ms), csv_number(t.dollars), csv_text(t.error));
  }
  return out;
}

}  // namespace xo
