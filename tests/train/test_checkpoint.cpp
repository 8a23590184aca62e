// Checkpoints and resume: a run stopped at any step and resumed from its checkpoint ends with
// exactly the parameters, losses and accuracies of the run never stopped (an MLP with momentum and
// batch shards, a CNN with BatchNorm and dropout under Adadelta, an embedding + LSTM under Adam,
// all shuffled, with partial last batches; and an MLP whose rate follows a plateau schedule and
// whose training stops early with the best epoch's weights restored); damaged checkpoints fall back
// to the one before; a checkpoint of another run is refused; a loss that stops being finite stops
// training.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/random.h"
#include "data/source.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "support/expect_error.h"
#include "support/file_size_limit.h"
#include "support/gpu.h"
#include "support/random_data.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace xo {
namespace {

namespace fs = std::filesystem;
using testing::expect_user_error;
using testing::random_data;

struct Case {
  const char* name;
  const char* spec;
  int shards = 0;
  DataSplit (*data)() = nullptr;
};

// Test names and failure messages show the case's name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

DataSplit disc_split() {
  ModelSpec spec = *builtin_spec("disc-4");
  return load_data(spec.data, data_request(spec, 2));
}
DataSplit image_split() { return {random_data(100, 64, 3, 1), random_data(30, 64, 3, 2)}; }
DataSplit token_split() { return {random_data(80, 6, 2, 3, 50), random_data(20, 6, 2, 4, 50)}; }
DataSplit noise_split() { return {random_data(100, 8, 3, 5), random_data(40, 8, 3, 6)}; }

const Case kCases[] = {
    {"mlp-momentum-shards", R"([model]
input = [2]
layers = [ { type = "linear", out = 8 }, { type = "tanh" }, { type = "linear", out = 8 },
           { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.1, momentum = 0.9 }
batch = 96
epochs = 3
shuffle = true
seed = 5
)",
     2, disc_split},
    {"cnn-batchnorm-dropout-adadelta", R"([model]
input = [1, 8, 8]
layers = [ { type = "conv2d", out = 4, kernel = 3 }, { type = "batchnorm2d" }, { type = "relu" },
           { type = "maxpool2d", kernel = 2 }, { type = "dropout", p = 0.25 },
           { type = "flatten" }, { type = "linear", out = 3 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "adadelta", lr = 1.0, rho = 0.95, eps = 1e-7 }
batch = 16
epochs = 3
shuffle = true
seed = 7
)",
     0, image_split},
    {"lstm-adam", R"([model]
input = [6]
layers = [ { type = "embedding", vocab = 50, out = 8 }, { type = "lstm", out = 8 },
           { type = "linear", out = 1 } ]
loss = "bce"
[train]
optimizer = { type = "adam", lr = 0.01 }
batch = 16
epochs = 2
shuffle = true
seed = 9
)",
     0, token_split},
    // Random labels: the training loss stalls (the plateau lowers the rate, with a cooldown) and
    // the test loss soon rises (early stopping ends the run and restores the best epoch).
    {"mlp-plateau-early-stopping", R"([model]
input = [8]
layers = [ { type = "linear", out = 16 }, { type = "relu" }, { type = "linear", out = 3 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.5, momentum = 0.9 }
batch = 24
epochs = 12
shuffle = true
seed = 11
[train.schedule]
type = "plateau"
monitor = "loss"
factor = 0.5
patience = 0
threshold = 0.05
cooldown = 1
[train.early_stopping]
monitor = "test_loss"
patience = 3
restore_best = true
)",
     0, noise_split},
};

struct Outcome {
  TrainResult result;
  std::string hash;  // Model::parameter_hash: every parameter and buffer, bit for bit
};

Outcome train(const ModelSpec& spec, const DataSplit& data, ExecutionOptions exec, int threads = 1,
              const std::string& device = "cpu") {
  auto be = make_backend(parse_device(device, threads));
  Model model(spec, *be);
  model.init(spec.train.seed);
  exec.node_time_steps = 0;
  Outcome o{train_model(model, data, spec.train, {}, exec), ""};
  o.hash = model.parameter_hash();
  return o;
}

void expect_same_outcome(const Outcome& a, const Outcome& b, const std::string& where) {
  EXPECT_EQ(a.hash, b.hash) << where << ": the parameters differ";
  EXPECT_EQ(a.result.steps_taken, b.result.steps_taken) << where;
  ASSERT_EQ(a.result.epochs.size(), b.result.epochs.size()) << where;
  for (size_t e = 0; e < a.result.epochs.size(); ++e) {
    const EpochRecord &x = a.result.epochs[e], &y = b.result.epochs[e];
    EXPECT_EQ(x.loss, y.loss) << where << ", epoch " << e + 1;
    EXPECT_EQ(x.train_error, y.train_error) << where << ", epoch " << e + 1;
    EXPECT_EQ(x.lr, y.lr) << where << ", epoch " << e + 1;
    if (!std::isnan(x.test_loss)) {
      EXPECT_EQ(x.test_loss, y.test_loss) << where << ", epoch " << e + 1;
      EXPECT_EQ(x.test_accuracy, y.test_accuracy) << where << ", epoch " << e + 1;
    }
  }
  EXPECT_EQ(a.result.stopped_early, b.result.stopped_early) << where;
  EXPECT_EQ(a.result.best_epoch, b.result.best_epoch) << where;
  EXPECT_EQ(a.result.restored_best, b.result.restored_best) << where;
}

ExecutionOptions with_checkpoints(const fs::path& dir, CheckpointInterval every, bool resume,
                                  int shards, std::vector<std::string>* notes = nullptr) {
  ExecutionOptions exec;
  exec.shards = shards;
  exec.checkpoint.dir = dir;
  exec.checkpoint.every = every;
  exec.checkpoint.resume = resume;
  exec.checkpoint.note = [notes](const std::string& m) {
    if (notes) notes->push_back(m);
  };
  return exec;
}

class Resume : public ::testing::TestWithParam<Case> {};

// Stopped after k steps (the newest checkpoint is then at k: one is taken every step) and resumed:
// inside the first epoch, just before, at and just after an epoch's end, and in the last epoch.
TEST_P(Resume, StoppedAnywhereAndResumedIsBitIdentical) {
  const Case& c = GetParam();
  const ModelSpec spec = parse_spec(c.spec, std::string(c.name) + ".toml");
  const DataSplit data = c.data();
  const Outcome whole = train(spec, data, ExecutionOptions{c.shards});
  const int64_t per_epoch = whole.result.steps_per_epoch;
  ASSERT_GT(per_epoch, 3);
  for (int64_t k :
       {int64_t{1}, per_epoch - 1, per_epoch, per_epoch + 1, whole.result.steps_taken - 2}) {
    testing::TempDir dir("resume");
    ExecutionOptions first = with_checkpoints(dir.path(), {1, 0}, false, c.shards);
    first.max_steps = k;
    const Outcome stopped = train(spec, data, first);
    EXPECT_EQ(stopped.result.steps_taken, k);
    EXPECT_EQ(newest_checkpoint(dir.path()), k);
    const Outcome resumed = train(spec, data, with_checkpoints(dir.path(), {1, 0}, true, c.shards));
    EXPECT_EQ(resumed.result.resumed_at_step, k);
    expect_same_outcome(whole, resumed, fmt::format("{} stopped after {} steps", c.name, k));
  }
}

// A checkpoint every 5 steps: the resume repeats the steps since the last one.
TEST_P(Resume, ResumedFromAnEarlierCheckpointIsBitIdentical) {
  const Case& c = GetParam();
  const ModelSpec spec = parse_spec(c.spec, std::string(c.name) + ".toml");
  const DataSplit data = c.data();
  const Outcome whole = train(spec, data, ExecutionOptions{c.shards});
  testing::TempDir dir("resume");
  ExecutionOptions first = with_checkpoints(dir.path(), {5, 0}, false, c.shards);
  first.max_steps = whole.result.steps_per_epoch + 3;
  train(spec, data, first);
  const auto newest = newest_checkpoint(dir.path());
  ASSERT_TRUE(newest);
  EXPECT_EQ(*newest % 5, 0);
  const Outcome resumed = train(spec, data, with_checkpoints(dir.path(), {5, 0}, true, c.shards));
  EXPECT_EQ(resumed.result.resumed_at_step, *newest);
  // The interval counts on from the step resumed at.
  EXPECT_EQ(*newest_checkpoint(dir.path()) % 5, 0);
  expect_same_outcome(whole, resumed, c.name);
}

// Paused after whole epochs (what successive halving does to a trial it may promote) and
// continued, once and then again: the schedule and the arithmetic are those of train.epochs, so
// the run ends bit-identical to one never paused. Checkpoints every 1000 steps: the pause saves
// its own.
TEST_P(Resume, PausedAfterEpochsAndContinuedIsBitIdentical) {
  const Case& c = GetParam();
  const ModelSpec spec = parse_spec(c.spec, std::string(c.name) + ".toml");
  const DataSplit data = c.data();
  const Outcome whole = train(spec, data, ExecutionOptions{c.shards});
  const auto epochs = static_cast<int64_t>(whole.result.epochs.size());
  ASSERT_GE(epochs, 2);
  testing::TempDir dir("pause");
  ExecutionOptions first = with_checkpoints(dir.path(), {1000, 0}, false, c.shards);
  first.pause_after_epochs = 1;
  const Outcome paused = train(spec, data, first);
  EXPECT_TRUE(paused.result.paused);
  EXPECT_EQ(paused.result.epochs.size(), 1u);
  EXPECT_EQ(newest_checkpoint(dir.path()), whole.result.steps_per_epoch);
  if (epochs >= 3) {
    ExecutionOptions second = with_checkpoints(dir.path(), {1000, 0}, true, c.shards);
    second.pause_after_epochs = 2;
    EXPECT_TRUE(train(spec, data, second).result.paused);
  }
  const Outcome rest = train(spec, data, with_checkpoints(dir.path(), {1000, 0}, true, c.shards));
  EXPECT_FALSE(rest.result.paused);
  expect_same_outcome(whole, rest, fmt::format("{} paused and continued", c.name));
}

// The same on a GPU, where the step is one recorded CUDA Graph whose counters (batch position,
// dropout step, optimizer step) and learning rate (a schedule's, set between epochs) live in
// device memory and are restored there.
TEST_P(Resume, OnTheGpuWithTheRecordedStepIsBitIdentical) {
  if (!testing::gpu_present()) GTEST_SKIP() << "no NVIDIA GPU here: the GPU resume is not tested";
  const Case& c = GetParam();
  const ModelSpec spec = parse_spec(c.spec, std::string(c.name) + ".toml");
  const DataSplit data = c.data();
  const Outcome whole = train(spec, data, ExecutionOptions{}, 0, "cuda");
  EXPECT_TRUE(whole.result.recorded_step);
  const int64_t per_epoch = whole.result.steps_per_epoch;
  for (int64_t k : {int64_t{1}, per_epoch - 1, per_epoch, per_epoch + 2}) {
    testing::TempDir dir("gpu-resume");
    ExecutionOptions first = with_checkpoints(dir.path(), {1, 0}, false, 0);
    first.max_steps = k;
    train(spec, data, first, 0, "cuda");
    const Outcome resumed =
        train(spec, data, with_checkpoints(dir.path(), {1, 0}, true, 0), 0, "cuda");
    EXPECT_EQ(resumed.result.resumed_at_step, k);
    EXPECT_TRUE(resumed.result.recorded_step);
    expect_same_outcome(whole, resumed,
                        fmt::format("{} on cuda stopped after {} steps", c.name, k));
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Resume, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) {
                           std::string name = param_info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

const Case& mlp() { return kCases[0]; }
const Case& scheduled() { return kCases[3]; }

// The scheduled case does what the resume tests rely on: its rate changes, and early stopping
// ends it before train.epochs and puts back an earlier epoch's weights.
TEST(Checkpoints, TheScheduledCaseChangesItsRateAndStopsEarly) {
  const ModelSpec spec = parse_spec(scheduled().spec, "scheduled.toml");
  const Outcome whole = train(spec, scheduled().data(), ExecutionOptions{});
  const auto& epochs = whole.result.epochs;
  ASSERT_GE(epochs.size(), 3u);
  EXPECT_LT(epochs.back().lr, epochs.front().lr);
  EXPECT_TRUE(whole.result.stopped_early);
  EXPECT_LT(static_cast<int64_t>(epochs.size()), spec.train.epochs);
  EXPECT_TRUE(whole.result.restored_best);
  EXPECT_LT(whole.result.best_epoch, epochs.back().epoch);
}

// A checkpoint taken under one schedule (or early-stopping rule) is refused by a run with another.
TEST(Checkpoints, CheckpointOfAnotherScheduleIsRefused) {
  const ModelSpec spec = parse_spec(scheduled().spec, "scheduled.toml");
  const DataSplit data = scheduled().data();
  testing::TempDir dir("other-schedule");
  ExecutionOptions first = with_checkpoints(dir.path(), {1, 0}, false, 0);
  first.max_steps = 6;
  train(spec, data, first);
  const ExecutionOptions resume = with_checkpoints(dir.path(), {1, 0}, true, 0);
  ModelSpec other_factor = spec;
  other_factor.train.schedule->factor = 0.25;
  expect_user_error([&] { train(other_factor, data, resume); },
                    {"belongs to another run", "the spec differs", "factor = 0.25"});
  ModelSpec other_patience = spec;
  other_patience.train.early_stopping->patience = 4;
  expect_user_error([&] { train(other_patience, data, resume); },
                    {"belongs to another run", "patience = 4"});
  ModelSpec unscheduled = spec;
  unscheduled.train.schedule.reset();
  expect_user_error([&] { train(unscheduled, data, resume); }, {"the spec differs"});
}

// What a kill while writing can leave, each made by hand: the newest checkpoint's tensors
// truncated, its JSON cut short, its tensors without a JSON, a temporary file beside them.
TEST(Checkpoints, DamagedNewestCheckpointFallsBackToThePreviousOne) {
  const ModelSpec spec = parse_spec(mlp().spec, "mlp.toml");
  const DataSplit data = mlp().data();
  const Outcome whole = train(spec, data, ExecutionOptions{2});
  struct Damage {
    const char* what;
    void (*apply)(const fs::path& json, const fs::path& tensors);
  };
  const Damage damages[] = {
      {"truncated tensors",
       [](const fs::path&, const fs::path& t) { fs::resize_file(t, fs::file_size(t) / 2); }},
      {"a flipped byte in the tensors",
       [](const fs::path&, const fs::path& t) {
         std::fstream f(t, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(static_cast<std::streamoff>(fs::file_size(t) - 5));
         f.put('\x7f');
       }},
      {"a JSON cut short",
       [](const fs::path& j, const fs::path&) { fs::resize_file(j, fs::file_size(j) / 3); }},
      {"tensors without their JSON", [](const fs::path& j, const fs::path&) { fs::remove(j); }},
      // nlohmann-json's copies and dumps recurse once per level: refused before it parses.
      {"a JSON nested 100,000 levels deep",
       [](const fs::path& j, const fs::path&) {
         constexpr size_t kDepth = 100000;
         std::ofstream(j) << "{\"tensors\": " << std::string(kDepth, '[')
                          << std::string(kDepth, ']') << "}";
       }},
  };
  for (const Damage& d : damages) {
    testing::TempDir dir("damaged");
    ExecutionOptions first = with_checkpoints(dir.path(), {1, 0}, false, 2);
    first.max_steps = 14;
    train(spec, data, first);
    const fs::path json = dir.path() / "step-000000000014.json";
    const fs::path tensors = dir.path() / "step-000000000014.safetensors";
    ASSERT_TRUE(fs::exists(json) && fs::exists(tensors));
    ASSERT_TRUE(fs::exists(dir.path() / "step-000000000013.json")) << "the previous one is kept";
    d.apply(json, tensors);
    std::ofstream(dir.path() / "step-000000000015.json.tmp.123") << "{";
    std::vector<std::string> notes;
    const Outcome resumed =
        train(spec, data, with_checkpoints(dir.path(), {1, 0}, true, 2, &notes));
    EXPECT_EQ(resumed.result.resumed_at_step, 13) << d.what;
    if (fs::exists(json)) {  // a checkpoint without its JSON was never whole: nothing to report
      bool noted = false;
      for (const auto& n : notes) noted |= n.find("damaged checkpoint") != std::string::npos;
      EXPECT_TRUE(noted) << d.what << ": the damaged checkpoint is not reported";
    }
    expect_same_outcome(whole, resumed, d.what);
  }
}

// A checkpoint's JSON edited by hand (its checksum recomputed, as a hostile file would be, so that
// each field's own check is what refuses it), its tensors edited with their hash made to match,
// and its tensors file replaced by a link or a FIFO: each newest checkpoint is damage, named in
// the note, and the run resumes bit-identically from the one before. Before these checks a wrong
// position crashed the resume, a tensors path of /dev/zero hung it, and the other edits resumed
// with different weights and exit 0.
TEST(Checkpoints, HostileFieldsAreDamageNamedAndTheOneBeforeIsUsed) {
  using OJson = nlohmann::ordered_json;
  const ModelSpec spec = parse_spec(mlp().spec, "mlp.toml");
  const DataSplit data = mlp().data();
  const Outcome whole = train(spec, data, ExecutionOptions{2});
  // The JSON rewritten through `edit`, signed again unless `resign` is false.
  auto rewrite = [](const fs::path& json, const std::function<void(OJson&)>& edit,
                    bool resign = true) {
    OJson j = OJson::parse(read_file(json));
    const OJson checksum = j.at("checksum");
    j.erase("checksum");
    edit(j);
    j["checksum"] = resign ? OJson(Hasher().text(j.dump()).hex()) : checksum;
    std::ofstream(json, std::ios::trunc) << j.dump(1);
  };
  // The tensors rewritten through `edit`, their size and hash in the JSON made to match.
  auto retensor = [&](const fs::path& json, const fs::path& file,
                      const std::function<void(std::vector<NamedTensor>&)>& edit) {
    std::vector<NamedTensor> tensors = decode_safetensors(read_file(file), file.string());
    edit(tensors);
    const std::string bytes = encode_safetensors(tensors, {}, file.string());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    rewrite(json, [&](OJson& j) {
      j["tensors"]["bytes"] = bytes.size();
      j["tensors"]["hash"] = Hasher().text(bytes).hex();
    });
  };
  auto field = [&](const char* key, OJson value) {
    return [&rewrite, key, value](const fs::path& json, const fs::path&) {
      rewrite(json, [&](OJson& j) { j[key] = value; });
    };
  };
  // One series of step times replaced by a folded one, its bins, samples and count `fields`.
  auto folded_times = [&rewrite](const char* series, std::string fields) {
    return [&rewrite, series, fields](const fs::path& json, const fs::path&) {
      rewrite(json, [&](OJson& j) {
        j["times"][series] = OJson::parse(
            R"({"warmup": 1, "mean": 1, "m2": 0, "min": 1, "max": 1, )" + fields + "}");
      });
    };
  };
  struct Hostile {
    const char* what;
    std::function<void(const fs::path& json, const fs::path& tensors)> apply;
    const char* named;  // in the note
  };
  const Hostile hostile[] = {
      {"position 950", field("position", 950), "position: 950"},
      {"position -1", field("position", -1), "position: -1"},
      {"position 1e12", field("position", int64_t{1'000'000'000'000}), "position:"},
      {"tensors in /dev/zero",
       [&](const fs::path& j, const fs::path&) {
         rewrite(j, [](OJson& o) { o["tensors"]["file"] = "/dev/zero"; });
       },
       "tensors.file: '/dev/zero'"},
      {"tensors up and out",
       [&](const fs::path& j, const fs::path&) {
         rewrite(j, [](OJson& o) { o["tensors"]["file"] = "../../../etc/passwd"; });
       },
       "tensors.file:"},
      {"epoch 1e12", field("epoch", int64_t{1'000'000'000'000}), "epoch:"},
      {"epoch 2 at step 14", field("epoch", 2), "steps_taken:"},
      {"optimizer_steps 0", field("optimizer_steps", 0), "optimizer_steps: 0, expected 14"},
      {"optimizer_steps 2^62", field("optimizer_steps", int64_t{1} << 62), "optimizer_steps:"},
      {"dropout_step -1", field("dropout_step", -1), "dropout_step:"},
      {"in_epoch false mid-epoch", field("in_epoch", false), "in_epoch:"},
      {"order entries 2^40",
       [&](const fs::path& j, const fs::path&) {
         rewrite(j, [](OJson& o) {
           for (OJson& e : o["order"]) e = (int64_t{1} << 40) + e.get<int64_t>();
         });
       },
       "order:"},
      {"an order that repeats a sample",
       [&](const fs::path& j, const fs::path&) {
         rewrite(j, [](OJson& o) { o["order"][1] = o["order"][0]; });
       },
       "is not a sample index seen once"},
      {"folded step times whose bins hold more than their count",
       folded_times("step", R"("bins": [0, 1], "samples": [2, 2], "count": 3)"),
       "times.step.bins: 2 samples in bin 1 (of 3 in all)"},
      {"folded step times with bins out of order",
       folded_times("data", R"("bins": [5, 4], "samples": [1, 1], "count": 2)"),
       "times.data.bins: bin 4 after bin 5"},
      {"a generator state that does not read", field("shuffle_generator", "12 x"),
       "shuffle_generator:"},
      {"the resume's note a number", field("resumed_differently", 12),
       "resumed_differently: expected a text"},
      {"the resume's note of 5000 bytes", field("resumed_differently", std::string(5000, 'x')),
       "resumed_differently: expected a text of at most 4096 bytes"},
      {"one digit of the generator changed, unsigned",
       [&](const fs::path& j, const fs::path&) {
         rewrite(
             j,
             [](OJson& o) {
               std::string g = o["shuffle_generator"].get<std::string>();
               g[0] = g[0] == '1' ? '2' : '1';
               o["shuffle_generator"] = g;
             },
             false);
       },
       "differs from its checksum"},
      {"NaN in a weight",
       [&](const fs::path& j, const fs::path& t) {
         retensor(j, t, [](std::vector<NamedTensor>& ts) { ts[0].data[0] = std::nanf(""); });
       },
       "holds nan"},
      {"a tensor missing",
       [&](const fs::path& j, const fs::path& t) {
         retensor(j, t, [](std::vector<NamedTensor>& ts) { ts.erase(ts.begin()); });
       },
       "is missing"},
      {"the tensors a FIFO",
       [](const fs::path&, const fs::path& t) {
         fs::remove(t);
         ASSERT_EQ(mkfifo(t.c_str(), 0600), 0);
       },
       "a FIFO, not read"},
      {"the tensors a link to the checkpoint before",
       [](const fs::path&, const fs::path& t) {
         fs::remove(t);
         fs::create_symlink(t.parent_path() / "step-000000000013.safetensors", t);
       },
       "a symbolic link, not read"},
  };
  for (const Hostile& h : hostile) {
    testing::TempDir dir("hostile");
    ExecutionOptions first = with_checkpoints(dir.path(), {1, 0}, false, 2);
    first.max_steps = 14;
    train(spec, data, first);
    const fs::path json = dir.path() / "step-000000000014.json";
    h.apply(json, dir.path() / "step-000000000014.safetensors");
    std::vector<std::string> notes;
    const Outcome resumed =
        train(spec, data, with_checkpoints(dir.path(), {1, 0}, true, 2, &notes));
    EXPECT_EQ(resumed.result.resumed_at_step, 13) << h.what;
    bool named = false;
    for (const auto& n : notes) {
      named |=
          n.find("damaged checkpoint") != std::string::npos && n.find(h.named) != std::string::npos;
    }
    EXPECT_TRUE(named) << h.what << ": no note names '" << h.named
                       << "': " << fmt::format("{}", fmt::join(notes, " | "));
    expect_same_outcome(whole, resumed, h.what);
  }
}

// Every checkpoint damaged: the resume is refused, naming each and what is wrong, rather than
// training from the beginning (which threw the run away with a warning before); --restart (resume
// off) trains afresh.
TEST(Checkpoints, NoUsableCheckpointIsRefusedNamingEach) {
  const ModelSpec spec = parse_spec(mlp().spec, "mlp.toml");
  const DataSplit data = mlp().data();
  testing::TempDir dir("none usable");
  ExecutionOptions first = with_checkpoints(dir.path(), {1, 0}, false, 2);
  first.max_steps = 14;
  train(spec, data, first);
  for (const char* stem : {"step-000000000014", "step-000000000013"}) {
    const fs::path tensors = dir.path() / (std::string(stem) + ".safetensors");
    fs::resize_file(tensors, fs::file_size(tensors) / 2);
  }
  expect_user_error(
      [&] {
        train(spec, data, with_checkpoints(dir.path(), {1, 0}, true, 2));
      },
      {"no usable checkpoint to resume from (2 damaged",
       "step-000000000014.json: ", "step-000000000013.json: ", "--restart"});
  EXPECT_EQ(newest_checkpoint(dir.path()), 14) << "nothing is removed by the refusal";
  const Outcome afresh = train(spec, data, with_checkpoints(dir.path(), {1, 0}, false, 2));
  EXPECT_EQ(afresh.result.resumed_at_step, 0);
}

// A full disk (simulated with the file size limit) while a resumed run saves: every write fails,
// the run goes on, the previous checkpoint stays and is what the next resume uses.
TEST(Checkpoints, FullDiskKeepsThePreviousCheckpointAndSaysSo) {
  const ModelSpec spec = parse_spec(mlp().spec, "mlp.toml");
  const DataSplit data = mlp().data();
  const Outcome whole = train(spec, data, ExecutionOptions{2});
  testing::TempDir dir("full");
  ExecutionOptions first = with_checkpoints(dir.path(), {1, 0}, false, 2);
  first.max_steps = 5;
  train(spec, data, first);
  std::vector<std::string> notes;
  {
    const testing::FileSizeLimit full(64);  // smaller than any checkpoint file
    ExecutionOptions second = with_checkpoints(dir.path(), {1, 0}, true, 2, &notes);
    second.max_steps = 9;
    const Outcome o = train(spec, data, second);
    EXPECT_EQ(o.result.steps_taken, 9);
    EXPECT_EQ(o.result.checkpoints_written, 0);
  }
  ASSERT_EQ(notes.size(), 5u);  // the note on resuming, then the four failed writes
  EXPECT_NE(notes[1].find("the checkpoint at step 6 was not written"), std::string::npos)
      << notes[1];
  EXPECT_NE(notes[1].find("the previous one, at step 5, is kept"), std::string::npos) << notes[1];
  EXPECT_EQ(newest_checkpoint(dir.path()), 5);
  const Outcome resumed = train(spec, data, with_checkpoints(dir.path(), {1, 0}, true, 2));
  EXPECT_EQ(resumed.result.resumed_at_step, 5);
  expect_same_outcome(whole, resumed, "after a full disk");
}

TEST(Checkpoints, CheckpointOfAnotherRunIsRefusedSayingWhatDiffers) {
  const ModelSpec spec = parse_spec(mlp().spec, "mlp.toml");
  const DataSplit data = mlp().data();
  testing::TempDir dir("other");
  ExecutionOptions first = with_checkpoints(dir.path(), {1, 0}, false, 2);
  first.max_steps = 4;
  train(spec, data, first);
  const ExecutionOptions resume = with_checkpoints(dir.path(), {1, 0}, true, 2);

  ModelSpec other_lr = spec;
  other_lr.train.optimizer.lr = 0.05;
  expect_user_error([&] { train(other_lr, data, resume); },
                    {"belongs to another run", "the spec differs", "lr = 0.05"});
  DataSplit other_data = data;
  other_data.train.y[0] = 1 - other_data.train.y[0];
  expect_user_error([&] { train(spec, other_data, resume); }, {"the data differs"});
  expect_user_error([&] { train(spec, data, resume, 2); }, {"the device differs", "1 threads"});
  expect_user_error(
      [&] {
        train(spec, data, with_checkpoints(dir.path(), {1, 0}, true, 1));
      },
      {"the settings differ", "2 batch shards"});
}

TEST(Checkpoints, NonFiniteLossStopsTrainingAndKeepsTheLastGoodCheckpoint) {
  ModelSpec spec = parse_spec(mlp().spec, "mlp.toml");
  spec.train.optimizer.lr = 1e30;  // the weights overflow within a few steps
  spec.train.optimizer.momentum = 0;
  const DataSplit data = mlp().data();
  testing::TempDir dir("nan");
  const Outcome o = train(spec, data, with_checkpoints(dir.path(), {1, 0}, false, 2));
  const TrainResult& r = o.result;
  ASSERT_TRUE(r.stopped_diverged);
  EXPECT_EQ(r.diverged_epoch, 1);
  EXPECT_EQ(r.diverged_from, r.diverged_step) << "the CPU checks every step";
  EXPECT_EQ(r.steps_taken, r.diverged_step);
  EXPECT_TRUE(r.epochs.empty());
  if (r.diverged_step > 1) {
    EXPECT_TRUE(std::isfinite(r.last_finite_loss));
    EXPECT_EQ(r.last_finite_step, r.diverged_step - 1);
    // The newest checkpoint is the last step whose loss was finite.
    EXPECT_EQ(newest_checkpoint(dir.path()), r.diverged_step - 1);
  } else {
    EXPECT_FALSE(newest_checkpoint(dir.path()));
  }

  ExecutionOptions go_on;
  go_on.shards = 2;
  go_on.stop_on_nan = false;
  const Outcome on = train(spec, data, go_on);
  EXPECT_FALSE(on.result.stopped_diverged);
  EXPECT_EQ(on.result.epochs.size(), 3u);
  EXPECT_EQ(on.result.diverged_epoch, 1);
}

TEST(Checkpoints, InterruptedFreshRunWritesNothingWhenOff) {
  const ModelSpec spec = parse_spec(mlp().spec, "mlp.toml");
  testing::TempDir dir("off");
  ExecutionOptions exec = with_checkpoints(dir.path() / "ck", {}, false, 2);
  exec.max_steps = 5;
  train(spec, mlp().data(), exec);
  EXPECT_FALSE(fs::exists(dir.path() / "ck"));
}

TEST(Checkpoints, IntervalsParseAndBadOnesNameTheFlag) {
  EXPECT_EQ(parse_checkpoint_interval("500steps", "--checkpoint-every").steps, 500);
  EXPECT_EQ(parse_checkpoint_interval("60s", "--checkpoint-every").seconds, 60);
  EXPECT_EQ(parse_checkpoint_interval("2min", "--checkpoint-every").seconds, 120);
  EXPECT_EQ(parse_checkpoint_interval("1.5h", "--checkpoint-every").seconds, 5400);
  EXPECT_FALSE(parse_checkpoint_interval("off", "--checkpoint-every").enabled());
  for (const char* bad : {"10", "-5s", "0s", "5days", "1.5steps", "steps", "", "nan s"}) {
    expect_user_error([&] { parse_checkpoint_interval(bad, "--checkpoint-every"); },
                      {"--checkpoint-every", "500steps"});
  }
}

}  // namespace
}  // namespace xo
