// A search's results.json (`crossover.tune/1`): each record's fields listed once
// (io/json_fields.h), written and read back through the same list, and results.csv.
#include "report/tune_json.h"

#include <fmt/format.h>

#include <limits>

#include "core/json_depth.h"
#include "io/json_fields.h"
#include "io/json_in.h"
#include "report/csv.h"
#include "report/report_json.h"

namespace xo {
namespace {

using json = nlohmann::json;

// The unit a curve figure and an objective are written in: percent for accuracies.
std::string objective_key(const std::string& metric) {
  return metric.find("accuracy") != std::string::npos ? metric + "_percent" : metric;
}

constexpr auto curve_fields = [](auto& io, auto& c) {
  io.integer("epoch", c.epoch);
  io.nullable("loss", c.loss);
  io.nullable("val_loss", c.val_loss);
  io.nullable("val_accuracy_percent", c.val_accuracy_percent);
  io.nullable("test_loss", c.test_loss);
  io.nullable("test_accuracy_percent", c.test_accuracy_percent);
  io.number("seconds", c.seconds);
};

// A trial's varied values as {key, value} objects (their order is the --vary order).
constexpr auto value_fields = [](auto& io, auto& v) {
  io.text("key", v.first);
  io.text("value", v.second);
};

// The status by name; an unknown name is an error naming the trial.
template <class Io, class R>
void status_field(Io& io, R& t) {
  if constexpr (Io::kReading) {
    const std::string status = io.in.text("status");
    const auto parsed = parse_trial_status(status);
    if (!parsed) {
      throw UserError(fmt::format("{}: status: unknown trial status '{}'", io.in.where(), status));
    }
    t.status = *parsed;
  } else {
    io.text("status", trial_status_name(t.status));
  }
}

// Each rung's objective, null where it was not finite.
template <class Io, class R>
void rungs_field(Io& io, R& t) {
  if constexpr (Io::kReading) {
    for (const auto& v : io.in.optional_numbers("rung_objective"))
      t.rung_objective.push_back(v.value_or(std::numeric_limits<double>::quiet_NaN()));
  } else {
    json rungs = json::array();
    for (double v : t.rung_objective) rungs.push_back(number_or_null(v));
    io.j["rung_objective"] = rungs;
  }
}

constexpr auto trial_fields = [](auto& io, auto& t) {
  io.text("id", t.id);
  io.objects("values", t.values, value_fields);
  status_field(io, t);
  io.text("device", t.device);
  io.integer("threads", t.threads);
  io.integer("rank", t.rank);
  if (io.present("host")) io.text("host", t.host);  // since multi-host searches (0.2.x)
  io.integer("params", t.params);
  io.integer("epochs", t.epochs);
  io.integer("steps", t.steps);
  io.nullable("objective", t.objective);
  rungs_field(io, t);
  io.objects("curve", t.curve, curve_fields);
  io.number("train_seconds", t.train_seconds);
  io.number("process_seconds", t.process_seconds);
  io.nullable("step_ms", t.step_ms);
  io.integer("concurrent", t.concurrent);
  if (io.present("group")) {  // since fused trials (0.2.x)
    io.text("group", t.group);
    io.integer("fused", t.fused);
  }
  io.nullable("dollars", t.dollars);
  io.text("error", t.error);
  if (io.present("machine_failed")) io.flag("machine_failed", t.machine_failed);  // since 0.2.x
  if (io.present("resumed_differently")) io.text("resumed_differently", t.resumed_differently);
};

constexpr auto decision_fields = [](auto& io, auto& d) {
  io.text("trial", d.trial);
  io.flag("promoted", d.promoted);
  io.integer("at_epochs", d.at_epochs);
  io.integer("to_epochs", d.to_epochs);
  io.integer("place", d.place);
  io.integer("of", d.of);
  io.integer("top", d.top);
};

constexpr auto option_fields = [](auto& io, auto& o) {
  io.integer("k", o.k);
  io.integer("threads", o.threads);
  // null where a timing measured nothing (records of 0.2.0 wrote one when Ctrl-C cut it short).
  io.nullable("samples_per_second", o.samples_per_second);
  io.numbers("per_trial_samples_per_second", o.per_trial);
};

constexpr auto parallel_fields = [](auto& io, auto& c) {
  io.text("device", c.device);
  io.integer("k", c.k);
  io.flag("measured", c.measured);
  io.objects("options", c.options, option_fields);
  if (io.present("fused")) io.integer("fused", c.fused);  // since fused trials (0.2.x)
  io.flag_or_absent("short_search", c.short_search);
};

constexpr auto plan_fields = [](auto& io, auto& p) {
  io.integer("instances", p.instances);
  io.number("wall_seconds", p.wall_seconds);
  io.number("dollars", p.dollars);
};

constexpr auto cost_line_fields = [](auto& io, auto& l) {
  io.text("instance", l.instance);
  io.text("device", l.device);
  io.integer("devices", l.devices);
  io.number("usd_per_hour", l.price_per_hour);
  io.flag("lower_bound", l.lower_bound);
  io.objects("plans", l.plans, plan_fields);
};

constexpr auto halving_fields = [](auto& io, auto& h) {
  io.integer("min_epochs", h.min_epochs);
  io.integer("factor", h.factor);
};

// The search's settings: the seed is unsigned in the record, an integer in the file; the rungs
// are read as numbers (as they always were).
template <class Io, class R>
void search_fields(Io& io, R& r) {
  io.text("model", r.model);
  io.text("spec_toml", r.spec_toml);
  io.texts("vary", r.vary);
  io.text("mode", r.mode);
  io.integer("samples", r.samples);
  if constexpr (Io::kReading) {
    r.seed = static_cast<uint64_t>(io.in.integer("seed"));
  } else {
    io.j["seed"] = r.seed;
    io.j["objective_unit"] = objective_key(r.objective);
  }
  io.text("objective", r.objective);
  io.flag("higher_is_better", r.higher_is_better);
  io.integer("max_epochs", r.max_epochs);
  if constexpr (Io::kReading) {
    if (const auto h = io.in.object("halving", /*optional=*/true))
      r.halving = read_fields<HalvingSettings>(*h, halving_fields);
    for (double e : io.in.numbers("rungs")) r.rungs.push_back(static_cast<int64_t>(e));
  } else {
    io.j["halving"] = r.halving ? fields_json(*r.halving, halving_fields) : json();
    io.j["rungs"] = r.rungs;
  }
}

template <class Io, class R>
void tune_fields(Io& io, R& r) {
  search_fields(io, r);
  io.objects("trials", r.trials, trial_fields);
  io.objects("decisions", r.decisions, decision_fields);
  io.objects("parallel", r.parallel, parallel_fields);
  io.integer("ranks", r.ranks);
  io.number("wall_seconds", r.wall_seconds);
  io.number("device_seconds", r.device_seconds);
  io.text("best", r.best);
  io.objects("cost", r.cost, cost_line_fields);
  io.text("cost_note", r.cost_note);
  io.text("dollars_instance", r.dollars_instance);
  io.flag("interrupted", r.interrupted);
}

}  // namespace

json to_json(const TuneRecord& r) {
  FieldsOut out;
  out.j["schema"] = r.schema;
  tune_fields(out, r);
  return std::move(out.j);
}

json to_json(const TuneRecord& r, const MachineInfo& machine) {
  json j = to_json(r);
  j["machine"] = to_json(machine);
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
  FieldsIn io(in);
  TuneRecord r;
  tune_fields(io, r);
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
      ",{},epochs,device,threads,rank_mpi,concurrent,group,fused,train_seconds,process_seconds,"
      "step_ms,dollars,error\n",
      objective_key(r.objective));
  int place = 0;
  for (size_t i : trials_by_objective(r)) {
    const TrialRecord& t = r.trials[i];
    out += fmt::format("{},{},{}", ++place, csv_text(t.id), trial_status_name(t.status));
    for (const auto& [k, v] : t.values) out += fmt::format(",{}", csv_text(v));
    out +=
        fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_number(t.objective), t.epochs,
                    csv_text(t.device), t.threads, t.rank, t.concurrent, csv_text(t.group), t.fused,
                    csv_number(t.train_seconds), csv_number(t.process_seconds),
                    csv_number(t.step_ms), csv_number(t.dollars), csv_text(t.error));
  }
  return out;
}

}  // namespace xo
