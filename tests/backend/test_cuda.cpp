// The CUDA backend against the CPU: a whole training run on each (same spec, weights and data)
// ends with the same parameters to f32 tolerance, and the recorded step (one CUDA Graph per step)
// ends exactly where launching every kernel from the host does. Without a GPU these tests skip,
// saying why; what can be checked without one (the reason a GPU is missing, `auto` falling back to
// the CPU) is checked everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "backend/backend.h"
#ifdef CROSSOVER_WITH_CUDA
#include "backend/cuda/cublaslt_loader.h"
#endif
#include "core/random.h"
#include "model/model.h"
#include "support/expect_error.h"
#include "support/gpu.h"
#include "train/trainer.h"

namespace xo {
namespace {

#define SKIP_WITHOUT_GPU()                                                                   \
  do {                                                                                       \
    std::string why_;                                                                        \
    if (!testing::gpu_present(&why_)) GTEST_SKIP() << "no NVIDIA GPU here (" << why_ << ")"; \
  } while (0)

TEST(CudaDevices, AMissingGpuIsExplainedAndAutoFallsBackToTheCpu) {
  const DeviceList list = list_devices();
  ASSERT_FALSE(list.available.empty());
  EXPECT_EQ(list.available.front(), "cpu");
  std::string why;
  if (testing::gpu_present(&why)) {
    auto be = make_backend(parse_device("cuda", 0));
    EXPECT_EQ(be->info().kind, DeviceKind::Gpu);
    EXPECT_NE(be->info().library.find("cuBLASLt"), std::string::npos) << be->info().library;
    EXPECT_NE(be->info().library.find("cuDNN"), std::string::npos) << be->info().library;
    EXPECT_EQ(make_backend(parse_device("auto", 0))->info().kind, DeviceKind::Gpu);
    return;
  }
  // Built without CUDA, or built with it on a machine without a driver or a GPU: either way the
  // reason is listed and a request for the GPU fails with it rather than crashing.
  ASSERT_EQ(list.unavailable_reasons.size(), 1u);
  const std::string& reason = list.unavailable_reasons.front();
  EXPECT_EQ(reason.rfind("cuda: ", 0), 0u) << reason;
#ifdef CROSSOVER_WITH_CUDA
  EXPECT_NE(reason.find("no NVIDIA"), std::string::npos) << reason;
#else
  EXPECT_NE(reason.find("built without CUDA"), std::string::npos) << reason;
#endif
  const std::string detail = reason.substr(6);
  testing::expect_user_error([] { make_backend(parse_device("cuda", 0)); }, {detail});
  testing::expect_user_error([] { make_backend(parse_device("cuda:1", 0)); }, {detail});
  EXPECT_EQ(make_backend(parse_device("auto", 0))->info().kind, DeviceKind::Cpu);
}

#ifdef CROSSOVER_WITH_CUDA
// cuBLASLt is opened when a CUDA backend first needs it, not linked: the library the build used
// opens and every entry point crossover calls is found, GPU or not (no call into it needs one);
// its version then comes through the loaded library.
TEST(CudaDevices, CublasLtOpensWhenFirstNeededWithEveryEntryPoint) {
  const std::string path = cuda::load_cublaslt();
  EXPECT_NE(path.find("libcublasLt.so"), std::string::npos) << path;
  EXPECT_EQ(cuda::load_cublaslt(), path);              // once per process
  EXPECT_GE(cuda::cublaslt_version(), size_t{10000});  // a major version, through the library
}
#endif

TEST(CudaDevices, PrecisionNames) {
  EXPECT_EQ(parse_precision("f32"), Precision::F32);
  EXPECT_EQ(parse_precision("tf32"), Precision::TF32);
  EXPECT_EQ(parse_precision("bf16"), Precision::BF16);
  testing::expect_user_error([] { parse_precision("fp16"); }, {"'fp16'", "f32, tf32 or bf16"});
}

// A model and a small data set for it: random inputs (token ids for an embedding), labels in
// range (real targets for mse), samples not a multiple of the batch (so the partial last batch
// runs too).
struct EquivalenceCase {
  std::string name;
  std::string layers, input, loss, optimizer;
  int64_t vocab = 0;  // > 0: the inputs are token ids below it
  int64_t epochs = 3;
  std::string rules;  // TOML tables after [train]: [train.schedule], [train.early_stopping]
};

void PrintTo(const EquivalenceCase& c, std::ostream* os) { *os << c.name; }

ModelSpec case_spec(const EquivalenceCase& c) {
  ModelSpec spec = parse_spec("[model]\ninput = " + c.input + "\nlayers = [" + c.layers +
                                  "]\nloss = \"" + c.loss +
                                  "\"\n[train]\nbatch = 16\nepochs = " +
                                  std::to_string(c.epochs) +
                                  "\nshuffle = true\noptimizer = { type = \"" + c.optimizer +
                                  "\", lr = 0.01 }\n" + c.rules,
                              c.name + ".toml");
  return spec;
}

Dataset case_data(const Model& model, const EquivalenceCase& c) {
  Dataset d;
  d.samples = 40;
  d.features = model.input_features();
  d.classes = model.classes();
  d.description = "random";
  Rng rng(11);
  d.x.resize(static_cast<size_t>(d.samples * d.features));
  for (float& v : d.x) {
    v = c.vocab > 0 ? static_cast<float>(rng.below(static_cast<uint64_t>(c.vocab)))
                    : static_cast<float>(rng.uniform(-1, 1));
  }
  for (int64_t i = 0; i < d.samples; ++i) {
    // mse: a real target in [-1, 1], as a float's bits.
    d.y.push_back(d.classes > 0 ? static_cast<int32_t>(i % d.classes)
                                : std::bit_cast<int32_t>(static_cast<float>(rng.uniform(-1, 1))));
  }
  return d;
}

struct Trained {
  TrainResult result;
  std::vector<float> params;
};

Trained train_on(const std::string& device, const EquivalenceCase& c, bool record) {
  auto be = make_backend(parse_device(device, 0));
  const ModelSpec spec = case_spec(c);
  Model model(spec, *be);
  const Dataset data = case_data(model, c);
  model.init(5);
  ExecutionOptions exec;
  exec.record_step = record;
  Trained t{train_model(model, data, spec.train, {}, exec), {}};
  t.params.resize(static_cast<size_t>(model.flat_size()));
  be->download(t.params.data(), model.params(), sizeof(float) * t.params.size());
  return t;
}

using testing::max_relative_difference;

class GpuEquivalence : public ::testing::TestWithParam<EquivalenceCase> {};

TEST_P(GpuEquivalence, TrainingEndsWithTheCpuParameters) {
  SKIP_WITHOUT_GPU();
  const Trained cpu = train_on("cpu", GetParam(), false);
  const Trained gpu = train_on("cuda", GetParam(), true);
  EXPECT_TRUE(gpu.result.recorded_step);
  ASSERT_EQ(cpu.result.epochs.size(), gpu.result.epochs.size());
  for (size_t e = 0; e < cpu.result.epochs.size(); ++e) {
    EXPECT_NEAR(gpu.result.epochs[e].loss, cpu.result.epochs[e].loss,
                1e-4 * std::abs(cpu.result.epochs[e].loss))
        << "epoch " << e + 1;
  }
  ASSERT_EQ(cpu.params.size(), gpu.params.size());
  EXPECT_LT(max_relative_difference(cpu.params, gpu.params), 1e-4);
}

TEST_P(GpuEquivalence, RecordedStepEqualsLaunchedStep) {
  SKIP_WITHOUT_GPU();
  const Trained eager = train_on("cuda", GetParam(), false);
  const Trained graph = train_on("cuda", GetParam(), true);
  EXPECT_FALSE(eager.result.recorded_step);
  EXPECT_TRUE(graph.result.recorded_step);
  for (size_t e = 0; e < eager.result.epochs.size(); ++e) {
    EXPECT_NEAR(graph.result.epochs[e].loss, eager.result.epochs[e].loss,
                1e-6 * std::abs(eager.result.epochs[e].loss));
  }
  EXPECT_LT(max_relative_difference(eager.params, graph.params), 1e-6);
}

// Runs everywhere: the cases are valid models, and on the CPU (which cannot record) asking for a
// recorded step changes nothing.
TEST_P(GpuEquivalence, CaseTrainsOnTheCpuWithOrWithoutRecording) {
  const Trained a = train_on("cpu", GetParam(), true);
  const Trained b = train_on("cpu", GetParam(), false);
  EXPECT_FALSE(a.result.recorded_step);
  ASSERT_FALSE(a.result.epochs.empty());
  ASSERT_LE(a.result.epochs.size(), static_cast<size_t>(GetParam().epochs));
  // A case with rules exercises them: its rate changes, and early stopping stops it.
  if (GetParam().rules.find("early_stopping") == std::string::npos) {
    ASSERT_EQ(a.result.epochs.size(), static_cast<size_t>(GetParam().epochs));
  } else {
    EXPECT_TRUE(a.result.stopped_early);
  }
  if (GetParam().rules.find("schedule") != std::string::npos) {
    EXPECT_NE(a.result.epochs.front().lr, a.result.epochs.back().lr);
  }
  EXPECT_TRUE(std::isfinite(a.result.final_loss));
  EXPECT_EQ(a.result.final_loss, b.result.final_loss);
  EXPECT_EQ(max_relative_difference(a.params, b.params), 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Models, GpuEquivalence,
    ::testing::Values(
        EquivalenceCase{"mlp_relu_sgd",
                        R"({ type = "linear", out = 32 }, { type = "relu" },
                           { type = "linear", out = 16 }, { type = "relu" },
                           { type = "linear", out = 3 })",
                        "[8]", "cross_entropy", "sgd"},
        EquivalenceCase{"mlp_tanh_sigmoid_adam",
                        R"({ type = "linear", out = 24 }, { type = "tanh" },
                           { type = "linear", out = 12 }, { type = "sigmoid" },
                           { type = "linear", out = 4 })",
                        "[6]", "cross_entropy", "adam"},
        EquivalenceCase{"cnn_dropout_rmsprop",
                        R"({ type = "conv2d", out = 4, kernel = 3, padding = 1 }, { type = "relu" },
                           { type = "maxpool2d", kernel = 2 }, { type = "dropout", p = 0.25 },
                           { type = "conv2d", out = 6, kernel = 3 }, { type = "relu" },
                           { type = "avgpool2d", kernel = 2 }, { type = "flatten" },
                           { type = "linear", out = 3 })",
                        "[2, 10, 10]", "cross_entropy", "rmsprop"},
        EquivalenceCase{"cnn_batchnorm_adadelta",
                        R"({ type = "conv2d", out = 4, kernel = 3, bias = false },
                           { type = "batchnorm2d" }, { type = "relu" }, { type = "flatten" },
                           { type = "linear", out = 8 }, { type = "batchnorm1d" },
                           { type = "relu" }, { type = "linear", out = 3 })",
                        "[1, 6, 6]", "cross_entropy", "adadelta"},
        EquivalenceCase{"lstm_bce_adamw",
                        R"({ type = "embedding", vocab = 30, out = 6 },
                           { type = "lstm", out = 5, layers = 2, sequence = true },
                           { type = "global_avgpool" }, { type = "dropout", p = 0.2 },
                           { type = "linear", out = 1 })",
                        "[7]", "bce", "adamw", 30},
        EquivalenceCase{"lstm_last_step_maxpool_sgd",
                        R"({ type = "embedding", vocab = 20, out = 4 },
                           { type = "lstm", out = 6, sequence = true },
                           { type = "global_maxpool" }, { type = "linear", out = 2 })",
                        "[5]", "cross_entropy", "sgd", 20}),
    [](const auto& case_info) { return case_info.param.name; });

// The rate changes between epochs: the recorded step reads it from device memory, so the GPU's
// epochs follow the CPU's (torch.optim.lr_scheduler's rules, golden against PyTorch on the CPU).
const char kMlp[] = R"({ type = "linear", out = 24 }, { type = "relu" },
                       { type = "linear", out = 12 }, { type = "relu" }, { type = "linear", out = 3 })";
INSTANTIATE_TEST_SUITE_P(
    Schedules, GpuEquivalence,
    ::testing::Values(
        EquivalenceCase{"step_sgd", kMlp, "[8]", "cross_entropy", "sgd", 0, 6,
                        "[train.schedule]\ntype = \"step\"\nstep_size = 2\ngamma = 0.5\n"},
        EquivalenceCase{"cosine_adam", kMlp, "[8]", "cross_entropy", "adam", 0, 5,
                        "[train.schedule]\ntype = \"cosine\"\neta_min = 0.001\n"},
        EquivalenceCase{"cosine_adamw_tmax", kMlp, "[8]", "cross_entropy", "adamw", 0, 5,
                        "[train.schedule]\ntype = \"cosine\"\nt_max = 3\n"},
        // The training loss of random labels stalls: the plateau halves the rate, and early
        // stopping ends the run and puts back the best epoch's weights.
        EquivalenceCase{"plateau_early_stopping_rmsprop", kMlp, "[8]", "cross_entropy", "rmsprop",
                        0, 12,
                        "[train.schedule]\ntype = \"plateau\"\nmonitor = \"loss\"\n"
                        "factor = 0.5\npatience = 0\nthreshold = 0.2\ncooldown = 1\n"
                        "[train.early_stopping]\nmonitor = \"loss\"\npatience = 2\n"
                        "min_delta = 0.03\nrestore_best = true\n"},
        EquivalenceCase{"step_adadelta", kMlp, "[8]", "cross_entropy", "adadelta", 0, 4,
                        "[train.schedule]\ntype = \"step\"\nstep_size = 1\ngamma = 0.7\n"}),
    [](const auto& case_info) { return case_info.param.name; });

// Mean squared error (torch.nn.MSELoss) on one output against real targets.
INSTANTIATE_TEST_SUITE_P(
    Mse, GpuEquivalence,
    ::testing::Values(
        EquivalenceCase{"mlp_sgd", R"({ type = "linear", out = 16 }, { type = "tanh" },
                                      { type = "linear", out = 1 })",
                        "[5]", "mse", "sgd"},
        EquivalenceCase{"mlp_adam_cosine", R"({ type = "linear", out = 16 }, { type = "relu" },
                                              { type = "linear", out = 1 })",
                        "[5]", "mse", "adam", 0, 4, "[train.schedule]\ntype = \"cosine\"\n"}),
    [](const auto& case_info) { return case_info.param.name; });

}  // namespace
}  // namespace xo
