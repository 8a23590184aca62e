#include "report/assemble.h"

#include "advisor/cost.h"
#include "advisor/crossover_point.h"
#include "advisor/sweep.h"
#include "advisor/verdict.h"
#include "measure/sampler.h"
#include "model/spec.h"
#include "train/trainer.h"

namespace xo {

void add_advice(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o_in, const std::string& axis, bool crossover_predicted) {
  const AdviceOptions o = with_profiles(o_in);
  if (o.expected_errors) report.validation = shipped_validation();
  report.predictions = predict_devices(focus, runs, peaks, catalog, o);
  const int64_t epochs = parse_spec(focus.spec_toml, focus.result.model).train.epochs;
  report.cost = cost_table(focus.result.model, focus.result.params, epochs,
                           focus.result.steps_per_epoch, report.predictions, catalog, o);
  const std::string crossover =
      report.sweep ? crossover_sentence(as_series(*report.sweep), report.sweep->crossovers, axis,
                                        crossover_predicted)
                   : "";
  report.verdict = make_verdict(report.predictions, *report.cost, catalog, crossover);
  if (report.verdict) report.verdict->trials = o.trials;
  if (report.verdict && focus.utilisation) {
    const TrainResult& r = focus.result;
    report.verdict->caution =
        contamination_warning(*focus.utilisation, r.model + " on " + r.device.id,
                              r.device.kind == DeviceKind::Cpu ? r.device.threads : 0);
  }
  // Buying is advised on only for a GPU that is worth it for this run.
  const std::string verdict_device =
      report.verdict && report.verdict->gpu && report.verdict->worth_it
          ? report.verdict->gpu->device
          : "";
  report.advice =
      advice_lines(focus.result.model, report.predictions, *report.cost, crossover, verdict_device);
}

void add_sweep_and_advice(Report& report, const std::vector<DevicePeaks>& peaks,
                          const std::vector<RunRecord>& rows, const std::string& axis,
                          const Catalog& catalog, const AdviceOptions& advice_in) {
  if (rows.empty()) return;
  const AdviceOptions advice = with_profiles(advice_in);
  std::vector<SweepSeries> series = sweep_series(rows);
  std::vector<std::string> predicted;
  if (auto gpu = predicted_gpu_series(rows, peaks, catalog, advice)) {
    predicted.push_back(gpu->device);
    series.push_back(std::move(*gpu));
  }
  const std::vector<Crossover> crossovers = find_crossovers(series);
  report.sweep = sweep_record(axis, series, crossovers, predicted);
  for (SweepLine& line : report.sweep->series) {
    if (line.predicted) line.note = reference_gpu_note(catalog, advice);
  }
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
  add_advice(report, *focus, rows, peaks, catalog, advice, axis, !predicted.empty());
}

void add_trials_advice(Report& report, const std::vector<RunRecord>& runs, int trials,
                       const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                       const AdviceOptions& o_in) {
  const AdviceOptions o = with_profiles(o_in);
  std::vector<RunRecord> alone, groups, largest;
  std::vector<std::string> predicted;  // the predicted lines of the chart
  for (const RunRecord& r : runs) {
    if (r.axis.empty()) alone.push_back(r);
    if (r.axis != "trials") continue;
    groups.push_back(r);
    if (r.axis_value == trials) largest.push_back(r);
  }
  if (!groups.empty()) {
    std::vector<SweepSeries> series = sweep_series(groups);
    if (auto gpu = predicted_gpu_series(groups, peaks, catalog, o)) {
      predicted.push_back(gpu->device);
      series.push_back(std::move(*gpu));
    }
    report.sweep = sweep_record("trials", series, find_crossovers(series), predicted);
    for (SweepLine& line : report.sweep->series) {
      if (line.predicted) line.note = reference_gpu_note(catalog, o);
    }
  }
  if (largest.empty()) {  // stopped before the largest group: the model alone
    if (!alone.empty()) add_advice(report, alone.front(), alone, peaks, catalog, o, "", true);
    return;
  }
  AdviceOptions fused = o;
  fused.trials = trials;
  add_advice(report, largest.front(), largest, peaks, catalog, fused, "trials", !predicted.empty());
  if (report.verdict && !alone.empty()) {
    Report one;
    add_advice(one, alone.front(), alone, peaks, catalog, o, "", true);
    if (one.verdict) report.verdict->single_trial = one.verdict->sentence;
  }
}

}  // namespace xo
