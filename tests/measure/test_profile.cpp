// Device profiles: what a measurement covers (every node of its models, as the engine runs them),
// the profile file's strict reader, and the profiles crossover ships.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "backend/backend.h"
#include "core/error.h"
#include "core/file.h"
#include "measure/peaks.h"
#include "measure/profile.h"
#include "model/layer.h"
#include "model/model.h"
#include "support/gpu.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

ModelSpec small_spec(const char* name, std::vector<int64_t> input, std::vector<LayerSpec> layers,
                     int64_t batch) {
  ModelSpec s;
  s.name = name;
  s.origin = "test";
  s.input = std::move(input);
  s.layers = std::move(layers);
  s.train.batch = batch;
  s.train.shuffle = false;
  return s;
}

LayerSpec layer(LayerType t, int64_t out = 0) {
  LayerSpec l;
  l.type = t;
  l.out = out;
  return l;
}

// An MLP with dropout, a CNN with a pool, an LSTM over embeddings: every kind of node the
// built-in models have.
std::vector<ModelSpec> specs() {
  LayerSpec conv = layer(LayerType::Conv2d, 4);
  conv.kernel = 3;
  LayerSpec pool = layer(LayerType::MaxPool2d);
  pool.kernel = 2;
  pool.stride = 2;
  LayerSpec dropout = layer(LayerType::Dropout);
  dropout.p = 0.25;
  LayerSpec embedding = layer(LayerType::Embedding, 8);
  embedding.vocab = 50;
  return {
      small_spec("mlp", {16},
                 {layer(LayerType::Linear, 32), layer(LayerType::ReLU), dropout,
                  layer(LayerType::Linear, 4)},
                 64),
      small_spec("cnn", {1, 8, 8},
                 {conv, layer(LayerType::ReLU), pool, layer(LayerType::Flatten),
                  layer(LayerType::Linear, 3)},
                 64),
      small_spec("lstm", {6}, {embedding, layer(LayerType::LSTM, 8), layer(LayerType::Linear, 2)},
                 64),
  };
}

DevicePeaks fake_peaks(const Backend& be) {
  DevicePeaks p;
  p.device = be.info().id;
  p.name = be.info().name;
  p.threads = be.info().threads;
  p.matmul_gflops = 100;
  p.matmul_n = 2048;
  p.bandwidth_gbs = 20;
  p.layer_overhead_us = 1;
  p.probed = "2026-11-24T00:00:00Z";
  return p;
}

bool has_sample(const DeviceProfile& p, const KernelSample& want) {
  return std::any_of(p.samples.begin(), p.samples.end(), [&](const KernelSample& s) {
    return s.op == want.op && s.variant == want.variant && s.batch == want.batch &&
           s.shards == want.shards && s.in_size == want.in_size && s.out_size == want.out_size &&
           s.trials == want.trials;
  });
}

TEST(Profile, EveryNodeOfItsModelsIsTimedWholeAndInShards) {
  auto be = make_backend(parse_device("cpu", 2));
  const DevicePeaks peaks = fake_peaks(*be);
  size_t calls = 0;
  const DeviceProfile p =
      measure_profile(*be, peaks, specs(), "test machine", [&](size_t, size_t) { ++calls; });
  EXPECT_GT(calls, 0u);
  EXPECT_EQ(p.device, "cpu");
  EXPECT_EQ(p.threads, 2);
  EXPECT_EQ(p.policy.shard_threads, 2);
  EXPECT_GT(p.shard_fork_us, 0);
  EXPECT_GE(p.step_fixed_us, 0);
  EXPECT_FALSE(p.date.empty());
  for (const ModelSpec& spec : specs()) {
    const ModelLayout layout = model_layout(spec);
    for (size_t i = 0; i < layout.nodes.size(); ++i) {
      if (is_view(layout.nodes[i], true)) continue;
      for (int shards : {1, 2}) {
        const KernelSample want = node_sample(layout, i, spec.train.batch / shards, shards);
        EXPECT_TRUE(has_sample(p, want))
            << spec.name << " node " << i << " (" << want.op << ") in " << shards << " shards";
      }
      // A Linear as fused trials run it: one group alone, and a group on each worker of every
      // size the profile times.
      if (layout.nodes[i].kind != NodeKind::Linear) continue;
      const int64_t batch = spec.train.batch;
      EXPECT_TRUE(has_sample(p, trials_linear_sample(layout, i, batch, 1, 1))) << spec.name;
      for (const int k : kProfiledTrials) {
        const KernelSample want = trials_linear_sample(layout, i, batch, k, 2);
        EXPECT_EQ(want.flops, k * node_sample(layout, i, batch, 2).flops);
        EXPECT_TRUE(has_sample(p, want)) << spec.name << " node " << i << ", " << k << " trials";
      }
    }
  }
  std::set<std::string> ops;
  for (const KernelSample& s : p.samples) {
    ops.insert(s.op);
    EXPECT_GE(s.forward_us, 0) << s.op;
    EXPECT_GE(s.backward_us, 0) << s.op;
    // A shard sample has the shards' parallel region taken off: a tiny one may come to 0.
    if (s.shards == 1) {
      EXPECT_GT(s.total_us(), 0) << s.op << " " << s.variant;
    }
  }
  for (const char* op : {"linear", "conv2d", "maxpool2d", "dropout", "embedding", "lstm", "loss",
                         "optimizer", "accumulate", "trials_linear"}) {
    EXPECT_TRUE(ops.count(op)) << op;
  }
}

TEST(Profile, ACpuProfileHasNoGraphTimes) {
  auto be = make_backend(parse_device("cpu", 1));
  const DeviceProfile p = measure_profile(*be, fake_peaks(*be), {specs()[0]}, "test machine");
  EXPECT_FALSE(p.has_graph_times());
  EXPECT_EQ(p.graph_step_fixed_us, 0);
  EXPECT_EQ(p.sm_count, 0);
  for (const KernelSample& s : p.samples) EXPECT_EQ(s.graph_total_us(), 0) << s.op;
}

// On a GPU every kernel is timed queued and inside a recorded graph (what one more call adds to
// a step of each kind), and the profile knows the device's multiprocessors and clock.
TEST(ProfileGpu, EveryKernelIsTimedQueuedAndInsideACudaGraph) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  auto be = make_backend(parse_device("cuda", 0));
  const DeviceProfile p = measure_profile(*be, fake_peaks(*be), specs(), "test machine");
  EXPECT_TRUE(p.has_graph_times());
  EXPECT_GT(p.graph_node_us, 0);
  EXPECT_GE(p.graph_step_fixed_us, 0);
  EXPECT_GE(p.step_fixed_us, 0);
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.clock_mhz, 0);
  std::set<std::string> ops;
  for (const KernelSample& s : p.samples) {
    ops.insert(s.op);
    EXPECT_EQ(s.shards, 1) << s.op;  // one group of fused trials (op trials_linear) too
    EXPECT_GT(s.total_us(), 0) << s.op << " " << s.variant;
    EXPECT_GT(s.graph_total_us(), 0) << s.op << " " << s.variant;
    EXPECT_TRUE(std::isfinite(s.graph_total_us())) << s.op;
  }
  for (const char* op : {"linear", "trials_linear", "conv2d", "maxpool2d", "dropout", "embedding",
                         "lstm", "loss", "optimizer"}) {
    EXPECT_TRUE(ops.count(op)) << op;
  }
  // The fused trials' Linear at every group size a GPU profile times (these Linears are small).
  std::set<int> trials;
  for (const KernelSample& s : p.samples) {
    if (s.op == "trials_linear") trials.insert(s.trials);
  }
  EXPECT_EQ(trials, std::set<int>(std::begin(kProfiledGpuTrials), std::end(kProfiledGpuTrials)));
  // The profile reads back with its graph times.
  const DeviceProfile q = parse_profile(to_json(p).dump(), "gpu.json");
  EXPECT_EQ(to_json(q), to_json(p));
}

TEST(Profile, AOneThreadDeviceHasNoShardSamples) {
  auto be = make_backend(parse_device("cpu", 1));
  const DeviceProfile p = measure_profile(*be, fake_peaks(*be), {specs()[0]}, "test machine");
  ASSERT_FALSE(p.samples.empty());
  for (const KernelSample& s : p.samples) EXPECT_EQ(s.shards, 1) << s.op;
  EXPECT_EQ(p.shard_fork_us, 0);
}

DeviceProfile hand_profile() {
  DeviceProfile p;
  p.id = "hand-2t";
  p.device = "cpu";
  p.name = "Hand CPU";
  p.threads = 2;
  p.machine = "a test";
  p.date = "2026-11-24T00:00:00Z";
  p.library = "oneDNN";
  p.peaks.device = "cpu";
  p.peaks.name = "Hand CPU";
  p.peaks.threads = 2;
  p.peaks.matmul_gflops = 100;
  p.peaks.matmul_n = 2048;
  p.peaks.bandwidth_gbs = 20;
  p.peaks.probed = "2026-11-24T00:00:00Z";
  p.policy = {2, 16, 1e7, 1e9, 4e6};
  p.step_fixed_us = 0.5;
  p.shard_fork_us = 1.5;
  KernelSample s;
  s.op = "linear";
  s.variant = "relu";
  s.batch = 100;
  s.in_size = 8;
  s.out_size = 16;
  s.flops = 5e4;
  s.bytes = 2e4;
  s.matmul_flops = 2.5e4;
  s.forward_us = 2;
  s.backward_us = 3;
  p.samples.push_back(s);
  s.batch = 50;
  s.graph_forward_us = 1;  // a GPU's sample: its time in a recorded step too
  s.graph_backward_us = 1.5;
  p.samples.push_back(s);
  s.op = "trials_linear";  // a Linear of 8 fused trials
  s.trials = 8;
  s.graph_forward_us = s.graph_backward_us = 0;
  p.samples.push_back(s);
  p.bf16_unit = "amx";
  p.measured.push_back({"disc-2", 100, 0.005, "a test", "", 0.0055});
  // A model that is not built in carries its spec.
  p.measured.push_back({"tiny", 8, 0.004, "a test", "[model]\nname = \"tiny\"\n"});
  return p;
}

TEST(Profile, JsonRoundTripKeepsEveryField) {
  const DeviceProfile p = hand_profile();
  const DeviceProfile q = parse_profile(to_json(p).dump(), "hand.json");
  EXPECT_EQ(to_json(q), to_json(p));
  EXPECT_EQ(q.policy.shard_threads, 2);
  EXPECT_EQ(q.samples.at(0).matmul_flops, 2.5e4);
  EXPECT_EQ(q.measured.at(0).model, "disc-2");
  EXPECT_EQ(q.samples.at(1).graph_backward_us, 1.5);
  EXPECT_EQ(q.samples.at(0).trials, 0);  // not written: every other op's
  EXPECT_FALSE(to_json(p)["samples"][0].contains("trials"));
  EXPECT_EQ(q.samples.at(2).trials, 8);
  EXPECT_EQ(q.measured.at(0).spec_toml, "");
  EXPECT_EQ(q.measured.at(0).slowest_ms, 0.0055);
  EXPECT_EQ(q.measured.at(1).slowest_ms, 0);  // not recorded
  EXPECT_EQ(q.measured.at(1).spec_toml, "[model]\nname = \"tiny\"\n");
  EXPECT_EQ(q.bf16_unit, "amx");
  // An older file without the graph fields reads with none.
  nlohmann::json old = to_json(p);
  for (const char* key : {"graph_step_fixed_us", "graph_node_us", "sm_count", "clock_mhz"}) {
    old.erase(key);
  }
  old["samples"][1].erase("graph_forward_us");
  const DeviceProfile r = parse_profile(old.dump(), "old.json");
  EXPECT_FALSE(r.has_graph_times());
  EXPECT_EQ(r.samples.at(1).graph_forward_us, 0);
}

// The packed form the shipped profiles are carried in (io/fields_pack.h) keeps every field, to the
// bit, and refuses bytes that are not a whole pack.
TEST(Profile, APackedProfileUnpacksToEveryFieldAndRefusesADamagedPack) {
  const DeviceProfile p = hand_profile();
  const std::string bytes = pack_profile(p);
  EXPECT_EQ(to_json(unpack_profile(bytes, "hand.json")), to_json(p));
  struct Case {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  std::string kind = bytes;
  kind.replace(kind.find("cpu", kind.find("cpu") + 1), 3, "tpu");  // "device", then "kind"
  std::string count = bytes;
  const size_t samples = count.find("relu") - 8 - 8 - 6 - 8;  // the count before sample 0's op
  count[samples + 7] = '\x7f';                                // a count beyond the bytes left
  const std::vector<Case> cases = {
      {"cut short", bytes.substr(0, bytes.size() - 3), "hand.json (packed): field 'slowest_ms'"},
      {"cut in a text", bytes.substr(0, 20),
       "hand.json (packed): field 'schema': expected a text's"},
      {"bytes after", bytes + "x", "field 'the end': expected no bytes after the last field"},
      {"an enum", kind, "field 'kind': expected \"cpu\" or \"gpu\""},
      {"a count", count, "field 'samples': expected a count of records"},
      {"empty", "", "field 'schema'"},
  };
  for (const Case& c : cases) {
    try {
      unpack_profile(c.bytes, "hand.json");
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos)
          << c.what << ": " << e.what();
    }
  }
}

// A shipped profile with a wrong field fails the build (the tool that packs them), naming the
// file and the field, and writes nothing; good ones give the source the binary is built from.
TEST(Profile, TheBuildPacksTheShippedProfilesAndRefusesAWrongOne) {
  const testing::TempDir dir("pack");
  nlohmann::json broken = to_json(hand_profile());
  broken["samples"][1]["forward_us"] = -1;
  write_file_atomic(dir.path() / "good.json", to_json(hand_profile()).dump());
  write_file_atomic(dir.path() / "broken.json", broken.dump());
  const auto run = [&](const std::string& files) {
    const std::string cmd = fmt::format("cd '{}' && {} out.cpp {} 2>&1", dir.path().string(),
                                        CROSSOVER_PACK_PROFILES, files);
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string out(4096, '\0');
    out.resize(fread(out.data(), 1, out.size(), pipe));
    const int status = pclose(pipe);
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  const auto [failed, message] = run("good.json broken.json");
  EXPECT_EQ(failed, 1);
  EXPECT_NE(message.find("data/profiles/broken.json: samples[1]: forward_us: expected a number "
                         ">= 0, found a number (-1)"),
            std::string::npos)
      << message;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out.cpp"));
  EXPECT_EQ(run("good.json").first, 0);
  const std::string source = read_file(dir.path() / "out.cpp");
  EXPECT_NE(source.find("{\"good.json\", {reinterpret_cast<const char*>(kPack0), " +
                        std::to_string(pack_profile(hand_profile()).size()) + "}}"),
            std::string::npos)
      << source.substr(0, 400);
}

TEST(Profile, TheReaderNamesTheFileAndTheFieldThatIsWrong) {
  const nlohmann::json good = to_json(hand_profile());
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"schema", [](auto& j) { j["schema"] = "crossover.profile/9"; }, "hand.json: schema:"},
      {"missing id", [](auto& j) { j.erase("id"); }, "hand.json: id: missing"},
      {"kind", [](auto& j) { j["kind"] = "tpu"; },
       "hand.json: kind: expected \"cpu\" or \"gpu\", found a string (\"tpu\")"},
      {"peaks", [](auto& j) { j["peaks"]["bandwidth_gbs"] = 0; },
       "hand.json: peaks: bandwidth_gbs: expected a number >= 1e-09, found a number (0)"},
      {"policy", [](auto& j) { j["policy"]["shard_threads"] = 0; },
       "policy: shard_threads: expected an integer from 1 to 4096"},
      {"negative time", [](auto& j) { j["samples"][0]["forward_us"] = -1; },
       "samples[0]: forward_us: expected a number >= 0, found a number (-1)"},
      {"batch", [](auto& j) { j["samples"][0]["batch"] = 1.5; },
       "samples[0]: batch: expected an integer"},
      {"step", [](auto& j) { j["measured"][0]["step_ms"] = "fast"; },
       "measured[0]: step_ms: expected a number"},
      {"samples", [](auto& j) { j["samples"] = 3; },
       "samples: expected an array, found a number (3)"},
      {"graph time", [](auto& j) { j["samples"][1]["graph_forward_us"] = -2; },
       "samples[1]: graph_forward_us"},
      {"graph node", [](auto& j) { j["graph_node_us"] = "x"; }, "graph_node_us: expected a number"},
      {"sm count", [](auto& j) { j["sm_count"] = 1e300; }, "sm_count:"},
      {"slowest below fastest", [](auto& j) { j["measured"][0]["slowest_ms"] = 0.004; },
       "measured[0]: slowest_ms: expected at least step_ms (0.005)"},
      {"bf16 unit", [](auto& j) { j["bf16_unit"] = "AMX"; },
       "hand.json: bf16_unit: expected amx or avx512_bf16 (a CPU profile timed at bf16), or "
       "absent, found a string (\"AMX\")"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    try {
      parse_profile(j.dump(), "hand.json");
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos)
          << c.what << ": " << e.what();
    }
  }
  EXPECT_THROW(parse_profile("{not json", "hand.json"), UserError);
  EXPECT_THROW(parse_profile(std::string(5000, '['), "hand.json"), UserError);
}

TEST(Profile, TheShippedProfilesReadAndTheCpuOneMeasuredEveryBuiltInModel) {
  const std::vector<DeviceProfile> shipped = shipped_profiles();
  const DeviceProfile* cpu = nullptr;
  for (const DeviceProfile& p : shipped) {
    EXPECT_FALSE(p.machine.empty()) << p.id;
    EXPECT_FALSE(p.date.empty()) << p.id;
    if (p.kind == DeviceKind::Cpu && p.has_kernels()) cpu = &p;
    if (!p.has_kernels()) {
      EXPECT_FALSE(p.note.empty()) << p.id << ": a profile of peaks only says so";
    }
  }
  ASSERT_NE(cpu, nullptr);
  std::set<std::string> measured;
  for (const MeasuredStep& m : cpu->measured) measured.insert(m.model);
  for (const std::string& name : builtin_spec_names()) EXPECT_TRUE(measured.count(name)) << name;
}

// The one field list reads every committed profile and writes back the same document, plus the
// fields the profile predates (a GPU's graph times, written as 0, what they read as); the binary
// carries each as it reads.
TEST(Profile, EveryShippedProfileWritesBackTheSameJson) {
  const std::filesystem::path dir = std::filesystem::path(CROSSOVER_SOURCE_DIR) / "data/profiles";
  const std::vector<DeviceProfile> packed = shipped_profiles();
  int read = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const nlohmann::json committed = nlohmann::json::parse(read_file(entry.path()));
    const DeviceProfile p = profile_from_json(committed, entry.path().string());
    for (const nlohmann::json& change : nlohmann::json::diff(committed, to_json(p))) {
      EXPECT_EQ(change.at("op"), "add") << entry.path() << ": " << change.dump();
      EXPECT_EQ(change.value("value", nlohmann::json()), 0)
          << entry.path() << ": " << change.dump();
    }
    // What the binary carries (packed when it was built) is the file as read now, to the bit.
    const auto shipped = std::find_if(packed.begin(), packed.end(),
                                      [&](const DeviceProfile& s) { return s.id == p.id; });
    ++read;
    if (shipped == packed.end()) {
      ADD_FAILURE() << entry.path() << ": not among the shipped profiles";
      continue;
    }
    EXPECT_EQ(to_json(*shipped), to_json(p)) << entry.path();
  }
  EXPECT_GE(read, 4);
  EXPECT_EQ(static_cast<size_t>(read), packed.size());
}

TEST(Profile, TheCacheKeepsOneProfilePerDeviceAndFindsThisMachines) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "profile_cache";
  std::filesystem::remove_all(dir);
  const auto file = dir / "profiles.json";
  auto be = make_backend(parse_device("cpu", 1));
  EXPECT_FALSE(cached_profile(be->info(), file));
  DeviceProfile p = hand_profile();
  store_profile(be->info(), p, file);
  ASSERT_TRUE(cached_profile(be->info(), file));
  EXPECT_EQ(cached_profile(be->info(), file)->id, "hand-2t");
  ASSERT_EQ(cached_profiles_here(file).size(), 1u);
  write_file_atomic(file, "damaged");
  EXPECT_FALSE(cached_profile(be->info(), file));  // measured again when asked
  store_profile(be->info(), p, file);              // and replaced
  EXPECT_TRUE(cached_profile(be->info(), file));
}

}  // namespace
}  // namespace xo
