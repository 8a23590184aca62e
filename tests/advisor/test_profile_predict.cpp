// Predictions from device profiles, by hand: a step is its nodes' samples, the loss, the
// optimizer, the merge and the fixed costs; another shape is scaled by the roofline's ratio;
// another device by the rate that bounds each kernel; the validation table compares them with
// measured steps.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "advisor/profile_predict.h"
#include "measure/profile.h"
#include "model/fused_network.h"
#include "model/layer.h"
#include "model/model.h"
#include "model/work.h"

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

// `s` with a batch normalisation after its last layer: on a CPU its trials step together
// (model/fused_network.h), the fused Linears' path.
ModelSpec with_batch_norm(ModelSpec s) {
  s.layers.push_back({LayerType::BatchNorm1d, 0, true, 0});
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
  a.measured = {{"disc-2", 100, 0.050, "test", "", 0.055}, {"disc-3", 100, 0.080, "test", ""}};
  DeviceProfile b = base_profile();  // peaks only, measured
  b.id = "b";
  b.note = "peaks only";
  b.peaks.matmul_gflops = 200;
  b.measured = {{"disc-2", 100, 0.040, "test", ""}};
  const std::vector<ValidationRow> rows = validate_profiles({a, b});
  // a from a; a from a less each model's own kernels; b's own: unmeasured; b from a.
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].device, "a");
  EXPECT_TRUE(rows[0].own);
  EXPECT_EQ(rows[0].holdout, Holdout::None);
  ASSERT_EQ(rows[0].entries.size(), 2u);
  std::vector<double> errors;
  for (const auto& e : rows[0].entries) errors.push_back(std::abs(e.error()));
  EXPECT_NEAR(rows[0].worst_abs, std::max(errors[0], errors[1]), 1e-12);
  EXPECT_NEAR(rows[0].median_abs, (errors[0] + errors[1]) / 2, 1e-12);
  // disc-2's runs moved by 10% (0.050 to 0.055 ms); disc-3's spread was not recorded.
  EXPECT_NEAR(rows[0].spread, 0.1, 1e-12);
  EXPECT_EQ(rows[1].device, "a");
  EXPECT_TRUE(rows[1].own);
  EXPECT_EQ(rows[1].holdout, Holdout::Model);
  EXPECT_EQ(rows[2].device, "b");
  EXPECT_TRUE(rows[2].entries.empty());
  EXPECT_NE(rows[2].unmeasured.find("peaks only"), std::string::npos);
  EXPECT_EQ(rows[3].device, "b");
  EXPECT_EQ(rows[3].from, "a");
  EXPECT_FALSE(rows[3].own);
  EXPECT_EQ(rows[3].holdout, Holdout::Device);
  EXPECT_EQ(rows[3].entries.size(), 1u);
  EXPECT_EQ(rows[0].kind, PredictionKind::Own);
  EXPECT_EQ(rows[3].kind, PredictionKind::CpuFromCpu);
  // The expected error of a CPU predicted from another CPU's profile: that row's median and worst.
  const auto other = expected_error(rows, a, PredictionKind::CpuFromCpu);
  ASSERT_TRUE(other);
  EXPECT_NEAR(other->median, rows[3].median_abs, 1e-12);
  EXPECT_NEAR(other->worst, rows[3].worst_abs, 1e-12);
  EXPECT_NE(other->rows.find("b from a"), std::string::npos) << other->rows;
  EXPECT_FALSE(other->at_least);
  // The device from its own profile: the leave-one-model-out row, never the in-sample one (whose
  // models' kernels were all in the profile), whatever the model.
  const auto own = expected_error(rows, a, PredictionKind::Own);
  ASSERT_TRUE(own);
  EXPECT_EQ(own->kind, PredictionKind::Own);
  EXPECT_NEAR(own->median, rows[1].median_abs, 1e-12);
  EXPECT_NEAR(own->worst, rows[1].worst_abs, 1e-12);
  EXPECT_NEAR(own->spread, 0.1, 1e-12);
  EXPECT_EQ(own->rows, "a, leave one model out");
  // No row predicts a GPU from a: not validated, at least the nearest kind's (a's own held-out
  // row), and said so.
  const auto gpu = expected_error(rows, a, PredictionKind::GpuFromCpu);
  ASSERT_TRUE(gpu);
  EXPECT_TRUE(gpu->at_least);
  EXPECT_EQ(gpu->kind, PredictionKind::Own);
  EXPECT_NEAR(gpu->median, rows[1].median_abs, 1e-12);
  EXPECT_NEAR(gpu->worst, rows[1].worst_abs, 1e-12);
  // A profile of a device kind no row speaks for (a GPU's, here): nothing to say, not a CPU's rows.
  DeviceProfile g = profile_of(8);
  g.id = "g";
  g.kind = DeviceKind::Gpu;
  EXPECT_FALSE(expected_error(rows, g, PredictionKind::Own));
  EXPECT_FALSE(expected_error(rows, g, PredictionKind::OtherArchitecture));
}

// Which rows may back which prediction: a GPU's architecture decides between the same and another
// architecture (an unknown one is another), a CPU's and a GPU's profiles never stand for each
// other's devices, and the catalog names the architectures of the shipped GPU profiles.
TEST(ProfilePredict, APredictionsKindIsItsDevicesAndTheirArchitectures) {
  EXPECT_EQ(prediction_kind(DeviceKind::Gpu, "hopper", DeviceKind::Gpu, "hopper", true),
            PredictionKind::Own);
  EXPECT_EQ(prediction_kind(DeviceKind::Gpu, "hopper", DeviceKind::Gpu, "hopper", false),
            PredictionKind::SameArchitecture);
  EXPECT_EQ(prediction_kind(DeviceKind::Gpu, "hopper", DeviceKind::Gpu, "turing", false),
            PredictionKind::OtherArchitecture);
  EXPECT_EQ(prediction_kind(DeviceKind::Gpu, "", DeviceKind::Gpu, "", false),
            PredictionKind::OtherArchitecture);
  EXPECT_EQ(prediction_kind(DeviceKind::Cpu, "", DeviceKind::Cpu, "", false),
            PredictionKind::CpuFromCpu);
  EXPECT_EQ(prediction_kind(DeviceKind::Cpu, "", DeviceKind::Gpu, "ampere", false),
            PredictionKind::GpuFromCpu);
  EXPECT_EQ(prediction_kind(DeviceKind::Gpu, "hopper", DeviceKind::Cpu, "", false),
            PredictionKind::CpuFromGpu);
  EXPECT_EQ(architecture_of(DeviceKind::Gpu, "NVIDIA H200"), "hopper");
  EXPECT_EQ(architecture_of(DeviceKind::Gpu, "NVIDIA H100 80GB HBM3"), "hopper");
  EXPECT_EQ(architecture_of(DeviceKind::Gpu, "Tesla T4"), "turing");
  EXPECT_EQ(architecture_of(DeviceKind::Gpu, "NVIDIA Z9000"), "");
  EXPECT_EQ(architecture_of(DeviceKind::Cpu, "AMD EPYC 9654"), "");
}

// The shipped profiles' stated errors hold on their own held-out rows: for every kind of
// prediction that has held-out rows, each entry (a model on a device) within the worst error
// stated for its prediction with that model left out of every row at least 90% of the time, and
// the stated median within 1.5x of the measured one (`crossover validate` prints this table).
TEST(ProfilePredict, TheShippedProfilesStatedErrorsCoverTheirHeldOutRows) {
  const std::vector<CalibrationRow> table = calibrate(validate_profiles(shipped_profiles()));
  ASSERT_FALSE(table.empty());
  bool own = false;
  for (const CalibrationRow& c : table) {
    own |= c.kind == PredictionKind::Own;
    EXPECT_TRUE(c.holds()) << prediction_kind_name(c.kind) << ": " << c.covered << " of "
                           << c.entries << " within the stated worst; stated median "
                           << c.stated_median << ", measured " << c.measured_median;
  }
  EXPECT_TRUE(own);
}

// The calibration counts the entries beyond their stated worst, and compares each entry's error
// with its stated median; in-sample rows are never read.
TEST(ProfilePredict, CalibrationCountsTheEntriesBeyondTheirStatedErrors) {
  auto row = [](std::string device, std::string from, PredictionKind kind,
                std::vector<double> predicted) {
    ValidationRow r;
    r.device = std::move(device);
    r.from = std::move(from);
    r.own = r.device == r.from;
    r.holdout = r.own ? Holdout::Model : Holdout::Device;
    r.kind = kind;
    for (size_t i = 0; i < predicted.size(); ++i)
      r.entries.push_back({fmt::format("m{}", i), predicted[i], 1.0, 0});
    return r;
  };
  // Nine entries 10% off and one 200%: the outlier is beyond the others' worst (its own left
  // out), the others within it; each entry's stated median is 10%.
  ValidationRow one =
      row("a", "a", PredictionKind::Own, {1.1, 1.1, 1.1, 1.1, 1.1, 1.1, 1.1, 1.1, 1.1, 3.0});
  ValidationRow in_sample = one;
  in_sample.holdout = Holdout::None;  // never read
  in_sample.entries = {{"m0", 100.0, 1.0, 0}};
  std::vector<CalibrationRow> table = calibrate({one, in_sample});
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].kind, PredictionKind::Own);
  EXPECT_EQ(table[0].entries, 10);
  EXPECT_EQ(table[0].covered, 9);
  EXPECT_NEAR(table[0].measured_median, 0.1, 1e-9);
  EXPECT_NEAR(table[0].median_ratio, 1, 1e-9);
  EXPECT_TRUE(table[0].holds());
  // Five CPUs each predicted from its own other CPU, 1% and 50% off: each 50% is beyond what its
  // row states without it. Half covered.
  std::vector<ValidationRow> pairs;
  for (int i = 0; i < 5; ++i) {
    pairs.push_back(
        row(fmt::format("d{}", i), fmt::format("s{}", i), PredictionKind::CpuFromCpu, {1.01, 1.5}));
  }
  table = calibrate(pairs);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].covered, 5);
  EXPECT_FALSE(table[0].holds());
  // One profile predicting two CPUs, ten models 1% off on one and five 50% off on the other: the
  // stated median (the median of the two rows', 25.5%) is 25 times most entries' error.
  table = calibrate({row("x", "p", PredictionKind::CpuFromCpu, std::vector<double>(10, 1.01)),
                     row("y", "p", PredictionKind::CpuFromCpu, std::vector<double>(5, 1.5))});
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].covered, 15);
  EXPECT_NEAR(table[0].median_ratio, 0.01 / 0.255, 1e-9);
  EXPECT_FALSE(table[0].holds());
}

// A model measured from its spec (never profiled) is validated with the models left out, never
// as one the profile measured.
TEST(ProfilePredict, AModelMeasuredFromItsSpecCountsAsOneTheProfileNeverSaw) {
  DeviceProfile a = profile_of(8);
  a.id = "a";
  a.measured = {{"disc-2", 100, 0.050, "test", ""},
                {"mlp", 8, 0.040, "test",
                 "[model]\nname = \"mlp\"\ninput = [4]\nlayers = [\n"
                 "  { type = \"linear\", out = 8 },\n  { type = \"relu\" },\n"
                 "  { type = \"linear\", out = 2 },\n]\nloss = \"cross_entropy\"\n\n"
                 "[train]\nbatch = 8\nshuffle = false\n\n[data]\nsource = \"disc\"\n"}};
  const std::vector<ValidationRow> rows = validate_profiles({a});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].holdout, Holdout::None);
  ASSERT_EQ(rows[0].entries.size(), 1u);
  EXPECT_EQ(rows[0].entries[0].model, "disc-2");
  EXPECT_EQ(rows[1].holdout, Holdout::Model);
  ASSERT_EQ(rows[1].entries.size(), 2u);
  EXPECT_EQ(rows[1].entries[1].model, "mlp");
  // Predicted from the profile as it is: this profile measured exactly its kernels.
  EXPECT_NEAR(rows[1].entries[1].predicted_ms,
              predict_with_profile(mlp(8), 8, a, profile_target(a), true).seconds * 1e3, 1e-12);
}

// Leaving a model out removes the samples that only its shapes gave, and nothing that another
// model or the profile grid also measured; its prediction then interpolates.
TEST(ProfilePredict, LeavingAModelOutRemovesOnlyTheSamplesNoOtherModelGave) {
  const ModelSpec disc2 = *builtin_spec("disc-2"), disc3 = *builtin_spec("disc-3");
  DeviceProfile p = base_profile();
  p.policy.shard_threads = 1;
  const ModelLayout l2 = model_layout(disc2), l3 = model_layout(disc3);
  // disc-2: 2 -> 4 -> 2; disc-3: 2 -> 4 -> 8 -> 2 (each Linear one node, its ReLU fused). Their
  // first Linear (2 -> 4, ReLU) is shared.
  p.samples.push_back(timed(node_sample(l2, 0, 100, 1), 1, 2));  // both models
  p.samples.push_back(timed(node_sample(l2, 1, 100, 1), 3, 4));  // disc-2's 4 -> 2 only
  p.samples.push_back(timed(node_sample(l3, 1, 100, 1), 5, 6));  // disc-3's 4 -> 8
  p.samples.push_back(timed(node_sample(l3, 2, 100, 1), 7, 8));  // disc-3's 8 -> 2
  EXPECT_TRUE(profile_has_model(p, disc2, 100));
  EXPECT_FALSE(profile_has_model(p, disc2, 50));
  const DeviceProfile without = without_model(p, disc2, {disc2, disc3});
  ASSERT_EQ(without.samples.size(), 3u);
  EXPECT_EQ(without.samples[0].out_size, 4);  // the shared one stays
  EXPECT_EQ(without.samples[1].out_size, 8);
  EXPECT_EQ(without.samples[2].in_size, 8);
  EXPECT_FALSE(profile_has_model(without, disc2, 100));
  // disc-2's 4 -> 2 now comes from disc-3's 8 -> 2, scaled by their rooflines.
  const ProfilePrediction r = predict_with_profile(disc2, 100, without, profile_target(p), true);
  EXPECT_EQ(r.interpolated, 1);
  EXPECT_EQ(r.unprofiled, 2);  // the loss and the optimizer: not in this hand-made profile
}

// A GPU profile with graph times: its own recorded step is the graph times, the graph's fixed
// cost and nothing else; another GPU gets the latency part by the clocks and never beats its own
// roofline at the source's best efficiency.
DeviceProfile gpu_profile() {
  DeviceProfile p = profile_of(8);
  p.id = "gpu-a";
  p.device = "cuda:0";
  p.kind = DeviceKind::Gpu;
  p.threads = 0;
  p.policy = {};
  p.peaks.matmul_gflops = 50000;
  p.peaks.bandwidth_gbs = 3000;
  p.graph_node_us = 1;
  p.graph_step_fixed_us = 3;
  p.step_fixed_us = 20;
  p.clock_mhz = 2000;
  p.sm_count = 100;
  for (KernelSample& s : p.samples) {
    s.graph_forward_us = s.forward_us / 2;    // 2 + 4 + 1.5 + 2 = 9.5 us in a graph
    s.graph_backward_us = s.backward_us / 2;  // 3 + 6 = 9
  }
  return p;
}

// Fused trials (predict_fused_with_profile): on a GPU one group, each Linear one kernel as tall
// as the trials' batches together, and the loss, optimizer and gather once per trial; on a CPU of
// two shard threads, two groups each on one thread.
TEST(ProfilePredict, FusedTrialsShareEachLinearAndOnAGpuTheirLossOptimizerAndGather) {
  DeviceProfile gpu = gpu_profile();
  KernelSample gather = small("batch", "", 8, 1, 4, 8.0 * 8 * 4, 2);
  gather.graph_forward_us = 1;
  gpu.samples.push_back(gather);
  ModelSpec spec = mlp(8);
  spec.train.shuffle = true;
  const ProfilePrediction alone = predict_with_profile(spec, 8, gpu, profile_target(gpu), true);
  const ProfilePrediction one =
      predict_fused_with_profile(spec, 8, 1, gpu, profile_target(gpu), true);
  // One trial fused is the model alone (its batch always gathered): 2+3 + 4+6 + 1.5 + 2 + 1 + 3.
  EXPECT_NEAR(one.seconds * 1e6, 22.5, 1e-9);
  EXPECT_NEAR(one.seconds, alone.seconds, 1e-15);
  EXPECT_EQ(one.interpolated, 0);
  const ProfilePrediction four =
      predict_fused_with_profile(spec, 8, 4, gpu, profile_target(gpu), true);
  EXPECT_EQ(four.shards, 1);
  // The two Linears, the loss and the gather at batch 32, the optimizer over 4 models' parameters,
  // each from its one-trial sample: every kernel one launch for the four trials (the Linears with
  // a trial dimension, the rest Backend::fused_step's): less than 4x.
  EXPECT_EQ(four.interpolated, 5);
  EXPECT_GT(four.seconds, one.seconds);
  EXPECT_LT(four.seconds, 4 * one.seconds);
  EXPECT_NEAR(four.kernels_s + four.fixed_s, four.seconds, 1e-15);
  // A CPU of two shard threads: four trials in two groups of two, each group on one thread (a
  // policy whose products all take several threads, and a batch normalisation, so that the
  // trials step together).
  DeviceProfile cpu = profile_of(8);
  cpu.policy.single_thread_flops = 0;
  cpu.samples.push_back(gather);
  const ModelSpec normed = with_batch_norm(spec);
  const ProfilePrediction on_cpu =
      predict_fused_with_profile(normed, 8, 4, cpu, profile_target(cpu), true);
  EXPECT_EQ(on_cpu.shards, 2);
  EXPECT_EQ(predict_fused_with_profile(normed, 8, 1, cpu, profile_target(cpu), true).shards, 1);
}

// A CPU profile that timed the fused trials' own Linear (op "trials_linear") predicts a fused
// group's Linears from those samples, exactly where it has the group's size, and scaled by the
// roofline from the nearest size where it does not; a GPU target keeps the taller Linears.
TEST(ProfilePredict, AFusedGroupOnACpuTakesTheProfilesSamplesOfTheTrialsLinear) {
  ModelSpec spec = with_batch_norm(mlp(8));
  spec.train.shuffle = true;
  const ModelLayout layout = model_layout(spec);
  DeviceProfile cpu = profile_of(8);
  cpu.policy.single_thread_flops = 0;  // the trials step together (model/fused_network.h)
  cpu.samples.push_back(small("batch", "", 8, 1, 4, 8.0 * 8 * 4, 2));
  const ProfilePrediction before =
      predict_fused_with_profile(spec, 8, 4, cpu, profile_target(cpu), true);
  // Four trials: two groups of two, one on each of the two workers.
  auto with_trials = [&](double us) {
    DeviceProfile p = cpu;
    p.samples.push_back(timed(trials_linear_sample(layout, 0, 8, 2, 2), us, us));
    p.samples.push_back(timed(trials_linear_sample(layout, 1, 8, 2, 2), us, 2 * us));
    return p;
  };
  const DeviceProfile p100 = with_trials(100), p200 = with_trials(200);
  const ProfilePrediction a =
      predict_fused_with_profile(spec, 8, 4, p100, profile_target(p100), true);
  const ProfilePrediction b =
      predict_fused_with_profile(spec, 8, 4, p200, profile_target(p200), true);
  // Each Linear is its sample, whole: 100 + 100 and 100 + 200 us in a, twice that in b.
  EXPECT_NEAR((b.seconds - a.seconds) * 1e6, 500, 1e-6);
  EXPECT_EQ(a.interpolated, before.interpolated - 2);
  EXPECT_GT(a.seconds, before.seconds);
  // 64 trials (32 a group), never timed: the two-trial samples scaled up by their rooflines.
  const ProfilePrediction many =
      predict_fused_with_profile(spec, 8, 64, p100, profile_target(p100), true);
  EXPECT_EQ(many.interpolated, a.interpolated + 2);
  EXPECT_GT(many.seconds, 8 * a.seconds);
  // A GPU target from the same profile: one group, each Linear a taller one; no trials sample.
  TargetDevice gpu = profile_target(p100);
  gpu.kind = DeviceKind::Gpu;
  TargetDevice gpu_before = profile_target(cpu);
  gpu_before.kind = DeviceKind::Gpu;
  EXPECT_EQ(predict_fused_with_profile(spec, 8, 4, p100, gpu, false).seconds,
            predict_fused_with_profile(spec, 8, 4, cpu, gpu_before, false).seconds);
}

// Trials that step side by side on a CPU's workers (a small MLP, its products one thread's work):
// each worker's trials one after another, each step as alone; the step the busiest worker's.
TEST(ProfilePredict, TrialsSideBySideTakeTheBusiestWorkersStepsAlone) {
  ModelSpec spec = mlp(8);
  const DeviceProfile cpu = profile_of(8);
  const ModelLayout layout = model_layout(spec);
  ASSERT_EQ(fused_stepping(layout.nodes, layout.tensors, 8, DeviceKind::Cpu, cpu.policy, 2),
            FusedStepping::SideBySide);
  const ProfilePrediction alone = predict_with_profile(spec, 8, cpu, profile_target(cpu), true);
  for (const auto& [trials, steps] : {std::pair{1, 1}, {2, 1}, {5, 3}, {16, 8}}) {
    const ProfilePrediction fused =
        predict_fused_with_profile(spec, 8, trials, cpu, profile_target(cpu), true);
    EXPECT_NEAR(fused.seconds, steps * alone.seconds, 1e-15) << trials << " trials";
  }
  // A wide model (two batch shards alone, its products past one thread's): a group of one is its
  // trial alone, in its two shards; four trials step side by side, each one shard on one thread,
  // predicted as long as each one's step alone in one shard on both threads (perfect scaling).
  ModelSpec wide = mlp(64);
  wide.input = {512};
  wide.layers[0].out = 256;
  const DeviceProfile p = base_profile();
  ASSERT_EQ(predict_with_profile(wide, 64, p, profile_target(p), true).shards, 2);
  const ProfilePrediction one = predict_fused_with_profile(wide, 64, 1, p, profile_target(p), true);
  EXPECT_EQ(one.shards, 2);
  EXPECT_EQ(one.seconds, predict_with_profile(wide, 64, p, profile_target(p), true).seconds);
  const ProfilePrediction four =
      predict_fused_with_profile(wide, 64, 4, p, profile_target(p), true);
  EXPECT_EQ(four.shards, 1);
  EXPECT_NEAR(four.seconds,
              4 * predict_with_profile(wide, 64, p, profile_target(p), true, 1).seconds, 1e-15);
}

// A GPU profile that timed the fused trials' Linear (op "trials_linear", one group: shards 1)
// predicts a fused group's Linears on a GPU from those samples' graph times, as a CPU profile
// does on a CPU; `advise --trials` takes such a profile for a GPU whose own has none (a catalog
// GPU predicted from the H100's profile), and not for one trial alone.
TEST(ProfilePredict, AFusedGroupOnAGpuTakesAGpuProfilesSamplesOfTheTrialsLinear) {
  ModelSpec spec = mlp(8);
  spec.train.shuffle = true;
  const ModelLayout layout = model_layout(spec);
  const DeviceProfile before = gpu_profile();
  auto with_trials = [&](double us) {
    DeviceProfile p = before;
    p.id = "gpu-b";
    for (size_t node : {size_t{0}, size_t{1}}) {
      KernelSample s = timed(trials_linear_sample(layout, node, 8, 4, 1), 2 * us, 2 * us);
      s.graph_forward_us = us;
      s.graph_backward_us = us;
      p.samples.push_back(s);
    }
    return p;
  };
  const DeviceProfile p10 = with_trials(10), p20 = with_trials(20);
  ASSERT_FALSE(has_trials_samples(before));
  ASSERT_TRUE(has_trials_samples(p10));
  const ProfilePrediction a =
      predict_fused_with_profile(spec, 8, 4, p10, profile_target(p10), true);
  const ProfilePrediction b =
      predict_fused_with_profile(spec, 8, 4, p20, profile_target(p20), true);
  // Each Linear is its sample's graph times, whole: 10 + 10 us each in a, 20 + 20 in b.
  EXPECT_TRUE(a.graph);
  EXPECT_NEAR((b.seconds - a.seconds) * 1e6, 40, 1e-6);
  const ProfilePrediction taller =
      predict_fused_with_profile(spec, 8, 4, before, profile_target(before), true);
  EXPECT_EQ(a.interpolated, taller.interpolated - 2);
  // The advice's choice of profile for a GPU without one of its own.
  AdviceOptions o;
  o.profiles = {before, p10};
  const CatalogDevice other{"gpu-c", DeviceKind::Gpu, "Other GPU", 10, 0, 0, 1000, 16, 300, 2000, 0,
                            0,       "test",          "2026-01-01"};
  const auto alone = profiled_step(spec, 8, catalog_target(other, {}, o), o);
  ASSERT_TRUE(alone);
  EXPECT_EQ(alone->from->id, before.id);
  o.trials = 4;
  const auto fused = profiled_step(spec, 8, catalog_target(other, {}, o), o);
  ASSERT_TRUE(fused);
  EXPECT_EQ(fused->from->id, p10.id);
  EXPECT_FALSE(fused->own);
}

TEST(ProfilePredict, AGpuRecordedStepIsItsGraphTimesAndTheGraphsFixedCost) {
  const DeviceProfile p = gpu_profile();
  const ProfilePrediction own = predict_with_profile(mlp(8), 8, p, profile_target(p), true);
  EXPECT_TRUE(own.graph);
  EXPECT_NEAR(own.seconds * 1e6, 2 + 3 + 4 + 6 + 1.5 + 2 + 3, 1e-9);
  // --no-graph: the queued times and the step's own fixed cost.
  TargetDevice launched = profile_target(p);
  launched.graph = false;
  const ProfilePrediction no_graph = predict_with_profile(mlp(8), 8, p, launched, false);
  EXPECT_FALSE(no_graph.graph);
  EXPECT_NEAR(no_graph.seconds * 1e6, 10 + 20 + 3 + 4 + 20, 1e-9);
  // A GPU at half the clock with the same rates: this tiny step is latency but for a sliver of
  // roofline (which the rates keep), so it takes all but that sliver twice as long.
  TargetDevice slow = profile_target(p);
  slow.clock_mhz = 1000;
  const ProfilePrediction half = predict_with_profile(mlp(8), 8, p, slow, false);
  EXPECT_TRUE(half.graph);
  EXPECT_LT(half.seconds, 2 * own.seconds);
  EXPECT_NEAR(half.seconds, 2 * own.seconds, 1e-3 * own.seconds);
  // Twice the rates at the same clock: only the roofline part shrinks, never below half of it.
  TargetDevice fast = profile_target(p);
  fast.gflops *= 2;
  fast.bandwidth_gbs *= 2;
  const ProfilePrediction faster = predict_with_profile(mlp(8), 8, p, fast, false);
  EXPECT_LT(faster.seconds, own.seconds);
  EXPECT_GT(faster.seconds, 0.99 * own.seconds);
  // A GPU with a thousandth of the rates: its roofline binds, whatever the clock.
  TargetDevice tiny = profile_target(p);
  tiny.gflops = 0.05;
  tiny.bandwidth_gbs = 0.003;
  const ProfilePrediction bound = predict_with_profile(mlp(8), 8, p, tiny, false);
  EXPECT_GT(bound.seconds, 5 * own.seconds);
}

// The roofline of `s` on `p`'s peaks; `s` as a GPU profile records it, `total` microseconds
// (forward and backward halves).
double roofline_on(const DeviceProfile& p, const KernelSample& s) {
  return std::max(s.flops / (p.peaks.matmul_gflops * 1e3), s.bytes / (p.peaks.bandwidth_gbs * 1e3));
}
KernelSample recorded(KernelSample s, double total) {
  s.forward_us = s.graph_forward_us = total / 2;
  s.backward_us = s.graph_backward_us = total / 2;
  return s;
}

// Token ids over `steps` positions, embedded in 32, an LSTM of `hidden` (`layers` deep), a Linear
// to 1 (BCE), batch `batch`.
ModelSpec lstm_model(int64_t batch, int64_t steps, int64_t hidden, int64_t layers = 1) {
  ModelSpec s;
  s.name = "lstm";
  s.origin = "test";
  s.input = {steps};
  LayerSpec embedding;
  embedding.type = LayerType::Embedding;
  embedding.out = 32;
  embedding.vocab = 1000;
  LayerSpec lstm;
  lstm.type = LayerType::LSTM;
  lstm.out = hidden;
  lstm.layers = layers;
  s.layers = {embedding, lstm, {LayerType::Linear, 1, true, 0}};
  s.loss = LossType::BinaryCrossEntropy;
  s.train.batch = batch;
  s.train.shuffle = false;
  return s;
}

KernelSample lstm_node_sample(const ModelSpec& spec) {
  const ModelLayout layout = model_layout(spec);
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    if (layout.nodes[i].kind == NodeKind::LSTM) return node_sample(layout, i, spec.train.batch, 1);
  }
  ADD_FAILURE() << "no LSTM in the spec";
  return {};
}

// A GPU profile of two LSTMs only (40 steps of 64 units at batch 64, 120 steps of 192 at 128),
// each recorded step's LSTM `floor_us` per time step plus `per_roofline` times the step's
// roofline, above its nodes' floor (2 x 1 us).
DeviceProfile lstm_gpu_profile(double floor_us, double per_roofline) {
  DeviceProfile p = gpu_profile();
  p.samples.clear();
  const std::pair<ModelSpec, double> shapes[] = {{lstm_model(64, 40, 64), 40.0},
                                                 {lstm_model(128, 120, 192), 120.0}};
  for (const auto& [spec, steps] : shapes) {
    const KernelSample s = lstm_node_sample(spec);
    p.samples.push_back(
        recorded(s, steps * floor_us + per_roofline * roofline_on(p, s) + 2 * p.graph_node_us));
  }
  return p;
}

// A convolution of `out` channels, `kernel` wide, on one 28x28 channel, then a Linear to 10.
ModelSpec conv_model(int64_t batch, int64_t out, int64_t kernel) {
  ModelSpec s;
  s.name = "conv";
  s.origin = "test";
  s.input = {1, 28, 28};
  LayerSpec conv;
  conv.type = LayerType::Conv2d;
  conv.out = out;
  conv.kernel = kernel;
  LayerSpec flatten;
  flatten.type = LayerType::Flatten;
  s.layers = {conv, flatten, {LayerType::Linear, 10, true, 0}};
  s.train.batch = batch;
  s.train.shuffle = false;
  return s;
}

// A GPU profile of three convolutions only, each recorded `floor_us` plus `per_roofline` times
// its roofline above its nodes' floor.
DeviceProfile conv_gpu_profile(double floor_us, double per_roofline) {
  DeviceProfile p = gpu_profile();
  p.samples.clear();
  for (const ModelSpec& spec :
       {conv_model(32, 8, 5), conv_model(128, 32, 3), conv_model(256, 64, 3)}) {
    const ModelLayout layout = model_layout(spec);
    const KernelSample s = node_sample(layout, 0, spec.train.batch, 1);
    p.samples.push_back(
        recorded(s, floor_us + per_roofline * roofline_on(p, s) + 2 * p.graph_node_us));
  }
  return p;
}

// A convolution shape a GPU profile lacks: its floor (a layer's cuDNN kernels at their latency)
// plus a multiple of its roofline, fitted over the profile's convolutions (issue 65: a small CNN
// scaled down from larger convolutions by a power law was predicted 35-48% too slow).
TEST(ProfilePredict, AGpuConvolutionTheProfileLacksIsAFloorPlusItsRoofline) {
  const auto step_us = [](const ModelSpec& spec, const DeviceProfile& p) {
    return predict_with_profile(spec, spec.train.batch, p, profile_target(p), true).seconds * 1e6;
  };
  const DeviceProfile base = conv_gpu_profile(50, 3), higher_floor = conv_gpu_profile(60, 3),
                      steeper = conv_gpu_profile(50, 6);
  const ModelSpec small = conv_model(64, 16, 3);
  EXPECT_NEAR(step_us(small, higher_floor) - step_us(small, base), 10, 1e-6);
  const double roofline = roofline_on(base, node_sample(model_layout(small), 0, 64, 1));
  EXPECT_NEAR(step_us(small, steeper) - step_us(small, base), 3 * roofline, 1e-6);
}

// An LSTM shape a GPU profile lacks: a recorded step runs its time steps one after another, each
// mostly its kernels' latency, so it is predicted as its steps times a per-step floor plus a
// multiple of the step's roofline, both fitted over the profile's LSTMs (issue 65: small LSTMs
// scaled by their FLOPs alone were predicted at half their measured time on the H200).
TEST(ProfilePredict, AGpuLstmTheProfileLacksIsItsTimeStepsEachAFloorPlusItsRoofline) {
  const auto step_us = [](const ModelSpec& spec, const DeviceProfile& p) {
    return predict_with_profile(spec, spec.train.batch, p, profile_target(p), true).seconds * 1e6;
  };
  const DeviceProfile base = lstm_gpu_profile(5, 4), higher_floor = lstm_gpu_profile(6, 4),
                      steeper = lstm_gpu_profile(5, 8);
  // 60 steps of 48 units at batch 32: a microsecond more per step is 60 more; four times its
  // roofline more per unit of roofline is four rooflines more. Nothing else in the step moves.
  const ModelSpec small = lstm_model(32, 60, 48);
  EXPECT_NEAR(step_us(small, higher_floor) - step_us(small, base), 60, 1e-6);
  const double roofline = roofline_on(base, lstm_node_sample(small));
  EXPECT_NEAR(step_us(small, steeper) - step_us(small, base), 4 * roofline, 1e-6);
  // Two layers: each step's floor twice.
  const ModelSpec deep = lstm_model(32, 60, 48, 2);
  EXPECT_NEAR(step_us(deep, higher_floor) - step_us(deep, base), 120, 1e-6);
  // A shape the profile has is its own sample, whatever the fit.
  const ModelSpec profiled = lstm_model(64, 40, 64);
  EXPECT_NEAR(step_us(profiled, higher_floor) - step_us(profiled, base), 40, 1e-6);
}

}  // namespace
}  // namespace xo

namespace xo {
namespace {

// A CPU's kernels timed at bf16 (`crossover validate --device cpu:bf16`) predict only a CPU at
// bf16, and f32's only f32: the catalog's CPUs (predicted at f32) never take a bf16 profile, the
// CPU at bf16 takes one where there is one, and the validation table has no row from one
// precision to the other.
TEST(ProfilePredict, ACpuProfileTimedAtBf16PredictsOnlyTheCpuAtBf16) {
  std::vector<DeviceProfile> profiles;
  for (const DeviceProfile& p : shipped_profiles()) {
    // The shipped f32 CPU profiles (a bf16 one ships too: its own copy is made below).
    if (p.kind == DeviceKind::Cpu && p.has_kernels() && p.peaks.precision.empty())
      profiles.push_back(p);
  }
  ASSERT_GE(profiles.size(), 2u);
  DeviceProfile bf16 = profiles[0];
  bf16.id += "-bf16";
  bf16.device = kCpuBf16;
  bf16.peaks.precision = "bf16";
  bf16.peaks.matmul_gflops *= 2;
  for (KernelSample& s : bf16.samples) s.forward_us /= 2;  // to tell its predictions apart
  AdviceOptions o;
  o.profiles = profiles;
  o.profiles.push_back(bf16);
  const ModelSpec spec = *builtin_spec("mnist-mlp");
  DeviceInfo cpu{.id = "cpu", .kind = DeviceKind::Cpu, .name = bf16.name, .threads = bf16.threads};
  const auto f32_step = profiled_step(spec, 128, local_target(cpu, bf16.peaks, o), o);
  ASSERT_TRUE(f32_step);
  EXPECT_TRUE(f32_step->from->peaks.precision.empty()) << f32_step->from->id;
  cpu.id = kCpuBf16;
  cpu.precision = "bf16";
  const auto bf16_step = profiled_step(spec, 128, local_target(cpu, bf16.peaks, o), o);
  ASSERT_TRUE(bf16_step);
  EXPECT_EQ(bf16_step->from->id, bf16.id);
  for (const CatalogDevice& c : shipped_catalog().devices) {
    if (c.kind != DeviceKind::Cpu) continue;
    const auto step = profiled_step(spec, 128, catalog_target(c, {}, o), o);
    ASSERT_TRUE(step) << c.id;
    EXPECT_NE(step->from->id, bf16.id) << c.id;
  }
  // Without a bf16 profile the CPU at bf16 has none to take (its bf16 probe's roofline instead).
  o.profiles = profiles;
  EXPECT_FALSE(profiled_step(spec, 128, local_target(cpu, bf16.peaks, o), o));

  bf16.measured = profiles[0].measured;
  profiles.push_back(bf16);
  for (const ValidationRow& r : validate_profiles(profiles)) {
    const bool from_bf16 = r.from == bf16.id, of_bf16 = r.device == bf16.id;
    EXPECT_EQ(from_bf16, of_bf16) << r.device << " from " << r.from;
  }
}

// This machine's CPU without a profile of its own, of the kind a shipped profile was measured on
// (the same name, threads and arithmetic, its probed peak within 15% of the profile's), takes that
// profile as it is (not scaled by this machine's probe) and its kind's own held-out error as a
// floor: not validated here. A part of another generation under the same name (its peak 1.5x), and
// another thread count, are CPUs from another CPU's profile, scaled.
TEST(ProfilePredict, ThisMachinesCpuOfAShippedProfilesKindTakesItNotValidatedHere) {
  AdviceOptions o;
  use_profiles(o, {});
  const DeviceProfile* shipped = nullptr;
  for (const DeviceProfile& p : o.profiles) {
    if (p.kind == DeviceKind::Cpu && p.has_kernels() && p.peaks.precision.empty()) shipped = &p;
  }
  ASSERT_NE(shipped, nullptr);
  const ModelSpec spec = *builtin_spec("mnist-mlp");
  DeviceInfo cpu{
      .id = "cpu", .kind = DeviceKind::Cpu, .name = shipped->name, .threads = shipped->threads};
  auto step_at = [&](double peak_ratio, int threads) {
    DevicePeaks here = shipped->peaks;
    here.matmul_gflops *= peak_ratio;
    here.bandwidth_gbs *= peak_ratio;
    cpu.threads = threads;
    return profiled_step(spec, 128, local_target(cpu, here, o), o);
  };
  const auto faster = step_at(1.1, shipped->threads), slower = step_at(0.9, shipped->threads);
  ASSERT_TRUE(faster && slower);
  for (const auto* step : {&*faster, &*slower}) {
    EXPECT_EQ(step->from, shipped);
    EXPECT_TRUE(step->own && step->kind_only);
    EXPECT_EQ(step->kind, PredictionKind::Own);
    ASSERT_TRUE(step->expected_error);
    EXPECT_TRUE(step->expected_error->at_least);
    EXPECT_EQ(step->expected_error->kind, PredictionKind::Own);
  }
  EXPECT_DOUBLE_EQ(faster->step.seconds, slower->step.seconds);  // as it is
  for (const auto& other : {step_at(1.5, shipped->threads), step_at(1.0, 4 * shipped->threads)}) {
    ASSERT_TRUE(other);
    EXPECT_FALSE(other->own || other->kind_only);
    EXPECT_EQ(other->kind, PredictionKind::CpuFromCpu);
  }
}

// A catalog CPU with a bf16 unit is weighed at bf16, as a user on it would train: its f32 step
// times the bf16 / f32 ratio of one machine's two profiles (the shipped EPYC's), named "at bf16",
// its f32 step beside and its error "at least" (no held-out row checks it). A CPU without a unit
// or whose entry does not say, a GPU, and a model whose products bf16 does not change stay f32.
TEST(ProfilePredict, CatalogCpusWithABf16UnitAreWeighedAtBf16) {
  AdviceOptions o;
  use_profiles(o, {});
  Catalog catalog = shipped_catalog();
  for (CatalogDevice& d : catalog.devices) {
    if (d.id == "epyc-9654") d.bf16_unit = "unknown", d.bf16_tflops = 0;  // an entry not saying
  }
  auto predict = [&](const char* model) {
    const ModelSpec spec = *builtin_spec(model);
    RunRecord focus;
    focus.result.model = model;
    focus.result.batch = spec.train.batch;
    focus.spec_toml = to_toml(spec);
    std::map<std::string, DevicePrediction> by_id;
    for (DevicePrediction& p : predict_devices(focus, {}, {}, catalog, o)) by_id[p.device] = p;
    return by_id;
  };
  const auto cnn = predict("mnist-cnn");
  int at_bf16 = 0;
  for (const CatalogDevice& c : catalog.devices) {
    SCOPED_TRACE(c.id);
    const DevicePrediction& p = cnn.at(c.id);
    if (p.precision.empty()) {
      EXPECT_FALSE(p.f32_step_s);
      EXPECT_EQ(p.name, c.name);
      continue;
    }
    ++at_bf16;
    EXPECT_TRUE(runs_bf16(c)) << "only a CPU with AMX or AVX-512 BF16 and its rate";
    EXPECT_EQ(p.precision, "bf16");
    EXPECT_EQ(p.name, c.name + " at bf16");
    ASSERT_TRUE(p.f32_step_s);
    EXPECT_LT(p.step.seconds, *p.f32_step_s);
    EXPECT_TRUE(p.expected_at_least);
    // The ratio of a machine whose products ran on this CPU's unit.
    const std::string own =
        c.bf16_unit == "amx" ? "intel-r-xeon-r-processor-2t-bf16" : "amd-epyc-2t-bf16";
    bool said = false;
    for (const std::string& a : p.assumptions) {
      said |= a.find(own + "'s") != std::string::npos;
      EXPECT_EQ(a.find("no machine with this CPU's unit"), std::string::npos) << a;
    }
    EXPECT_TRUE(said) << "the assumptions name the profiles whose ratio it takes: " << own;
  }
  EXPECT_GE(at_bf16, 2) << "the shipped AMX Xeons and Zen 4 parts, for a CNN";
  EXPECT_TRUE(cnn.at("i9-14900k").precision.empty());
  EXPECT_TRUE(cnn.at("epyc-9654").precision.empty());
  // disc-4's layers are all small (f32 at any precision): nothing is weighed at bf16.
  for (const auto& [id, p] : predict("disc-4")) EXPECT_TRUE(p.precision.empty()) << id;
}

TEST(ProfilePredict, ACatalogCpuTakesAnotherUnitsBf16RatioOnlyWhereItsOwnWasNotProfiledAndSaysSo) {
  AdviceOptions o;
  use_profiles(o, {});
  const Catalog catalog = shipped_catalog();
  const ModelSpec spec = *builtin_spec("mnist-cnn");
  RunRecord focus;
  focus.result.model = "mnist-cnn";
  focus.result.batch = spec.train.batch;
  focus.spec_toml = to_toml(spec);
  auto amx_assumption = [&](const AdviceOptions& opts) {
    for (const DevicePrediction& p : predict_devices(focus, {}, {}, catalog, opts)) {
      if (p.device != "xeon-8480plus") continue;
      for (const std::string& a : p.assumptions) {
        if (a.rfind("bf16:", 0) == 0) return a;
      }
    }
    return std::string("(none)");
  };
  const std::string own = amx_assumption(o);
  EXPECT_NE(own.find("intel-r-xeon-r-processor-2t-bf16's"), std::string::npos) << own;
  EXPECT_NE(own.find("its products on AMX, each carried to this CPU at its AMX rate"),
            std::string::npos)
      << own;
  // Without the AMX machine's profile, the AVX-512 BF16 machine's ratio, said to be another unit's.
  std::erase_if(o.profiles,
                [](const DeviceProfile& p) { return p.id == "intel-r-xeon-r-processor-2t-bf16"; });
  const std::string other = amx_assumption(o);
  EXPECT_NE(other.find("amd-epyc-2t-bf16's"), std::string::npos) << other;
  EXPECT_NE(other.find("its products on AVX-512 BF16: no machine with this CPU's unit was "
                       "profiled, each carried to this CPU at its AMX rate"),
            std::string::npos)
      << other;
}

}  // namespace
}  // namespace xo
