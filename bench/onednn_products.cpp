// oneDNN's matmul alone, on the shapes of a training step at batch 100 (disc-12's widest layer),
// outside crossover: what the library gives each product, to tell what bounds a step.
//
//   crossover_onednn_products threads            one thread against two, alternated in rounds in
//                                                one process, f32 and bf16 (the operands already
//                                                in the precision: no conversion timed)
//   crossover_onednn_products weight-gradient    a weight gradient's product (out x rows x in,
//                                                the f32 gradient written whole) as its rows grow,
//                                                f32 against bf16, on OMP_NUM_THREADS threads
//
// Each figure is the median of its calls (and, for `threads`, the median over rounds of each
// round's median). docs/benchmarks.md, "An AMX Xeon".
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
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

struct Prepared {
  dnnl::matmul primitive;
  memory a, b, c;
};

// A primitive made under the current thread count (oneDNN's brgemm plans its split then).
Prepared prepare(const dnnl::engine& engine, const Product& p, Type type) {
  const memory::desc a({p.m, p.k}, type, p.a), b({p.k, p.n}, type, p.b),
      c({p.m, p.n}, Type::f32, Tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
  Prepared out{dnnl::matmul(pd), memory(a, engine), memory(b, engine), memory(c, engine)};
  for (memory* m : {&out.a, &out.b}) {
    std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
  }
  return out;
}

double median_ms(dnnl::stream& stream, Prepared& p, int calls) {
  std::vector<double> ms;
  for (int i = 0; i < calls; ++i) {
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

void threads_table(const dnnl::engine& engine, dnnl::stream& stream) {
  const Product products[] = {
      {"forward 100x2048x4096", 100, 2048, 4096, Tag::ab, Tag::ba},
      {"backward data 100x4096x2048", 100, 4096, 2048, Tag::ab, Tag::ab},
      {"weight gradient 4096x100x2048", 4096, 100, 2048, Tag::ba, Tag::ab},
      {"forward 100x1024x2048", 100, 1024, 2048, Tag::ab, Tag::ba},
      {"square 2048", 2048, 2048, 2048, Tag::ab, Tag::ab},
  };
  for (const Type type : {Type::f32, Type::bf16}) {
    for (const Product& p : products) {
      omp_set_num_threads(1);
      Prepared one = prepare(engine, p, type);
      omp_set_num_threads(2);
      Prepared two = prepare(engine, p, type);
      std::vector<double> t1, t2;
      for (int round = 0; round < 6; ++round) {
        omp_set_num_threads(1);
        t1.push_back(median_ms(stream, one, 7));
        omp_set_num_threads(2);
        t2.push_back(median_ms(stream, two, 7));
      }
      std::sort(t1.begin(), t1.end());
      std::sort(t2.begin(), t2.end());
      const double a = t1[3], b = t2[3];
      fmt::print(
          "{:<4} {:<30} 1 thread {:8.3f} ms ({:6.1f} GFLOP/s)  2 threads {:8.3f} ms ({:6.1f})"
          "  2/1 {:.2f}\n",
          type == Type::f32 ? "f32" : "bf16", p.what, a, gflop(p) / a * 1e3, b, gflop(p) / b * 1e3,
          b / a);
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

}  // namespace

int main(int argc, char** argv) {
  const char* table = argc == 2 ? argv[1] : "";
  const bool threads = std::strcmp(table, "threads") == 0;
  if (!threads && std::strcmp(table, "weight-gradient") != 0) {
    fmt::print(stderr, "usage: crossover_onednn_products threads|weight-gradient\n");
    return 2;
  }
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  if (threads) {
    threads_table(engine, stream);
  } else {
    weight_gradient_table(engine, stream);
  }
  return 0;
}
