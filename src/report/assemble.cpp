#include "report/assemble.h"

#include "advisor/cost.h"
#include "advisor/crossover_point.h"
#include "advisor/sweep.h"
#include "advisor/verdict.h"
#include "advisor/width_sweep.h"
#include "measure/sampler.h"
#include "model/spec.h"
#include "train/trainer.h"

namespace xo {

namespace {

// Predictions, cost and the verdict for `focus` (for o.trials fused trials where it is set); the
// crossover and the advice lines come once the chart is drawn (add_crossover_and_lines).
void add_verdict(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                 const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                 const AdviceOptions& o) {
  if (o.expected_errors) report.validation = shipped_validation();
  report.predictions = predict_devices(focus, runs, peaks, catalog, o);
  const int64_t epochs = parse_spec(focus.spec_toml, focus.result.model).train.epochs;
  report.cost = cost_table(focus.result.model, focus.result.params, epochs,
                           focus.result.steps_per_epoch, report.predictions, catalog, o);
  report.verdict = make_verdict(report.predictions, *report.cost, catalog, "");
  if (report.verdict) report.verdict->trials = o.trials;
  if (report.verdict && focus.utilisation) {
    const TrainResult& r = focus.result;
    report.verdict->caution =
        contamination_warning(*focus.utilisation, r.model + " on " + r.device.id,
                              r.device.kind == DeviceKind::Cpu ? r.device.threads : 0);
  }
}

// The crossover of the report's sweep (along `axis`, predicted or measured), if it has one, in the
// verdict and the advice lines under it.
void add_crossover_and_lines(Report& report, const RunRecord& focus, const std::string& axis,
                             bool crossover_predicted) {
  const std::string crossover =
      report.sweep ? crossover_sentence(as_series(*report.sweep), report.sweep->crossovers, axis,
                                        crossover_predicted)
                   : "";
  if (report.verdict) report.verdict->crossover = crossover;
  // Buying is advised on only for a GPU that is worth it for this run.
  const std::string verdict_device =
      report.verdict && report.verdict->gpu && report.verdict->worth_it
          ? report.verdict->gpu->device
          : "";
  report.advice =
      advice_lines(focus.result.model, report.predictions, *report.cost, crossover, verdict_device);
}

// The sweep section of `rows` along `axis` with `gpu` predicted at every point (chart_gpu's: the
// verdict's GPU) where no GPU was measured. Whether a predicted line was added.
bool add_sweep(Report& report, const std::vector<RunRecord>& rows,
               const std::vector<DevicePeaks>& peaks, const std::string& axis,
               const Catalog& catalog, const AdviceOptions& o) {
  std::vector<SweepSeries> series = sweep_series(rows);
  std::vector<std::string> predicted;
  const CatalogDevice* gpu = chart_gpu(catalog, report.verdict);
  if (auto line = predicted_gpu_series(rows, peaks, o, gpu)) {
    predicted.push_back(line->device);
    series.push_back(std::move(*line));
  }
  report.sweep = sweep_record(axis, series, find_crossovers(series), predicted);
  for (SweepLine& line : report.sweep->series) {
    if (line.predicted) line.note = chart_gpu_note(catalog, o, *gpu);
  }
  return !predicted.empty();
}

}  // namespace

void add_advice(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o_in, const std::string& axis, bool crossover_predicted) {
  const AdviceOptions o = with_profiles(o_in);
  add_verdict(report, focus, runs, peaks, catalog, o);
  add_crossover_and_lines(report, focus, axis, crossover_predicted);
}

void add_sweep_and_advice(Report& report, const std::vector<DevicePeaks>& peaks,
                          const std::vector<RunRecord>& rows, const std::string& axis,
                          const Catalog& catalog, const AdviceOptions& advice_in) {
  if (rows.empty()) return;
  const AdviceOptions advice = with_profiles(advice_in);
  // Advice for the largest model of the sweep on the first device that learned something (a
  // verdict about a model that learned nothing beyond the class balance, as disc-12 may, answers
  // no one's question); the largest where none did.
  const RunRecord* focus = &rows.front();
  auto learned = [](const RunRecord& r) { return stuck_warning(r.result).empty(); };
  for (const RunRecord& r : rows) {
    if (r.result.device.id != focus->result.device.id) continue;
    const bool better =
        learned(r) == learned(*focus) ? r.axis_value > focus->axis_value : learned(r);
    if (better) focus = &r;
  }
  // The verdict first: the chart plots the GPU it weighs.
  add_verdict(report, *focus, rows, peaks, catalog, advice);
  const bool predicted = add_sweep(report, rows, peaks, axis, catalog, advice);
  add_crossover_and_lines(report, *focus, axis, predicted);
}

void add_width_sweep_and_advice(Report& report, const ModelSpec& spec, const RunRecord& focus,
                                const std::vector<RunRecord>& runs,
                                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                                const AdviceOptions& o_in) {
  const AdviceOptions o = with_profiles(o_in);
  add_verdict(report, focus, runs, peaks, catalog, o);
  // The CPU at bf16 where it was measured beside: the crossover at bf16 too.
  const RunRecord* bf16 = nullptr;
  for (const RunRecord& r : runs) {
    if (r.result.model == focus.result.model && r.result.device.kind == DeviceKind::Cpu &&
        r.result.device.precision == "bf16" && &r != &focus) {
      bf16 = &r;
    }
  }
  report.sweep = predicted_width_sweep(spec, focus, peaks, catalog, o,
                                       chart_gpu(catalog, report.verdict), bf16);
  add_crossover_and_lines(report, focus, "width", true);
}

void add_trials_advice(Report& report, const std::vector<RunRecord>& runs, int trials,
                       const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                       const AdviceOptions& o_in) {
  const AdviceOptions o = with_profiles(o_in);
  std::vector<RunRecord> alone, groups, largest;
  for (const RunRecord& r : runs) {
    if (r.axis.empty()) alone.push_back(r);
    if (r.axis != "trials") continue;
    groups.push_back(r);
    if (r.axis_value == trials) largest.push_back(r);
  }
  // The verdict for the largest group (the model alone where the job stopped before it), then the
  // chart of the groups with the GPU that verdict weighs.
  AdviceOptions fused = o;
  fused.trials = trials;
  const bool whole = !largest.empty();
  if (!whole && alone.empty()) {  // nothing to advise on: the groups' chart alone
    if (!groups.empty()) add_sweep(report, groups, peaks, "trials", catalog, o);
    return;
  }
  const std::vector<RunRecord>& focus_runs = whole ? largest : alone;
  add_verdict(report, focus_runs.front(), focus_runs, peaks, catalog, whole ? fused : o);
  const bool predicted = !groups.empty() && add_sweep(report, groups, peaks, "trials", catalog, o);
  add_crossover_and_lines(report, focus_runs.front(), whole ? "trials" : "",
                          whole ? predicted : true);
  if (whole && report.verdict && !alone.empty()) {
    Report one;
    add_advice(one, alone.front(), alone, peaks, catalog, o, "", true);
    if (one.verdict) report.verdict->single_trial = one.verdict->sentence;
  }
}

}  // namespace xo
