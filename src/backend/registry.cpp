// Turns a device string into a backend, lists the devices this build can use here, and says how
// many CPU threads a process takes by default.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/entry.h"
#include "core/error.h"

namespace xo {

int usable_cpu_cores() { return cpu::available_cores(); }
std::string cpu_bf16_unit() { return cpu::cpu_bf16_unit(); }
bool cpu_bf16_linear(int64_t in_features, int64_t out_features) {
  return !cpu::small_linear(in_features, out_features);
}

namespace {
// A CPU backend at the precision asked for: tf32 is a GPU tensor-core format, computed in f32 here.
std::unique_ptr<Backend> cpu_backend(const DeviceRequest& request) {
  const Precision p = request.precision == Precision::BF16 ? Precision::BF16 : Precision::F32;
  return std::make_unique<cpu::CpuBackend>(request.threads, p);
}
}  // namespace

int threads_per_rank(int threads, int ranks_here) {
  if (threads > 0) return threads;
  return std::max(1, usable_cpu_cores() / std::max(1, ranks_here));
}

DeviceRequest parse_device(const std::string& text, int threads, const std::string& precision) {
  DeviceRequest r;
  r.threads = threads;
  r.precision = parse_precision(precision);
  if (threads < 0)
    throw UserError(fmt::format("--threads {}: expected 0 (all cores) or more", threads));
  // More threads than cores only contend, and far more (--threads 100000) made oneDNN fail to
  // create its memory objects, reported as an internal error: clamp, and say so.
  if (const int cores = cpu::available_cores(); threads > cores) {
    r.threads = cores;
    r.note = fmt::format("--threads {}: this machine has {} cores; using {} threads", threads,
                         cores, cores);
  }
  if (text == "cpu" || text == "auto" || text == "cuda") {
    r.kind = text;
    return r;
  }
  if (text == kCpuBf16) {  // the CPU at bf16 whatever --precision says
    r.kind = "cpu";
    r.precision = Precision::BF16;
    return r;
  }
  if (text.rfind("cuda:", 0) == 0) {
    const char* b = text.data() + 5;
    const char* e = text.data() + text.size();
    auto [p, ec] = std::from_chars(b, e, r.index);
    if (ec == std::errc() && p == e && b != e && r.index >= 0) {
      r.kind = "cuda";
      return r;
    }
  }
  throw UserError(
      fmt::format("--device '{}': expected cpu, {}, cuda, cuda:N or auto", text, kCpuBf16));
}

std::unique_ptr<Backend> make_backend(const DeviceRequest& request) {
  if (request.kind == "cpu") return cpu_backend(request);
  if (request.kind == "cuda") return cuda::make_backend(request.index, request.precision);
  if (request.kind == "auto") {
    std::string why;
    if (!cuda::list_devices(&why).empty()) return cuda::make_backend(0, request.precision);
    return cpu_backend(request);
  }
  throw UserError(fmt::format("unknown device kind '{}'", request.kind));
}

DeviceList list_devices() {
  DeviceList list;
  list.available.push_back("cpu");
  std::string why;
  for (auto& id : cuda::list_devices(&why)) list.available.push_back(id);
  if (!why.empty()) list.unavailable_reasons.push_back("cuda: " + why);
  return list;
}

}  // namespace xo
