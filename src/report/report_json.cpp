// The report document and the training result as JSON. Each record's fields are listed once
// (io/json_fields.h), and both the writer and the reader run that list; a reader-only line
// beside it reads what older files wrote differently. The result's lists are
// report/result_fields.h.
#include "report/report_json.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "advisor/scale_out.h"
#include "backend/backend.h"
#include "core/error.h"
#include "core/json_depth.h"
#include "io/json_fields.h"
#include "io/json_in.h"
#include "report/result_fields.h"

namespace xo {
namespace {

using json = nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using result_fields::key;

// ---------------------------------------------------------------------------------------------
// A report's run: the result (report/result_fields.h), what was measured around it, and its
// analysis.

constexpr auto utilisation_fields = [](auto& io, auto& u) {
  io.number("interval_s", u.interval_s);
  io.integer("samples", u.samples);
  io.numbers("t_s", u.t_s);
  io.numbers("cpu_percent", u.cpu_percent);
  io.number_rows("cpu_core_percent", u.cpu_core_percent);
  io.numbers("rss_mib", u.rss_mib);
  io.optional_numbers("gpu_percent", u.gpu_percent);
  io.optional_numbers("gpu_memory_mib", u.gpu_memory_mib);
  io.optional_numbers("gpu_power_w", u.gpu_power_w);
  io.optional_numbers("gpu_sm_clock_mhz", u.gpu_sm_clock_mhz);
  if constexpr (!kReads<decltype(io)>) {  // null where no GPU was sampled
    if (u.gpu_percent.empty()) {
      for (const char* k : {"gpu_percent", "gpu_memory_mib", "gpu_power_w", "gpu_sm_clock_mhz"})
        io.j[k] = json();
    }
  }
  io.optional_number("mean_cpu_percent", u.mean_cpu_percent);
  io.optional_number("mean_gpu_percent", u.mean_gpu_percent);
  // Since 0.1.1's busy-machine check; earlier files have no such figure.
  if (io.present("mean_other_cores")) io.optional_number("mean_other_cores", u.mean_other_cores);
  io.number("max_rss_mib", u.max_rss_mib);
};

constexpr auto layer_time_fields = [](auto& io, auto& l) {
  io.text("name", l.name);
  io.nullable("forward_ms", l.forward_ms);
  io.nullable("backward_ms", l.backward_ms);
  io.nullable("flops", l.flops);
  io.nullable("bytes", l.bytes);
  io.nullable("gflops", l.gflops);
  io.optional_number("peak_fraction", l.peak_fraction);
  io.optional_text("bound", l.bound);
};

constexpr auto step_phases_fields = [](auto& io, auto& p) {
  io.optional_number("data", p.data_ms);
  io.nullable("forward", p.forward_ms);
  io.nullable("backward", p.backward_ms);
  io.optional_number("optimizer", p.optimizer_ms);
};

constexpr auto loop_phases_fields = [](auto& io, auto& p) {
  io.optional_number("data", p.data_ms);
  io.optional_number("forward_backward", p.forward_backward_ms);
  io.optional_number("optimizer", p.optimizer_ms);
};

constexpr auto axis_fields = [](auto& io, auto& row) {
  io.text("name", row.axis);
  io.number("value", row.axis_value);
};

// The analysis of the run against its device's peaks; the per-node profile where there is one.
template <class Io, class A, class R>
void analysis_fields(Io& io, A& a, R& r) {
  io.nullable("seconds_per_epoch", a.seconds_per_epoch);
  double per_100 = 100 * a.seconds_per_epoch;  // checked, not kept
  io.nullable("seconds_per_100_epochs", per_100);
  io.flag("per_epoch_estimated", a.per_epoch_estimated);
  io.integer("steps_taken", r.steps_taken);
  io.optional_number("peak_gflops", a.peak_gflops);
  io.optional_number("peak_fraction", a.peak_fraction);
  io.optional_number("roofline_step_ms", a.roofline_step_ms);
  io.optional_number("roofline_error_percent", a.roofline_error_percent);
  io.optional_text("roofline_bound", a.roofline_bound);
  StepPhases phases = a.phases.value_or(StepPhases{});
  if (io.object_or_null("phases_ms", a.phases.has_value(), phases, step_phases_fields)) {
    if constexpr (Io::kReading) {
      a.phases = phases;
      r.node_timed_steps = io.in.has("profiled_steps") ? io.in.integer("profiled_steps") : 0;
    } else {
      io.integer("profiled_steps", r.node_timed_steps);
    }
  }
  if constexpr (Io::kReading) {
    for (const JsonIn& l : io.in.objects("layers_profile", /*optional=*/true))
      FieldsIn::read(l, a.layer_times.emplace_back(), layer_time_fields);
  } else if (a.phases) {
    io.objects("layers_profile", a.layer_times, layer_time_fields);
  } else {
    io.j["layers_profile"] = json();
  }
  io.object_or_null("loop_phases_ms", true, a.loop_phases, loop_phases_fields);
}

// What was measured around the run: its resources and its cost, its spec and hashes.
// `hashes`: the document has a manifest (0.1.1 and later), so every run has its data's and final
// parameters' hashes; older files have neither.
template <class Io, class Row>
void measured_fields(Io& io, Row& row, bool hashes) {
  if constexpr (Io::kReading) {
    if (const auto u = io.in.object("utilisation", /*optional=*/true))
      row.utilisation = read_fields<Utilisation>(*u, utilisation_fields);
  } else {
    io.j["utilisation"] =
        row.utilisation ? fields_json(*row.utilisation, utilisation_fields) : json();
  }
  io.nullable("peak_rss_mib", row.peak_rss_mib);
  // Copies of the utilisation's, and whether other processes were busy on this run's CPUs (its
  // timings are then not the machine's): written, checked, not kept.
  const auto* u = row.utilisation ? &*row.utilisation : nullptr;
  std::optional<double> cpu = u ? u->mean_cpu_percent : std::nullopt;
  std::optional<double> gpu = u ? u->mean_gpu_percent : std::nullopt;
  bool contaminated = u && timings_contaminated(*u);
  io.optional_number("mean_cpu_percent", cpu);
  io.optional_number("mean_gpu_percent", gpu);
  if (io.present("timings_contaminated")) io.flag("timings_contaminated", contaminated);
  io.number("step_flops", row.work.flops);
  io.number("step_bytes", row.work.bytes);
  io.text("spec_toml", row.spec_toml);
  if (hashes || io.present("data_hash")) io.text("data_hash", row.data_hash);
  if (hashes || io.present("params_hash")) io.text("params_hash", row.params_hash);
}

template <class Io, class Run>
void run_fields(Io& io, Run& run, bool hashes, int schema) {
  auto& row = run.run;
  auto& r = row.result;
  result_fields::result(io, r, "epoch_log", schema);
  io.integer("layers", row.layers);
  if constexpr (!Io::kReading) io.j["epochs"] = epochs_completed(r);
  io.object_or_null("axis", !row.axis.empty(), row, axis_fields);
  analysis_fields(io, run.analysis, r);
  if constexpr (Io::kReading) {
    const LoopPhases& loop = run.analysis.loop_phases;
    r.data_ms = loop.data_ms.value_or(kNaN);
    r.forward_backward_ms = loop.forward_backward_ms.value_or(kNaN);
    r.optimizer_ms = loop.optimizer_ms.value_or(kNaN);
  }
  measured_fields(io, row, hashes);
  if constexpr (Io::kReading) {
    row.work.batch = r.batch;
  } else if (r.epochs.empty()) {  // measured steps only (--steps): no epoch finished
    io.j["final_loss"] = json();
    io.j["final_train_error"] = json();
  }
}

json run_json(const ReportRun& run) {
  FieldsOut out;
  run_fields(out, run, true, 2);
  return std::move(out.j);
}

ReportRun read_run(const JsonIn& in, bool hashes, int schema) {
  FieldsIn io(in);
  ReportRun run;
  run_fields(io, run, hashes, schema);
  return run;
}

std::string run_name(size_t i, const json& run) {
  const auto text = [&](const char* key) {
    const auto it = run.find(key);
    return it != run.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string model = text("model"), device = text("device");
  if (model.empty()) return fmt::format("runs[{}]", i);
  return device.empty() ? fmt::format("run '{}'", model)
                        : fmt::format("run '{}' on {}", model, device);
}

// ---------------------------------------------------------------------------------------------
// The other records.

constexpr auto machine_fields = [](auto& io, auto& m) {
  io.text("cpu", m.cpu);
  if constexpr (kReads<decltype(io)>) {
    const auto cpus = io.in.optional_number("logical_cpus");
    if (cpus && std::isfinite(*cpus)) m.logical_cpus = static_cast<int64_t>(*cpus);
  } else {
    io.j["logical_cpus"] = m.logical_cpus ? json(*m.logical_cpus) : json();
  }
  io.flag("avx512", m.avx512);
  io.optional_number("memory_gib", m.memory_gib);
  io.text("os", m.os);
  io.text("hostname", m.hostname);
  io.text("compiler", m.compiler);
  io.text("flags", m.flags);
  io.text("cpu_cores", m.cpu_cores);
  io.pairs("libraries", m.libraries);
  if constexpr (kReads<decltype(io)>) {  // null in files that had no NVML
    m.nvidia_driver = io.in.optional_text("nvidia_driver").value_or("");
  } else {
    io.text("nvidia_driver", m.nvidia_driver);
  }
  io.texts("gpus", m.gpus);
  io.text("crossover", m.crossover);
  io.text("date", m.date);
  io.texts("devices", m.devices);
  io.texts("devices_unavailable", m.devices_unavailable);
};

}  // namespace

json to_json(const MachineInfo& m) { return fields_json(m, machine_fields); }

namespace {

MachineInfo read_machine(const JsonIn& in) { return read_fields<MachineInfo>(in, machine_fields); }

constexpr auto build_fields = [](auto& io, auto& b) {
  io.text("type", b.type);
  io.text("compiler", b.compiler);
  io.text("cxx_flags", b.cxx_flags);
  io.flag("cuda", b.cuda);
  io.text("cuda_architectures", b.cuda_architectures);
};

// The ranges a replay trusts (a spec's epochs and --steps, --threads and --profile-steps as the
// commands take them); the precision one parse_precision knows.
constexpr auto settings_fields = [](auto& io, auto& s) {
  io.texts("devices", s.devices);
  io.optional_integer("epochs", s.epochs, Between{1, kMaxEpochs});
  io.integer("max_steps", s.max_steps, Between{0, kMaxSteps});
  io.integer("threads", s.threads, Between{0, kMaxThreads});
  io.integer("profile_steps", s.node_time_steps, Between{0, kMaxSteps});
  io.text("precision", s.precision);
  if constexpr (kReads<decltype(io)>) {
    try {
      parse_precision(s.precision);
    } catch (const UserError&) {
      io.refuse("precision", "f32, tf32 or bf16", s.precision);
    }
  }
  io.flag("record_step", s.record_step);
};

constexpr auto manifest_fields = [](auto& io, auto& m) {
  io.text("crossover", m.build.version);
  io.text("commit", m.build.commit);
  io.object("build", m.build, build_fields);
  io.pairs("libraries", m.libraries);
  io.pairs("device_libraries", m.device_libraries);
  io.text("command_line", m.command_line);
  io.object("settings", m.settings, settings_fields);
};

json manifest_json(const Manifest& m) { return fields_json(m, manifest_fields); }

Manifest read_manifest(const JsonIn& in) { return read_fields<Manifest>(in, manifest_fields); }

DevicePeaks read_peaks(const JsonIn& in) {
  return read_fields<DevicePeaks>(in, [](auto& io, auto& p) { peaks_fields(io, p, true); });
}

constexpr auto point_fields = [](auto& io, auto& p) {
  io.nullable("axis_value", p.axis_value);
  io.nullable("params", p.params);
  io.nullable("seconds_per_100_epochs", p.seconds);
};

// `schema` 1 had no note.
template <class Io, class L>
void line_fields(Io& io, L& l, int schema) {
  io.text("device", l.device);
  io.flag("predicted", l.predicted);
  if (schema >= 2) io.text("note", l.note);
  io.objects("points", l.points, point_fields);
}

// The crossing and the two measured points it lies between.
constexpr auto crossover_fields = [](auto& io, auto& x) {
  io.text("faster", x.faster);
  io.text("slower", x.slower);
  io.nullable("axis_value", x.axis_value);
  io.nullable("params", x.params);
  if constexpr (kReads<decltype(io)>) {
    const std::vector<double> between = io.in.numbers("between");
    if (between.size() == 2) {
      x.below_axis = between[0];
      x.above_axis = between[1];
    } else {
      io.in.fail("between", "two numbers", nullptr);
      x.below_axis = x.above_axis = kNaN;
    }
  } else {
    io.j["between"] = {x.below_axis, x.above_axis};
  }
};

constexpr auto scaling_fields = [](auto& io, auto& p) {
  io.integer("ranks", p.ranks);
  io.number("step_ms", p.step_ms);
  io.number("samples_per_second", p.samples_per_second);
  io.nullable("communicate_ms", p.communicate_ms);
  io.integer("reduced_bytes_per_step", p.reduced_bytes);
  io.nullable("bus_gbs", p.bus_gbs);
  io.nullable("efficiency", p.efficiency);
};

template <class Io, class S>
void sweep_fields(Io& io, S& s, int schema) {
  io.text("axis", s.axis);
  io.text("x", s.x);
  io.objects("series", s.series, [schema](auto& l_io, auto& l) { line_fields(l_io, l, schema); });
  io.objects("crossovers", s.crossovers, crossover_fields);
  // Since the sweep along ranks (0.2.x); only a sweep along ranks has it.
  if (Io::kReading ? io.present("scaling") : !s.scaling.empty())
    io.objects("scaling", s.scaling, scaling_fields);
}

constexpr auto sweep_list = [](auto& io, auto& r, int schema) { sweep_fields(io, r, schema); };

json sweep_json(const SweepRecord& s) { return fields_json(s, with_schema(sweep_list, 2)); }

SweepRecord read_sweep(const JsonIn& in, int schema) {
  return read_fields<SweepRecord>(in, with_schema(sweep_list, schema));
}

constexpr auto validation_entry_fields = [](auto& io, auto& e) {
  io.text("model", e.model);
  io.number("predicted_ms", e.predicted_ms);
  io.number("measured_ms", e.measured_ms);
  if (io.present("unprofiled")) io.integer("unprofiled", e.unprofiled);
  std::optional<double> error = e.error();  // from the two times: checked, not kept
  io.optional_number("error", error);
};

// The holdout by name. Files before the leave-one-model-out rows have none: an own row is the own
// profile, any other another device's; an unknown name keeps that default.
template <class Io, class V>
void holdout_field(Io& io, V& v) {
  if constexpr (Io::kReading) {
    v.holdout = v.own ? Holdout::None : Holdout::Device;
    if (!io.present("holdout")) return;
    const std::string h = io.in.text("holdout");
    for (const Holdout k : {Holdout::None, Holdout::Model, Holdout::Device}) {
      if (h == holdout_name(k)) v.holdout = k;
    }
  } else {
    io.text("holdout", holdout_name(v.holdout));
  }
}

// The summary figures: null without entries; a reader takes null as 0.
template <class Io>
void summary_field(Io& io, const char* key, auto& v, bool written) {
  if constexpr (Io::kReading) {
    v = io.in.optional_number(key).value_or(0);
  } else {
    io.j[key] = written ? json(v) : json();
  }
}

constexpr auto validation_fields = [](auto& io, auto& v) {
  io.text("device", v.device);
  io.text("name", v.name);
  io.text("from", v.from);
  io.flag("own", v.own);
  holdout_field(io, v);
  io.text("how", v.how);
  io.objects("entries", v.entries, validation_entry_fields);
  summary_field(io, "median_abs_error", v.median_abs, !v.entries.empty());
  summary_field(io, "worst_abs_error", v.worst_abs, !v.entries.empty());
  summary_field(io, "measurement_spread", v.spread, true);
  io.text("unmeasured", v.unmeasured);
};

ValidationRow read_validation(const JsonIn& in) {
  return read_fields<ValidationRow>(in, validation_fields);
}

}  // namespace

json validation_json(const ValidationRow& v) { return fields_json(v, validation_fields); }

namespace {

// A time the record holds in seconds and the document in milliseconds.
template <class Io>
void milliseconds(Io& io, const char* key, auto& seconds) {
  double ms = seconds * 1e3;
  io.nullable(key, ms);
  if constexpr (Io::kReading) seconds = ms / 1e3;
}

// The step measured here (null where not), and the prediction's error against it: derived,
// written, checked, not kept.
template <class Io, class P>
void measured_step_fields(Io& io, P& p) {
  std::optional<double> ms, error;
  if (p.measured_s) {
    ms = *p.measured_s * 1e3;
    error = 100 * (p.step.seconds - *p.measured_s) / *p.measured_s;
  }
  io.optional_number("measured_step_ms", ms);
  if constexpr (Io::kReading) {
    if (ms) p.measured_s = *ms / 1e3;
  }
  // error_percent is read after the profile's figures (below), as it always was.
  if constexpr (!Io::kReading) io.optional_number("error_percent", error);
}

template <class Io, class P>
void prediction_fields(Io& io, P& p, int schema) {
  io.text("device", p.device);
  io.text("name", p.name);
  io.named("kind", p.kind);
  io.flag("local", p.local);
  io.text("model", p.model);
  milliseconds(io, "step_ms", p.step.seconds);
  milliseconds(io, "flops_ms", p.step.flops_seconds);
  milliseconds(io, "bytes_ms", p.step.bytes_seconds);
  milliseconds(io, "overhead_ms", p.step.overhead_seconds);
  io.text("bound", p.step.bound);
  measured_step_fields(io, p);
  if (schema >= 2) {
    io.optional_number("measured_epoch_s", p.measured_epoch_s);
    io.flag("lower_bound", p.lower_bound);
  }
  // Files before the device profiles (0.2) have none of these.
  if (io.present("profile")) io.text("profile", p.profile);
  if (io.present("expected_error")) io.optional_number("expected_error", p.expected_error);
  if (io.present("expected_worst_error"))
    io.optional_number("expected_worst_error", p.expected_worst);
  if (io.present("expected_error_at_least"))
    io.flag("expected_error_at_least", p.expected_at_least);
  if (io.present("expected_error_kind")) io.text("expected_error_kind", p.expected_kind);
  if constexpr (Io::kReading) io.in.optional_number("error_percent");
  io.texts("assumptions", p.assumptions);
  // A catalog CPU weighed at bf16 (absent in files before it, and at f32).
  io.text_unless_empty("precision", p.precision);
  if (io.present("f32_step_ms") && (Io::kReading || p.f32_step_s)) {
    std::optional<double> ms;
    if (p.f32_step_s) ms = *p.f32_step_s * 1e3;
    io.optional_number("f32_step_ms", ms);
    if constexpr (Io::kReading) p.f32_step_s = ms ? std::optional(*ms / 1e3) : std::nullopt;
  }
}

constexpr auto prediction_list = [](auto& io, auto& r, int schema) {
  prediction_fields(io, r, schema);
};

json prediction_json(const DevicePrediction& p) {
  return fields_json(p, with_schema(prediction_list, 2));
}

DevicePrediction read_prediction(const JsonIn& in, int schema) {
  return read_fields<DevicePrediction>(in, with_schema(prediction_list, schema));
}

constexpr auto scale_out_fields = [](auto& io, auto& x) {
  io.integer("devices", x.devices);
  // Since runs across several instances (0.2.x).
  if (io.present("instances")) io.integer("instances", x.instances);
  io.text("link", x.link);
  io.nullable("link_gbs", x.link_gbs);
  if (io.present("network")) io.text("network", x.network);
  if (io.present("network_gbit")) io.nullable("network_gbit", x.network_gbit);
  io.nullable("step_s", x.step_s);
  io.nullable("compute_s", x.compute_s);
  io.nullable("allreduce_s", x.allreduce_s);
  io.nullable("exposed_s", x.exposed_s);
  io.nullable("efficiency", x.efficiency);
  io.nullable("run_hours", x.run_hours);
  io.nullable("on_demand_usd", x.on_demand_usd);
};

constexpr auto instance_fields = [](auto& io, auto& x) {
  io.text("id", x.id);
  io.text("provider", x.provider);
  io.text("name", x.name);
  io.text("device", x.device);
  io.integer("device_count", x.device_count);
  io.text("region", x.region);
  io.nullable("on_demand_usd_per_hour", x.on_demand_usd_per_hour);
  io.nullable("run_hours", x.run_hours);
  io.nullable("on_demand_usd", x.on_demand_usd);
  io.optional_number("spot_usd", x.spot_usd);
  io.flag("predicted", x.predicted);
  io.text("source", x.source);
  io.text("date", x.date);
  // Since data-parallel predictions (0.2.x).
  CostTable::Instance::ScaleOut so = x.scale_out.value_or(CostTable::Instance::ScaleOut{});
  if (io.present("scale_out") &&
      io.object_or_null("scale_out", x.scale_out.has_value(), so, scale_out_fields)) {
    if constexpr (kReads<decltype(io)>) x.scale_out = so;
  }
  // Since runs across several instances (0.2.x).
  if (io.present("across")) io.objects("across", x.across, scale_out_fields);
};

constexpr auto local_fields = [](auto& io, auto& l) {
  io.text("device", l.device);
  io.text("name", l.name);
  io.nullable("run_hours", l.run_hours);
};

constexpr auto owned_fields = [](auto& io, auto& o) {
  io.text("device", o.device);
  io.text("name", o.name);
  io.nullable("price_usd", o.price_usd);
  io.nullable("run_hours", o.run_hours);
  io.nullable("run_usd", o.run_usd);
  io.nullable("hourly_capital_usd", o.hourly_capital_usd);
  io.nullable("hourly_power_usd", o.hourly_power_usd);
  io.flag("predicted", o.predicted);
  io.text("source", o.source);
  io.text("date", o.date);
};

constexpr auto break_even_fields = [](auto& io, auto& b) {
  io.text("device", b.device);
  io.text("name", b.name);
  io.text("instance", b.instance);
  io.flag("same_device", b.same_device);
  io.nullable("rent_usd_per_owned_hour", b.rent_usd_per_owned_hour);
  io.optional_number("hours_per_month", b.hours_per_month);
  io.optional_number("payback_months", b.payback_months);
  io.nullable("at_hours_per_month", b.at_hours_per_month);
};

// The cost's assumptions, with two of the table's own figures beside them.
template <class Io, class C>
void assumptions_fields(Io& io, C& c, int schema) {
  io.nullable("lifetime_years", c.assumptions.lifetime_years);
  io.nullable(key(schema, "utilisation", "utilisation_fraction"), c.assumptions.utilisation);
  io.nullable("electricity_usd_per_kwh", c.assumptions.electricity_usd_per_kwh);
  io.nullable("host_power_w", c.assumptions.host_power_w);
  io.nullable("hours_per_month", c.hours_per_month);
  io.texts("catalog", c.catalog);
}

template <class Io, class C>
void cost_fields(Io& io, C& c, int schema) {
  io.text("model", c.model);
  io.integer("epochs", c.epochs);
  io.integer("steps_per_epoch", c.steps_per_epoch);
  io.object("assumptions", c,
            [schema](auto& a_io, auto& a) { assumptions_fields(a_io, a, schema); });
  io.objects("local", c.local, local_fields);
  io.objects("instances", c.instances, instance_fields);
  io.objects("ownership", c.ownership, owned_fields);
  io.objects("break_even", c.break_even, break_even_fields);
}

constexpr auto cost_list = [](auto& io, auto& r, int schema) { cost_fields(io, r, schema); };

json cost_json(const CostTable& c) { return fields_json(c, with_schema(cost_list, 2)); }

CostTable read_cost(const JsonIn& in, int schema) {
  return read_fields<CostTable>(in, with_schema(cost_list, schema));
}

constexpr auto gpu_option_fields = [](auto& io, auto& g) {
  io.text("how", g.how);
  io.text("id", g.id);
  io.text("name", g.name);
  io.text("device", g.device);
  io.nullable("seconds", g.seconds);
  io.optional_number("usd", g.usd);
  io.flag("predicted", g.predicted);
  io.flag("lower_bound", g.lower_bound);
};

constexpr auto verdict_fields = [](auto& io, auto& v) {
  io.text("model", v.model);
  io.integer("epochs", v.epochs);
  io.text("here", v.here);
  io.nullable("here_seconds", v.here_seconds);
  io.flag("here_estimated", v.here_estimated);
  GpuOption gpu = v.gpu.value_or(GpuOption{});  // null: no GPU measured or priced
  if (io.object_or_null("gpu", v.gpu.has_value(), gpu, gpu_option_fields)) {
    if constexpr (kReads<decltype(io)>) v.gpu = gpu;
  }
  io.flag("worth_it", v.worth_it);
  io.text("sentence", v.sentence);
  io.text("crossover", v.crossover);
  io.text("caution", v.caution);
  // Since advise --trials (0.2.x): absent from earlier files.
  if (io.present("trials")) io.integer("trials", v.trials);
  if (io.present("single_trial")) io.text("single_trial", v.single_trial);
};

json verdict_json(const GpuVerdict& v) { return fields_json(v, verdict_fields); }

GpuVerdict read_verdict(const JsonIn& in) { return read_fields<GpuVerdict>(in, verdict_fields); }

}  // namespace

json to_json(const TrainResult& r) {
  FieldsOut out;
  result_fields::result(out, r, "epochs", 2);
  out.j["schema"] = kTrainSchema;
  return std::move(out.j);
}

json to_json(const Report& report) {
  json j;
  j["schema"] = kReportSchema;
  j["kind"] = report.kind;
  j["title"] = report.title;
  j["created"] = report.created;
  j["complete"] = report.complete;
  j["machine"] = report.machine ? to_json(*report.machine) : json();
  if (report.manifest) j["manifest"] = manifest_json(*report.manifest);
  j["peaks"] = json::array();
  for (const DevicePeaks& p : report.peaks) j["peaks"].push_back(to_json(p));
  j["runs"] = json::array();
  for (const ReportRun& run : report.runs) j["runs"].push_back(run_json(run));
  if (report.sweep) j["sweep"] = sweep_json(*report.sweep);
  if (!report.predictions.empty()) {
    j["predictions"] = json::array();
    for (const DevicePrediction& p : report.predictions)
      j["predictions"].push_back(prediction_json(p));
  }
  if (!report.validation.empty()) {
    j["validation"] = json::array();
    for (const ValidationRow& v : report.validation) j["validation"].push_back(validation_json(v));
  }
  if (report.cost) j["cost"] = cost_json(*report.cost);
  if (report.verdict) j["verdict"] = verdict_json(*report.verdict);
  if (report.advice) j["advice"] = *report.advice;
  return j;
}

Report read_report(const json& doc, const std::string& origin, ReadMode mode) {
  const JsonSource source{origin, mode};
  const auto found = doc.find("schema");  // end() for a document that is not an object
  const std::string name =
      found != doc.end() && found->is_string() ? found->get<std::string>() : "";
  const bool is_report = name == kReportSchema || name == kReportSchemaV1;
  // A lenient read of a document without a schema takes it as the current one.
  const int schema = name == kReportSchemaV1 ? 1 : 2;
  if (!is_report && mode == ReadMode::Strict) {
    throw UserError(fmt::format("{}: not a crossover results.json (expected schema '{}')", origin,
                                kReportSchema));
  }
  const JsonIn in(doc, "", source);
  Report r;
  r.kind = in.text("kind");
  r.title = in.text("title");
  r.created = in.text("created");
  // Required like every field written; a lenient read of a document without it (a hand-made one)
  // does not call it partial.
  r.complete = mode == ReadMode::Lenient && !in.has("complete") ? true : in.flag("complete");
  if (const auto machine = in.object("machine", /*optional=*/true))
    r.machine = read_machine(*machine);
  for (const JsonIn& p : in.objects("peaks")) r.peaks.push_back(read_peaks(p));
  // Files before 0.1.1 have no manifest (and no hashes in their runs); a file with one must
  // have a whole one.
  const bool with_manifest = in.has("manifest");
  if (with_manifest) {
    if (const auto manifest = in.object("manifest")) r.manifest = read_manifest(*manifest);
  }
  for (const JsonIn& run : in.objects("runs", run_name))
    r.runs.push_back(read_run(run, with_manifest, schema));
  if (in.has("sweep")) {
    if (const auto sweep = in.object("sweep")) r.sweep = read_sweep(*sweep, schema);
  }
  if (in.has("predictions")) {
    for (const JsonIn& p : in.objects("predictions"))
      r.predictions.push_back(read_prediction(p, schema));
  }
  if (in.has("validation")) {
    for (const JsonIn& v : in.objects("validation")) r.validation.push_back(read_validation(v));
  }
  if (in.has("cost")) {
    if (const auto cost = in.object("cost")) r.cost = read_cost(*cost, schema);
  }
  if (in.has("verdict")) {
    if (const auto verdict = in.object("verdict")) r.verdict = read_verdict(*verdict);
  }
  if (in.has("advice")) r.advice = in.texts("advice");
  return r;
}

nlohmann::json parse_report_json(const std::string& text, const std::string& origin) {
  check_json_depth(text, origin);
  return json::parse(text, nullptr, false);
}

namespace {

constexpr auto train_document_fields = [](auto& io, auto& d) {
  result_fields::result(io, d.result, "epochs", 2);
  io.object("machine", d.machine, machine_fields);
  io.optional_number("mean_other_cores", d.mean_other_cores);
  io.flag("timings_contaminated", d.timings_contaminated);
};

// The document's text, checked to be a crossover.train/2 file.
json parse_train_json(const std::string& text, const std::string& origin) {
  json doc = parse_report_json(text, origin);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("schema") ||
      doc["schema"] != kTrainSchema) {
    throw UserError(fmt::format("{}: not a crossover train --json file (expected schema '{}')",
                                origin, kTrainSchema));
  }
  return doc;
}

}  // namespace

json to_json(const TrainDocument& doc) {
  json j = fields_json(doc, train_document_fields);
  j["schema"] = kTrainSchema;
  return j;
}

TrainResult read_train_result(const std::string& text, const std::string& origin) {
  const json doc = parse_train_json(text, origin);
  const JsonSource source{origin, ReadMode::Strict};
  const JsonIn in(doc, "", source);
  FieldsIn io(in);
  TrainResult r;
  result_fields::result(io, r, "epochs", 2);
  return r;
}

TrainDocument read_train_document(const std::string& text, const std::string& origin) {
  const json doc = parse_train_json(text, origin);
  const JsonSource source{origin, ReadMode::Strict};
  return read_fields<TrainDocument>(JsonIn(doc, "", source), train_document_fields);
}

namespace {

constexpr const char* kAllreduceSchema = "crossover.allreduce/1";

// A measured link in the units the file shows (us, GB/s): its latency, and by message size the
// point-to-point rate and the rate of the sum's additions.
constexpr auto link_fields = [](auto& io, auto& link) {
  io.text("name", link.name);
  double latency_us = link.latency_s * 1e6;
  io.number("latency_us", latency_us);
  if constexpr (kReads<decltype(io)>) link.latency_s = latency_us / 1e6;
};

template <class Io, class R>
void link_sample_fields(Io& io, R& l, int ranks) {
  io.number("bytes", l.bytes);
  if constexpr (!kReads<Io>) io.number("message_bytes", l.bytes * ranks);
  double gbs = l.bytes_per_s / 1e9, reduce_gbs = 1e-9 / std::max(l.reduce_s_per_byte, 1e-18);
  io.number("gbs", gbs);
  io.number("reduce_gbs", reduce_gbs);
  if constexpr (kReads<Io>) {
    l.bytes_per_s = gbs * 1e9;
    l.reduce_s_per_byte = 1e-9 / reduce_gbs;
  }
}

template <class Io, class R>
void allreduce_size_fields(Io& io, R& row, int ranks) {
  io.integer("bytes", row.bytes);
  double measured_ms = row.measured_s * 1e3, predicted_ms = row.predicted_s * 1e3;
  io.number("measured_ms", measured_ms);
  io.number("predicted_ms", predicted_ms);
  if constexpr (kReads<Io>) {
    row.measured_s = measured_ms / 1e3;
    row.predicted_s = predicted_ms / 1e3;
  } else {
    const double b = static_cast<double>(row.bytes);
    io.number("algbw_gbs", b / row.measured_s / 1e9);
    io.number("busbw_gbs", allreduce_bus_bandwidth(b, ranks, row.measured_s) / 1e9);
    io.number("error", row.error());
  }
}

constexpr auto allreduce_fields = [](auto& io, auto& d) {
  auto& r = d.record;
  io.text("created", d.created);
  io.integer("ranks", r.ranks);
  io.integer("local_ranks", r.local_ranks);
  io.integer("repeat", r.repeat);
  io.object("link", r.link, link_fields);
  const int ranks = r.ranks;
  io.objects("link_by_size", r.link.samples,
             [ranks](auto& s_io, auto& s) { link_sample_fields(s_io, s, ranks); });
  io.objects("sizes", r.sizes,
             [ranks](auto& s_io, auto& s) { allreduce_size_fields(s_io, s, ranks); });
  io.number("median_abs_error", r.median_abs_error);
  io.number("worst_abs_error", r.worst_abs_error);
  io.object("machine", d.machine, machine_fields);
};

}  // namespace

json to_json(const AllreduceDocument& doc) {
  json j = fields_json(doc, allreduce_fields);
  j["schema"] = kAllreduceSchema;
  return j;
}

AllreduceDocument read_allreduce_document(const std::string& text, const std::string& origin) {
  const json doc = parse_report_json(text, origin);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("schema") ||
      doc["schema"] != kAllreduceSchema) {
    throw UserError(fmt::format("{}: not a crossover allreduce --json file (expected schema '{}')",
                                origin, kAllreduceSchema));
  }
  const JsonSource source{origin, ReadMode::Strict};
  AllreduceDocument d = read_fields<AllreduceDocument>(JsonIn(doc, "", source), allreduce_fields);
  // The link's rate where no size is given: its largest sample's, as measured.
  if (!d.record.link.samples.empty()) {
    d.record.link.bytes_per_s = d.record.link.samples.back().bytes_per_s;
    d.record.link.reduce_s_per_byte = d.record.link.samples.back().reduce_s_per_byte;
  }
  return d;
}

}  // namespace xo
