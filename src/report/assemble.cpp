#include "report/assemble.h"

#include "advisor/cost.h"
#include "advisor/verdict.h"
#include "measure/sampler.h"
#include "model/spec.h"

namespace xo {

void add_advice(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o_in, const std::string& axis, bool crossover_predicted) {
  const AdviceOptions o = with_profiles(o_in);
  report.validation = o.validation;
  report.predictions = predict_devices(focus, runs, peaks, catalog, o);
  const int64_t epochs = parse_spec(focus.spec_toml, focus.result.model).train.epochs;
  report.cost = cost_table(focus.result.model, focus.result.params, epochs,
                           focus.result.steps_per_epoch, report.predictions, catalog, o);
  const std::string crossover =
      report.sweep ? crossover_sentence(as_series(*report.sweep), report.sweep->crossovers, axis,
                                        crossover_predicted)
                   : "";
  report.verdict = make_verdict(report.predictions, *report.cost, catalog, crossover);
  if (report.verdict && focus.utilisation) {
    const TrainResult& r = focus.result;
    report.verdict->caution =
        contamination_warning(*focus.utilisation, r.model + " on " + r.device.id,
                              r.device.kind == DeviceKind::Cpu ? r.device.threads : 0);
  }
  const std::string verdict_device =
      report.verdict && report.verdict->gpu ? report.verdict->gpu->device : "";
  report.advice =
      advice_lines(focus.result.model, report.predictions, *report.cost, crossover, verdict_device);
}

}  // namespace xo
