// The model's parameter layout (PyTorch names, shapes, flat-buffer views), its initialisation, and
// weight exchange through safetensors, with the errors a user sees for mismatched files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backend/backend.h"
#include "core/error.h"
#include "model/model.h"
#include "support/expect_error.h"

namespace xo {
namespace {

std::unique_ptr<Backend> cpu() { return make_backend(parse_device("cpu", 0)); }

TEST(Model, ParameterNamesShapesAndCountsFollowPyTorch) {
  auto be = cpu();
  Model m(*builtin_spec("disc-3"), *be);
  const auto& t = m.tensors();
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0].name, "0.weight");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(t[1].name, "0.bias");
  EXPECT_EQ(t[2].name, "2.weight");
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(t[4].name, "4.weight");
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(m.parameter_count(), 4 * 2 + 4 + 8 * 4 + 8 + 2 * 8 + 2);
  for (const auto& p : t) EXPECT_EQ(p.offset % 16, 0) << p.name << " is not 64-byte aligned";
  EXPECT_EQ(m.nodes().size(), 3u);  // ReLUs are fused into their Linears
  EXPECT_EQ(m.nodes()[0].activation, Activation::ReLU);
  EXPECT_EQ(m.nodes()[2].activation, Activation::None);
  EXPECT_EQ(Model(*builtin_spec("disc-8"), *be).parameter_count(), 44710);
  EXPECT_EQ(Model(*builtin_spec("disc-10"), *be).parameter_count(), 703142);
}

TEST(Model, InitFollowsPyTorchBounds) {
  auto be = cpu();
  Model m(*builtin_spec("disc-8"), *be);
  m.init(0);
  // Check the bound of the widest layer: 8.weight [64, 32] ~ U(-1/sqrt(32), 1/sqrt(32)).
  const auto params = m.export_params();
  const NamedTensor& w = params[8];
  ASSERT_EQ(w.name, "8.weight");
  const double bound = 1.0 / std::sqrt(32.0);
  double lo = 1, hi = -1, mean = 0;
  for (float v : w.data) {
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
    mean += v;
  }
  mean /= static_cast<double>(w.data.size());
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9 * bound);  // 2048 draws reach close to both ends
  EXPECT_GT(hi, 0.9 * bound);
  EXPECT_NEAR(mean, 0.0, 0.02);
}

TEST(Model, SafetensorsRoundTripIsExact) {
  auto be = cpu();
  Model a(*builtin_spec("disc-5"), *be), b(*builtin_spec("disc-5"), *be);
  a.init(7);
  const auto path = std::filesystem::path(::testing::TempDir()) / "model_roundtrip.safetensors";
  save_safetensors(path, a.export_params());
  b.import_params(load_safetensors(path), path.string());
  const auto pa = a.export_params(), pb = b.export_params();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].name, pb[i].name);
    EXPECT_EQ(pa[i].shape, pb[i].shape);
    EXPECT_EQ(pa[i].data, pb[i].data);
  }
}

TEST(Model, ImportErrorsNameTheFileAndTensor) {
  auto be = cpu();
  Model m(*builtin_spec("disc-3"), *be);
  m.init(0);
  auto params = m.export_params();
  auto expect_error = [&](std::vector<NamedTensor> tensors, const std::string& needle) {
    testing::expect_user_error([&] { m.import_params(tensors, "w.safetensors"); },
                               {"w.safetensors", needle});
  };
  auto missing = params;
  missing.erase(missing.begin() + 1);
  expect_error(missing, "'0.bias' [4] is missing");
  auto wrong_shape = params;
  wrong_shape[2].shape = {4, 8};
  expect_error(wrong_shape, "'2.weight' has shape [4, 8], expected [8, 4]");
  auto extra = params;
  extra.push_back({"9.weight", {1}, {0.0f}});
  expect_error(extra, "'9.weight' is not a parameter");
}

TEST(Model, FlopsCountTheThreeMatmulsOfTraining) {
  auto be = cpu();
  Model m(*builtin_spec("disc-2"), *be);  // Linear(2,4) ReLU Linear(4,2)
  EXPECT_EQ(m.forward_flops(100), 2.0 * 100 * (2 * 4 + 4 * 2));
  // First layer: forward + d_weights; second: forward + d_weights + d_src.
  EXPECT_EQ(m.train_flops(100), 2.0 * 100 * (2 * 2 * 4 + 3 * 4 * 2));
}

}  // namespace
}  // namespace xo

namespace xo {
namespace {

// Invariance: splitting a batch into shards that run concurrently gives the same gradients and
// loss as one pass over the whole batch, to float32 rounding, for every kind of layer (dropout
// masks included: they are drawn per element of the whole batch).
struct ShardCase {
  std::string name;
  ModelSpec spec;
  bool token_ids = false;  // inputs are ids below 50
};

void PrintTo(const ShardCase& c, std::ostream* os) { *os << c.name; }

class ShardTest : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardTest, ShardedStepEqualsUnsharded) {
  auto be = cpu();
  Model model(GetParam().spec, *be);
  const int64_t batch = 24, features = model.input_features();
  std::vector<float> x(batch * features);
  std::vector<int32_t> y(batch);
  for (int64_t i = 0; i < batch * features; ++i) {
    x[i] = GetParam().token_ids ? static_cast<float>((i * 7) % 50)
                                : std::sin(0.37f * static_cast<float>(i));
  }
  for (int64_t i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(i % 3 == 0);
  DeviceBuffer dx = be->allocate(sizeof(float) * x.size());
  DeviceBuffer dy = be->allocate(sizeof(int32_t) * y.size());
  be->upload(dx.as<float>(), x.data(), dx.bytes());
  be->upload(dy.as<int32_t>(), y.data(), dy.bytes());
  auto step = [&](int shards, LossStats& stats) {
    model.init(3);  // the same weights and dropout step for both
    Network net(model, {.batch = batch, .shards = shards});
    EXPECT_EQ(net.shards(), shards);
    DeviceBuffer s = be->allocate(sizeof(LossStats));
    net.train_step(dx.as<float>(), dy.as<int32_t>(), s.as<LossStats>());
    be->download(&stats, s.as<LossStats>(), sizeof(stats));
    std::vector<float> grads(model.flat_size());
    be->download(grads.data(), model.grads(), sizeof(float) * grads.size());
    return grads;
  };
  LossStats one{}, three{};
  const auto g1 = step(1, one);
  const auto g3 = step(3, three);
  EXPECT_NEAR(one.loss_sum, three.loss_sum, 1e-6 * std::abs(one.loss_sum));
  EXPECT_EQ(one.correct, three.correct);
  EXPECT_EQ(one.samples, three.samples);
  float scale = 0;
  for (float g : g1) scale = std::max(scale, std::abs(g));
  ASSERT_GT(scale, 0.0f);
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g1[i], g3[i], 1e-5f * scale) << "grad " << i;
}

ModelSpec spec_of(const std::string& layers, const std::string& input, const std::string& loss) {
  return parse_spec(
      "[model]\ninput = " + input + "\nlayers = [" + layers + "]\nloss = \"" + loss + "\"\n",
      "shard.toml");
}

INSTANTIATE_TEST_SUITE_P(
    Models, ShardTest,
    ::testing::Values(
        ShardCase{"disc7", *builtin_spec("disc-7")},
        ShardCase{
            "cnn",
            spec_of(R"({ type = "conv2d", out = 4, kernel = 3, padding = 1 }, { type = "relu" },
                             { type = "maxpool2d", kernel = 2 }, { type = "dropout", p = 0.3 },
                             { type = "avgpool2d", kernel = 2 }, { type = "flatten" },
                             { type = "linear", out = 3 })",
                    "[2, 8, 8]", "cross_entropy")},
        ShardCase{"lstm",
                  spec_of(R"({ type = "embedding", vocab = 50, out = 6 },
                             { type = "lstm", out = 5, layers = 2, sequence = true },
                             { type = "global_maxpool" }, { type = "dropout", p = 0.5 },
                             { type = "linear", out = 1 })",
                          "[7]", "bce"),
                  true}),
    [](const auto& param) { return param.param.name; });

TEST(Model, BatchNormBuffersFollowPyTorchAndTrainUnsharded) {
  auto be = cpu();
  Model m(spec_of(R"({ type = "conv2d", out = 3, kernel = 3, bias = false },
                     { type = "batchnorm2d" }, { type = "relu" }, { type = "flatten" },
                     { type = "linear", out = 2 })",
                  "[1, 5, 5]", "cross_entropy"),
          *be);
  m.init(3);
  // Parameters: conv weight, BN weight and bias, linear; the buffers are not parameters.
  EXPECT_EQ(m.parameter_count(), 27 + 3 + 3 + 27 * 2 + 2);
  auto exported = m.export_params();
  std::vector<std::string> names;
  for (const auto& t : exported) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "1.weight", "1.bias", "4.weight", "4.bias",
                                             "1.running_mean", "1.running_var",
                                             "1.num_batches_tracked"}));
  EXPECT_EQ(exported[1].data, std::vector<float>(3, 1.0f));  // nn.BatchNorm2d: weight 1
  EXPECT_EQ(exported[2].data, std::vector<float>(3, 0.0f));  // bias 0
  EXPECT_EQ(exported[6].data, std::vector<float>(3, 1.0f));  // running_var 1
  EXPECT_EQ(exported[7].dtype, "I64");
  EXPECT_TRUE(exported[7].shape.empty());  // a 0-d tensor, as in the state_dict
  // The whole batch's statistics: a plan asked for 2 shards runs 1.
  Network net(m, {.batch = 4, .shards = 2});
  EXPECT_EQ(net.shards(), 1);
  std::vector<float> x(4 * 25);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.7 * i));
  const std::vector<int32_t> y = {0, 1, 1, 0};
  DeviceBuffer dx = be->allocate(sizeof(float) * x.size()), dy = be->allocate(sizeof(int32_t) * 4),
               stats = be->allocate(sizeof(LossStats));
  be->upload(dx.as<float>(), x.data(), dx.bytes());
  be->upload(dy.as<int32_t>(), y.data(), dy.bytes());
  net.train_step(dx.as<float>(), dy.as<int32_t>(), stats.as<LossStats>());
  net.train_step(dx.as<float>(), dy.as<int32_t>(), stats.as<LossStats>());
  exported = m.export_params();
  EXPECT_EQ(exported[7].data[0], 2.0f);        // two batches seen
  EXPECT_NE(exported[5].data[0], 0.0f);        // the running mean moved
  // Round trip through a file: parameters and buffers come back exactly.
  const auto file = std::filesystem::path(::testing::TempDir()) / "bn.safetensors";
  save_safetensors(file, exported);
  Model copy(m.spec(), *be);
  copy.import_params(load_safetensors(file), file.string());
  const auto back = copy.export_params();
  ASSERT_EQ(back.size(), exported.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].data, exported[i].data) << back[i].name;
    EXPECT_EQ(back[i].dtype, exported[i].dtype) << back[i].name;
  }
  // A file without the buffers is refused, naming the missing one.
  exported.pop_back();
  testing::expect_user_error([&] { copy.import_params(exported, "partial.safetensors"); },
                             {"partial.safetensors", "1.num_batches_tracked", "missing"});
}

}  // namespace
}  // namespace xo
