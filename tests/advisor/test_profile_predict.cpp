// Predictions from device profiles, by hand: a step is its nodes' samples, the loss, the
// optimizer, the merge and the fixed costs; another shape is scaled by the roofline's ratio;
// another device by the rate that bounds each kernel; the validation table compares them with
// measured steps.
#include <gtest/gtest.h>

#include "advisor/profile_predict.h"
#include "model/cost.h"
#include "model/layer.h"

namespace xo {
namespace {

// 4 -> 8 (ReLU) -> 2, plain SGD, batch `batch`.
ModelSpec mlp(int64_t batch) {
  ModelSpec s;
  s.name = "mlp";
  s.origin = "test";
  s.input = {4};
  s.layers.push_back({LayerType::Linear, 8, true, 0});
  LayerSpec relu;
  relu.type = LayerType::ReLU;
  s.layers.push_back(relu);
  s.layers.push_back({LayerType::Linear, 2, true, 0});
  s.train.batch = batch;
  s.train.shuffle = false;
  return s;
}

DeviceProfile base_profile() {
  DeviceProfile p;
  p.id = "hand";
  p.device = "cpu";
  p.kind = DeviceKind::Cpu;
  p.name = "Hand CPU";
  p.threads = 2;
  p.date = "2026-11-24";
  p.peaks.matmul_gflops = 100;
  p.peaks.bandwidth_gbs = 10;
  p.peaks.layer_overhead_us = 1;
  p.peaks.probed = "2026-11-24";
  p.policy = {2, 16, 1e7, 1e9, 4e6};
  p.step_fixed_us = 0.5;
  p.shard_fork_us = 2;
  return p;
}

KernelSample timed(KernelSample s, double forward, double backward) {
  s.forward_us = forward;
  s.backward_us = backward;
  return s;
}

KernelSample small(const char* op, const char* variant, int64_t batch, int shards, double in,
                   double bytes, double us) {
  KernelSample s;
  s.op = op;
  s.variant = variant;
  s.batch = batch;
  s.shards = shards;
  s.in_size = in;
  s.bytes = bytes;
  s.forward_us = us;
  return s;
}

// Every kernel of mlp(batch) sampled at that batch, unsharded: 10 + 20 us for the nodes, 3 for
// the loss, 4 for the optimizer.
DeviceProfile profile_of(int64_t batch) {
  DeviceProfile p = base_profile();
  const ModelLayout layout = model_layout(mlp(batch));
  p.samples.push_back(timed(node_sample(layout, 0, batch, 1), 4, 6));
  p.samples.push_back(timed(node_sample(layout, 1, batch, 1), 8, 12));
  p.samples.push_back(small("loss", "cross_entropy", batch, 1, 2, 4.0 * 3 * batch * 2, 3));
  p.samples.push_back(small("optimizer", "sgd", 1, 1, static_cast<double>(layout.flat_size),
                            12.0 * static_cast<double>(layout.flat_size), 4));
  return p;
}

TEST(ProfilePredict, AStepIsItsKernelsPlusTheFixedCostOnItsOwnProfile) {
  const DeviceProfile p = profile_of(8);
  const ProfilePrediction r = predict_with_profile(mlp(8), 8, p, profile_target(p), true);
  EXPECT_TRUE(r.own);
  EXPECT_EQ(r.shards, 1);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.interpolated, 0);
  EXPECT_EQ(r.unprofiled, 0);
  EXPECT_NEAR(r.seconds * 1e6, 10 + 20 + 3 + 4 + 0.5, 1e-9);
  EXPECT_NEAR(r.kernels_s + r.fixed_s, r.seconds, 1e-15);
  EXPECT_NEAR(r.flops_s + r.bytes_s, r.kernels_s, 1e-15);
  EXPECT_EQ(r.how(), "own profile");
}

TEST(ProfilePredict, AnotherBatchIsTheNearestSampleScaledByItsRoofline) {
  const DeviceProfile p = profile_of(8);
  const ModelLayout layout = model_layout(mlp(16));
  const ProfilePrediction r = predict_with_profile(mlp(16), 16, p, profile_target(p), true);
  EXPECT_GT(r.interpolated, 0);
  // Node 1 at batch 16 from its sample at batch 8: the fixed 1 us kept, the rest (19 us) times the
  // ratio of the two rooflines on this device.
  const KernelSample at8 = node_sample(model_layout(mlp(8)), 1, 8, 1);
  const KernelSample at16 = node_sample(layout, 1, 16, 1);
  auto roof = [](const KernelSample& s) {
    // Small matmuls: one of the two threads.
    return std::max(s.flops / (100e3 / 2), s.bytes / 10e3);
  };
  const double node1 = 1 + 19 * roof(at16) / roof(at8);
  const double node0 = 1 + 9 * roof(node_sample(layout, 0, 16, 1)) /
                               roof(node_sample(model_layout(mlp(8)), 0, 8, 1));
  const double loss = 1.0 / 3 + (3 - 1.0 / 3) * 2;  // bytes doubled, all bandwidth
  EXPECT_NEAR(r.seconds * 1e6, node0 + node1 + loss + 4 + 0.5, 1e-6);
}

TEST(ProfilePredict, ShardsTakeTheShardSamplesTheMergeAndOneParallelRegion) {
  DeviceProfile p = base_profile();
  const int64_t batch = 64;
  // A step of 2e7 FLOPs at batch 64 shards in two on this policy: a wide model.
  ModelSpec spec = mlp(batch);
  spec.input = {512};
  spec.layers[0].out = 256;
  const ModelLayout layout = model_layout(spec);
  ASSERT_EQ(p.policy.shards(batch, 2.0 * batch * 512 * 256 * 2 + 3.0 * 2 * batch * 256 * 2), 2);
  p.samples.push_back(timed(node_sample(layout, 0, 32, 2), 5, 5));
  p.samples.push_back(timed(node_sample(layout, 1, 32, 2), 1, 1));
  p.samples.push_back(small("loss", "cross_entropy", 32, 2, 2, 4.0 * 3 * 32 * 2, 2));
  p.samples.push_back(small("optimizer", "sgd", 1, 1, static_cast<double>(layout.flat_size),
                            12.0 * static_cast<double>(layout.flat_size), 7));
  KernelSample merge = small("accumulate", "", 1, 2, static_cast<double>(layout.flat_size),
                             12.0 * static_cast<double>(layout.flat_size), 6);
  p.samples.push_back(merge);
  const ProfilePrediction r = predict_with_profile(spec, batch, p, profile_target(p), true);
  EXPECT_EQ(r.shards, 2);
  EXPECT_EQ(r.interpolated, 0);
  EXPECT_NEAR(r.seconds * 1e6, 10 + 2 + 2 + 7 + 6 + 0.5 + 2, 1e-9);
}

TEST(ProfilePredict, AnotherDeviceScalesEachKernelByTheRateThatBoundsIt) {
  const DeviceProfile p = profile_of(8);
  TargetDevice gpu;
  gpu.id = "gpu";
  gpu.kind = DeviceKind::Gpu;
  gpu.gflops = 1000;         // 10x the source's compute
  gpu.bandwidth_gbs = 1000;  // 100x its bandwidth
  gpu.layer_overhead_us = 6;
  gpu.step_overhead_us = 10;
  const ProfilePrediction r = predict_with_profile(mlp(8), 8, p, gpu, false);
  EXPECT_FALSE(r.own);
  EXPECT_EQ(r.how(), "from hand's profile, scaled");
  // Across kinds the fixed costs are the target's: 6 us a node, 2 us a small kernel, 10 a step.
  EXPECT_NEAR(r.fixed_s * 1e6, 2 * 6 + 2 * 2 + 10, 1e-9);
  // Each kernel's work (its time less the source's fixed part) shrinks by 10x (compute) or 100x
  // (bandwidth): far below the source's.
  EXPECT_LT(r.kernels_s * 1e6, (9 + 19 + 3 - 1.0 / 3 + 4) / 10 + 1e-9);
  EXPECT_GT(r.kernels_s, 0);
}

TEST(ProfilePredict, AKindOfNodeTheProfileNeverSawIsItsRooflineAndCounted) {
  DeviceProfile p = profile_of(8);
  p.samples.erase(p.samples.begin());  // the first Linear+ReLU's sample
  p.samples.erase(p.samples.begin());  // and the second Linear's: no "linear" left
  const ProfilePrediction r = predict_with_profile(mlp(8), 8, p, profile_target(p), true);
  EXPECT_EQ(r.unprofiled, 2);
  EXPECT_GT(r.seconds, 0);
}

TEST(ProfilePredict, TheValidationTableComparesOwnAndOtherProfilesWithMeasurements) {
  DeviceProfile a = profile_of(100);
  a.id = "a";
  // disc-2 is 2 -> 4 (ReLU) -> 2 at batch 100: not this profile's mlp, so every node interpolates.
  a.measured = {{"disc-2", 100, 0.050, "test"}, {"disc-3", 100, 0.080, "test"}};
  DeviceProfile b = base_profile();  // peaks only, measured
  b.id = "b";
  b.note = "peaks only";
  b.peaks.matmul_gflops = 200;
  b.measured = {{"disc-2", 100, 0.040, "test"}};
  const std::vector<ValidationRow> rows = validate_profiles({a, b});
  ASSERT_EQ(rows.size(), 3u);  // a from a; b from a; b's own: unmeasured
  EXPECT_EQ(rows[0].device, "a");
  EXPECT_TRUE(rows[0].own);
  ASSERT_EQ(rows[0].entries.size(), 2u);
  std::vector<double> errors;
  for (const auto& e : rows[0].entries) errors.push_back(std::abs(e.error()));
  EXPECT_NEAR(rows[0].worst_abs, std::max(errors[0], errors[1]), 1e-12);
  EXPECT_NEAR(rows[0].median_abs, (errors[0] + errors[1]) / 2, 1e-12);
  EXPECT_EQ(rows[1].device, "b");
  EXPECT_EQ(rows[1].from, "a");
  EXPECT_FALSE(rows[1].own);
  EXPECT_EQ(rows[1].entries.size(), 1u);
  EXPECT_TRUE(rows[2].entries.empty());
  EXPECT_NE(rows[2].unmeasured.find("peaks only"), std::string::npos);
  // The expected error of a CPU predicted from another CPU's profile is that row's median.
  EXPECT_NEAR(*expected_error(rows, DeviceKind::Cpu, DeviceKind::Cpu, false, {a, b}),
              rows[1].median_abs, 1e-12);
  EXPECT_FALSE(expected_error(rows, DeviceKind::Cpu, DeviceKind::Gpu, false, {a, b}));
}

}  // namespace
}  // namespace xo
