// Measures the matmul rate a backend reaches on large square problems (through the same Linear
// kernel the engine uses: at bf16 its conversion of both operands included, 2n^2 elements beside
// 2n^3 FLOPs), to quote every achieved GFLOP/s as a fraction of it.
//   crossover_matmul_peak [--device cpu] [--threads N] [--precision f32|bf16]
//                         [--sizes 1024,2048,3072] [--reps 10]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "train/stats.h"

namespace {

std::vector<int64_t> parse_sizes(const std::string& text) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t comma = text.find(',', pos);
    out.push_back(std::stoll(text.substr(pos, comma - pos)));
    pos = comma == std::string::npos ? text.size() : comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu", precision = "f32";
  int threads = 0, reps = 10;
  std::vector<int64_t> sizes = {1024, 2048, 3072};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device")
      device = value;
    else if (flag == "--threads")
      threads = std::atoi(value.c_str());
    else if (flag == "--precision")
      precision = value;
    else if (flag == "--sizes")
      sizes = parse_sizes(value);
    else if (flag == "--reps")
      reps = std::atoi(value.c_str());
    else {
      fmt::print(stderr, "unknown flag {}\n", flag);
      return 2;
    }
  }
  auto be = xo::make_backend(xo::parse_device(device, threads, precision));
  fmt::print("device: {} ({}), {} threads, {}, {}\n", be->info().id, be->info().name,
             be->info().threads, be->info().library, be->info().precision);
  double best = 0;
  for (int64_t n : sizes) {
    auto kernel = be->linear({n, n, n, false, xo::Activation::None, true});
    xo::DeviceBuffer a = be->allocate(sizeof(float) * n * n);
    xo::DeviceBuffer b = be->allocate(sizeof(float) * n * n);
    xo::DeviceBuffer c = be->allocate(sizeof(float) * n * n);
    std::vector<float> host(n * n);
    for (int64_t i = 0; i < n * n; ++i) host[i] = static_cast<float>((i % 17) - 8) / 16.0f;
    be->upload(a.as<float>(), host.data(), sizeof(float) * n * n);
    be->upload(b.as<float>(), host.data(), sizeof(float) * n * n);
    std::vector<double> seconds;
    for (int r = 0; r <= reps; ++r) {  // the first run is the warm-up
      be->synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      kernel->forward(a.as<float>(), b.as<float>(), nullptr, c.as<float>());
      be->synchronize();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) seconds.push_back(s);
    }
    const auto st = xo::summarize(seconds);
    const double gflops = 2.0 * n * n * n / st.median / 1e9;
    best = std::max(best, gflops);
    fmt::print("matmul {}x{}x{}: median {:.3f} ms (cv {:.1f}%), {:.1f} GFLOP/s\n", n, n, n,
               st.median * 1e3, 100 * st.cv, gflops);
  }
  fmt::print("peak_gflops {:.1f}\n", best);
  return 0;
}
