// Optimizer steps against values computed by hand from torch.optim's update rules, on every
// backend. Parameters start at p = 1 with a constant gradient g = 0.5.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <ostream>
#include <vector>

#include "backend/backend.h"

namespace xo {
namespace {

struct OptCase {
  std::string name;
  OptimizerSettings spec;
  int steps;
  float expected;  // p after `steps` steps, computed by hand (see each case's comment)
};

OptimizerSettings sgd(double lr, double momentum = 0, bool nesterov = false, double wd = 0,
                      double dampening = 0) {
  OptimizerSettings s;
  s.type = OptimizerType::SGD;
  s.lr = lr;
  s.momentum = momentum;
  s.nesterov = nesterov;
  s.weight_decay = wd;
  s.dampening = dampening;
  return s;
}

OptimizerSettings adam(OptimizerType type, double lr, double wd) {
  OptimizerSettings s;
  s.type = type;
  s.lr = lr;
  s.weight_decay = wd;
  return s;
}

OptimizerSettings rmsprop(double lr, double alpha) {
  OptimizerSettings s;
  s.type = OptimizerType::RMSprop;
  s.lr = lr;
  s.alpha = alpha;
  return s;
}

OptimizerSettings adadelta(double lr, double wd = 0) {
  OptimizerSettings s;
  s.type = OptimizerType::Adadelta;
  s.lr = lr;
  s.rho = 0.9;
  s.eps = 1e-6;
  s.weight_decay = wd;
  return s;
}

std::vector<OptCase> cases() {
  return {
      // p = 1 - 0.1 * 0.5
      {"sgd_plain", sgd(0.1), 1, 0.95f},
      // buf1 = 0.5, p1 = 0.95; buf2 = 0.9*0.5 + 0.5 = 0.95, p2 = 0.95 - 0.095 = 0.855
      {"sgd_momentum_two_steps", sgd(0.1, 0.9), 2, 0.855f},
      // buf1 = 0.5; update g + mu*buf = 0.5 + 0.45 = 0.95; p = 1 - 0.095
      {"sgd_nesterov", sgd(0.1, 0.9, true), 1, 0.905f},
      // g = 0.5 + 0.1*1 = 0.6; p = 1 - 0.06
      {"sgd_weight_decay", sgd(0.1, 0, false, 0.1), 1, 0.94f},
      // buf1 = 0.5, p1 = 0.95; buf2 = 0.9*0.5 + (1-0.5)*0.5 = 0.7, p2 = 0.95 - 0.07 = 0.88
      {"sgd_dampening", sgd(0.1, 0.9, false, 0, 0.5), 2, 0.88f},
      // m = 0.05, v = 0.00025; m_hat = 0.5, v_hat = 0.25; p = 1 - 0.1 * 0.5 / (0.5 + 1e-8)
      {"adam_one_step", adam(OptimizerType::Adam, 0.1, 0), 1, 0.9f},
      // Adam's bias correction keeps a constant gradient's step at lr: p = 1 - 3 * 0.1
      {"adam_three_steps", adam(OptimizerType::Adam, 0.1, 0), 3, 0.7f},
      // L2: g = 0.5 + 0.5*1 = 1.0; the normalised step is still lr: p = 0.9
      {"adam_l2", adam(OptimizerType::Adam, 0.1, 0.5), 1, 0.9f},
      // decoupled: p = 1 * (1 - 0.1*0.5) - 0.1 = 0.85
      {"adamw_decay", adam(OptimizerType::AdamW, 0.1, 0.5), 1, 0.85f},
      // v = 0.1 * 0.25 = 0.025; p = 1 - 0.01 * 0.5 / (sqrt(0.025) + 1e-8)
      {"rmsprop_one_step", rmsprop(0.01, 0.9), 1, 0.9683772254f},
      // v2 = 0.9 * 0.025 + 0.025 = 0.0475; p2 = p1 - 0.005 / sqrt(0.0475)
      {"rmsprop_two_steps", rmsprop(0.01, 0.9), 2, 0.9454356531f},
      // v = 0.025; d = sqrt(0 + 1e-6) / sqrt(0.025 + 1e-6) * 0.5; p = 1 - d
      {"adadelta_one_step", adadelta(1.0), 1, 0.9968377856f},
      // u = 0.1 d^2; v2 = 0.0475; d2 = sqrt(u + 1e-6) / sqrt(v2 + 1e-6) * 0.5; p = 1 - d - d2
      {"adadelta_two_steps", adadelta(1.0), 2, 0.9935934238f},
      // g = 0.5 + 0.1 * 1 = 0.6; v = 0.036; p = 1 - 0.5 * sqrt(1e-6) / sqrt(0.036 + 1e-6) * 0.6
      {"adadelta_weight_decay", adadelta(0.5, 0.1), 1, 0.9984188831f},
  };
}

// The case's name in test listings (ctest's), not a dump of its bytes.
void PrintTo(const OptCase& c, std::ostream* os) { *os << c.name; }

class OptimizerTest : public ::testing::TestWithParam<OptCase> {};

TEST_P(OptimizerTest, MatchesHandComputedStep) {
  const OptCase& c = GetParam();
  constexpr int64_t kN = 50000;  // past the parallel threshold, so both paths are exercised
  for (const auto& id : list_devices().available) {
    SCOPED_TRACE(id);
    auto be = make_backend(parse_device(id, 0));
    auto opt = be->optimizer(c.spec, kN);
    std::vector<float> p(kN, 1.0f), g(kN, 0.5f);
    DeviceBuffer params = be->allocate(sizeof(float) * kN);
    DeviceBuffer grads = be->allocate(sizeof(float) * kN);
    be->upload(params.as<float>(), p.data(), sizeof(float) * kN);
    be->upload(grads.as<float>(), g.data(), sizeof(float) * kN);
    for (int s = 0; s < c.steps; ++s) opt->step(params.as<float>(), grads.as<float>());
    be->synchronize();
    be->download(p.data(), params.as<float>(), sizeof(float) * kN);
    EXPECT_EQ(opt->steps(), c.steps);
    // A few float32 roundings per step (Adam's bias corrections among them).
    EXPECT_NEAR(p[0], c.expected, 3e-6f);
    EXPECT_EQ(p[0], p[kN - 1]);
  }
}

// A schedule's rate replaces the one the CPU optimizer was built with, for every update rule: built
// with a rate 70 times too large and given the case's before the first step, it gives the case's
// hand-computed result. (The GPU's kernels take the rate at record time: the trainer refuses a
// schedule there, and tests/train/test_epoch_rules.cpp checks that refusal.)
TEST_P(OptimizerTest, TheCpuOptimizerTakesANewLearningRate) {
  const OptCase& c = GetParam();
  constexpr int64_t kN = 50000;
  auto be = make_backend(parse_device("cpu", 0));
  OptimizerSettings built = c.spec;
  built.lr = 70 * c.spec.lr;
  auto opt = be->optimizer(built, kN);
  opt->set_learning_rate(c.spec.lr);
  std::vector<float> p(kN, 1.0f), g(kN, 0.5f);
  DeviceBuffer params = be->allocate(sizeof(float) * kN);
  DeviceBuffer grads = be->allocate(sizeof(float) * kN);
  be->upload(params.as<float>(), p.data(), sizeof(float) * kN);
  be->upload(grads.as<float>(), g.data(), sizeof(float) * kN);
  for (int s = 0; s < c.steps; ++s) opt->step(params.as<float>(), grads.as<float>());
  be->download(p.data(), params.as<float>(), sizeof(float) * kN);
  EXPECT_NEAR(p[0], c.expected, 3e-6f);
}

// Data-parallel ranks of one machine step one shared parameter buffer, each its own part with its
// own optimizer, summing the ranks' gradients for that part as it goes (--reduce shared): the
// parts' steps are the whole buffer's step on the summed gradients, bit for bit, for every update
// rule, also after the state has moved to other memory (as it moves into and out of the memory the
// ranks share).
TEST_P(OptimizerTest, TheCpuOptimizerStepsPartsAsOneStep) {
  const OptCase& c = GetParam();
  constexpr int64_t kN = 50000, kCut = 20016;
  auto be = make_backend(parse_device("cpu", 0));
  auto whole = be->optimizer(c.spec, kN);
  std::unique_ptr<OptimizerKernel> parts[2] = {be->optimizer(c.spec, kN),
                                               be->optimizer(c.spec, kN)};
  std::vector<float> p(kN), mine(kN), theirs(kN), sum(kN);
  for (int64_t i = 0; i < kN; ++i) p[i] = 0.25f + 0.5f * static_cast<float>(i % 97) / 97;
  auto buffer = [&](const std::vector<float>& values) {
    DeviceBuffer b = be->allocate(sizeof(float) * kN);
    be->upload(b.as<float>(), values.data(), sizeof(float) * kN);
    return b;
  };
  DeviceBuffer a = buffer(p), b = buffer(p);
  std::vector<DeviceBuffer> moved;
  for (int s = 0; s < c.steps + 2; ++s) {
    for (int64_t i = 0; i < kN; ++i) {
      mine[i] = static_cast<float>((i * 7 + s * 13) % 31) / 31 - 0.4f;
      theirs[i] = static_cast<float>((i * 5 + s * 3) % 29) / 29 - 0.6f;
      sum[i] = mine[i] + theirs[i];
    }
    DeviceBuffer g = buffer(sum), g0 = buffer(mine), g1 = buffer(theirs);
    whole->step(a.as<float>(), g.as<float>());
    // Each part's rank sums into its own gradients: rank 0 adds rank 1's, rank 1 rank 0's.
    parts[0]->step_part(b.as<float>(), g0.as<float>(), {g1.as<float>()}, 0, kCut);
    parts[1]->step_part(b.as<float>(), g1.as<float>(), {g0.as<float>()}, kCut, kN);
    if (s == 0) {
      // The second part's state moves to new memory, its values copied first.
      const std::vector<OptimizerStateBuffer> state = parts[1]->state_buffers();
      for (const OptimizerStateBuffer& buffer_k : state) {
        moved.push_back(be->allocate(sizeof(float) * kN));
        std::copy(buffer_k.data, buffer_k.data + kN, moved.back().as<float>());
      }
      const std::vector<DeviceBuffer> before = parts[1]->swap_state(moved);
      ASSERT_EQ(before.size(), state.size());
      for (size_t k = 0; k < state.size(); ++k) EXPECT_EQ(before[k].as<float>(), state[k].data);
    }
  }
  EXPECT_EQ(parts[0]->steps(), c.steps + 2);
  std::vector<float> pa(kN), pb(kN);
  be->download(pa.data(), a.as<float>(), sizeof(float) * kN);
  be->download(pb.data(), b.as<float>(), sizeof(float) * kN);
  EXPECT_EQ(pa, pb);
  EXPECT_NE(pa, p);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OptimizerTest, ::testing::ValuesIn(cases()),
                         [](const auto& case_info) { return case_info.param.name; });

// The names spec files use and `crossover train` prints, one per type, in the order listed.
TEST(OptimizerType, NamesAreThoseOfSpecFiles) {
  std::vector<std::string> names;
  for (OptimizerType t : kOptimizerTypes) names.push_back(optimizer_type_name(t));
  EXPECT_EQ(names, (std::vector<std::string>{"sgd", "adam", "adamw", "rmsprop", "adadelta"}));
}

}  // namespace
}  // namespace xo
