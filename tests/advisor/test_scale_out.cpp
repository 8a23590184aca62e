// The ring all-reduce model and the data-parallel step built on it.
#include <gtest/gtest.h>

#include <cmath>

#include "advisor/scale_out.h"
#include "advisor/sweep.h"

namespace {

using xo::Link;

TEST(ScaleOut, RingAllReduceMovesTwiceTheDataOverNMinusOneNths) {
  const Link link{"test", 10e9, 0, 0};
  EXPECT_DOUBLE_EQ(xo::ring_allreduce_seconds(1e9, 1, link), 0);
  // 2 ranks: 2 steps of half the bytes each.
  EXPECT_NEAR(xo::ring_allreduce_seconds(1e9, 2, link), 0.1, 1e-12);
  // 8 ranks: 14 steps of an eighth: 2 * 7/8 of the bytes.
  EXPECT_NEAR(xo::ring_allreduce_seconds(1e9, 8, link), 0.175, 1e-12);
  // Latency per step, and the reduce-scatter's additions over (n-1)/n of the bytes.
  const Link slow{"test", 10e9, 1e-3, 1e-10};
  EXPECT_NEAR(xo::ring_allreduce_seconds(1e9, 4, slow), 0.15 + 6e-3 + 0.075, 1e-12);
}

// Across machines: every one of the ring's 2(n-1) steps moves bytes/n per device at the slower of
// its link and the machine's network, and waits the network's latency where it crosses machines
// (2 x (machines - 1) of them), the link's elsewhere. One device per machine is the ring over the
// network, one machine the ring over the link.
TEST(ScaleOut, ARingAcrossMachinesCrossesTheirNetworkAtItsWholeRate) {
  const Link nvlink{"inside", 400e9, 5e-6, 0}, network{"network", 100e9, 10e-6, 0};
  const xo::Ring two_of_four{2, 4, nvlink, network};
  EXPECT_EQ(two_of_four.ranks(), 8);
  // 8 devices: 14 steps of 1e9/8 bytes at 100 GB/s, 2 of them across (10 us), 12 inside (5 us).
  EXPECT_NEAR(two_of_four.allreduce_seconds(1e9), 14 * 1e9 / 8 / 100e9 + 2 * 10e-6 + 12 * 5e-6,
              1e-12);
  // A network faster than the link: the link binds.
  const xo::Ring fast_network{2, 4, Link{"inside", 50e9, 0, 0}, Link{"network", 400e9, 0, 0}};
  EXPECT_NEAR(fast_network.allreduce_seconds(1e9), 14 * 1e9 / 8 / 50e9, 1e-12);
  EXPECT_NEAR((xo::Ring{3, 1, nvlink, network}.allreduce_seconds(1e9)),
              xo::ring_allreduce_seconds(1e9, 3, network), 1e-15);
  EXPECT_NEAR((xo::Ring{1, 8, nvlink, network}.allreduce_seconds(1e9)),
              xo::ring_allreduce_seconds(1e9, 8, nvlink), 1e-15);
  EXPECT_DOUBLE_EQ((xo::Ring{1, 1, nvlink, network}.allreduce_seconds(1e9)), 0);
  // The step across machines: the all-reduce after backward, as on one machine.
  const auto step = xo::predict_data_parallel(8e-3, 1e-3, 1e9, two_of_four, 0.25e6, false);
  EXPECT_EQ(step.ranks, 8);
  EXPECT_NEAR(step.step_s, 1e-3 + two_of_four.allreduce_seconds(1e9), 1e-15);
  EXPECT_NEAR(step.efficiency, 8e-3 / (8 * step.step_s), 1e-12);
}

// A link measured as a ring's two phases: the ring model of a message of that size gives the
// phases back, on any rank count; a transfer is the all-gather's step, the addition what the
// reduce-scatter's step takes beyond it.
TEST(ScaleOut, ALinkMeasuredAsARingsPhasesGivesThemBack) {
  for (const int ranks : {2, 3, 8}) {
    const double chunk = 1 << 20, latency = 2e-6;
    const double reduce_scatter = (ranks - 1) * 150e-6, all_gather = (ranks - 1) * 100e-6;
    Link link{"measured", 0, latency, 0};
    link.samples.push_back(
        xo::ring_phase_sample(chunk, ranks, reduce_scatter, all_gather, latency));
    EXPECT_NEAR(link.samples[0].bytes_per_s, chunk / 98e-6, 1) << ranks;
    EXPECT_NEAR(link.samples[0].reduce_s_per_byte, 50e-6 / chunk, 1e-18) << ranks;
    EXPECT_NEAR(xo::ring_allreduce_seconds(chunk * ranks, ranks, link), reduce_scatter + all_gather,
                1e-12)
        << ranks;
  }
  // A reduce-scatter measured faster than the all-gather (noise at a small size): no negative
  // addition.
  EXPECT_EQ(xo::ring_phase_sample(4096, 2, 1e-6, 2e-6, 0).reduce_s_per_byte, 0);
}

TEST(ScaleOut, BusBandwidthIsNcclTestsDefinition) {
  // nccl-tests: busbw = algbw * 2(n-1)/n.
  EXPECT_DOUBLE_EQ(xo::allreduce_bus_bandwidth(1e9, 2, 1.0), 1e9);
  EXPECT_DOUBLE_EQ(xo::allreduce_bus_bandwidth(1e9, 8, 1.0), 1.75e9);
  EXPECT_DOUBLE_EQ(xo::allreduce_bus_bandwidth(1e9, 1, 1.0), 0);
}

TEST(ScaleOut, BackwardHidesTheAllReduceUpToTheLastBucket) {
  const Link link{"test", 1e9, 0, 0};
  // 3 ms of compute on the slice (2 ms of backward); a 1 MB all-reduce over 2 ranks takes 1 ms:
  // hidden but for the last 0.25 MB bucket (0.25 ms).
  const auto hidden = xo::predict_data_parallel(6e-3, 3e-3, 1e6, 2, link, 0.25e6, true);
  EXPECT_NEAR(hidden.allreduce_s, 1e-3, 1e-12);
  EXPECT_NEAR(hidden.exposed_s, 0.25e-3, 1e-12);
  EXPECT_NEAR(hidden.step_s, 3.25e-3, 1e-12);
  EXPECT_NEAR(hidden.efficiency, 6e-3 / (2 * 3.25e-3), 1e-12);
  // 10 MB take 10 ms: 8 ms show after the 2 ms of backward.
  const auto exposed = xo::predict_data_parallel(6e-3, 3e-3, 10e6, 2, link, 0.25e6, true);
  EXPECT_NEAR(exposed.exposed_s, 8e-3, 1e-12);
  // Summed after backward (crossover's engine): all of it shows.
  const auto after = xo::predict_data_parallel(6e-3, 3e-3, 1e6, 2, link, 0.25e6, false);
  EXPECT_NEAR(after.exposed_s, 1e-3, 1e-12);
  EXPECT_NEAR(after.step_s, 4e-3, 1e-12);
  // One rank: no all-reduce, the whole-batch step.
  const auto one = xo::predict_data_parallel(6e-3, 6e-3, 10e6, 1, link, 0.25e6, true);
  EXPECT_DOUBLE_EQ(one.exposed_s, 0);
  EXPECT_DOUBLE_EQ(one.efficiency, 1);
}

// A sweep along ranks: each count's efficiency against one rank's throughput, and the bus
// bandwidth where the communicate phase is the whole sum (after-backward) only.
TEST(ScaleOut, ScalingPointsOfASweepAlongRanks) {
  auto run = [](int ranks, double step_ms, const std::string& mode, double communicate_ms) {
    xo::RunRecord r;
    r.axis = "ranks";
    r.axis_value = ranks;
    r.result.ranks = ranks;
    r.result.step_ms.median = step_ms;
    r.result.reduce_mode = ranks > 1 ? mode : "";
    r.result.communicate_ms = communicate_ms;
    r.result.reduced_bytes = ranks > 1 ? 1000000 : 0;
    return r;
  };
  const std::vector<xo::RunRecord> runs = {
      run(1, 2.0, "", NAN), run(2, 1.25, "after-backward", 0.5), run(4, 1.0, "overlap", 0.1),
      run(3, 1.0, "shared", 0.25)};
  const auto points = xo::scaling_points(runs);
  ASSERT_EQ(points.size(), 4u);
  // Shared: the sum is in the optimizer's pass, the phase only the wait for the slowest rank.
  EXPECT_TRUE(std::isnan(points[3].bus_gbs));
  EXPECT_DOUBLE_EQ(points[3].efficiency, 2.0 / 3);
  EXPECT_DOUBLE_EQ(points[0].efficiency, 1.0);
  EXPECT_TRUE(std::isnan(points[0].communicate_ms));
  EXPECT_TRUE(std::isnan(points[0].bus_gbs));
  EXPECT_DOUBLE_EQ(points[1].efficiency, 2.0 / (2 * 1.25));
  // 1 MB in 0.5 ms on 2 ranks: 2 GB/s x 2(2-1)/2.
  EXPECT_NEAR(points[1].bus_gbs, 2.0, 1e-12);
  EXPECT_EQ(points[1].reduced_bytes, 1000000);
  EXPECT_DOUBLE_EQ(points[2].efficiency, 0.5);
  EXPECT_TRUE(std::isnan(points[2].bus_gbs));  // overlap: the phase is what backward left
  // Without a one-rank run there is nothing to compare against; other axes are not scaling.
  std::vector<xo::RunRecord> no_one = {runs[1]};
  no_one.push_back(runs[0]);
  no_one.back().axis = "depth";
  const auto alone = xo::scaling_points(no_one);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_TRUE(std::isnan(alone[0].efficiency));
}

}  // namespace
