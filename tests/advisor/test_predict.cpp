// The roofline prediction against hand-computed numbers, the per-layer costs of a small model,
// and the calibration.
#include <gtest/gtest.h>

#include "advisor/predict.h"
#include "backend/backend.h"
#include "model/model.h"

namespace xo {
namespace {

ModelSpec mlp() {
  // 4 -> Linear 8 + ReLU -> Linear 2, plain SGD.
  ModelSpec s;
  s.name = "mlp";
  s.origin = "test";
  s.input = {4};
  LayerSpec l1;
  l1.type = LayerType::Linear;
  l1.out = 8;
  LayerSpec relu;
  relu.type = LayerType::ReLU;
  LayerSpec l2;
  l2.type = LayerType::Linear;
  l2.out = 2;
  s.layers = {l1, relu, l2};
  return s;
}

TEST(Predict, StepWorkOfASmallMlp) {
  auto be = make_backend(parse_device("cpu", 1));
  const Model m(mlp(), *be);
  const StepWork c = step_work(m, 10);
  ASSERT_EQ(c.layers.size(), 2u);  // the ReLU is fused into the first Linear
  EXPECT_EQ(c.layers[0].name, "0 linear+relu");
  EXPECT_EQ(c.layers[1].name, "2 linear");
  // Layer 0: forward 2*10*4*8 = 640 FLOPs, and the weight gradient again (no gradient below).
  EXPECT_DOUBLE_EQ(c.layers[0].flops, 2 * 640.0);
  // Layer 2: 2*10*8*2 = 320 forward, three passes (a gradient flows to layer 0).
  EXPECT_DOUBLE_EQ(c.layers[1].flops, 3 * 320.0);
  // Layer 0 bytes: in 40, params 40, out 80 floats; backward d_out + in + out + 2 params.
  EXPECT_DOUBLE_EQ(c.layers[0].bytes, 4.0 * (40 + 40 + 80 + 80 + 40 + 80 + 40 + 40));
  // Layer 2: in 80, params 18, out 20; backward + d_in 80.
  EXPECT_DOUBLE_EQ(c.layers[1].bytes, 4.0 * (80 + 18 + 20 + 20 + 80 + 20 + 18 + 18 + 80));
  // SGD without momentum: 12 bytes per parameter, 58 parameters.
  EXPECT_DOUBLE_EQ(c.optimizer_bytes, 12.0 * 58);
  EXPECT_DOUBLE_EQ(c.flops, 2 * 640.0 + 3 * 320.0);
  EXPECT_DOUBLE_EQ(c.bytes, c.layers[0].bytes + c.layers[1].bytes + c.optimizer_bytes);
}

TEST(Predict, RooflineByHand) {
  StepWork c;
  c.layers = {{"big", 0, 2e9, 1e6}, {"wide", 1, 1e6, 4e8}};  // FLOP-bound, byte-bound
  c.optimizer_bytes = 1e8;
  const DeviceRates rates{1000, 100, 5, 1};  // 1 TFLOP/s, 100 GB/s, 5 us + 1 us per layer
  const StepPrediction p = predict_step(c, rates);
  // big: 2e9 / 1e12 = 2 ms (vs 1e6 / 1e11 = 10 us): FLOPs. wide: 4e8 / 1e11 = 4 ms: bytes.
  // optimizer: 1e8 / 1e11 = 1 ms. overhead: 5 + 2 * 1 = 7 us.
  EXPECT_NEAR(p.flops_seconds, 2e-3, 1e-15);
  EXPECT_NEAR(p.bytes_seconds, 5e-3, 1e-15);
  EXPECT_NEAR(p.overhead_seconds, 7e-6, 1e-18);
  EXPECT_NEAR(p.seconds, 7.007e-3, 1e-15);
  ASSERT_EQ(p.layer_bounds.size(), 2u);
  EXPECT_EQ(p.layer_bounds[0], "FLOPs");
  EXPECT_EQ(p.layer_bounds[1], "bytes");
  EXPECT_EQ(p.bound, "bytes");
  // Half the efficiency doubles the roofline terms, not the overhead.
  const StepPrediction half = predict_step(c, rates, 0.5);
  EXPECT_NEAR(half.seconds, 14e-3 + 7e-6, 1e-15);
  // A tiny step is bound by the overhead.
  StepWork tiny;
  tiny.layers = {{"t", 0, 100, 100}};
  EXPECT_EQ(predict_step(tiny, rates).bound, "overhead");
}

TEST(Predict, CalibrationMeetsTheMeasurement) {
  StepWork c;
  c.layers = {{"big", 0, 2e9, 1e6}};
  const DeviceRates rates{1000, 100, 10, 0};
  // Roofline 2 ms + 10 us overhead; measured 4.01 ms -> efficiency 0.5.
  const double eff = calibrate_efficiency(c, rates, 4.01e-3);
  EXPECT_NEAR(eff, 0.5, 1e-12);
  EXPECT_NEAR(predict_step(c, rates, eff).seconds, 4.01e-3, 1e-15);
  // Faster than the roofline (a stale probe): capped at 1. Slower than 50x: floored at 0.02.
  EXPECT_EQ(calibrate_efficiency(c, rates, 1e-3), 1.0);
  EXPECT_EQ(calibrate_efficiency(c, rates, 1.0), 0.02);
}

TEST(Predict, OptimizerBytes) {
  OptimizerSettings o;
  EXPECT_EQ(optimizer_bytes_per_param(o), 12);
  o.momentum = 0.9;
  EXPECT_EQ(optimizer_bytes_per_param(o), 20);
  o.type = OptimizerType::Adam;
  EXPECT_EQ(optimizer_bytes_per_param(o), 28);
  o.type = OptimizerType::RMSprop;
  EXPECT_EQ(optimizer_bytes_per_param(o), 20);
}

}  // namespace
}  // namespace xo
