// A device profile's JSON (crossover.profile/1): written by `crossover devices --profile`, read
// back from the cache and from data/profiles/. Its fields are listed once (io/json_fields.h) and
// run both ways; the reader checks every field's type and range and names the file, the place
// and the field of the first that is wrong. The same list packs a profile into bytes
// (io/fields_pack.h), as the shipped profiles are carried in the binary. Apart from the
// measurement, so that the fuzz target links no backend.
#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/json_depth.h"
#include "io/fields_pack.h"
#include "io/json_fields.h"
#include "measure/profile.h"

namespace xo {
namespace {

using nlohmann::json;

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxBatch = std::numeric_limits<int64_t>::max() / 2;

// The engine's rules for the device's threads, as the profile measured them.
constexpr auto policy_fields = [](auto& io, auto& e) {
  io.integer("shard_threads", e.shard_threads, Between{1, 4096});
  io.integer("min_shard_batch", e.min_shard_batch, Between{0, kMaxInt});
  io.number("min_shard_flops", e.min_shard_flops, AtLeast{0});
  io.number("max_shard_flops", e.max_shard_flops, AtLeast{0});
  io.number("single_thread_flops", e.single_thread_flops, AtLeast{0});
};

// One timed kernel; a GPU's times in a recorded step are absent from older files.
constexpr auto sample_fields = [](auto& io, auto& s) {
  io.text("op", s.op);
  if constexpr (kReads<decltype(io)>) {
    if (s.op.empty()) io.refuse("op", "an operation's name", s.op);
  }
  io.text("variant", s.variant);
  io.integer("batch", s.batch, Between{1, kMaxBatch});
  io.integer("shards", s.shards, Between{1, 4096});
  io.number("in_size", s.in_size, AtLeast{0});
  io.number("out_size", s.out_size, AtLeast{0});
  io.number("flops", s.flops, AtLeast{0});
  io.number("bytes", s.bytes, AtLeast{0});
  io.number("matmul_flops", s.matmul_flops, AtLeast{0});
  io.integer_unless_zero("trials", s.trials, Between{0, 1 << 20});
  io.number("forward_us", s.forward_us, AtLeast{0});
  io.number("backward_us", s.backward_us, AtLeast{0});
  io.number_or_zero("graph_forward_us", s.graph_forward_us, AtLeast{0});
  io.number_or_zero("graph_backward_us", s.graph_backward_us, AtLeast{0});
};

// A step measured on the device; a built-in model has no spec, one measurement no slowest.
constexpr auto measured_fields = [](auto& io, auto& m) {
  io.text("model", m.model);
  io.integer("batch", m.batch, Between{1, kMaxBatch});
  io.number("step_ms", m.step_ms, AtLeast{1e-12});
  io.text("source", m.source);
  io.text_unless_empty("spec_toml", m.spec_toml);
  io.number_unless_zero("slowest_ms", m.slowest_ms, AtLeast{0});
  if constexpr (kReads<decltype(io)>) {
    if (m.slowest_ms > 0 && m.slowest_ms < m.step_ms) {
      io.refuse("slowest_ms",
                fmt::format("at least step_ms ({}): the slowest of the runs whose fastest is "
                            "step_ms",
                            m.step_ms),
                m.slowest_ms);
    }
  }
};

constexpr auto profile_fields = [](auto& io, auto& p) {
  io.constant("schema", kProfileSchema);
  io.text("id", p.id);
  io.text("device", p.device);
  io.named("kind", p.kind);
  io.text("name", p.name);
  io.integer("threads", p.threads, Between{0, kMaxInt});
  io.text("machine", p.machine);
  io.text("date", p.date);
  io.text("library", p.library);
  io.text_unless_empty("bf16_unit", p.bf16_unit);
  if constexpr (kReads<decltype(io)>) {
    if (!p.bf16_unit.empty() && p.bf16_unit != "amx" && p.bf16_unit != "avx512_bf16") {
      io.refuse("bf16_unit", "amx or avx512_bf16 (a CPU profile timed at bf16), or absent",
                p.bf16_unit);
    }
  }
  io.text("note", p.note);
  io.object("peaks", p.peaks, [](auto& o, auto& peaks) { peaks_fields(o, peaks, false); });
  io.object("policy", p.policy, policy_fields);
  // A step's fixed costs: the launched step's, a shard fork's, and on a GPU the recorded step's
  // and a graph node's, with the multiprocessors and clock they were measured at.
  io.number("step_fixed_us", p.step_fixed_us, AtLeast{0});
  io.number("shard_fork_us", p.shard_fork_us, AtLeast{0});
  io.number_or_zero("graph_step_fixed_us", p.graph_step_fixed_us, AtLeast{0});
  io.number_or_zero("graph_node_us", p.graph_node_us, AtLeast{0});
  io.integer_or_zero("sm_count", p.sm_count, Between{0, 100000});
  io.number_or_zero("clock_mhz", p.clock_mhz, AtLeast{0});
  io.objects("samples", p.samples, sample_fields);
  io.objects("measured", p.measured, measured_fields);
};

}  // namespace

json to_json(const DeviceProfile& p) { return fields_json(p, profile_fields); }

DeviceProfile profile_from_json(const json& j, const std::string& origin) {
  const JsonSource source{origin, ReadMode::Strict};
  return read_fields<DeviceProfile>(JsonIn(j, "", source), profile_fields);
}

DeviceProfile parse_profile(const std::string& text, const std::string& origin) {
  check_json_depth(text, origin);
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw UserError(fmt::format("{}: not JSON", origin));
  return profile_from_json(j, origin);
}

std::string pack_profile(const DeviceProfile& p) { return FieldsPack::write(p, profile_fields); }

DeviceProfile unpack_profile(std::string_view bytes, const std::string& origin) {
  return FieldsUnpack::read<DeviceProfile>(bytes, origin, profile_fields);
}

}  // namespace xo
