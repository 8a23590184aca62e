#include "cli/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/interrupt.h"
#include "data/source.h"
#include "measure/sampler.h"
#include "model/model.h"
#include "report/machine.h"

namespace xo::cli {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_left(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  if (seconds < 5400) return fmt::format("{:.0f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

}  // namespace

void add_measure_options(CLI::App* sub, MeasureOptions& o, bool with_steps) {
  sub->add_option("--out", o.out, "Folder for results.json, results.csv and report.html")
      ->capture_default_str();
  sub->add_option("--devices", o.devices, "Devices (default: every device present)")
      ->delimiter(',');
  sub->add_option("--epochs", o.epochs, "Override every model's epochs")->check(positive_number());
  if (with_steps) {
    sub->add_option("--steps", o.max_steps,
                    "Measure at most N training steps per model (time per epoch is then the "
                    "median step times the steps per epoch, and says so)")
        ->check(non_negative_integer());
  }
  sub->add_option("--threads", o.threads, "CPU threads (0 = all cores)")
      ->check(non_negative_integer());
  sub->add_flag("--reprobe", o.reprobe, "Measure each device's peaks again (they are cached)");
  add_gpu_options(sub, o.precision, o.record_step);
}

void add_gpu_options(CLI::App* sub, std::string& precision, bool& record_step) {
  sub->add_option("--precision", precision,
                  "GPU matmul arithmetic: f32 (the CPU's, default), tf32 or bf16 (tensor cores; "
                  "f32 master weights). The CPU always computes in f32")
      ->capture_default_str();  // checked by parse_precision, whose error names the choices
  sub->add_flag("!--no-graph", record_step,
                "Launch every kernel of a GPU step from the host instead of replaying the step "
                "as one CUDA Graph (shows what the graph buys)");
}

void add_cost_options(CLI::App* sub, CostOptions& o) {
  sub->add_option("--catalog", o.catalogs,
                  "A catalog file merged over the shipped data/catalog.toml (same id replaces)");
  sub->add_option("--price", o.prices,
                  "Override a price: INSTANCE=USD_PER_HOUR, INSTANCE.spot=USD_PER_HOUR or "
                  "DEVICE=PURCHASE_USD");
  OwnershipAssumptions& a = o.advice.ownership;
  sub->add_option("--lifetime-years", a.lifetime_years, "Years owned hardware is written off over")
      ->capture_default_str();
  sub->add_option("--utilisation", a.utilisation,
                  "Fraction of its lifetime owned hardware is in use, in (0, 1]")
      ->capture_default_str();
  sub->add_option("--electricity-price", a.electricity_usd_per_kwh, "USD per kWh")
      ->capture_default_str();
  sub->add_option("--host-power", a.host_power_w, "Watts of the machine around an owned GPU")
      ->capture_default_str();
  sub->add_option("--hours-per-month", o.advice.hours_per_month,
                  "Use per month at which payback times are given")
      ->check(positive_number())
      ->capture_default_str();
}

Catalog load_user_catalog(const CostOptions& o) {
  check_assumptions(o.advice.ownership);
  Catalog c = load_catalog(default_catalog_path());
  for (const std::string& file : o.catalogs) c = merge_catalogs(std::move(c), load_catalog(file));
  for (const std::string& p : o.prices) apply_price_override(c, p);
  return c;
}

Session::Session(const MeasureOptions& o) : o_(o), started_(now_seconds()) {
  devices_ = o.devices;
  if (devices_.empty()) {
    const DeviceList list = list_devices();
    devices_ = list.available;
    for (const auto& why : list.unavailable_reasons) fmt::print(stderr, "note: {}\n", why);
  }
  machine_ = describe_machine();
  for (std::string& d : devices_) {
    Backend& be = backend(d);
    d = be.info().id;  // "auto" and "cuda" name the device they resolved to
    progress_.update(fmt::format("probing the peaks of {}...", be.info().id));
    DevicePeaks p = device_peaks(be, o.reprobe, default_peaks_cache());
    progress_.clear();
    fmt::print(stderr, "{}: f32 matmul {:.1f} GFLOP/s, memory {:.1f} GB/s, step overhead {:.1f} µs{}\n",
               p.device, p.matmul_gflops, p.bandwidth_gbs, p.step_overhead_us,
               p.cached ? " (cached; --reprobe measures again)" : " (measured now)");
    peaks_.push_back(std::move(p));
  }
}

Backend& Session::backend(const std::string& device) {
  for (const auto& be : backends_) {
    if (be->info().id == device) return *be;
  }
  backends_.push_back(make_backend(parse_device(device, o_.threads, o_.precision)));
  // "auto" and "cuda" name the device they resolve to from here on.
  return *backends_.back();
}

const SweepRow& Session::measure(const ModelSpec& spec_in, const std::string& device, size_t job,
                                 size_t jobs, const std::string& axis, double axis_value) {
  ModelSpec spec = spec_in;
  if (o_.epochs) spec.train.epochs = *o_.epochs;
  Backend& be = backend(device);
  const std::string label = fmt::format("{} on {}", spec.name, be.info().id);
  const double job_start = now_seconds();
  progress_.update(fmt::format("[{}/{}] {}: loading data", job + 1, jobs, label));
  Model model(spec, be);
  const DataSplit data = load_data(spec.data, data_request(spec, model.classes()));
  model.init(spec.train.seed);
  reset_peak_resident();  // the peak memory below is this run's
  // NVML numbers GPUs as CUDA does when CUDA_VISIBLE_DEVICES is unset (the usual case).
  int gpu_index = -1;
  if (be.info().kind == "cuda") {
    const auto colon = be.info().id.find(':');
    gpu_index = colon == std::string::npos ? 0 : std::atoi(be.info().id.c_str() + colon + 1);
  }
  Sampler sampler(o_.sample_interval_s, gpu_index);
  sampler.start();
  ExecutionOptions exec;
  exec.profile_steps = o_.profile_steps;
  exec.max_steps = o_.max_steps;
  exec.record_step = o_.record_step;
  TrainResult r = train_model(
      model, data, spec.train,
      [&](const EpochRecord& e, int64_t n) {
        const double done = static_cast<double>(e.epoch) / static_cast<double>(n);
        const double fraction = (static_cast<double>(job) + done) / static_cast<double>(jobs);
        const double elapsed = now_seconds() - started_;
        const double this_left = (now_seconds() - job_start) / done * (1 - done);
        progress_.bar(fraction, fmt::format("[{}/{}] {}: epoch {}/{}, loss {:.4f}; this model "
                                            "~{} left, all ~{} left",
                                            job + 1, jobs, label, e.epoch, n, e.loss,
                                            format_left(this_left),
                                            format_left(elapsed / fraction * (1 - fraction))));
      },
      exec);
  sampler.stop();
  progress_.clear();
  SweepRow row;
  row.layers = weighted_layers(spec);
  row.axis = axis;
  row.axis_value = axis_value;
  row.spec_toml = to_toml(spec);
  row.cost = step_cost(model, r.batch);
  row.utilisation = sampler.timeline_json();
  row.peak_rss_mib = peak_resident_mib();
  const DevicePeaks* peaks = find_peaks(peaks_, be.info().id);
  fmt::print(stderr, "{}: {:.4f} ms/step, {:.1f} GFLOP/s{}, train error {:.2f}%\n", label,
             r.step_ms.median, r.gflops,
             peaks ? fmt::format(" ({:.1f}% of peak)", 100 * r.gflops / peaks->matmul_gflops) : "",
             r.final_train_error);
  stopped_ = r.interrupted || stop_requested();
  row.result = std::move(r);
  rows_.push_back(std::move(row));
  return rows_.back();
}

nlohmann::json Session::report(const std::string& kind, const std::string& title) const {
  nlohmann::json j;
  j["schema"] = kReportSchema;
  j["kind"] = kind;
  j["title"] = title;
  j["created"] = machine_.value("date", "");
  j["complete"] = !stopped_;
  j["machine"] = machine_;
  j["peaks"] = nlohmann::json::array();
  for (const DevicePeaks& p : peaks_) j["peaks"].push_back(to_json(p));
  j["runs"] = nlohmann::json::array();
  for (const SweepRow& row : rows_) j["runs"].push_back(run_json(row, find_peaks(peaks_, row.result.device.id)));
  return j;
}

std::vector<SweepSeries> sweep_series(const std::vector<SweepRow>& rows) {
  std::vector<SweepSeries> series;
  for (const SweepRow& row : rows) {
    SweepSeries* s = nullptr;
    for (SweepSeries& existing : series) {
      if (existing.device == row.result.device.id) s = &existing;
    }
    if (!s) {
      series.push_back({row.result.device.id, {}});
      s = &series.back();
    }
    s->points.push_back({row.axis_value, static_cast<double>(row.result.params),
                         seconds_per_100_epochs(row.result)});
  }
  return series;
}

nlohmann::json sweep_json(const std::string& axis, const std::vector<SweepSeries>& series,
                          const std::vector<Crossover>& crossovers,
                          const std::vector<std::string>& predicted_devices) {
  nlohmann::json j;
  j["axis"] = axis;
  // Parameters on x when they change along the axis; else the axis itself (batch, sequence).
  bool params_vary = false;
  for (const SweepSeries& s : series) {
    for (const SweepPoint& p : s.points) params_vary |= p.params != s.points.front().params;
  }
  j["x"] = params_vary ? "params" : "axis_value";
  j["series"] = nlohmann::json::array();
  for (const SweepSeries& s : series) {
    nlohmann::json points = nlohmann::json::array();
    for (const SweepPoint& p : s.points) {
      points.push_back({{"axis_value", p.axis_value},
                        {"params", p.params},
                        {"seconds_per_100_epochs", p.seconds}});
    }
    const bool predicted =
        std::find(predicted_devices.begin(), predicted_devices.end(), s.device) != predicted_devices.end();
    j["series"].push_back({{"device", s.device}, {"predicted", predicted}, {"points", points}});
  }
  j["crossovers"] = nlohmann::json::array();
  for (const Crossover& c : crossovers) {
    j["crossovers"].push_back({{"faster", c.faster},
                               {"slower", c.slower},
                               {"axis_value", c.axis_value},
                               {"params", c.params},
                               {"between", {c.below_axis, c.above_axis}}});
  }
  return j;
}

std::optional<SweepSeries> predicted_gpu_series(const std::vector<SweepRow>& rows,
                                                const std::vector<DevicePeaks>& peaks,
                                                const Catalog& catalog, const AdviceOptions& o) {
  for (const SweepRow& row : rows) {
    if (row.result.device.kind == "cuda") return std::nullopt;  // a GPU was measured
  }
  const CatalogDevice* gpu = reference_gpu(catalog);
  if (!gpu || rows.empty()) return std::nullopt;
  SweepSeries s{gpu->id + " (predicted)", {}};
  const DeviceRates rates = catalog_rates(*gpu, peaks, o);
  const std::string first_device = rows.front().result.device.id;
  for (const SweepRow& row : rows) {
    if (row.result.device.id != first_device) continue;
    const double step = predict_step(row.cost, rates, 1.0).seconds;
    s.points.push_back({row.axis_value, static_cast<double>(row.result.params),
                        step * static_cast<double>(row.result.steps_per_epoch) * 100});
  }
  return s;
}

void add_advice(nlohmann::json& report, const SweepRow& focus, const std::vector<SweepRow>& rows,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o, const std::vector<Crossover>& crossovers,
                const std::string& axis, bool crossover_predicted) {
  const std::vector<DevicePrediction> p = predict_devices(focus, rows, peaks, catalog, o);
  const int64_t epochs = parse_spec(focus.spec_toml, focus.result.model).train.epochs;
  const nlohmann::json cost =
      cost_json(focus.result.model, epochs, focus.result.steps_per_epoch, p, catalog, o);
  report["predictions"] = predictions_json(focus.result.model, p);
  report["cost"] = cost;
  report["advice"] = advice_lines(focus.result.model, p, cost, crossovers, axis, crossover_predicted);
}

}  // namespace xo::cli
