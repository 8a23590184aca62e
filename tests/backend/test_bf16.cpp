// The CPU's --precision bf16: each product of Linear, Conv2d and LSTM reads its operands rounded to
// bf16 and accumulates in f32. Checked against the f32 kernels fed the operands already rounded
// (what the bf16 kernels must compute, to accumulation order) and against the f32 kernels fed the
// operands as they are (which they must not match: a bf16 path that fell back to f32 fails).
// Skipped, saying why, on a CPU without AMX or AVX-512 BF16.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/random.h"
#include "optim/optimizer.h"
#include "support/cli.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

#define XO_NEEDS_BF16_UNIT()                                                                  \
  if (cpu_bf16_unit().empty())                                                                \
  GTEST_SKIP() << "this CPU has neither AMX nor AVX-512 BF16 (as oneDNN sees it): the CPU's " \
                  "bf16 path cannot run here"

float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  std::memcpy(&x, &u, sizeof u);
  return x;
}
std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_bf16(x);
  return v;
}
std::vector<float> uniform(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  return v;
}

// Backend memory holding `host` (or n zeros), read back by host().
struct Tensor {
  Backend* be;
  DeviceBuffer buf;
  size_t n;
  Tensor(Backend& b, const std::vector<float>& host)
      : be(&b), buf(b.allocate(sizeof(float) * host.size())), n(host.size()) {
    b.upload(buf.as<float>(), host.data(), sizeof(float) * n);
  }
  Tensor(Backend& b, size_t count) : be(&b), buf(b.allocate(sizeof(float) * count)), n(count) {}
  float* p() const { return buf.as<float>(); }
  std::vector<float> host() const {
    std::vector<float> h(n);
    be->download(h.data(), p(), sizeof(float) * n);
    return h;
  }
};

double largest(const std::vector<float>& v) {
  double m = 1e-6;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}
// The largest difference relative to b's largest magnitude.
double difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  return d / largest(b);
}

// Equal to the rounded-operand reference up to f32 accumulation order, and not to the unrounded
// one (bf16 rounding moves results by about 2^-9 relative).
constexpr double kSameProduct = 2e-5;
constexpr double kBf16Moved = 1e-4;

void expect_bf16_products(const char* what, const std::vector<float>& bf16,
                          const std::vector<float>& reference_rounded,
                          const std::vector<float>& reference_f32) {
  EXPECT_LE(difference(bf16, reference_rounded), kSameProduct) << what;
  EXPECT_GE(difference(bf16, reference_f32), kBf16Moved) << what << ": not computed in bf16";
}

// A Linear's forward and backward on `be`: dst, d_src, d_W, d_b.
struct LinearOut {
  std::vector<float> dst, d_src, d_w, d_b;
};
LinearOut run_linear(Backend& be, const LinearShape& s, const std::vector<float>& x,
                     const std::vector<float>& w, const std::vector<float>& g) {
  auto k = be.linear(s);
  const int64_t models = s.models, stride = s.model_stride > 0 ? s.model_stride : 0;
  const size_t wn = stride > 0 ? static_cast<size_t>(models * stride)
                               : static_cast<size_t>(s.out_features * s.in_features);
  // Fused: each model's weights then its bias in its stride; alone: the bias apart.
  std::vector<float> params(wn, 0.0f), bias(static_cast<size_t>(s.out_features), 0.25f);
  std::copy(w.begin(), w.end(), params.begin());
  Tensor src(be, x), weights(be, params), b(be, bias), dst(be, g.size()), d_dst(be, g), d_w(be, wn),
      d_b(be, wn), d_x(be, x.size());
  const float* bias_p = stride > 0 ? weights.p() + s.out_features * s.in_features : b.p();
  if (!s.has_bias) bias_p = nullptr;
  k->forward(src.p(), weights.p(), bias_p, dst.p());
  float* d_bias_p = stride > 0 ? d_w.p() + s.out_features * s.in_features : d_b.p();
  if (!s.has_bias) d_bias_p = nullptr;
  k->backward(src.p(), weights.p(), dst.p(), d_dst.p(), d_w.p(), d_bias_p, d_x.p());
  LinearOut out{dst.host(), d_x.host(), d_w.host(), {}};
  if (stride > 0) {  // model 0's bias gradient follows its weights' in its stride
    out.d_b.assign(out.d_w.begin() + s.out_features * s.in_features,
                   out.d_w.begin() + s.out_features * s.in_features + s.out_features);
  } else {
    out.d_b = d_b.host();
  }
  out.d_w.resize(static_cast<size_t>(s.out_features * s.in_features));
  return out;
}

void check_linear(const LinearShape& s) {
  auto f32 = make_backend(parse_device("cpu", 1, "f32"));
  auto bf16 = make_backend(parse_device("cpu", 1, "bf16"));
  EXPECT_EQ(bf16->info().precision, "bf16");
  Rng rng(7);
  const auto x = uniform(rng, static_cast<size_t>(s.models * s.batch * s.in_features));
  const auto w = uniform(rng, static_cast<size_t>(s.out_features * s.in_features));
  const auto g = uniform(rng, static_cast<size_t>(s.models * s.batch * s.out_features));
  const LinearOut got = run_linear(*bf16, s, x, w, g);
  const LinearOut exact = run_linear(*f32, s, x, w, g);
  const LinearOut round = run_linear(*f32, s, rounded(x), rounded(w), rounded(g));
  expect_bf16_products("dst", got.dst, round.dst, exact.dst);
  expect_bf16_products("d_src", got.d_src, round.d_src, exact.d_src);
  expect_bf16_products("d_W", got.d_w, round.d_w, exact.d_w);
  // The bias gradient sums d_dst in f32, unrounded.
  if (s.has_bias) {
    EXPECT_LE(difference(got.d_b, exact.d_b), 1e-6);
  }
}

TEST(CpuBf16, LinearProductsReadBf16OperandsAndAccumulateInF32) {
  XO_NEEDS_BF16_UNIT();
  check_linear({.batch = 24, .in_features = 40, .out_features = 48});
  check_linear({.batch = 64, .in_features = 200, .out_features = 130, .has_bias = false});
}

TEST(CpuBf16, FusedModelsLinearProductsAreBf16Too) {
  XO_NEEDS_BF16_UNIT();
  LinearShape s{.batch = 16, .in_features = 96, .out_features = 80};
  s.models = 3;
  s.model_stride = 96 * 80 + 80 + 8;  // padding between models, as a group may have
  check_linear(s);
}

TEST(CpuBf16, SmallLayersStayF32AsInAFusedGroup) {
  XO_NEEDS_BF16_UNIT();
  auto f32 = make_backend(parse_device("cpu", 1, "f32"));
  auto bf16 = make_backend(parse_device("cpu", 1, "bf16"));
  Rng rng(3);
  const LinearShape s{.batch = 10, .in_features = 32, .out_features = 16};
  const auto x = uniform(rng, 320), w = uniform(rng, 512), g = uniform(rng, 160);
  const LinearOut a = run_linear(*bf16, s, x, w, g), b = run_linear(*f32, s, x, w, g);
  EXPECT_EQ(a.dst, b.dst);
  EXPECT_EQ(a.d_w, b.d_w);
}

TEST(CpuBf16, ConvolutionReadsBf16OperandsAndAccumulatesInF32) {
  XO_NEEDS_BF16_UNIT();
  Conv2dShape s;
  s.batch = 4;
  s.in_channels = 8;
  s.height = s.width = 10;
  s.out_channels = 16;
  s.kernel = 3;
  s.padding = 1;
  auto run = [&](Backend& be, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>& g) {
    auto k = be.conv2d(s);
    Tensor src(be, x), weights(be, w), bias(be, std::vector<float>(16, 0.5f)), dst(be, g.size()),
        d_dst(be, g), d_w(be, w.size()), d_b(be, 16), d_x(be, x.size());
    k->forward(src.p(), weights.p(), bias.p(), dst.p());
    k->backward(src.p(), weights.p(), dst.p(), d_dst.p(), d_w.p(), d_b.p(), d_x.p());
    return std::vector<std::vector<float>>{dst.host(), d_x.host(), d_w.host(), d_b.host()};
  };
  auto f32 = make_backend(parse_device("cpu", 1, "f32"));
  auto bf16 = make_backend(parse_device("cpu", 1, "bf16"));
  Rng rng(11);
  const auto x = uniform(rng, 4 * 8 * 100), w = uniform(rng, 16 * 8 * 9), g = uniform(rng, 6400);
  const auto got = run(*bf16, x, w, g), exact = run(*f32, x, w, g);
  const auto round = run(*f32, rounded(x), rounded(w), rounded(g));
  const char* names[] = {"dst", "d_src", "d_W"};
  for (int i = 0; i < 3; ++i) expect_bf16_products(names[i], got[i], round[i], exact[i]);
  // oneDNN sums the bias gradient from the bf16 d_dst it reads (as PyTorch's autocast does).
  EXPECT_LE(difference(got[3], round[3]), kSameProduct) << "d_bias";
}

// The LSTM rounds h to bf16 at every step inside its recurrence, so no f32 run reproduces it: its
// output is checked against a double-precision reference whose products read rounded operands,
// its gradients against the f32 kernel within bf16's reach.
TEST(CpuBf16, LstmProductsReadBf16Operands) {
  XO_NEEDS_BF16_UNIT();
  LstmShape s;
  s.batch = 4;
  s.steps = 5;
  s.input = 12;
  s.hidden = 24;
  s.layers = 2;
  s.sequence = true;
  const int64_t B = 4, T = 5, H = 24, G = 96;
  Rng rng(5);
  std::vector<std::vector<float>> in = {uniform(rng, B * T * 12)};
  for (int64_t k = 0; k < 2; ++k) {
    const int64_t I = k == 0 ? 12 : H;
    in.push_back(uniform(rng, G * I));
    in.push_back(uniform(rng, G * H));
    in.push_back(uniform(rng, G));
    in.push_back(uniform(rng, G));
  }
  const auto g = uniform(rng, B * T * H);
  auto run = [&](Backend& be) {
    auto kernel = be.lstm(s);
    std::vector<Tensor> t;
    for (const auto& v : in) t.emplace_back(be, v);
    std::vector<Tensor> grads;
    for (size_t i = 1; i < in.size(); ++i) grads.emplace_back(be, in[i].size());
    std::vector<LstmLayerParams> p;
    std::vector<LstmLayerGrads> gr;
    for (int k = 0; k < 2; ++k) {
      p.push_back({t[1 + 4 * k].p(), t[2 + 4 * k].p(), t[3 + 4 * k].p(), t[4 + 4 * k].p()});
      gr.push_back(
          {grads[4 * k].p(), grads[4 * k + 1].p(), grads[4 * k + 2].p(), grads[4 * k + 3].p()});
    }
    Tensor dst(be, static_cast<size_t>(B * T * H)), d_dst(be, g), d_src(be, in[0].size());
    kernel->forward(t[0].p(), p.data(), dst.p());
    kernel->backward(t[0].p(), p.data(), d_dst.p(), gr.data(), d_src.p());
    std::vector<std::vector<float>> out = {dst.host(), d_src.host()};
    for (const auto& x : grads) out.push_back(x.host());
    return out;
  };
  // The forward in double, each product's operands rounded to bf16.
  std::vector<float> x = in[0];
  int64_t I = 12;
  for (int64_t k = 0; k < 2; ++k) {
    const auto w_ih = rounded(in[1 + 4 * k]), w_hh = rounded(in[2 + 4 * k]);
    const auto &b_ih = in[3 + 4 * k], &b_hh = in[4 + 4 * k];
    std::vector<float> out(static_cast<size_t>(B * T * H));
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> c(H, 0.0);
      std::vector<float> h(H, 0.0f);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> gate(G);
        for (int64_t r = 0; r < G; ++r) {
          double acc = double{b_ih[r]} + b_hh[r];
          for (int64_t j = 0; j < I; ++j)
            acc += double{w_ih[r * I + j]} * round_bf16(x[(b * T + t) * I + j]);
          for (int64_t j = 0; j < H; ++j) acc += double{w_hh[r * H + j]} * round_bf16(h[j]);
          gate[r] = acc;
        }
        auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
        for (int64_t j = 0; j < H; ++j) {
          c[j] = sig(gate[H + j]) * c[j] + sig(gate[j]) * std::tanh(gate[2 * H + j]);
          h[j] = static_cast<float>(sig(gate[3 * H + j]) * std::tanh(c[j]));
          out[(b * T + t) * H + j] = h[j];
        }
      }
    }
    x = out;
    I = H;
  }
  auto f32 = make_backend(parse_device("cpu", 1, "f32"));
  auto bf16 = make_backend(parse_device("cpu", 1, "bf16"));
  const auto got = run(*bf16), exact = run(*f32);
  EXPECT_LE(difference(got[0], x), 1e-4) << "h against the rounded-operand reference";
  EXPECT_GE(difference(got[0], exact[0]), kBf16Moved) << "h: not computed in bf16";
  for (size_t i = 1; i < got.size(); ++i) {
    SCOPED_TRACE(fmt::format("gradient {}", i));
    EXPECT_LE(difference(got[i], exact[i]), 3e-2);  // bf16 keeps 8 bits: about 0.4% per rounding
    EXPECT_GE(difference(got[i], exact[i]), kBf16Moved);
  }
}

// The optimizer writes the bf16 copy of the parameters it updates, and the next products read it
// instead of converting the weights again: the copy is what they read even after the parameters
// are changed behind the backend's back (as nothing in crossover does), and a write through the
// backend (a checkpoint restored, weights loaded) or a buffer freed makes them convert again.
TEST(CpuBf16, ProductsReadTheOptimizersCopyUntilTheWeightsAreWrittenElsewhere) {
  XO_NEEDS_BF16_UNIT();
  auto be = make_backend(parse_device("cpu", 1, "bf16"));
  const LinearShape s{.batch = 8, .in_features = 40, .out_features = 48, .has_bias = false};
  Rng rng(13);
  const auto x = uniform(rng, 8 * 40), w = uniform(rng, 48 * 40), g = uniform(rng, 48 * 40);
  // What the forward computes from weights `v`, converted by the kernel itself (a fresh backend).
  auto forward_of = [&](const std::vector<float>& v) {
    auto fresh = make_backend(parse_device("cpu", 1, "bf16"));
    return run_linear(*fresh, s, x, v, std::vector<float>(8 * 48, 0.0f)).dst;
  };
  auto kernel = be->linear(s);
  Tensor src(*be, x), dst(*be, static_cast<size_t>(8 * 48));
  auto params = std::make_unique<Tensor>(*be, w);
  Tensor grads(*be, g);
  auto forward = [&] {
    kernel->forward(src.p(), params->p(), nullptr, dst.p());
    return dst.host();
  };
  OptimizerSettings sgd;
  sgd.lr = 0.5;
  auto optimizer = be->optimizer(sgd, static_cast<int64_t>(w.size()));
  EXPECT_EQ(optimizer->weights_copy_bytes(), sizeof(uint16_t) * w.size());
  EXPECT_EQ(forward(), forward_of(w)) << "before any update: converted by the kernel";
  optimizer->step(params->p(), grads.p());
  const std::vector<float> updated = params->host();
  EXPECT_NE(updated, w);
  EXPECT_EQ(forward(), forward_of(updated)) << "after the update: the optimizer's copy";
  std::fill_n(params->p(), w.size(), 0.0f);  // behind the backend's back
  EXPECT_EQ(forward(), forward_of(updated)) << "the products read the copy, not the parameters";
  be->upload(params->p(), w.data(), sizeof(float) * w.size());
  EXPECT_EQ(forward(), forward_of(w)) << "an upload makes the copy stale";
  optimizer->step(params->p(), grads.p());
  const std::vector<float> again = params->host();
  EXPECT_EQ(forward(), forward_of(again));
  // The buffer freed and another in its place (the allocator may hand out the same address).
  params.reset();
  params = std::make_unique<Tensor>(*be, g);
  EXPECT_EQ(forward(), forward_of(g));
}

// A fused group's Linear reads its models' copies where their optimizers keep them in one buffer
// laid out as the parameters are (train_fused moves them there): all of them current, the kernel
// converts nothing; one of them stale, it converts every model's weights again.
TEST(CpuBf16, AFusedGroupsLinearReadsItsModelsCopiesFromOneBuffer) {
  XO_NEEDS_BF16_UNIT();
  auto be = make_backend(parse_device("cpu", 1, "bf16"));
  constexpr int64_t kModels = 3, kIn = 40, kOut = 48, kBatch = 8;
  // Each model: its weights (no bias), then room for a bias the kernel requires of its stride.
  constexpr int64_t kFlat = kOut * kIn, kStride = kFlat + kOut + 16;
  const LinearShape s{.batch = kBatch,
                      .in_features = kIn,
                      .out_features = kOut,
                      .has_bias = false,
                      .models = kModels,
                      .model_stride = kStride};
  Rng rng(17);
  const auto x = uniform(rng, kModels * kBatch * kIn);
  const auto w = uniform(rng, kModels * kStride), g = uniform(rng, kModels * kStride);
  const size_t out = kModels * kBatch * kOut;
  // What the kernel computes from parameters `v`, converted by itself (a fresh backend).
  auto forward_of = [&](const std::vector<float>& v) {
    auto fresh = make_backend(parse_device("cpu", 1, "bf16"));
    auto kernel = fresh->linear(s);
    Tensor src(*fresh, x), params(*fresh, v), dst(*fresh, out);
    kernel->forward(src.p(), params.p(), nullptr, dst.p());
    return dst.host();
  };
  auto kernel = be->linear(s);
  Tensor src(*be, x), params(*be, w), grads(*be, g), dst(*be, out);
  auto forward = [&] {
    kernel->forward(src.p(), params.p(), nullptr, dst.p());
    return dst.host();
  };
  OptimizerSettings sgd;
  sgd.lr = 0.5;
  const DeviceBuffer copies = be->allocate(sizeof(uint16_t) * kModels * kStride);
  std::vector<std::unique_ptr<OptimizerKernel>> optimizers;
  for (int64_t t = 0; t < kModels; ++t) {
    optimizers.push_back(be->optimizer(sgd, kFlat));
    optimizers.back()->swap_weights_copy(
        copies.view(sizeof(uint16_t) * t * kStride, sizeof(uint16_t) * kFlat));
  }
  auto step_all = [&] {
    for (int64_t t = 0; t < kModels; ++t)
      optimizers[t]->step(params.p() + t * kStride, grads.p() + t * kStride);
  };
  step_all();
  const std::vector<float> updated = params.host();
  EXPECT_NE(updated, w);
  EXPECT_EQ(forward(), forward_of(updated)) << "after the updates: the optimizers' copies";
  std::fill_n(params.p(), updated.size(), 0.0f);  // behind the backend's back
  EXPECT_EQ(forward(), forward_of(updated)) << "the products read the copies, not the parameters";
  // Model 1's weights written through the backend: its copy is stale, so all are converted.
  std::vector<float> now = params.host();
  std::copy(w.begin() + kStride, w.begin() + kStride + kFlat, now.begin() + kStride);
  be->upload(params.p() + kStride, w.data() + kStride, sizeof(float) * kFlat);
  EXPECT_EQ(forward(), forward_of(now)) << "one stale copy: every model's weights converted";
  step_all();
  EXPECT_EQ(forward(), forward_of(params.host()));
}

// A CPU without either unit (or oneDNN held below them) refuses --precision bf16, naming what is
// missing; the AVX-512 BF16 path runs where oneDNN is held to it (an AMX CPU's other path).
TEST(CpuBf16Cli, ACpuWithoutBf16UnitsRefusesBf16NamingWhatIsMissing) {
  const auto refused =
      testing::run_cli("--version >/dev/null && ONEDNN_MAX_CPU_ISA=AVX2 " +
                       std::string(CROSSOVER_BINARY) + " train disc-4 --steps 2 --precision bf16");
  EXPECT_NE(refused.status, 0) << refused.output;
  EXPECT_NE(refused.output.find("--precision bf16 on the CPU needs AMX (amx_bf16) or AVX-512 "
                                "BF16 (avx512_bf16)"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("ONEDNN_MAX_CPU_ISA=AVX2"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--precision f32"), std::string::npos) << refused.output;
}

TEST(CpuBf16Cli, TheAvx512Bf16PathTrainsWhereOneDnnIsHeldToIt) {
  XO_NEEDS_BF16_UNIT();
  const auto r =
      testing::run_cli("--version >/dev/null && ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 " +
                       std::string(CROSSOVER_BINARY) + " train disc-10 --steps 3 --precision bf16");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("bf16 on AVX-512 BF16"), std::string::npos) << r.output;
}

// A run on cpu:bf16 replays bit-identically here, and a machine whose CPU cannot run bf16 refuses
// to replay it, saying why.
TEST(CpuBf16Cli, ARunAtBf16ReplaysAndACpuWithoutTheUnitsRefusesIt) {
  XO_NEEDS_BF16_UNIT();
  const testing::TempDir dir("bf16_replay");
  const std::string out = (dir.path() / "r").string();
  const auto ran =
      testing::run_cli("run --models disc-9 --devices cpu:bf16 --epochs 2 --out '" + out + "'");
  ASSERT_EQ(ran.status, 0) << ran.output;
  const auto again = testing::run_cli("replay '" + out + "/results.json'");
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("1 bit-identical"), std::string::npos) << again.output;
  const auto refused = testing::run_cli("--version >/dev/null && ONEDNN_MAX_CPU_ISA=AVX2 " +
                                        std::string(CROSSOVER_BINARY) + " replay '" + out +
                                        "/results.json' --out '" + out + "-2'");
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("cpu:bf16: this CPU has neither AMX nor AVX-512 BF16"),
            std::string::npos)
      << refused.output;
}

}  // namespace
}  // namespace xo
