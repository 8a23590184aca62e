// A device profile's JSON (crossover.profile/1): written by `crossover devices --profile`, read
// back from the cache and from data/profiles/. The reader checks every field and names the file
// and the place of the first that is wrong. Apart from the measurement, so that the fuzz target
// links no backend.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/json_depth.h"
#include "measure/profile.h"

namespace xo {
namespace {

using nlohmann::json;

nlohmann::json sample_json(const KernelSample& s) {
  return {{"op", s.op},
          {"variant", s.variant},
          {"batch", s.batch},
          {"shards", s.shards},
          {"in_size", s.in_size},
          {"out_size", s.out_size},
          {"flops", s.flops},
          {"bytes", s.bytes},
          {"matmul_flops", s.matmul_flops},
          {"forward_us", s.forward_us},
          {"backward_us", s.backward_us},
          {"graph_forward_us", s.graph_forward_us},
          {"graph_backward_us", s.graph_backward_us}};
}

// Reads fields of one JSON object, each error naming the file and the object's place.
class Fields {
 public:
  Fields(const json& j, std::string origin, std::string place)
      : j_(j), origin_(std::move(origin)), place_(std::move(place)) {
    if (!j_.is_object()) fail("", "expected an object");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw UserError(fmt::format("{}: {}{}{}: {}", origin_, place_,
                                place_.empty() || key.empty() ? "" : ".", key, what));
  }
  const json& at(const std::string& key) const {
    if (!j_.contains(key)) fail(key, "missing");
    return j_.at(key);
  }
  std::string text(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_string()) fail(key, "expected a string");
    return v.get<std::string>();
  }
  // A finite number >= `min`.
  double number(const std::string& key, double min = 0) const {
    const json& v = at(key);
    if (!v.is_number()) fail(key, "expected a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < min)
      fail(key, fmt::format("{} (expected a number >= {})", x, min));
    return x;
  }
  int64_t integer(const std::string& key, int64_t min, int64_t max) const {
    const json& v = at(key);
    const bool in_range =
        v.is_number_unsigned()
            ? v.get<uint64_t>() <= static_cast<uint64_t>(max)
            : v.is_number_integer() && v.get<int64_t>() >= min && v.get<int64_t>() <= max;
    if (!in_range || v.get<int64_t>() < min) {
      fail(key, fmt::format("expected an integer from {} to {}", min, max));
    }
    return v.get<int64_t>();
  }
  // A number >= `min` that older files lack: 0 when absent.
  double optional_number(const std::string& key, double min = 0) const {
    return j_.contains(key) ? number(key, min) : 0;
  }
  const json& array(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_array()) fail(key, "expected an array");
    return v;
  }
  std::string where(const std::string& key) const {
    return place_.empty() ? key : fmt::format("{}.{}", place_, key);
  }

 private:
  const json& j_;
  std::string origin_, place_;
};

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

}  // namespace

nlohmann::json to_json(const DeviceProfile& p) {
  json samples = json::array();
  for (const KernelSample& s : p.samples) samples.push_back(sample_json(s));
  json measured = json::array();
  for (const MeasuredStep& m : p.measured) {
    json entry = {
        {"model", m.model}, {"batch", m.batch}, {"step_ms", m.step_ms}, {"source", m.source}};
    if (!m.spec_toml.empty()) entry["spec_toml"] = m.spec_toml;
    if (m.slowest_ms > 0) entry["slowest_ms"] = m.slowest_ms;
    measured.push_back(std::move(entry));
  }
  const ExecutionPolicy& e = p.policy;
  json peaks = to_json(p.peaks);
  peaks.erase("cached");
  return {{"schema", kProfileSchema},
          {"id", p.id},
          {"device", p.device},
          {"kind", device_kind_name(p.kind)},
          {"name", p.name},
          {"threads", p.threads},
          {"machine", p.machine},
          {"date", p.date},
          {"library", p.library},
          {"note", p.note},
          {"peaks", peaks},
          {"policy",
           {{"shard_threads", e.shard_threads},
            {"min_shard_batch", e.min_shard_batch},
            {"min_shard_flops", e.min_shard_flops},
            {"max_shard_flops", e.max_shard_flops},
            {"single_thread_flops", e.single_thread_flops}}},
          {"step_fixed_us", p.step_fixed_us},
          {"shard_fork_us", p.shard_fork_us},
          {"graph_step_fixed_us", p.graph_step_fixed_us},
          {"graph_node_us", p.graph_node_us},
          {"sm_count", p.sm_count},
          {"clock_mhz", p.clock_mhz},
          {"samples", samples},
          {"measured", measured}};
}

namespace {

// The peaks the profile's device was probed at and the engine's rules for its threads.
void read_peaks_and_policy(const Fields& f, const std::string& origin, DeviceProfile& p) {
  const Fields e(f.at("peaks"), origin, "peaks");
  p.peaks.device = e.text("device");
  p.peaks.name = e.text("name");
  p.peaks.threads = static_cast<int>(e.integer("threads", 0, kMaxInt));
  p.peaks.matmul_gflops = e.number("matmul_gflops", 1e-9);
  p.peaks.matmul_n = e.integer("matmul_n", 0, kMaxInt);
  p.peaks.bandwidth_gbs = e.number("bandwidth_gbs", 1e-9);
  p.peaks.step_overhead_us = e.number("step_overhead_us");
  p.peaks.layer_overhead_us = e.number("layer_overhead_us");
  p.peaks.probed = e.text("probed");
  const Fields r(f.at("policy"), origin, "policy");
  p.policy.shard_threads = static_cast<int>(r.integer("shard_threads", 1, 4096));
  p.policy.min_shard_batch = r.integer("min_shard_batch", 0, kMaxInt);
  p.policy.min_shard_flops = r.number("min_shard_flops");
  p.policy.max_shard_flops = r.number("max_shard_flops");
  p.policy.single_thread_flops = r.number("single_thread_flops");
}

// A step's fixed costs: the launched step's, a shard fork's, and on a GPU the recorded step's and
// a graph node's, with the multiprocessors and clock they were measured at.
void read_fixed_costs(const Fields& f, DeviceProfile& p) {
  p.step_fixed_us = f.number("step_fixed_us");
  p.shard_fork_us = f.number("shard_fork_us");
  p.graph_step_fixed_us = f.optional_number("graph_step_fixed_us");
  p.graph_node_us = f.optional_number("graph_node_us");
  if (const double sms = f.optional_number("sm_count"); sms <= 100000) {
    p.sm_count = static_cast<int>(sms);
  } else {
    f.fail("sm_count", fmt::format("{} (expected at most 100000)", sms));
  }
  p.clock_mhz = f.optional_number("clock_mhz");
}

KernelSample read_sample(const Fields& e) {
  KernelSample s;
  s.op = e.text("op");
  if (s.op.empty()) e.fail("op", "empty");
  s.variant = e.text("variant");
  s.batch = e.integer("batch", 1, std::numeric_limits<int64_t>::max() / 2);
  s.shards = static_cast<int>(e.integer("shards", 1, 4096));
  s.in_size = e.number("in_size");
  s.out_size = e.number("out_size");
  s.flops = e.number("flops");
  s.bytes = e.number("bytes");
  s.matmul_flops = e.number("matmul_flops");
  s.forward_us = e.number("forward_us");
  s.backward_us = e.number("backward_us");
  s.graph_forward_us = e.optional_number("graph_forward_us");
  s.graph_backward_us = e.optional_number("graph_backward_us");
  return s;
}

MeasuredStep read_measured(const Fields& e, const json& j) {
  MeasuredStep m;
  m.model = e.text("model");
  m.batch = e.integer("batch", 1, std::numeric_limits<int64_t>::max() / 2);
  m.step_ms = e.number("step_ms", 1e-12);
  m.source = e.text("source");
  if (j.contains("spec_toml")) m.spec_toml = e.text("spec_toml");
  m.slowest_ms = e.optional_number("slowest_ms");
  if (m.slowest_ms > 0 && m.slowest_ms < m.step_ms) {
    e.fail("slowest_ms", fmt::format("{} is below step_ms {} (expected the slowest of the runs "
                                     "whose fastest is step_ms)",
                                     m.slowest_ms, m.step_ms));
  }
  return m;
}

}  // namespace

DeviceProfile profile_from_json(const json& j, const std::string& origin) {
  const Fields f(j, origin, "");
  if (f.text("schema") != kProfileSchema) {
    f.fail("schema", fmt::format("'{}' (expected '{}')", f.text("schema"), kProfileSchema));
  }
  DeviceProfile p;
  p.id = f.text("id");
  p.device = f.text("device");
  const std::string kind = f.text("kind");
  const std::optional<DeviceKind> k = parse_device_kind(kind);
  if (!k) f.fail("kind", fmt::format("'{}' (expected 'cpu' or 'gpu')", kind));
  p.kind = *k;
  p.name = f.text("name");
  p.threads = static_cast<int>(f.integer("threads", 0, kMaxInt));
  p.machine = f.text("machine");
  p.date = f.text("date");
  p.library = f.text("library");
  p.note = f.text("note");
  read_peaks_and_policy(f, origin, p);
  read_fixed_costs(f, p);
  const json& samples = f.array("samples");
  for (size_t i = 0; i < samples.size(); ++i) {
    p.samples.push_back(read_sample(Fields(samples[i], origin, fmt::format("samples[{}]", i))));
  }
  const json& measured = f.array("measured");
  for (size_t i = 0; i < measured.size(); ++i) {
    const Fields e(measured[i], origin, fmt::format("measured[{}]", i));
    p.measured.push_back(read_measured(e, measured[i]));
  }
  return p;
}

DeviceProfile parse_profile(const std::string& text, const std::string& origin) {
  check_json_depth(text, origin);
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw UserError(fmt::format("{}: not JSON", origin));
  return profile_from_json(j, origin);
}

}  // namespace xo
