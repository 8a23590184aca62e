// Conv2d (+ fused activation) on the GPU, forward and backward, through cuDNN's legacy convolution
// API (PyTorch's Conv2d: cross-correlation, NCHW tensors, weights [out, in, k, k] = cuDNN's KCRS
// filter layout, so no reordering anywhere):
//  - forward:  cudnnConvolutionForward into dst, then one kernel of ours adds the bias and applies
//    the activation in place (cudnnConvolutionBiasActivationForward only fuses ReLU/identity and
//    ties the algorithm to IMPLICIT_PRECOMP_GEMM);
//  - backward: one pass of ours turns d_dst into the pre-activation gradient in place (from dst,
//    as activation.cu) and sums it per channel into d_bias on the way (see "Bias gradient"), then
//    cudnnConvolutionBackwardFilter (d_weights) and, when the layer below needs it,
//    cudnnConvolutionBackwardData (d_src), all with beta = 0: overwritten, as the contract says.
// Plan time does everything a step must not (steps are recorded into CUDA Graphs): descriptors
// (destroyed by their owners, without throwing), one convolution descriptor per direction (each
// carries the math type of the algorithm chosen for it), the algorithms, and one workspace
// (be.allocate) sized for the largest of the three directions, which run one at a time on the one
// stream and so share it. It also runs each direction once (warm_up()), so that cuDNN's lazy
// first-call set-up is not recorded.
//
// Precision (be.precision()): F32 sets CUDNN_FMA_MATH, because cuDNN's default lets float
// convolutions use TF32 tensor cores on Ampere and later, which would break CPU/GPU equivalence;
// F32 also avoids the FFT and Winograd algorithms where another exists, since their transforms
// round differently from a direct sum (the CPU runs oneDNN's direct convolution). TF32 and BF16
// set CUDNN_TENSOR_OP_MATH, under which float convolutions may use TF32 tensor cores (inputs
// rounded to 10 mantissa bits, f32 accumulation; PyTorch's allow_tf32 does the same). Not
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: that one also lets cuDNN convert float data to FP16,
// whose range (max 65504, subnormals below 6e-5) gradients can leave. BF16 tensors are never used
// for convolutions: the data stay f32 and a bf16 run convolves in TF32.
//
// Algorithms: measured at plan time. cudnnFind*Ex runs every candidate of a direction on scratch
// tensors of the layer's shape (a non-zero pattern: zeros can run faster than data) with a
// kMaxWorkspaceBytes scratch workspace, on the backend's stream, outside any recording (it
// synchronizes). A candidate is usable when it ran, fits the precision and needs at most
// kMaxWorkspaceBytes; in F32 FFT/Winograd only when no direct candidate is usable. Of the usable
// ones we take the fastest, unless a deterministic one (backward-filter ALGO_0/ALGO_3 and
// backward-data ALGO_0 add with atomics) is within kDeterministicSlack (1.25x) of it: then the
// fastest deterministic one. Determinism is worth a little time (a recorded and a launched step
// give the same bits, runs repeat), not any time: cuDNN's heuristic, deterministic-only choice for
// the MNIST CNN's backward filter (ALGO_1) took much of the step on an H100 (docs/benchmarks.md,
// "On an NVIDIA H100: crossover's CUDA backend vs PyTorch 2.11").
// A measured choice is kept for the process, per device, precision, direction and convolution
// geometry, and a later plan of the same geometry reuses it without measuring: near-equal
// candidates swap places from one measurement to the next, and two plans of one shape (an eager
// and a recorded run, say) must not round differently. When Find offers nothing usable, cuDNN's
// heuristic (cudnnGet*Algorithm_v7) ranks the candidates and pick() takes the first that passes,
// relaxing its wishes step by step, so that some algorithm is always found.
//
// Bias gradient: d_bias[k] = the sum of the pre-activation gradient over n and p (P = OH * OW
// positions), summed in the pass that writes it rather than by cudnnConvolutionBackwardBias (a
// second read of d_dst, and its own kernel, besides the derivative pass: docs/benchmarks.md, "On an
// NVIDIA H100: crossover's CUDA backend vs PyTorch 2.11"). Deterministic, without atomics: channel
// k's N * P values are cut into S contiguous slices, block (k, s) sums slice s in a fixed order
// (thread t every kThreads-th value from t, then a fixed tree) into partial[k][s], and a second
// small kernel adds a channel's S partials in order. S is a plan-time constant of the shape (about
// kBiasBlocks blocks in all, an H100-filling wave on MNIST's shapes, and at least kMinSliceValues
// values a slice), never of the GPU, so d_bias has the same bits on every GPU and in every run.
#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/activation_math.h"
#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;
// A deterministic algorithm is taken over a faster non-deterministic one up to this time ratio.
constexpr float kDeterministicSlack = 1.25f;
// The bias-gradient split (see the header): about 8 blocks of kThreads per SM of a 132-SM H100,
// one full wave, and enough values a block that its fixed costs stay small.
constexpr int64_t kBiasBlocks = 1024;
constexpr int64_t kMinSliceValues = 4 * kThreads;
constexpr int kWarps = kThreads / 32;

// ---- Element-wise kernels: bias + activation forward, activation derivative backward ----

// dst [N, C, plane] = act(dst + bias[c]) in place; bias may be null.
template <Activation A>
__global__ void bias_activation_kernel(float* dst, const float* bias, int64_t n, int64_t channels,
                                       int64_t plane) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float v = dst[i];
    if (bias) v += bias[(i / plane) % channels];
    dst[i] = activate<A>(v);
  }
}

// d_dst = d_dst * act'(dst) in place: the pre-activation gradient (layers without a bias).
template <Activation A>
__global__ void activation_backward_kernel(const float* dst, float* d_dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    d_dst[i] = derivative_times<A>(dst[i], d_dst[i]);
  }
}

template <Activation A>
void launch_bias_activation(cudaStream_t stream, float* dst, const float* bias, int64_t n,
                            int64_t channels, int64_t plane) {
  XO_CUDA_LAUNCH(bias_activation_kernel<A>, blocks_for(n), kThreads, 0, stream, dst, bias, n,
                 channels, plane);
}

// ---- The bias gradient, fused with the activation derivative (see the header) ----

// How channel k's values j = n * plane + p (at d[(n * channels + k) * plane + p]) are cut: into
// `slices` runs of `run` values, the last one shorter. Fixed at plan time from the shape; 32-bit
// (values < 2^31, checked), whose division is cheaper than 64-bit's.
struct BiasSplit {
  uint32_t channels = 0, plane = 0, values = 0;  // K, P = OH * OW, N * P
  uint32_t slices = 1, run = 0;
};

BiasSplit bias_split(const Conv2dShape& s) {
  if (!s.has_bias) return {};  // unused
  const int64_t plane = s.out_height() * s.out_width(), values = s.batch * plane;
  XO_ASSERT(values > 0 && values < (int64_t{1} << 31));
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int64_t slices =
      std::min(ceil_div(kBiasBlocks, s.out_channels), ceil_div(values, kMinSliceValues));
  if (slices < 1) slices = 1;
  const int64_t run = ceil_div(values, slices);
  slices = ceil_div(values, run);  // recounted: no empty slice at the end
  XO_ASSERT(s.out_channels * slices < (int64_t{1} << 31));
  BiasSplit b;
  b.channels = static_cast<uint32_t>(s.out_channels);
  b.plane = static_cast<uint32_t>(plane);
  b.values = static_cast<uint32_t>(values);
  b.slices = static_cast<uint32_t>(slices);
  b.run = static_cast<uint32_t>(run);
  return b;
}

// The sum of v over the block, in thread 0 (the other threads get 0): warp sums by shuffles, then
// thread 0 adds the warps' sums in warp order. Fixed order for a fixed block size: the same bits
// every run. `shared` holds kWarps floats.
__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kWarps; ++w) total += shared[w];
  }
  return total;
}

// Block b = k * slices + s: d = d * act'(dst) in place over channel k's slice s (None: d is read
// only) and partial[b] = the slice's sum. Consecutive threads take consecutive values, so the
// reads are coalesced within a plane.
template <Activation A>
__global__ void __launch_bounds__(kThreads)
    derivative_bias_kernel(const float* dst, float* d, float* partial, BiasSplit split) {
  __shared__ float shared[kWarps];
  const uint32_t k = blockIdx.x / split.slices, s = blockIdx.x - k * split.slices;
  const uint32_t begin = s * split.run, end = min(begin + split.run, split.values);
  float sum = 0.0f;
  for (uint32_t j = begin + threadIdx.x; j < end; j += kThreads) {
    const uint32_t n = j / split.plane, p = j - n * split.plane;
    const int64_t i = (int64_t{n} * split.channels + k) * split.plane + p;
    float v = d[i];
    if constexpr (A != Activation::None) {
      v = derivative_times<A>(dst[i], v);
      d[i] = v;
    }
    sum += v;
  }
  const float total = block_sum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// d_bias[k] = partial[k][0] + ... + partial[k][slices - 1], in that order.
__global__ void add_slices_kernel(const float* partial, float* d_bias, int64_t channels,
                                  int64_t slices) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < channels;
       k += int64_t{gridDim.x} * blockDim.x) {
    float total = 0.0f;
    for (int64_t s = 0; s < slices; ++s) total += partial[k * slices + s];
    d_bias[k] = total;
  }
}

// x[i] = a small non-zero value that varies with i: what cudnnFind*Ex times the candidates on.
__global__ void fill_pattern_kernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = 0.0625f * static_cast<float>(i % 13) - 0.40625f;  // -0.40625 ... 0.34375, never 0
  }
}

// ---- cuDNN descriptors, owned: destroyed without throwing, also when a constructor throws ----

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { XO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() {
    if (d) cudnnDestroyTensorDescriptor(d);
  }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { XO_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() {
    if (d) cudnnDestroyFilterDescriptor(d);
  }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { XO_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() {
    if (d) cudnnDestroyConvolutionDescriptor(d);
  }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

cudnnMathType_t math_type(Precision p) {
  return p == Precision::F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

// Whether a candidate's math type fits the precision: F32 takes no tensor-op algorithm, and no
// precision takes one that may convert float data to FP16.
bool math_fits(Precision p, cudnnMathType_t m) {
  if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
  return p != Precision::F32 || m != CUDNN_TENSOR_OP_MATH;
}

bool is_transform(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool is_transform(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool is_transform(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The chosen algorithm of one direction and the workspace it needs.
template <typename Algo>
struct Choice {
  Algo algo{};
  size_t workspace = 0;
};

// Picks from cudnnFind*Ex's measured candidates, by the rule in the header. `prepare(perf, &bytes)`
// sets the candidate's math type on the direction's descriptor (TF32/BF16; F32 keeps FMA) and asks
// cuDNN for its workspace under it (Find measured several math types; the size it reported may be
// another's): a candidate refused there is dropped and the choice made again among the rest, so
// the last prepare() call is the winner's. Null when no candidate is usable.
template <typename Perf, typename Prepare>
const Perf* pick_measured(const std::vector<Perf>& found, int returned, Precision p,
                          Prepare prepare, size_t* bytes) {
  std::vector<const Perf*> usable;
  for (int i = 0; i < returned; ++i) {
    const Perf& r = found[static_cast<size_t>(i)];
    if (r.status == CUDNN_STATUS_SUCCESS && math_fits(p, r.mathType) &&
        r.memory <= kMaxWorkspaceBytes)
      usable.push_back(&r);
  }
  const auto transform = [](const Perf* r) { return is_transform(r->algo); };
  if (p == Precision::F32 && !std::all_of(usable.begin(), usable.end(), transform))
    std::erase_if(usable, transform);
  while (!usable.empty()) {
    const Perf* fastest = nullptr;
    const Perf* deterministic = nullptr;  // the fastest deterministic one
    for (const Perf* r : usable) {
      if (!fastest || r->time < fastest->time) fastest = r;
      if (r->determinism == CUDNN_DETERMINISTIC &&
          (!deterministic || r->time < deterministic->time))
        deterministic = r;
    }
    const Perf* best = deterministic && deterministic->time <= kDeterministicSlack * fastest->time
                           ? deterministic
                           : fastest;
    if (prepare(*best, bytes) == CUDNN_STATUS_SUCCESS && *bytes <= kMaxWorkspaceBytes) return best;
    std::erase(usable, best);
  }
  return nullptr;
}

// Picks from cuDNN's heuristic ranking (best expected first), when nothing measured is usable.
// Four passes, each relaxing one wish, the first candidate that passes wins:
//   1. deterministic, and (F32) no FFT/Winograd;  2. (F32) no FFT/Winograd;
//   3. deterministic;                              4. anything cuDNN runs for the precision.
// `prepare` as in pick_measured(): the last prepare() call is the winner's.
template <typename Perf, typename Prepare>
auto pick(const std::vector<Perf>& candidates, int returned, Precision p, Prepare prepare,
          const std::string& what) -> Choice<decltype(Perf{}.algo)> {
  for (int pass = 0; pass < 4; ++pass) {
    const bool want_deterministic = pass == 0 || pass == 2;
    const bool want_direct = p == Precision::F32 && pass < 2;
    for (int i = 0; i < returned; ++i) {
      const Perf& r = candidates[static_cast<size_t>(i)];
      if (r.status != CUDNN_STATUS_SUCCESS || !math_fits(p, r.mathType)) continue;
      if (want_deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
      if (want_direct && is_transform(r.algo)) continue;
      if (r.memory > kMaxWorkspaceBytes) continue;
      size_t bytes = 0;
      if (prepare(r, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxWorkspaceBytes) continue;
      return {r.algo, bytes};
    }
  }
  throw_internal("pick", "cuDNN offers no " + what + " algorithm for this convolution", __FILE__,
                 __LINE__);
}

// The process's measured choices (see the header), by device, precision, direction and
// convolution geometry. Plans may be built from several threads: the map is locked.
class MeasuredChoices {
 public:
  // device, precision, direction (0 forward, 1 backward filter, 2 backward data), N, C, H, W, K,
  // R, stride, padding.
  using Key = std::array<int64_t, 11>;
  struct Entry {
    int algo = 0;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  };
  std::optional<Entry> find(const Key& key) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }
  void remember(const Key& key, Entry entry) {
    const std::lock_guard<std::mutex> lock(mutex_);
    entries_[key] = entry;
  }

 private:
  std::mutex mutex_;
  std::map<Key, Entry> entries_;
};

MeasuredChoices& measured_choices() {
  static MeasuredChoices choices;
  return choices;
}

// One direction's algorithm: the process's earlier measurement for the key if cuDNN still takes
// it, else a measurement now (`find(perf)`: cudnnFind*Ex's results, how many), else the heuristic
// (`heuristic(perf)`: cudnnGet*Algorithm_v7's, how many). `prepare` as in pick_measured().
template <typename Perf, typename Find, typename Heuristic, typename Prepare>
auto choose(const MeasuredChoices::Key& key, int count, Precision p, Find find, Heuristic heuristic,
            Prepare prepare, const std::string& what) -> Choice<decltype(Perf{}.algo)> {
  using Algo = decltype(Perf{}.algo);
  size_t bytes = 0;
  if (const auto known = measured_choices().find(key)) {
    Perf r{};
    r.algo = static_cast<Algo>(known->algo);
    r.mathType = known->math;
    if (prepare(r, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kMaxWorkspaceBytes)
      return {r.algo, bytes};
  }
  std::vector<Perf> perf(static_cast<size_t>(count));
  const int found = find(perf);
  if (const Perf* best = pick_measured(perf, found, p, prepare, &bytes)) {
    measured_choices().remember(key, {static_cast<int>(best->algo), best->mathType});
    return {best->algo, bytes};
  }
  const int ranked = heuristic(perf);
  return pick(perf, ranked, p, prepare, what);
}

// What cudnnFind*Ex runs the candidates on: tensors of the layer's shape and the largest
// workspace a candidate may have. Allocated by the first direction that measures; gone with the
// constructor, before the plan's own workspace is allocated.
struct FindScratch {
  DeviceBuffer src, w, dst, d_w, workspace;
};

class GpuConv2d final : public WeightedKernel {
 public:
  GpuConv2d(CudaBackend& be, const Conv2dShape& s) : be_(be), s_(s), bias_split_(bias_split(s)) {
    const auto i32 = [](int64_t v) {
      XO_ASSERT(v >= 0 && v < (int64_t{1} << 31));
      return static_cast<int>(v);
    };
    const int n = i32(s.batch), c = i32(s.in_channels), h = i32(s.height), w = i32(s.width);
    const int k = i32(s.out_channels), r = i32(s.kernel);
    const int oh = i32(s.out_height()), ow = i32(s.out_width());
    XO_ASSERT(n > 0 && c > 0 && k > 0 && r > 0 && oh > 0 && ow > 0 && s.stride > 0);
    XO_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(x_.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    XO_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(y_.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, oh, ow));
    XO_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(w_.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, r));
    for (ConvDesc* conv : {&fwd_conv_, &bwd_data_conv_, &bwd_filter_conv_}) {
      XO_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv->d, i32(s.padding), i32(s.padding),
                                                     i32(s.stride), i32(s.stride), 1, 1,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      XO_CUDNN_CHECK(cudnnSetConvolutionMathType(conv->d, math_type(be.precision())));
    }
    // cuDNN's own idea of the output must be PyTorch's.
    int dims[4] = {};
    XO_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(fwd_conv_.d, x_.d, w_.d, 4, dims));
    XO_ASSERT(dims[0] == n && dims[1] == k && dims[2] == oh && dims[3] == ow);

    choose_algorithms();
    size_t bytes = fwd_.workspace;
    if (bwd_filter_.workspace > bytes) bytes = bwd_filter_.workspace;
    if (bwd_data_.workspace > bytes) bytes = bwd_data_.workspace;
    workspace_bytes_ = bytes;
    workspace_ = be.allocate(bytes);
    // The blocks' sums, added per channel by add_slices_kernel; one slice needs none (they are
    // d_bias itself).
    if (s.has_bias && bias_split_.slices > 1) {
      partial_ = be.allocate(sizeof(float) * size_t{bias_split_.channels} * bias_split_.slices);
    }
    warm_up();
  }

  void forward(const float* src, const float* weights, const float* bias, float* dst) override {
    const float one = 1.0f, zero = 0.0f;
    XO_CUDNN_CHECK(cudnnConvolutionForward(be_.cudnn(), &one, x_.d, src, w_.d, weights, fwd_conv_.d,
                                           fwd_.algo, workspace(), workspace_bytes_, &zero, y_.d,
                                           dst));
    const float* b = s_.has_bias ? bias : nullptr;
    if (b == nullptr && s_.activation == Activation::None) return;
    const int64_t plane = s_.out_height() * s_.out_width();
    const int64_t n = s_.batch * s_.out_channels * plane;
    const cudaStream_t stream = be_.stream();
    with_fused_activation(s_.activation, [&](auto a) {
      launch_bias_activation<decltype(a)::value>(stream, dst, b, n, s_.out_channels, plane);
    });
  }

  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == s_.need_d_src);
    float* bias_sums = s_.has_bias ? d_bias : nullptr;
    with_fused_activation(s_.activation, [&](auto a) {
      pre_activation_gradient<decltype(a)::value>(dst, d_dst, bias_sums);
    });
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t handle = be_.cudnn();
    XO_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, &one, x_.d, src, y_.d, d_dst,
                                                  bwd_filter_conv_.d, bwd_filter_.algo, workspace(),
                                                  workspace_bytes_, &zero, w_.d, d_weights));
    if (d_src) {
      XO_CUDNN_CHECK(cudnnConvolutionBackwardData(handle, &one, w_.d, weights, y_.d, d_dst,
                                                  bwd_data_conv_.d, bwd_data_.algo, workspace(),
                                                  workspace_bytes_, &zero, x_.d, d_src));
    }
  }

 private:
  // d_dst = d_dst * act'(dst) in place (None: already so) and, when d_bias is not null, d_bias =
  // the per-channel sums of the result, in one pass (see the header).
  template <Activation A>
  void pre_activation_gradient(const float* dst, float* d_dst, float* d_bias) {
    const cudaStream_t stream = be_.stream();
    if (d_bias == nullptr) {
      if constexpr (A != Activation::None) {
        const int64_t n = s_.batch * s_.out_channels * s_.out_height() * s_.out_width();
        XO_CUDA_LAUNCH(activation_backward_kernel<A>, blocks_for(n), kThreads, 0, stream, dst,
                       d_dst, n);
      }
      return;
    }
    const BiasSplit& split = bias_split_;
    float* sums = split.slices == 1 ? d_bias : partial_.as<float>();
    XO_CUDA_LAUNCH(derivative_bias_kernel<A>, split.channels * split.slices, kThreads, 0, stream,
                   dst, d_dst, sums, split);
    if (split.slices > 1) {
      XO_CUDA_LAUNCH(add_slices_kernel, blocks_for(split.channels), kThreads, 0, stream,
                     partial_.as<float>(), d_bias, int64_t{split.channels}, int64_t{split.slices});
    }
  }

  // Chooses each direction's algorithm (see the header) and leaves its math type set on the
  // direction's descriptor.
  void choose_algorithms() {
    const Precision p = be_.precision();
    cudnnHandle_t handle = be_.cudnn();
    // Every Find gets fresh inputs: an earlier one may have written its output over one of them.
    std::optional<FindScratch> scratch;
    // A Find that fails is no error here: the heuristic takes over (an error of the device itself
    // resurfaces in warm_up()). Find and the heuristic both start from the precision's math type
    // on the descriptor (a remembered choice that cuDNN refused may have changed it).
    choose_forward(handle, p, scratch);
    choose_backward_filter(handle, p, scratch);
    if (s_.need_d_src) choose_backward_data(handle, p, scratch);
  }

  // The math type a candidate runs with: F32 stays FMA whatever the candidate says (FMA and
  // DEFAULT candidates both run under it); TF32/BF16 take the candidate's (NVIDIA's advice for
  // the _v7 and Find results).
  static cudnnStatus_t set_math(Precision p, cudnnConvolutionDescriptor_t conv, cudnnMathType_t m) {
    return cudnnSetConvolutionMathType(conv, p == Precision::F32 ? CUDNN_FMA_MATH : m);
  }

  // The key a direction's measured choice is remembered under.
  MeasuredChoices::Key choice_key(Precision p, int direction) {
    const int64_t device = be_.device(), precision = static_cast<int64_t>(p);
    return {device,   precision,       direction, s_.batch,  s_.in_channels, s_.height,
            s_.width, s_.out_channels, s_.kernel, s_.stride, s_.padding};
  }

  // The Find scratch tensors, allocated at the first Find, filled afresh for each.
  FindScratch& scratch_inputs(std::optional<FindScratch>& scratch) {
    const auto floats = [](int64_t count) { return static_cast<size_t>(count) * sizeof(float); };
    const int64_t src_n = s_.batch * s_.in_channels * s_.height * s_.width;
    const int64_t dst_n = s_.batch * s_.out_channels * s_.out_height() * s_.out_width();
    const int64_t w_n = s_.out_channels * s_.in_channels * s_.kernel * s_.kernel;
    if (!scratch) {
      scratch.emplace(FindScratch{be_.allocate(floats(src_n)), be_.allocate(floats(w_n)),
                                  be_.allocate(floats(dst_n)), be_.allocate(floats(w_n)),
                                  be_.allocate(kMaxWorkspaceBytes)});
    }
    const cudaStream_t stream = be_.stream();
    XO_CUDA_LAUNCH(fill_pattern_kernel, blocks_for(src_n), kThreads, 0, stream,
                   scratch->src.as<float>(), src_n);
    XO_CUDA_LAUNCH(fill_pattern_kernel, blocks_for(w_n), kThreads, 0, stream,
                   scratch->w.as<float>(), w_n);
    XO_CUDA_LAUNCH(fill_pattern_kernel, blocks_for(dst_n), kThreads, 0, stream,
                   scratch->dst.as<float>(), dst_n);
    return *scratch;
  }

  void choose_forward(cudnnHandle_t handle, Precision p, std::optional<FindScratch>& scratch) {
    using Perf = cudnnConvolutionFwdAlgoPerf_t;
    int count = 0;
    XO_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count));
    fwd_ = choose<Perf>(
        choice_key(p, 0), count, p,
        [&](std::vector<Perf>& perf) {
          FindScratch& t = scratch_inputs(scratch);
          XO_CUDNN_CHECK(cudnnSetConvolutionMathType(fwd_conv_.d, math_type(p)));
          int returned = 0;
          const cudnnStatus_t st = cudnnFindConvolutionForwardAlgorithmEx(
              handle, x_.d, t.src.as<void>(), w_.d, t.w.as<void>(), fwd_conv_.d, y_.d,
              t.dst.as<void>(), count, &returned, perf.data(), t.workspace.as<void>(),
              t.workspace.bytes());
          return st == CUDNN_STATUS_SUCCESS ? returned : 0;
        },
        [&](std::vector<Perf>& perf) {
          XO_CUDNN_CHECK(cudnnSetConvolutionMathType(fwd_conv_.d, math_type(p)));
          int returned = 0;
          XO_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
              handle, x_.d, w_.d, fwd_conv_.d, y_.d, count, &returned, perf.data()));
          return returned;
        },
        [&](const Perf& c, size_t* bytes) {
          const cudnnStatus_t st = set_math(p, fwd_conv_.d, c.mathType);
          if (st != CUDNN_STATUS_SUCCESS) return st;
          return cudnnGetConvolutionForwardWorkspaceSize(handle, x_.d, w_.d, fwd_conv_.d, y_.d,
                                                         c.algo, bytes);
        },
        "forward");
  }

  void choose_backward_filter(cudnnHandle_t handle, Precision p,
                              std::optional<FindScratch>& scratch) {
    using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
    int count = 0;
    XO_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count));
    bwd_filter_ = choose<Perf>(
        choice_key(p, 1), count, p,
        [&](std::vector<Perf>& perf) {
          FindScratch& t = scratch_inputs(scratch);
          XO_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_filter_conv_.d, math_type(p)));
          int returned = 0;
          const cudnnStatus_t st = cudnnFindConvolutionBackwardFilterAlgorithmEx(
              handle, x_.d, t.src.as<void>(), y_.d, t.dst.as<void>(), bwd_filter_conv_.d, w_.d,
              t.d_w.as<void>(), count, &returned, perf.data(), t.workspace.as<void>(),
              t.workspace.bytes());
          return st == CUDNN_STATUS_SUCCESS ? returned : 0;
        },
        [&](std::vector<Perf>& perf) {
          XO_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_filter_conv_.d, math_type(p)));
          int returned = 0;
          XO_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
              handle, x_.d, y_.d, bwd_filter_conv_.d, w_.d, count, &returned, perf.data()));
          return returned;
        },
        [&](const Perf& c, size_t* bytes) {
          const cudnnStatus_t st = set_math(p, bwd_filter_conv_.d, c.mathType);
          if (st != CUDNN_STATUS_SUCCESS) return st;
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              handle, x_.d, y_.d, bwd_filter_conv_.d, w_.d, c.algo, bytes);
        },
        "backward-filter");
  }

  void choose_backward_data(cudnnHandle_t handle, Precision p,
                            std::optional<FindScratch>& scratch) {
    using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
    int count = 0;
    XO_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count));
    bwd_data_ = choose<Perf>(
        choice_key(p, 2), count, p,
        [&](std::vector<Perf>& perf) {
          FindScratch& t = scratch_inputs(scratch);
          XO_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_data_conv_.d, math_type(p)));
          int returned = 0;
          // d_src goes to the src scratch: backward data does not read src.
          const cudnnStatus_t st = cudnnFindConvolutionBackwardDataAlgorithmEx(
              handle, w_.d, t.w.as<void>(), y_.d, t.dst.as<void>(), bwd_data_conv_.d, x_.d,
              t.src.as<void>(), count, &returned, perf.data(), t.workspace.as<void>(),
              t.workspace.bytes());
          return st == CUDNN_STATUS_SUCCESS ? returned : 0;
        },
        [&](std::vector<Perf>& perf) {
          XO_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_data_conv_.d, math_type(p)));
          int returned = 0;
          XO_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
              handle, w_.d, y_.d, bwd_data_conv_.d, x_.d, count, &returned, perf.data()));
          return returned;
        },
        [&](const Perf& c, size_t* bytes) {
          const cudnnStatus_t st = set_math(p, bwd_data_conv_.d, c.mathType);
          if (st != CUDNN_STATUS_SUCCESS) return st;
          return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_.d, y_.d, bwd_data_conv_.d,
                                                              x_.d, c.algo, bytes);
        },
        "backward-data");
  }

  // Runs each direction and our backward kernels once on zeroed scratch tensors and waits for
  // them. The trainer records its first step into a CUDA Graph without an eager step before, so
  // without this cuDNN's first call of an algorithm (its lazy set-up: plan building, kernel
  // loading, shared-memory attributes) would happen under stream capture; here it happens at plan
  // time, and an algorithm that fails to run fails here, with cuDNN's message, rather than inside
  // a recording.
  void warm_up() {
    const auto floats = [](int64_t count) { return static_cast<size_t>(count) * sizeof(float); };
    const int64_t src_n = s_.batch * s_.in_channels * s_.height * s_.width;
    const int64_t dst_n = s_.batch * s_.out_channels * s_.out_height() * s_.out_width();
    const int64_t w_n = s_.out_channels * s_.in_channels * s_.kernel * s_.kernel;
    const DeviceBuffer src = be_.allocate(floats(src_n)), dst = be_.allocate(floats(dst_n));
    const DeviceBuffer w = be_.allocate(floats(w_n));
    const DeviceBuffer bias = be_.allocate(floats(s_.out_channels));
    const DeviceBuffer d_w = be_.allocate(floats(w_n));
    const DeviceBuffer d_bias = be_.allocate(floats(s_.out_channels));
    const DeviceBuffer d_src = be_.allocate(s_.need_d_src ? floats(src_n) : 0);
    forward(src.as<float>(), w.as<float>(), bias.as<float>(), dst.as<float>());
    // Backward takes d_dst as scratch: dst (zeros) serves as both.
    backward(src.as<float>(), w.as<float>(), dst.as<float>(), dst.as<float>(), d_w.as<float>(),
             d_bias.as<float>(), s_.need_d_src ? d_src.as<float>() : nullptr);
    XO_CUDA_CHECK(cudaStreamSynchronize(be_.stream()));
  }

  // Null when no direction needs a workspace (cuDNN accepts that with a size of 0).
  void* workspace() const { return workspace_bytes_ > 0 ? workspace_.as<void>() : nullptr; }

  CudaBackend& be_;
  Conv2dShape s_;
  TensorDesc x_, y_;  // src/d_src [N, C, H, W], dst/d_dst [N, K, OH, OW]
  FilterDesc w_;      // weights [K, C, R, R]
  ConvDesc fwd_conv_, bwd_data_conv_, bwd_filter_conv_;  // one per direction: math types differ
  Choice<cudnnConvolutionFwdAlgo_t> fwd_;
  Choice<cudnnConvolutionBwdFilterAlgo_t> bwd_filter_;
  Choice<cudnnConvolutionBwdDataAlgo_t> bwd_data_;
  size_t workspace_bytes_ = 0;
  DeviceBuffer workspace_;  // shared by the three directions (one stream: never concurrent)
  BiasSplit bias_split_;
  DeviceBuffer partial_;  // [K, S] slice sums of the bias gradient (S > 1 only)
};

}  // namespace

std::unique_ptr<WeightedKernel> make_conv2d(CudaBackend& be, const Conv2dShape& shape) {
  return std::make_unique<GpuConv2d>(be, shape);
}

}  // namespace xo::cuda
