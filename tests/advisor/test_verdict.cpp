// The verdict on hand-made predictions and costs: which GPU option it names, when it says a GPU is
// worth it (faster by the threshold and saving enough time a run) and when not, lower bounds said
// as such; the crossover sentence names the device that leads a sweep without a crossover; and the
// time of a run is one figure in the cost table, the advice and the verdict.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "advisor/verdict.h"

namespace xo {
namespace {

Catalog catalog(bool with_gpu) {
  Catalog c;
  if (with_gpu) {
    c.devices.push_back({"gpu-a", DeviceKind::Gpu, "Test GPU A100x", 10, 0, 0, 1000, 16, 300, 2000,
                         0, 0, "t", "2026-01-01"});
    c.instances.push_back(
        {"cloud-gpu", "Cloud", "g1", "gpu-a", 1, 4, 16, 2.0, 1.0, "r", "t", "2026-01-01"});
  }
  c.devices.push_back({"cpu-a", DeviceKind::Cpu, "Test CPU 9999", 1, 0, 0, 100, 0, 100, 500, 8, 16,
                       "t", "2026-01-01"});
  return c;
}

// This machine's CPU measured at `cpu_ms` a step (an epoch of `epoch_s` where one completed), the
// catalog's GPU predicted at `gpu_ms` (a lower bound: no GPU measured).
std::vector<DevicePrediction> predictions(double cpu_ms, double gpu_ms,
                                          std::optional<double> epoch_s = std::nullopt) {
  DevicePrediction here;
  here.model = "m";
  here.device = "cpu";
  here.name = "Local CPU (this machine)";
  here.local = true;
  here.measured_s = cpu_ms / 1e3;
  here.measured_epoch_s = epoch_s ? *epoch_s : cpu_ms / 1e3 * 10;
  DevicePrediction gpu;
  gpu.model = "m";
  gpu.device = "gpu-a";
  gpu.name = "Test GPU A100x";
  gpu.kind = DeviceKind::Gpu;
  gpu.step.seconds = gpu_ms / 1e3;
  gpu.step.bound = gpu_ms < 1 ? "overhead" : "FLOPs";
  gpu.lower_bound = true;
  return {here, gpu};
}

struct Case {
  const char* name;
  double cpu_ms, gpu_ms;
  int64_t epochs;  // of 10 steps
  bool with_gpu;
  bool worth_it;
  std::vector<std::string> says;  // pieces of the sentence
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class VerdictCase : public ::testing::TestWithParam<Case> {};

TEST_P(VerdictCase, NamesTheOptionAndSaysWhy) {
  const Case& k = GetParam();
  const Catalog c = catalog(k.with_gpu);
  const auto p = predictions(k.cpu_ms, k.gpu_ms);
  const CostTable cost = cost_table("m", 0, k.epochs, 10, p, c, AdviceOptions{});
  const auto v = make_verdict(p, cost, c, "");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->worth_it, k.worth_it) << v->sentence;
  EXPECT_EQ(v->here, "cpu");
  EXPECT_DOUBLE_EQ(v->here_seconds, k.cpu_ms / 1e3 * 10 * static_cast<double>(k.epochs));
  for (const std::string& piece : k.says) {
    EXPECT_NE(v->sentence.find(piece), std::string::npos) << piece << " not in: " << v->sentence;
  }
  if (k.with_gpu) {
    ASSERT_TRUE(v->gpu.has_value());
    EXPECT_TRUE(v->gpu->lower_bound);
    // Renting and buying the GPU take the same time: the rental is named (no purchase for one
    // run; the advice says when buying pays).
    EXPECT_EQ(v->gpu->how, "rent");
    EXPECT_EQ(v->gpu->device, "gpu-a");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Verdicts, VerdictCase,
    ::testing::Values(
        // 40 ms against 1 ms a step, 10,000 epochs of 10 steps: 66.7 min here, 100 s there.
        Case{"much_faster_and_long",
             40,
             1,
             10000,
             true,
             true,
             {"A GPU is worth it for this run: Cloud g1 (gpu-a) would take at least",
              "predicted, a lower bound", "40.0x faster", "on demand"}},
        // The same speed-up on a run of 3 epochs: 1.2 s saved is not worth setting up a GPU.
        Case{"much_faster_but_short",
             40,
             1,
             3,
             true,
             false,
             {"A GPU is not worth it for this run", "40.0x faster", "saves only 1.17 s a run",
              "under 10.0 min saved a run"}},
        // 1.3x faster on a long run: below the speed-up that pays.
        Case{"barely_faster",
             1.3,
             1,
             1000000,
             true,
             false,
             {"A GPU is not worth it for this run", "only 1.3x faster", "below 1.5x"}},
        // The CPU is faster: the model is too small for the GPU's fixed costs.
        Case{"cpu_faster",
             0.4,
             0.5,
             1000,
             true,
             false,
             {"A GPU is not worth it for this run: cpu is faster than every GPU option",
              "too small to keep a GPU busy"}},
        Case{"no_gpu_priced", 40, 1, 10, false, false, {"No GPU to compare"}}),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

// Where every GPU option is slower than here, the fastest is named, and options tied on time go
// to the cheaper: an 8-GPU instance at $55/h does not stand for a one-GPU instance of the same
// speed (every option bound by the same fixed costs) at $1/h.
TEST(Verdict, OptionsTiedOnTimeGoToTheCheaper) {
  Catalog c = catalog(true);
  CatalogInstance eight{"cloud-8gpu", "Cloud", "g8",         "gpu-a", 8,   64,
                        512,          55.0,    std::nullopt, "r",     "t", "2026-01-01"};
  c.instances.insert(c.instances.begin(), eight);  // listed first: it won the tie before
  const auto p = predictions(0.4, 0.5);
  const CostTable cost = cost_table("m", 0, 20, 10, p, c, AdviceOptions{});
  const auto v = make_verdict(p, cost, c, "");
  ASSERT_TRUE(v.has_value());
  ASSERT_TRUE(v->gpu.has_value());
  EXPECT_EQ(v->gpu->id, "cloud-gpu") << v->sentence;
  EXPECT_FALSE(v->worth_it);
}

TEST(Verdict, ARunTimeIsOneFigureInTheCostTableTheAdviceAndTheVerdict) {
  // An epoch measured at 0.5 s (its wall time, slower than 10 median steps of 40 ms) is what a
  // run takes: 20 epochs, 10 s, everywhere.
  const Catalog c = catalog(true);
  const auto p = predictions(40, 1, 0.5);
  const CostTable cost = cost_table("m", 0, 20, 10, p, c, AdviceOptions{});
  ASSERT_EQ(cost.local.size(), 1u);
  EXPECT_DOUBLE_EQ(cost.local[0].run_hours * 3600, 10.0);
  const auto v = make_verdict(p, cost, c, "");
  ASSERT_TRUE(v.has_value());
  EXPECT_DOUBLE_EQ(v->here_seconds, 10.0);
  EXPECT_FALSE(v->here_estimated);
  const auto lines = advice_lines("m", p, cost, "", "");
  EXPECT_NE(lines[0].find(", 10.0 s for 20 epochs of m (measured)"), std::string::npos) << lines[0];
}

TEST(Verdict, WithoutACrossoverTheLeaderIsNamedWithTheRange) {
  const std::vector<SweepSeries> series = {
      {"cpu", {{2, 100, 1.0}, {4, 200, 2.0}, {12, 900, 5.0}}},
      {"t4 (predicted, lower bound)", {{2, 100, 3.0}, {4, 200, 4.0}, {12, 900, 6.0}}}};
  EXPECT_EQ(crossover_sentence(series, {}, "depth", true),
            "cpu is faster over the whole range of depth (2 to 12, predicted): no crossover.");
  const auto leader = fastest_throughout(series);
  ASSERT_TRUE(leader.has_value());
  EXPECT_EQ(leader->device, "cpu");
  // With a crossover, the sentence says where.
  const std::vector<Crossover> crossing = {{"gpu", "cpu", 7.5, 4e5, 6, 8}};
  EXPECT_EQ(crossover_sentence(series, crossing, "depth", false),
            "Crossover (measured): gpu overtakes cpu at depth 7.5, about 400000 parameters.");
  // Between two neighbouring depths no model lies: the crossing is said as between them.
  const std::vector<Crossover> neighbours = {{"gpu", "cpu", 7.97, 4e5, 7, 8}};
  EXPECT_EQ(crossover_sentence(series, neighbours, "depth", true),
            "Crossover (predicted): gpu overtakes cpu between depth 7 and 8, about 400000 "
            "parameters.");
  // One series, or series that share no point: nothing to compare.
  EXPECT_EQ(crossover_sentence({series[0]}, {}, "depth", true), "");
  EXPECT_FALSE(fastest_throughout({series[0], {"gpu", {{3, 1, 1.0}}}}).has_value());
}

}  // namespace
}  // namespace xo
