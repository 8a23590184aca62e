// The answer a user came for, before any table: for this model's full training run, the time here,
// the GPU option to weigh (this machine's GPU; else the cheapest cloud instance that is faster than
// here, or the fastest; a GPU to buy only where the catalog rents none), the time it saves and
// what it costs, and one sentence, "a GPU is (not) worth it for this run, because …". Built from
// the predictions and the cost table; every time in it is a run time (run_seconds), the same the
// cost table and the sweep use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/cost.h"
#include "advisor/crossover_point.h"

namespace xo {

// When a GPU is worth it: at least this much faster, and saving at least this much a run (below
// that, starting an instance, copying the data and the code to it, or buying a card does not pay
// back in the user's time).
struct GpuVerdictThresholds {
  double min_speedup = 1.5;
  double min_saving_seconds = kMinSavingSeconds;
};

// A way to train on a GPU.
struct GpuOption {
  std::string how;            // "here" (a GPU of this machine), "rent" or "buy"
  std::string id;             // the local device, the catalog instance or the catalog device
  std::string name;           // as people say it: "AWS g4dn.xlarge (T4)"
  std::string device;         // the GPU: a local device id or a catalog device id
  double seconds = 0;         // the full run there
  std::optional<double> usd;  // rent: on demand; buy: the run's share of owning it; here: none
  bool predicted = true;
  // Predicted at the roofline (efficiency 1) with no GPU measured to calibrate it: the run takes
  // at least this long.
  bool lower_bound = false;
  // A prediction's expected error (the validation table's median for its kind), for the sentence.
  std::optional<double> expected_error;
  std::optional<double> expected_worst;  // and the worst of those rows
  bool expected_at_least = false;        // no row validates its kind: at least these
};

struct GpuVerdict {
  std::string model;
  int64_t epochs = 0;
  std::string here;              // the fastest device measured here
  double here_seconds = 0;       // the full run on it
  bool here_estimated = false;   // from the median step (no epoch completed)
  std::optional<GpuOption> gpu;  // the GPU option weighed; none: no GPU measured or priced
  bool worth_it = false;
  std::string sentence;   // "A GPU is not worth it for this run: …"
  std::string crossover;  // where one device overtakes the other along the sweep; may be empty
  // Why the time here may not be the machine's (other processes kept its cores busy: the
  // contamination warning); empty when the measurement was clean.
  std::string caution;
  // A sweep's verdict (advise --trials K): the run is K trials of the model trained as one fused
  // group (0: one run alone), and `single_trial` the verdict's sentence for one of them alone.
  int64_t trials = 0;
  std::string single_trial;
};

// The leader of a sweep without a crossover: the device fastest at every point two or more series
// share, and the axis range they share. None with fewer than two series or no shared point.
struct SweepLeader {
  std::string device;
  double from = 0, to = 0;  // axis values
};
std::optional<SweepLeader> fastest_throughout(const std::vector<SweepSeries>& series);

// The crossover sentence: "cpu is faster over the whole range of depth (2 to 12, measured)" or
// "t4 (predicted) overtakes cpu at depth 7.2, about 1.3e+05 parameters (predicted)"; empty without
// two series to compare.
std::string crossover_sentence(const std::vector<SweepSeries>& series,
                               const std::vector<Crossover>& crossovers, const std::string& axis,
                               bool predicted);

// The verdict for the run the cost table prices; none when nothing was measured here.
std::optional<GpuVerdict> make_verdict(const std::vector<DevicePrediction>& predictions,
                                       const CostTable& cost, const Catalog& catalog,
                                       std::string crossover, const GpuVerdictThresholds& t = {});

// The catalog GPU a chart plots against a sweep measured here: the one `verdict` weighs where that
// is a catalog device (rented or bought), so that the chart and the verdict name one GPU; else the
// reference GPU (advice.h). Null when the catalog has no GPU.
const CatalogDevice* chart_gpu(const Catalog& catalog, const std::optional<GpuVerdict>& verdict);

}  // namespace xo
