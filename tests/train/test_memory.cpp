// A run's memory, planned before it is allocated: the estimate against what the CPU backend is
// really asked for, the refusal of runs too big for this machine (before their buffers exist), and
// allocation failures as OutOfMemory.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <ostream>
#include <regex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "core/format.h"
#include "data/source.h"
#include "model/model.h"
#include "support/expect_error.h"
#include "train/memory.h"
#include "train/trainer.h"

namespace xo {
namespace {

ModelSpec spec_of(const std::string& name, const std::string& layers, const std::string& input,
                  const std::string& loss, const std::string& optimizer) {
  return parse_spec("[model]\nname = \"" + name + "\"\ninput = " + input + "\nlayers = [" + layers +
                        "]\nloss = \"" + loss + "\"\n[train]\noptimizer = " + optimizer + "\n",
                    name + ".toml");
}

// `samples` rows of `features` values (token ids below `vocab` when it is given) and labels in
// [0, classes): deterministic, no meaning.
Dataset made_up(int64_t samples, int64_t features, int64_t classes, int64_t vocab = 0) {
  Dataset d;
  d.samples = samples;
  d.features = features;
  d.classes = classes;
  d.description = "made up";
  for (int64_t i = 0; i < samples * features; ++i) {
    d.x.push_back(vocab > 0 ? static_cast<float>(i % vocab)
                            : static_cast<float>(std::sin(0.3 * i)));
  }
  for (int64_t i = 0; i < samples; ++i) d.y.push_back(static_cast<int32_t>(i % classes));
  return d;
}

struct MemoryCase {
  std::string name;
  ModelSpec spec;
  int64_t batch, train_samples, test_samples;
  bool shuffle;
  ExecutionOptions exec;
};

void PrintTo(const MemoryCase& c, std::ostream* os) { *os << c.name; }

class PlannedMemory : public ::testing::TestWithParam<MemoryCase> {};

// The estimate counts exactly the buffers the run asks its backend for (Backend::allocate): the
// Model's, the optimizer's state, every Network's (shards, the partial batch, the evaluator's,
// the profiling one) and the data on the device. On the CPU these are the requested bytes the
// backend counts, so the margin is zero; what kernels keep on their own (oneDNN scratchpads, an
// LSTM's gates) is the part no estimate sees, hence "at least" in the messages.
void expect_planned(const MemoryCase& c, const char* precision) {
  auto backend = make_backend(parse_device("cpu", 1, precision));
  Backend& be = *backend;
  ModelSpec spec = c.spec;
  spec.train.batch = c.batch;
  spec.train.epochs = 1;
  spec.train.shuffle = c.shuffle;
  const ModelLayout layout = model_layout(spec);
  const MemoryEstimate before_model =
      model_memory(layout, spec.train.optimizer, keeps_bf16_weights(be.info()));

  Model model(spec, be);
  EXPECT_EQ(be.bytes_allocated(), before_model.parameters);
  const int64_t vocab = model.token_vocab();
  const DataSplit data{made_up(c.train_samples, model.input_features(), model.classes(), vocab),
                       made_up(c.test_samples, model.input_features(), model.classes(), vocab)};
  model.init(1);
  const MemoryEstimate planned = training_memory(model, data, spec.train, c.exec);
  EXPECT_EQ(planned.parameters, before_model.parameters);
  EXPECT_EQ(planned.optimizer, before_model.optimizer);
  EXPECT_GT(planned.activations, 0);
  EXPECT_GT(planned.data, 0);

  const TrainResult r = train_model(model, data, spec.train, {}, c.exec);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(be.bytes_allocated(), planned.total())
      << "parameters " << planned.parameters << ", optimizer " << planned.optimizer
      << ", activations " << planned.activations << ", data " << planned.data;
}

TEST_P(PlannedMemory, MatchesWhatTheBackendIsAskedFor) { expect_planned(GetParam(), "f32"); }

// At bf16 the optimizer also keeps the parameters' bf16 copy (2 bytes each).
TEST_P(PlannedMemory, MatchesWhatTheBackendIsAskedForAtBf16) {
  if (cpu_bf16_unit().empty())
    GTEST_SKIP() << "this CPU has neither AMX nor AVX-512 BF16 (as oneDNN sees it): no cpu:bf16";
  expect_planned(GetParam(), "bf16");
}

ExecutionOptions with(int shards, bool record_step, int node_time_steps) {
  ExecutionOptions e;
  e.shards = shards;
  e.record_step = record_step;
  e.node_time_steps = node_time_steps;
  return e;
}

INSTANTIATE_TEST_SUITE_P(
    Models, PlannedMemory,
    ::testing::Values(
        // A partial last batch, no test set, plain SGD (no optimizer state).
        MemoryCase{"mlp_sgd", *builtin_spec("disc-5"), 64, 300, 0, false, with(1, false, 0)},
        // Two shards (their own gradients), shuffled (the gathered batch), momentum.
        MemoryCase{"mlp_shards_momentum",
                   spec_of("m", R"({ type = "linear", out = 16 }, { type = "tanh" },
                                   { type = "linear", out = 3 })",
                           "[5]", "cross_entropy", R"({ type = "sgd", lr = 0.1, momentum = 0.9 })"),
                   40, 100, 1001, true, with(2, true, 0)},
        // Views (flatten, dropout in inference), BatchNorm's buffers, a test set whose last
        // batch is partial, Adam, the profiling Network.
        MemoryCase{"cnn_adam",
                   spec_of("c", R"({ type = "conv2d", out = 4, kernel = 3, padding = 1 },
                                   { type = "batchnorm2d" }, { type = "relu" },
                                   { type = "maxpool2d", kernel = 2 }, { type = "dropout", p = 0.3 },
                                   { type = "flatten" }, { type = "linear", out = 3 })",
                           "[2, 8, 8]", "cross_entropy", R"({ type = "adam", lr = 0.001 })"),
                   16, 50, 21, false, with(0, true, 1)},
        // Token ids, an LSTM, RMSprop.
        MemoryCase{"lstm_rmsprop",
                   spec_of("l", R"({ type = "embedding", vocab = 20, out = 6 },
                                   { type = "lstm", out = 5, sequence = true },
                                   { type = "global_maxpool" }, { type = "linear", out = 1 })",
                           "[7]", "bce", R"({ type = "rmsprop", lr = 0.01 })"),
                   10, 35, 12, true, with(0, false, 0)},
        MemoryCase{"mlp_adadelta",
                   spec_of("a", R"({ type = "linear", out = 8 }, { type = "sigmoid" },
                                   { type = "linear", out = 2 })",
                           "[3]", "cross_entropy", R"({ type = "adadelta" })"),
                   25, 25, 5, false, with(3, true, 0)}),
    [](const auto& param) { return param.param.name; });

// 1,000,000 x 1,000,000 weights: 4 TB for the parameters alone, beyond any machine this runs on.
ModelSpec huge_spec() {
  return spec_of("wide", R"({ type = "linear", out = 1000000 }, { type = "relu" },
                           { type = "linear", out = 1000000 }, { type = "relu" },
                           { type = "linear", out = 2 })",
                 "[2]", "cross_entropy", R"({ type = "adam", lr = 0.001 })");
}

// "<figure> <unit>iB are free": the free memory, stated.
bool states_free_memory(const std::string& message) {
  return std::regex_search(message, std::regex(R"([0-9.]+ [KMGTPE]?i?B are free)"));
}

TEST(Memory, AModelTooBigIsRefusedBeforeItsBuffersAreAllocated) {
  auto backend = make_backend(parse_device("cpu", 1));
  Backend& be = *backend;
  const ModelSpec spec = huge_spec();
  const MemoryEstimate need = model_memory(model_layout(spec), spec.train.optimizer);
  const auto start = std::chrono::steady_clock::now();
  const std::string message = testing::user_error([&] { check_model_memory(spec, be); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);  // worked out from the spec: nothing is allocated or touched
  EXPECT_EQ(be.bytes_allocated(), 0);
  for (const std::string& piece : {std::string("model 'wide' on cpu needs at least "),
                                   "parameters and gradients " + byte_size(need.parameters),
                                   "optimizer state " + byte_size(need.optimizer)}) {
    EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
  }
  EXPECT_TRUE(states_free_memory(message)) << message;
  // Adam keeps two moments: the optimizer's state is the parameters' twice.
  EXPECT_EQ(need.optimizer, 2 * 4 * model_layout(spec).flat_size);
}

// Parameters that fit (3.7 GB with their gradients) and a layer of 10^8 outputs per sample: its
// activations for one batch (10^5 samples, 74 TiB) are counted from the spec, before the Model
// is built. The Model was built first, which took a minute and 6 GB before the training check said
// no.
TEST(Memory, OneBatchOfActivationsIsCountedBeforeTheModelIsBuilt) {
  auto backend = make_backend(parse_device("cpu", 1));
  Backend& be = *backend;
  ModelSpec spec = spec_of("tall", R"({ type = "linear", out = 100000000 }, { type = "relu" },
                                    { type = "linear", out = 2 })",
                           "[2]", "cross_entropy", R"({ type = "sgd", lr = 0.1 })");
  spec.train.batch = 100000;
  spec.data.samples = 100000;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = testing::user_error([&] { check_model_memory(spec, be); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(be.bytes_allocated(), 0);
  // Outputs and their gradients of both layers that are not views (the ReLU is fused, not a view):
  // at least the 10^8-wide layer's, twice, in float32.
  const double activations = 2.0 * 4 * 100000 * 1e8;
  EXPECT_NE(message.find("model 'tall' on cpu needs at least "), std::string::npos) << message;
  EXPECT_NE(message.find("activations "), std::string::npos) << message;
  EXPECT_TRUE(states_free_memory(message)) << message;
  const std::smatch found = [&] {
    std::smatch m;
    std::regex_search(message, m, std::regex(R"(activations ([0-9.]+) TiB)"));
    return m;
  }();
  ASSERT_FALSE(found.empty()) << message;
  EXPECT_GE(std::stod(found[1].str()) * 1.01, activations / std::pow(2.0, 40)) << message;
}

// A file's length is not known before it is read: its batch counts as one sample, never as more
// than the file may hold.
TEST(Memory, AFileSourceCountsOneSampleBeforeItIsRead) {
  auto backend = make_backend(parse_device("cpu", 1));
  Backend& be = *backend;
  ModelSpec spec = spec_of("file", R"({ type = "linear", out = 1000000 }, { type = "relu" },
                                    { type = "linear", out = 2 })",
                           "[2]", "cross_entropy", R"({ type = "sgd", lr = 0.1 })");
  spec.train.batch = 1000000;  // 8 TB of activations if the file had a million rows
  spec.data.source = "csv:rows.csv";
  check_model_memory(spec, be);  // 16 MB of parameters and gradients, 8 MB for one sample
  spec.data.source = "disc";
  spec.data.samples = 1000000;
  EXPECT_TRUE(states_free_memory(testing::user_error([&] { check_model_memory(spec, be); })));
}

TEST(Memory, ARunTooBigForItsActivationsIsRefusedBeforeThePlanAllocates) {
  // 8M parameters (64 MB with their gradients) that fit; a batch of 4M samples through a layer
  // 2M wide does not: 64 TiB of activations.
  auto backend = make_backend(parse_device("cpu", 1));
  Backend& be = *backend;
  ModelSpec spec = spec_of("broad", R"({ type = "linear", out = 2097152 }, { type = "relu" },
                                     { type = "linear", out = 2 })",
                           "[2]", "cross_entropy", R"({ type = "sgd", lr = 0.1 })");
  spec.train.batch = int64_t{1} << 22;
  spec.train.epochs = 1;
  Model model(spec, be);
  const int64_t model_bytes = be.bytes_allocated();
  Dataset train;
  train.samples = spec.train.batch;
  train.features = 2;
  train.classes = 2;
  train.x.assign(static_cast<size_t>(2 * train.samples), 0.5f);
  train.y.assign(static_cast<size_t>(train.samples), 1);
  const DataSplit data{std::move(train), {}};
  const MemoryEstimate need = training_memory(model, data, spec.train, {});
  const std::string message =
      testing::user_error([&] { train_model(model, data, spec.train, {}, {}); });
  EXPECT_EQ(be.bytes_allocated(), model_bytes);  // the plan allocated nothing
  for (const std::string& piece :
       {std::string("model 'broad' on cpu needs at least ") + byte_size(need.total()),
        "activations " + byte_size(need.activations), "data " + byte_size(need.data),
        "besides the " + byte_size(need.parameters)}) {
    EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
  }
  EXPECT_TRUE(states_free_memory(message)) << message;
}

TEST(Memory, AFailedAllocationIsOutOfMemoryNamingTheDeviceAndTheSize) {
  auto backend = make_backend(parse_device("cpu", 1));
  Backend& be = *backend;
  const auto free = be.free_memory_bytes();
  ASSERT_TRUE(free.has_value()) << "/proc/meminfo has no MemAvailable";
  EXPECT_GT(*free, 0);
  struct Case {
    const char* what;
    size_t bytes;
  };
  // Beyond any address space, so the allocator refuses; and beyond what is available, which
  // Linux would promise anyway (overcommit) and then fail to deliver while zeroing it.
  for (const Case& c :
       {Case{"beyond the address space", size_t{1} << 62},
        Case{"beyond the available memory", static_cast<size_t>(*free) * 2 + (size_t{1} << 30)}}) {
    try {
      be.allocate(c.bytes);
      ADD_FAILURE() << c.what << ": no error";
    } catch (const OutOfMemory& e) {
      EXPECT_EQ(e.requested_bytes(), static_cast<int64_t>(c.bytes)) << c.what;
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("cpu: out of memory allocating " + byte_size(c.bytes), 0), 0u)
          << c.what << ": " << message;
    } catch (const std::bad_alloc&) {
      ADD_FAILURE() << c.what << ": std::bad_alloc instead of OutOfMemory";
    }
  }
  EXPECT_EQ(be.bytes_allocated(), 0);
  // Built without the check first, a model too big meets the same error, as a UserError.
  EXPECT_THROW(Model model(huge_spec(), be), OutOfMemory);
  EXPECT_EQ(be.bytes_allocated(), 0);
}

}  // namespace
}  // namespace xo
