// Helpers shared by the CPU op families that run oneDNN primitives: thread limits, the eltwise
// algorithm of an activation, and a matmul whose memory objects are bound once.
#pragma once

#include <omp.h>

#include <cstdint>
#include <cstring>
#include <dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "backend/cpu/bf16_math.h"
#include "backend/cpu/bf16_weights.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/dnnl_check.h"
#include "core/error.h"

namespace xo::cpu {

// The data types the CPU kernels hand oneDNN: f32 everywhere, and at --precision bf16 the
// operands of matmuls and convolutions (bf16 copies: the weights' kept by their optimizer, the
// rest made per step; products accumulate in f32).
inline constexpr auto f32 = dnnl::memory::data_type::f32;
inline constexpr auto bf16 = dnnl::memory::data_type::bf16;

// dst[i] = the bf16 bits of src[i] for i < n (bf16_row on each thread's block).
inline void to_bf16(const float* src, uint16_t* dst, int64_t n) {
  parallel_for(n, [&](int64_t b, int64_t e) { bf16_row(src + b, dst + b, e - b); });
}

// A bf16 copy of f32 data (an operand of a bf16 product), `floats` long, allocated once at plan
// time and filled by `from` at each use. Element by element, so the same values for any thread
// count.
class Bf16Copy {
 public:
  Bf16Copy() = default;
  explicit Bf16Copy(int64_t floats) : bits_(static_cast<size_t>(floats)) {}
  // Converts src[0, floats) and returns the copy.
  const uint16_t* from(const float* src) {
    to_bf16(src, bits_.data(), static_cast<int64_t>(bits_.size()));
    return bits_.data();
  }
  // The weights src[0, floats) as bf16: the copy their optimizer keeps where it is current
  // (`kept`), else converted here. last() returns it until the next call (the backward's operand).
  // models > 1: the weights of a fused group's models, `stride` floats apart, each model's block
  // the last floats - (models - 1) * stride (the floats between them are not read).
  const uint16_t* weights(const float* src, const Bf16Weights& kept, int64_t models = 1,
                          int64_t stride = 0) {
    const auto floats = static_cast<int64_t>(bits_.size());
    last_ = kept.find(src, floats - (models - 1) * stride, models, stride);
    if (!last_) last_ = from(src);
    return last_;
  }
  const uint16_t* last() const { return last_; }
  uint16_t* data() { return bits_.data(); }
  const uint16_t* data() const { return bits_.data(); }

 private:
  std::vector<uint16_t> bits_;
  const uint16_t* last_ = nullptr;
};

// A descriptor of the same dims and strides in another data type: a matmul operand as bf16.
inline dnnl::memory::desc as_type(const dnnl::memory::desc& md, dnnl::memory::data_type type) {
  dnnl::memory::desc out = md;
  out.data.data_type = static_cast<dnnl_data_type_t>(type);
  return out;
}

inline dnnl::algorithm eltwise_algorithm(Activation act) {
  switch (act) {
    case Activation::ReLU:
      return dnnl::algorithm::eltwise_relu;
    case Activation::Tanh:
      return dnnl::algorithm::eltwise_tanh;
    case Activation::Sigmoid:
      return dnnl::algorithm::eltwise_logistic;
    default:
      break;
  }
  // None has no eltwise step, and the activations that do not fuse have no post-op here.
  XO_ASSERT(false && "no eltwise algorithm for an activation that is not fused");
}

// Runs the enclosed oneDNN calls with at most `threads` OpenMP threads (0: leave as is). oneDNN's
// OpenMP runtime reads the limit when a primitive is created and when it runs.
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads) : saved_(threads > 0 ? omp_get_max_threads() : 0) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~ThreadLimit() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int saved_;
};

// A matmul primitive with its memory objects bound once; each call only swaps data pointers.
// Matmuls smaller than kSingleThreadMatmulFlops run on one thread: there the OpenMP fork/join
// costs more than the work it splits (measured: cpu_backend.h).
class BoundMatmul {
 public:
  BoundMatmul() = default;
  BoundMatmul(const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
              const dnnl::memory::desc* bias, const dnnl::memory::desc& dst,
              dnnl::primitive_attr attr, const dnnl::engine& engine, bool in_shard) {
    // [..., M, K] x [..., K, N]: the batch dimensions (fused models) multiply the work.
    const dnnl::memory::dims& a = src.dims();
    const dnnl::memory::dims& b = weights.dims();
    double flops = 2.0 * static_cast<double>(b[b.size() - 1]);
    for (const auto d : a) flops *= static_cast<double>(d);
    threads_ = in_shard || flops < kSingleThreadMatmulFlops ? 1 : 0;
    ThreadLimit limit(threads_);
    // A user-owned scratchpad, sized here, keeps the training step free of allocations.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto desc =
        bias ? dnnl::matmul::desc(src, weights, *bias, dst) : dnnl::matmul::desc(src, weights, dst);
    const auto pd = XO_DNNL_CHECK(dnnl::matmul::primitive_desc(desc, attr, engine));
    primitive_ = XO_DNNL_CHECK(dnnl::matmul(pd));
    src_ = dnnl::memory(src, engine, DNNL_MEMORY_NONE);
    weights_ = dnnl::memory(weights, engine, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(dst, engine, DNNL_MEMORY_NONE);
    args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}};
    if (bias) {
      bias_ = dnnl::memory(*bias, engine, DNNL_MEMORY_NONE);
      args_.emplace(DNNL_ARG_BIAS, bias_);
    }
    if (pd.scratchpad_desc().get_size() > 0) {
      scratchpad_ = dnnl::memory(pd.scratchpad_desc(), engine);  // allocated once, here
      args_.emplace(DNNL_ARG_SCRATCHPAD, scratchpad_);
    }
  }

  // src and weights are f32 or bf16 (uint16_t bits) as the descriptors said; dst is f32.
  void run(const dnnl::stream& stream, const void* src, const void* weights, const float* bias,
           float* dst) {
    ThreadLimit limit(threads_);
    src_.set_data_handle(const_cast<void*>(src));
    weights_.set_data_handle(const_cast<void*>(weights));
    if (bias) bias_.set_data_handle(const_cast<float*>(bias));
    dst_.set_data_handle(dst);
    XO_DNNL_CHECK(primitive_.execute(stream, args_));
  }

 private:
  dnnl::matmul primitive_;
  dnnl::memory src_, weights_, bias_, dst_, scratchpad_;
  std::unordered_map<int, dnnl::memory> args_;
  int threads_ = 0;
};

// A tensor that a primitive may want in its own (blocked) layout while crossover keeps it plain.
// `user` is bound to crossover's buffer per call; when the primitive chose another layout, a buffer
// in that layout is allocated here, at plan time, with the reorders both ways. `memory()` is what
// to bind in the primitive's arguments (fixed for the object's life, so argument maps are built
// once).
class Staged {
 public:
  Staged() = default;
  Staged(const dnnl::memory::desc& user, const dnnl::memory::desc& wanted,
         const dnnl::engine& engine)
      : user_(user, engine, DNNL_MEMORY_NONE) {
    if (wanted != user) {
      internal_ = dnnl::memory(wanted, engine);
      to_internal_ = XO_DNNL_CHECK(dnnl::reorder(user_, internal_));
      to_user_ = XO_DNNL_CHECK(dnnl::reorder(internal_, user_));
      staged_ = true;
    }
  }
  const dnnl::memory& memory() const { return staged_ ? internal_ : user_; }
  // An input: points the user memory at `data` and reorders it in when needed.
  void load(const dnnl::stream& stream, const float* data) {
    user_.set_data_handle(const_cast<float*>(data));
    if (staged_) XO_DNNL_CHECK(to_internal_.execute(stream, user_, internal_));
  }
  // An output: point at `data` before the primitive runs, store() after it.
  void bind(float* data) { user_.set_data_handle(data); }
  void store(const dnnl::stream& stream) {
    if (staged_) XO_DNNL_CHECK(to_user_.execute(stream, internal_, user_));
  }

 private:
  dnnl::memory user_, internal_;
  dnnl::reorder to_internal_, to_user_;
  bool staged_ = false;
};

// A user-owned scratchpad for a primitive (allocated here, at plan time) added to its arguments.
template <typename PrimitiveDesc>
void add_scratchpad(const PrimitiveDesc& pd, const dnnl::engine& engine,
                    std::unordered_map<int, dnnl::memory>& args) {
  if (pd.scratchpad_desc().get_size() > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), engine));
  }
}

}  // namespace xo::cpu
