// oneDNN's matmul alone, on the shapes of a training step at batch 100 (disc-12's widest layer),
// outside crossover: what the library gives each product, to tell what bounds a step.
//
//   crossover_onednn_products threads            one thread against two, alternated in rounds in
//                                                one process, f32 and bf16 (the operands already
//                                                in the precision: no conversion timed)
//   crossover_onednn_products weight-gradient    a weight gradient's product (out x rows x in,
//                                                the f32 gradient written whole) as its rows grow,
//                                                f32 against bf16, on OMP_NUM_THREADS threads
//   crossover_onednn_products layouts            a weight read as stored (plain) against read in
//                                                the layout oneDNN picks for it (packed once,
//                                                outside the timing), on OMP_NUM_THREADS threads
//   crossover_onednn_products split              each product on two threads as oneDNN splits it,
//                                                against its output in two halves, each a
//                                                one-thread product on a thread of ours
//   crossover_onednn_products step [L] [f32|bf16]
//                                                every product of a disc-L training step
//                                                (default disc-12, bf16) in crossover's layouts,
//                                                its caches evicted before each as in a step,
//                                                against the 2048^3 peak probed in the same round
//
// Each figure is the median of its calls (and, for `threads`, the median over rounds of each
// round's median). docs/benchmarks.md, "An AMX Xeon".
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <vector>

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

struct Product {
  const char* what;
  memory::dim m, k, n;
  Tag a, b;  // ab: as stored; ba: transposed (a weight read as W^T, activations as X^T)
};

// disc-12's widest layer (2048 -> 4096) and the one before it, at batch 100, as crossover lays
// them out (cpu/linear.cpp).
const Product kWideForward{"forward 100x2048x4096", 100, 2048, 4096, Tag::ab, Tag::ba};
const Product kWideBackwardData{"backward data 100x4096x2048", 100, 4096, 2048, Tag::ab, Tag::ab};
const Product kWideWeightGradient{
    "weight gradient 4096x100x2048", 4096, 100, 2048, Tag::ba, Tag::ab};
const Product kForward1024{"forward 100x1024x2048", 100, 1024, 2048, Tag::ab, Tag::ba};

struct Prepared {
  dnnl::matmul primitive;
  memory a, b, c;
};

// A primitive made under the current thread count (oneDNN's brgemm plans its split then).
// `packed`: the weights in the layout the primitive picks (format_tag::any) instead of p.b.
Prepared prepare(const dnnl::engine& engine, const Product& p, Type type, bool packed = false) {
  const memory::desc a({p.m, p.k}, type, p.a), b({p.k, p.n}, type, packed ? Tag::any : p.b),
      c({p.m, p.n}, Type::f32, Tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
  Prepared out{dnnl::matmul(pd), memory(a, engine), memory(pd.weights_desc(), engine),
               memory(c, engine)};
  for (memory* m : {&out.a, &out.b}) {
    std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
  }
  return out;
}

// Writes 512 MiB between timed calls where CROSSOVER_BENCH_COLD is set: the operands then come
// from memory, as in a training step whose other layers pass in between.
void evict_caches(bool force = false) {
  static const bool cold = std::getenv("CROSSOVER_BENCH_COLD") != nullptr;
  if (!cold && !force) return;
  static std::vector<float> junk(size_t{128} << 20);
#pragma omp parallel for
  for (size_t i = 0; i < junk.size(); ++i) junk[i] += 1.0f;
}

double median_ms(dnnl::stream& stream, Prepared& p, int calls) {
  std::vector<double> ms;
  for (int i = 0; i < calls; ++i) {
    evict_caches();
    const auto t0 = std::chrono::steady_clock::now();
    p.primitive.execute(stream,
                        {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}});
    stream.wait();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + calls / 2, ms.end());
  return ms[static_cast<size_t>(calls / 2)];
}

double gflop(const Product& p) { return 2.0 * static_cast<double>(p.m * p.k * p.n) / 1e9; }

// Two ways of running one product, each timed in six rounds alternated with the other (the
// machine's speed drifts) and printed as the medians over rounds, each's rate and b's over a's.
template <typename TimeA, typename TimeB>
void print_alternated(Type type, const Product& p, const char* a_name, TimeA&& time_a,
                      const char* b_name, TimeB&& time_b, const char* ratio_name) {
  std::vector<double> ta, tb;
  for (int round = 0; round < 6; ++round) {
    ta.push_back(time_a());
    tb.push_back(time_b());
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  const double a = ta[3], b = tb[3];
  fmt::print("{:<4} {:<30} {} {:8.3f} ms ({:6.1f} GFLOP/s)  {} {:8.3f} ms ({:6.1f})  {} {:.2f}\n",
             type == Type::f32 ? "f32" : "bf16", p.what, a_name, a, gflop(p) / a * 1e3, b_name, b,
             gflop(p) / b * 1e3, ratio_name, b / a);
}

void threads_table(const dnnl::engine& engine, dnnl::stream& stream) {
  const Product products[] = {kWideForward,
                              kWideBackwardData,
                              kWideWeightGradient,
                              kForward1024,
                              {"square 2048", 2048, 2048, 2048, Tag::ab, Tag::ab}};
  for (const Type type : {Type::f32, Type::bf16}) {
    for (const Product& p : products) {
      omp_set_num_threads(1);
      Prepared one = prepare(engine, p, type);
      omp_set_num_threads(2);
      Prepared two = prepare(engine, p, type);
      print_alternated(
          type, p, "1 thread",
          [&] {
            omp_set_num_threads(1);
            return median_ms(stream, one, 7);
          },
          "2 threads",
          [&] {
            omp_set_num_threads(2);
            return median_ms(stream, two, 7);
          },
          "2/1");
    }
  }
}

void weight_gradient_table(const dnnl::engine& engine, dnnl::stream& stream) {
  fmt::print("{} threads\n", omp_get_max_threads());
  for (const memory::dim rows : {16, 32, 50, 64, 100, 128}) {
    for (const auto& [out, in] : {std::pair<memory::dim, memory::dim>{4096, 2048}, {1024, 512}}) {
      const Product p{"", out, rows, in, Tag::ba, Tag::ab};
      Prepared f = prepare(engine, p, Type::f32), b = prepare(engine, p, Type::bf16);
      const double tf = median_ms(stream, f, 15), tb = median_ms(stream, b, 15);
      fmt::print(
          "weight gradient {:4}x{:3}x{:4} ({:5.1f} MiB written)  f32 {:8.3f} ms  bf16 "
          "{:8.3f} ms  bf16/f32 {:.2f}\n",
          out, rows, in, 4.0 * static_cast<double>(out * in) / (1 << 20), tf, tb, tb / tf);
    }
  }
}

void layouts_table(const dnnl::engine& engine, dnnl::stream& stream) {
  fmt::print("{} threads\n", omp_get_max_threads());
  const Product products[] = {kWideForward,
                              kWideBackwardData,
                              kForward1024,
                              {"forward 128x784x512", 128, 784, 512, Tag::ab, Tag::ba}};
  for (const Type type : {Type::f32, Type::bf16}) {
    for (const Product& p : products) {
      Prepared plain = prepare(engine, p, type), packed = prepare(engine, p, type, true);
      print_alternated(
          type, p, "plain", [&] { return median_ms(stream, plain, 7); }, "packed",
          [&] { return median_ms(stream, packed, 7); }, "packed/plain");
    }
  }
}

// A product's output in `parts` blocks along M (split_m) or N, each a one-thread matmul of its
// own run on a thread of ours: one primitive (user scratchpad), a scratchpad and memory objects
// per part. A and B are read in place through strides; C is [M, N] row-major.
struct SplitProduct {
  dnnl::matmul primitive;
  std::vector<memory> a, b, c, scratch;
};

// The strides of a [rows, cols] matrix stored as `t` (ab: row-major; ba: transposed).
memory::dims strides_of(Tag t, memory::dim rows, memory::dim cols) {
  return t == Tag::ab ? memory::dims{cols, 1} : memory::dims{1, rows};
}

SplitProduct prepare_split(const dnnl::engine& engine, const Product& p, Type type, int parts,
                           bool split_m, const Prepared& whole) {
  const memory::dim m = split_m ? p.m / parts : p.m, n = split_m ? p.n : p.n / parts;
  // Strides of the whole operands (A [M, K], B [K, N] in their tags, C [M, N] ab).
  const memory::desc a({m, p.k}, type, strides_of(p.a, p.m, p.k)),
      b({p.k, n}, type, strides_of(p.b, p.k, p.n)), c({m, n}, Type::f32, memory::dims{p.n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  omp_set_num_threads(1);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
  omp_set_num_threads(parts);
  SplitProduct out{dnnl::matmul(pd), {}, {}, {}, {}};
  const memory::dim el = type == Type::f32 ? 4 : 2;  // bytes an element
  for (int i = 0; i < parts; ++i) {
    // The block's first element in each whole operand.
    const memory::dim a_off = split_m ? (p.a == Tag::ab ? i * m * p.k : i * m) : 0;
    const memory::dim b_off = split_m ? 0 : (p.b == Tag::ab ? i * n : i * n * p.k);
    const memory::dim c_off = split_m ? i * m * p.n : i * n;
    auto* wa = static_cast<char*>(whole.a.get_data_handle()) + a_off * el;
    auto* wb = static_cast<char*>(whole.b.get_data_handle()) + b_off * el;
    auto* wc = static_cast<char*>(whole.c.get_data_handle()) + c_off * 4;
    out.a.emplace_back(a, engine, wa);
    out.b.emplace_back(b, engine, wb);
    out.c.emplace_back(c, engine, wc);
    out.scratch.emplace_back(pd.scratchpad_desc(), engine);
  }
  return out;
}

double split_median_ms(const dnnl::engine& engine, SplitProduct& s, int calls) {
  const int parts = static_cast<int>(s.a.size());
  std::vector<double> ms;
  for (int call = 0; call < calls; ++call) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(parts)
    {
      const int i = omp_get_thread_num();
      dnnl::stream stream(engine);
      s.primitive.execute(stream, {{DNNL_ARG_SRC, s.a[i]},
                                   {DNNL_ARG_WEIGHTS, s.b[i]},
                                   {DNNL_ARG_DST, s.c[i]},
                                   {DNNL_ARG_SCRATCHPAD, s.scratch[i]}});
      stream.wait();
    }
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + calls / 2, ms.end());
  return ms[static_cast<size_t>(calls / 2)];
}

void split_table(const dnnl::engine& engine, dnnl::stream& stream) {
  struct Case {
    Product p;
    bool split_m;
  };
  const Case cases[] = {
      {kWideForward, false},
      {kWideBackwardData, false},
      {kWideWeightGradient, true},
      {kForward1024, false},
      {{"weight gradient 2048x100x1024", 2048, 100, 1024, Tag::ba, Tag::ab}, true},
  };
  for (const Type type : {Type::f32, Type::bf16}) {
    for (const Case& c : cases) {
      omp_set_num_threads(2);
      Prepared whole = prepare(engine, c.p, type);
      SplitProduct split = prepare_split(engine, c.p, type, 2, c.split_m, whole);
      print_alternated(
          type, c.p, "oneDNN's 2 threads", [&] { return median_ms(stream, whole, 7); }, "halves",
          [&] { return split_median_ms(engine, split, 7); }, "halves/oneDNN");
    }
  }
}

// Every product of a disc-`layers` step at batch 100 in crossover's layouts (cpu/linear.cpp):
// the forward reads W [out, in] as W^T (ba); backward data d_src = d_pre W; the weight gradient
// d_W = d_pre^T (ba) x src. In rounds: the 2048^3 probe (as `crossover devices` probes the peak),
// then each product once with the caches evicted (a step's other layers pass between its
// products). Per kind, the products' time and their FLOPs' rate as a fraction of the round's
// probe: medians over rounds.
void step_table(int layers, Type type) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  struct Timed {
    Product p;
    int kind;  // 0 forward, 1 backward data, 2 weight gradient
    Prepared prepared;
  };
  std::vector<Timed> products;
  memory::dim in = 2;
  for (int l = 0; l < layers; ++l) {
    const memory::dim out = l + 1 < layers ? in * 2 : 2;
    products.push_back({{"", 100, in, out, Tag::ab, Tag::ba}, 0, {}});
    if (l > 0) products.push_back({{"", 100, out, in, Tag::ab, Tag::ab}, 1, {}});
    products.push_back({{"", out, 100, in, Tag::ba, Tag::ab}, 2, {}});
    in = out;
  }
  for (Timed& t : products) t.prepared = prepare(engine, t.p, type);
  const Product square{"", 2048, 2048, 2048, Tag::ab, Tag::ab};
  Prepared probe = prepare(engine, square, type);
  constexpr int kRounds = 7;
  const char* kinds[] = {"forward", "backward data", "weight gradient"};
  std::vector<double> peak, ms[3], fraction[3], all_ms, all_fraction;
  for (int round = 0; round < kRounds; ++round) {
    const double probe_ms = median_ms(stream, probe, 3);
    const double gflops = gflop(square) / probe_ms * 1e3;
    peak.push_back(gflops);
    double t[3] = {}, f[3] = {};
    for (Timed& p : products) {
      evict_caches(true);
      t[p.kind] += median_ms(stream, p.prepared, 1);
      f[p.kind] += gflop(p.p);
    }
    for (int k = 0; k < 3; ++k) {
      ms[k].push_back(t[k]);
      fraction[k].push_back(f[k] / t[k] * 1e3 / gflops);
    }
    all_ms.push_back(t[0] + t[1] + t[2]);
    all_fraction.push_back((f[0] + f[1] + f[2]) / all_ms.back() * 1e3 / gflops);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  fmt::print(
      "disc-{} at {}, {} threads: the {}^3 probe {:.1f} GFLOP/s (median of {} rounds; {:.1f}"
      " to {:.1f})\n",
      layers, type == Type::f32 ? "f32" : "bf16", omp_get_max_threads(), 2048, median(peak),
      kRounds, *std::min_element(peak.begin(), peak.end()),
      *std::max_element(peak.begin(), peak.end()));
  for (int k = 0; k < 3; ++k) {
    fmt::print("  {:<16} {:8.3f} ms a step  {:5.1f}% of the round's probe\n", kinds[k],
               median(ms[k]), 100 * median(fraction[k]));
  }
  fmt::print("  {:<16} {:8.3f} ms a step  {:5.1f}% of the round's probe\n", "all products",
             median(all_ms), 100 * median(all_fraction));
}

}  // namespace

int main(int argc, char** argv) {
  const char* table = argc >= 2 ? argv[1] : "";
  if (std::strcmp(table, "step") == 0) {
    const int layers = argc >= 3 ? std::atoi(argv[2]) : 12;
    const bool f32_only = argc >= 4 && std::strcmp(argv[3], "f32") == 0;
    if (layers < 2 || layers > 12 || (argc >= 4 && !f32_only && std::strcmp(argv[3], "bf16"))) {
      fmt::print(stderr, "usage: crossover_onednn_products step [2..12] [f32|bf16]\n");
      return 2;
    }
    step_table(layers, f32_only ? Type::f32 : Type::bf16);
    return 0;
  }
  using Table = void (*)(const dnnl::engine&, dnnl::stream&);
  const std::pair<const char*, Table> tables[] = {
      {"threads", threads_table},
      {"weight-gradient", weight_gradient_table},
      {"layouts", layouts_table},
      {"split", split_table},
  };
  for (const auto& [name, run] : tables) {
    if (std::strcmp(table, name) == 0) {
      dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      dnnl::stream stream(engine);
      run(engine, stream);
      return 0;
    }
  }
  fmt::print(stderr,
             "usage: crossover_onednn_products threads|weight-gradient|layouts|split|step [L] "
             "[f32|bf16]\n");
  return 2;
  return 0;
}
