// The advisor's assembly on a hand-made catalog: predictions use the datasheet at the achievable
// fraction and the calibrated efficiency, costs are hours times prices, CPU instances get their
// share of the chip, break-even against another device is for the same work, and the advice names
// measured and predicted figures as such.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "advisor/advice.h"
#include "report/report_json.h"

namespace xo {
namespace {

Catalog hand_catalog() {
  Catalog c;
  // A GPU of 10 TFLOP/s and 1000 GB/s, $2000; a CPU of 1 TFLOP/s, 100 GB/s, 8 cores/16 threads.
  c.devices.push_back({"gpu-a", DeviceKind::Gpu, "Test GPU A100x", 10, 0, 0, 1000, 16, 300, 2000, 0,
                       0, "t", "2026-01-01"});
  c.devices.push_back({"cpu-a", DeviceKind::Cpu, "Test CPU 9999", 1, 0, 0, 100, 0, 100, 500, 8, 16,
                       "t", "2026-01-01"});
  c.instances.push_back(
      {"cloud-gpu", "Cloud", "g1", "gpu-a", 1, 4, 16, 2.0, 1.0, "r", "t", "2026-01-01"});
  c.instances.push_back(
      {"cloud-cpu", "Cloud", "c2", "cpu-a", 1, 2, 4, 0.1, std::nullopt, "r", "t", "2026-01-01"});
  return c;
}

// A measured run on this machine's CPU: one FLOP-bound layer of 8e9 FLOPs.
RunRecord measured_run(double measured_ms) {
  RunRecord row;
  row.result.model = "m";
  row.result.device.id = "cpu";
  row.result.device.kind = DeviceKind::Cpu;
  row.result.device.name = "Local CPU";
  row.result.step_ms.median = measured_ms;
  row.result.steps_per_epoch = 10;
  row.work.layers = {{"0 linear", 0, 8e9, 1e3}};
  row.work.flops = 8e9;
  row.work.bytes = 1e3;
  return row;
}

DevicePeaks local_peaks() {
  DevicePeaks p;
  p.device = "cpu";
  p.name = "Local CPU";
  p.matmul_gflops = 400;  // 8e9 FLOPs: 20 ms at the peak
  p.bandwidth_gbs = 50;
  return p;
}

TEST(Advice, PredictionsCostsAndBreakEvenByHand) {
  const Catalog c = hand_catalog();
  const RunRecord row = measured_run(40);  // 40 ms measured: efficiency 0.5 of the 20 ms roofline
  AdviceOptions o;
  const auto p = predict_devices(row, {row}, {local_peaks()}, c, o);
  ASSERT_EQ(p.size(), 3u);  // this CPU, the GPU, the CPU
  EXPECT_TRUE(p[0].local);
  EXPECT_NEAR(p[0].step.seconds, 0.020, 1e-12);  // the uncalibrated roofline
  EXPECT_NEAR(*p[0].measured_s, 0.040, 1e-12);
  // GPU: not measured here: efficiency 1, 80% of 10 TFLOP/s = 8e12 -> 1 ms + 10 us + 6 us.
  EXPECT_EQ(p[1].device, "gpu-a");
  EXPECT_NEAR(p[1].step.seconds, 1e-3 + 16e-6, 1e-12);
  EXPECT_FALSE(p[1].measured_s.has_value());
  // Catalog CPU: the local efficiency 0.5 carries over: 8e9 / (0.8e12 * 0.5) = 20 ms.
  EXPECT_NEAR(p[2].step.seconds, 0.020, 1e-12);

  const CostTable cost = cost_table("m", 0, 3, 10, p, c, o);  // 30 steps
  ASSERT_EQ(cost.instances.size(), 2u);
  const auto& gpu = cost.instances[0];
  const double gpu_hours = 30 * (1e-3 + 16e-6) / 3600;
  EXPECT_NEAR(gpu.run_hours, gpu_hours, 1e-15);
  EXPECT_NEAR(gpu.on_demand_usd, 2.0 * gpu_hours, 1e-15);
  EXPECT_NEAR(gpu.spot_usd.value(), 1.0 * gpu_hours, 1e-15);
  // The CPU instance rents 2 of the chip's 16 threads: the work takes 8x as long.
  const auto& cpu = cost.instances[1];
  EXPECT_NEAR(cpu.run_hours, 30 * 0.020 * 8 / 3600, 1e-15);
  EXPECT_FALSE(cpu.spot_usd.has_value());
  // Owning the CPU: $500 over 3 years at 50% use, 100 W at $0.15/kWh.
  const auto& own_cpu = cost.ownership[1];
  const double capital = 500 / (3 * 365.25 * 24 * 0.5), power = 0.1 * 0.15;
  EXPECT_NEAR(own_cpu.hourly_capital_usd, capital, 1e-12);
  EXPECT_NEAR(own_cpu.run_usd, 30 * 0.020 / 3600 * (capital + power), 1e-15);
  // Break-even for the CPU against the CPU instance: the same work costs 0.1 $/h * 8 per hour of
  // the owned CPU; monthly capital 500 / 36.
  const auto& be = cost.break_even[1];
  EXPECT_EQ(be.instance, "cloud-cpu");
  EXPECT_NEAR(be.hours_per_month.value(), (500.0 / 36) / (0.8 - power), 1e-9);
  // The GPU against its own instance: 2 $/h, 300 W + 150 W host.
  const auto& be_gpu = cost.break_even[0];
  EXPECT_TRUE(be_gpu.same_device);
  EXPECT_EQ(pairing_text(be_gpu), "the same device, rented");
  CostTable::BuyOrRent other = be_gpu;
  other.same_device = false;
  EXPECT_EQ(pairing_text(other),
            "no instance in the catalog rents a Test GPU A100x alone: the single-device instance "
            "of its kind with the cheapest run, priced for the same work");
  EXPECT_NEAR(be_gpu.hours_per_month.value(), (2000.0 / 36) / (2.0 - 0.45 * 0.15), 1e-9);

  const auto lines = advice_lines("m", p, cost, "cpu is faster over the whole range", "gpu-a");
  ASSERT_GE(lines.size(), 5u);
  EXPECT_NE(lines[0].find("Fastest here: cpu"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("(measured)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("Test GPU A100x"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("predicted"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("Cloud g1"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3], "cpu is faster over the whole range");
  // Buying the GPU the verdict names, against renting the same GPU.
  EXPECT_NE(lines[4].find("Buying the Test GPU A100x beats renting one on cloud-gpu above"),
            std::string::npos)
      << lines[4];
}

TEST(Advice, ALocalDeviceInTheCatalogIsMeasuredAndPredicted) {
  Catalog c = hand_catalog();
  RunRecord row = measured_run(40);
  row.result.device.name = "Test CPU 9999 64-Core";  // the same model as the catalog's cpu-a
  const auto p = predict_devices(row, {row}, {local_peaks()}, c, AdviceOptions{});
  ASSERT_EQ(p.size(), 3u);
  ASSERT_TRUE(p[2].measured_s.has_value());
  EXPECT_NEAR(*p[2].measured_s, 0.040, 1e-12);
  EXPECT_FALSE(p[1].measured_s.has_value());  // a GPU never stands for a CPU
  const auto j = to_json(Report{.predictions = p})["predictions"];
  EXPECT_NEAR(j[2]["error_percent"].get<double>(), 100 * (0.020 - 0.040) / 0.040, 1e-9);
}

// An instance of 8 of the hand catalog's gpu-a, $16/h, their link 100 GB/s ("TestLink").
CatalogInstance eight_gpu_instance() {
  CatalogInstance eight{"cloud-8gpu", "Cloud", "g8",         "gpu-a", 8,   64,
                        512,          16.0,    std::nullopt, "r",     "t", "2026-01-01"};
  eight.interconnect = "TestLink";
  eight.interconnect_gbs = 100;
  return eight;
}

// A multi-GPU instance with its link: the run on all its GPUs, data-parallel, by hand: each GPU's
// slice (the step's work divided, its fixed costs not: no profile here), plus the ring
// all-reduce of the gradients that backward does not hide; written to JSON and read back; the
// advice compares it with the single-GPU instance.
TEST(Advice, AMultiGpuInstanceIsPricedOnAllItsGpus) {
  Catalog c = hand_catalog();
  c.instances.push_back(eight_gpu_instance());
  const RunRecord row = measured_run(40);
  AdviceOptions o;
  const auto p = predict_devices(row, {row}, {local_peaks()}, c, o);
  // 1e8 parameters: 400 MB of gradients.
  const CostTable cost = cost_table("m", 100'000'000, 3, 10, p, c, o);
  ASSERT_EQ(cost.instances.size(), 3u);
  EXPECT_FALSE(cost.instances[0].scale_out.has_value());  // one GPU: nothing to scale
  const auto& x = cost.instances[2].scale_out;
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(x->devices, 8);
  // Whole step 1.016 ms (16 us fixed); the slice: 16 us + 1 ms / 8.
  const double whole = 1e-3 + 16e-6, slice = 16e-6 + 1e-3 / 8;
  EXPECT_NEAR(x->compute_s, slice, 1e-12);
  // Ring: 14 steps of 50 MB at 100 GB/s, 5 us each: 7 ms + 70 us, all after backward (crossover's
  // engine does not overlap it).
  const double allreduce = 14 * (5e-6 + 50e6 / 100e9);
  EXPECT_NEAR(x->allreduce_s, allreduce, 1e-12);
  EXPECT_NEAR(x->exposed_s, allreduce, 1e-12);
  EXPECT_NEAR(x->step_s, slice + allreduce, 1e-12);
  EXPECT_NEAR(x->efficiency, whole / (8 * x->step_s), 1e-12);
  EXPECT_NEAR(x->run_hours, 30 * x->step_s / 3600, 1e-15);
  EXPECT_NEAR(x->on_demand_usd, 16.0 * x->run_hours, 1e-15);
  // The instance's own row stays the run on one of its GPUs.
  EXPECT_NEAR(cost.instances[2].run_hours, 30 * whole / 3600, 1e-15);

  Report report;
  report.kind = "advise";
  report.cost = cost;
  const Report read = read_report(to_json(report), "test");
  ASSERT_TRUE(read.cost.has_value());
  const CostTable& back = *read.cost;
  ASSERT_TRUE(back.instances[2].scale_out.has_value());
  EXPECT_DOUBLE_EQ(back.instances[2].scale_out->step_s, x->step_s);
  EXPECT_EQ(back.instances[2].scale_out->link, "TestLink");
  EXPECT_FALSE(back.instances[0].scale_out.has_value());

  // 400 MB over 100 GB/s outweighs the slices: slower than one GPU, so the advice leaves it
  // unsaid (the cost table has it).
  for (const std::string& l : advice_lines("m", p, cost, "", "")) {
    EXPECT_EQ(l.find("Scaling out"), std::string::npos) << l;
  }
  // A long run of a small model (1,000 parameters: 4 KB of gradients; 10^6 steps of 1 ms) gains
  // nearly 8x on the 8 GPUs and saves far more than kMinSavingSeconds: said, against one GPU.
  const CostTable long_run = cost_table("m", 1000, 1000, 1000, p, c, o);
  bool said = false;
  for (const std::string& l : advice_lines("m", p, long_run, "", "")) {
    if (l.find("Scaling out: Cloud g8's 8x gpu-a data-parallel over TestLink") == 0) {
      said = true;
      EXPECT_NE(l.find("x faster than one of them"), std::string::npos) << l;
    }
  }
  EXPECT_TRUE(said);
  // The same saving under a threshold larger than it: unsaid.
  const double saved_s =
      3600 * (long_run.instances[2].run_hours - long_run.instances[2].scale_out->run_hours);
  for (const std::string& l : advice_lines("m", p, long_run, "", "", 2 * saved_s)) {
    EXPECT_EQ(l.find("Scaling out"), std::string::npos) << l;
  }
}

// An instance whose network the catalog gives: the run on every GPU of 2 and 4 of them, by hand
// (each GPU's slice, the ring across the instances at the network's rate); billed for every
// instance; written to JSON and read back; the advice weighs it against one instance.
TEST(Advice, InstancesWithTheirNetworkArePricedAcrossSeveral) {
  Catalog c = hand_catalog();
  CatalogInstance eight = eight_gpu_instance();
  eight.network = "TestNet";
  eight.network_gbit = 400;  // 50 GB/s
  c.instances.push_back(eight);
  const RunRecord row = measured_run(40);
  AdviceOptions o;
  const auto p = predict_devices(row, {row}, {local_peaks()}, c, o);
  const CostTable cost = cost_table("m", 100'000'000, 3, 10, p, c, o);  // 400 MB of gradients
  ASSERT_EQ(cost.instances.size(), 3u);
  EXPECT_TRUE(cost.instances[0].across.empty());  // no network given
  const auto& across = cost.instances[2].across;
  ASSERT_EQ(across.size(), 2u);
  for (const auto& [x, m] : {std::pair{across[0], 2}, std::pair{across[1], 4}}) {
    const int n = 8 * m;
    EXPECT_EQ(x.instances, m);
    EXPECT_EQ(x.devices, n);
    EXPECT_EQ(x.network, "TestNet");
    EXPECT_DOUBLE_EQ(x.network_gbit, 400);
    const double slice = 16e-6 + 1e-3 / n;  // no profile: the work divided, the fixed costs not
    EXPECT_NEAR(x.compute_s, slice, 1e-12) << m;
    // 2(n-1) steps of 400 MB / n at 50 GB/s (the network, slower than the link), 2(m-1) across
    // the instances at NCCL's 9.6 us, the rest at the link's 5 us.
    const double allreduce =
        2.0 * (n - 1) * 400e6 / n / 50e9 + 2.0 * (m - 1) * 9.6e-6 + 2.0 * (n - m) * 5e-6;
    EXPECT_NEAR(x.allreduce_s, allreduce, 1e-12) << m;
    EXPECT_NEAR(x.step_s, slice + allreduce, 1e-12) << m;
    EXPECT_NEAR(x.efficiency, (1e-3 + 16e-6) / (n * x.step_s), 1e-12) << m;
    EXPECT_NEAR(x.run_hours, 30 * x.step_s / 3600, 1e-15) << m;
    EXPECT_NEAR(x.on_demand_usd, m * 16.0 * x.run_hours, 1e-12) << m;  // every instance billed
  }

  Report report;
  report.kind = "advise";
  report.cost = cost;
  const Report read = read_report(to_json(report), "test");
  ASSERT_TRUE(read.cost.has_value());
  const auto& back = read.cost->instances[2].across;
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].instances, 4);
  EXPECT_EQ(back[1].network, "TestNet");
  EXPECT_DOUBLE_EQ(back[1].allreduce_s, across[1].allreduce_s);
  EXPECT_TRUE(read.cost->instances[0].across.empty());

  // 400 MB at 50 GB/s a step outweighs the slices: not worth a second instance, and unsaid.
  for (const std::string& l : advice_lines("m", p, cost, "", "")) {
    EXPECT_EQ(l.find("Across instances"), std::string::npos) << l;
  }
  // So is a long run whose ring across instances costs more a step than a second instance's
  // share of the batch saves (4 KB of gradients, 1 ms steps: the ring's fixed costs outweigh it).
  for (const std::string& l :
       advice_lines("m", p, cost_table("m", 1000, 1000, 1000, p, c, o), "", "")) {
    EXPECT_EQ(l.find("Across instances"), std::string::npos) << l;
  }
}

// A hand-made prediction of `device` (`name`) at `step_s` a step; `local` ones measured there.
DevicePrediction prediction(const std::string& device, const std::string& name, double step_s,
                            bool local) {
  DevicePrediction p;
  p.model = "m";
  p.device = device;
  p.name = name;
  p.kind = local ? DeviceKind::Cpu : DeviceKind::Gpu;
  p.local = local;
  p.step.seconds = step_s;
  p.step.bound = "overhead";
  if (local) p.measured_s = step_s;
  return p;
}

// A single-device instance of `device` at `usd_per_hour`.
CostTable::Instance rental(const std::string& device, double usd_per_hour) {
  CostTable::Instance i;
  i.id = fmt::format("rent-{}", device);
  i.name = i.id;
  i.provider = "Cloud";
  i.device = device;
  i.on_demand_usd_per_hour = usd_per_hour;
  return i;
}

// "Fastest in the catalog" is a device faster than here, a tie (within kTieFraction) going to the
// cheaper to rent; where none is faster, the advice says so rather than name a slower one as the
// fastest (a Ryzen predicted at 19.5 us against 14.9 us measured here was called "fastest in the
// catalog"; an 8-GPU instance won a tie with a one-GPU instance of the same speed).
TEST(Advice, TheFastestInTheCatalogIsFasterThanHereAndATieGoesToTheCheaper) {
  CostTable cost;
  cost.model = "m";
  cost.epochs = 1;
  cost.steps_per_epoch = 10;
  cost.instances = {rental("gpu-a", 2.0), rental("gpu-b", 1.0)};
  const std::vector<DevicePrediction> tied = {prediction("cpu", "Local CPU", 0.010, true),
                                              prediction("gpu-a", "GPU A", 0.00100, false),
                                              prediction("gpu-b", "GPU B", 0.00101, false)};
  const auto lines = advice_lines("m", tied, cost, "", "");
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1].find("Fastest in the catalog: GPU B at "), 0u) << lines[1];
  EXPECT_NE(lines[1].find("x here's"), std::string::npos) << lines[1];

  const std::vector<DevicePrediction> slower = {prediction("cpu", "Local CPU", 0.001, true),
                                                prediction("gpu-a", "GPU A", 0.002, false),
                                                prediction("gpu-b", "GPU B", 0.003, false)};
  const auto none = advice_lines("m", slower, cost, "", "");
  ASSERT_GE(none.size(), 2u);
  EXPECT_EQ(none[1].find("Nothing in the catalog is faster than cpu here: the fastest, GPU A, "),
            0u)
      << none[1];
  for (const std::string& l : none) {
    EXPECT_EQ(l.find("Buying"), std::string::npos) << "no GPU is worth it: nothing to buy\n" << l;
  }
}

}  // namespace
}  // namespace xo
