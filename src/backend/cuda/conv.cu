// Conv2d (+ fused activation) on the GPU, forward and backward, through cuDNN's legacy convolution
// API (PyTorch's Conv2d: cross-correlation, NCHW tensors, weights [out, in, k, k] = cuDNN's KCRS
// filter layout, so no reordering anywhere):
//  - forward:  cudnnConvolutionForward into dst, then one kernel of ours adds the bias and applies
//    the activation in place (cudnnConvolutionBiasActivationForward only fuses ReLU/identity and
//    ties the algorithm to IMPLICIT_PRECOMP_GEMM);
//  - backward: a kernel of ours turns d_dst into the pre-activation gradient in place (from dst,
//    as activation.cu), then cudnnConvolutionBackwardBias (d_bias), cudnnConvolutionBackwardFilter
//    (d_weights) and, when the layer below needs it, cudnnConvolutionBackwardData (d_src), all with
//    beta = 0: overwritten, as the contract says.
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
// Algorithms: cuDNN's heuristic (cudnnGet*Algorithm_v7, deterministic itself, unlike the timed
// cudnnFind*, which can pick differently from run to run) ranks the candidates; we take the first
// that cuDNN supports for the shape, fits the precision, needs at most kMaxWorkspaceBytes, and is
// deterministic (backward-filter ALGO_0/ALGO_3 and backward-data ALGO_0 add with atomics), falling
// back step by step (see pick()) so that some algorithm is always found.
#include <string>
#include <vector>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;

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

// d_dst = d_dst * act'(dst) in place: the pre-activation gradient.
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

template <Activation A>
void launch_activation_backward(cudaStream_t stream, const float* dst, float* d_dst, int64_t n) {
  XO_CUDA_LAUNCH(activation_backward_kernel<A>, blocks_for(n), kThreads, 0, stream, dst, d_dst, n);
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

// Picks from cuDNN's ranked candidates (best expected first). Four passes, each relaxing one
// wish, the first candidate that passes wins:
//   1. deterministic, and (F32) no FFT/Winograd;  2. (F32) no FFT/Winograd;
//   3. deterministic;                              4. anything cuDNN runs for the precision.
// `prepare(perf, &bytes)` sets the candidate's math type on the direction's descriptor (TF32/BF16;
// F32 keeps FMA) and asks cuDNN for its workspace: a candidate cuDNN refuses there is skipped. The
// last prepare() call is the winner's, so the descriptor is left as the winner needs it.
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

class GpuConv2d final : public Conv2dKernel {
 public:
  GpuConv2d(CudaBackend& be, const Conv2dShape& s) : be_(be), s_(s) {
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
        cudnnSetTensor4dDescriptor(bias_.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, k, 1, 1));
    XO_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(w_.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, r));
    const Precision p = be.precision();
    for (ConvDesc* conv : {&fwd_conv_, &bwd_data_conv_, &bwd_filter_conv_}) {
      XO_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv->d, i32(s.padding), i32(s.padding),
                                                     i32(s.stride), i32(s.stride), 1, 1,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      XO_CUDNN_CHECK(cudnnSetConvolutionMathType(conv->d, math_type(p)));
    }
    // cuDNN's own idea of the output must be PyTorch's.
    int dims[4] = {};
    XO_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(fwd_conv_.d, x_.d, w_.d, 4, dims));
    XO_ASSERT(dims[0] == n && dims[1] == k && dims[2] == oh && dims[3] == ow);

    cudnnHandle_t handle = be.cudnn();
    // The math type a candidate runs with: F32 stays FMA whatever the candidate says (FMA and
    // DEFAULT candidates both run under it); TF32/BF16 take the candidate's (NVIDIA's advice for
    // the _v7 results).
    const auto set_math = [p](cudnnConvolutionDescriptor_t conv, cudnnMathType_t m) {
      return cudnnSetConvolutionMathType(conv, p == Precision::F32 ? CUDNN_FMA_MATH : m);
    };
    {
      int count = 0, returned = 0;
      XO_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(count));
      XO_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_.d, w_.d, fwd_conv_.d, y_.d,
                                                            count, &returned, perf.data()));
      fwd_ = pick(
          perf, returned, p,
          [&](const cudnnConvolutionFwdAlgoPerf_t& c, size_t* bytes) {
            const cudnnStatus_t st = set_math(fwd_conv_.d, c.mathType);
            if (st != CUDNN_STATUS_SUCCESS) return st;
            return cudnnGetConvolutionForwardWorkspaceSize(handle, x_.d, w_.d, fwd_conv_.d, y_.d,
                                                           c.algo, bytes);
          },
          "forward");
    }
    {
      int count = 0, returned = 0;
      XO_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(count));
      XO_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          handle, x_.d, y_.d, bwd_filter_conv_.d, w_.d, count, &returned, perf.data()));
      bwd_filter_ = pick(
          perf, returned, p,
          [&](const cudnnConvolutionBwdFilterAlgoPerf_t& c, size_t* bytes) {
            const cudnnStatus_t st = set_math(bwd_filter_conv_.d, c.mathType);
            if (st != CUDNN_STATUS_SUCCESS) return st;
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                handle, x_.d, y_.d, bwd_filter_conv_.d, w_.d, c.algo, bytes);
          },
          "backward-filter");
    }
    if (s.need_d_src) {
      int count = 0, returned = 0;
      XO_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(count));
      XO_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          handle, w_.d, y_.d, bwd_data_conv_.d, x_.d, count, &returned, perf.data()));
      bwd_data_ = pick(
          perf, returned, p,
          [&](const cudnnConvolutionBwdDataAlgoPerf_t& c, size_t* bytes) {
            const cudnnStatus_t st = set_math(bwd_data_conv_.d, c.mathType);
            if (st != CUDNN_STATUS_SUCCESS) return st;
            return cudnnGetConvolutionBackwardDataWorkspaceSize(
                handle, w_.d, y_.d, bwd_data_conv_.d, x_.d, c.algo, bytes);
          },
          "backward-data");
    }
    size_t bytes = fwd_.workspace;
    if (bwd_filter_.workspace > bytes) bytes = bwd_filter_.workspace;
    if (bwd_data_.workspace > bytes) bytes = bwd_data_.workspace;
    workspace_bytes_ = bytes;
    workspace_ = be.allocate(bytes);
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
    switch (s_.activation) {
      case Activation::ReLU:
        launch_bias_activation<Activation::ReLU>(stream, dst, b, n, s_.out_channels, plane);
        break;
      case Activation::Tanh:
        launch_bias_activation<Activation::Tanh>(stream, dst, b, n, s_.out_channels, plane);
        break;
      case Activation::Sigmoid:
        launch_bias_activation<Activation::Sigmoid>(stream, dst, b, n, s_.out_channels, plane);
        break;
      case Activation::None:
        launch_bias_activation<Activation::None>(stream, dst, b, n, s_.out_channels, plane);
        break;
    }
  }

  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == s_.need_d_src);
    const int64_t n = s_.batch * s_.out_channels * s_.out_height() * s_.out_width();
    const cudaStream_t stream = be_.stream();
    switch (s_.activation) {
      case Activation::ReLU:
        launch_activation_backward<Activation::ReLU>(stream, dst, d_dst, n);
        break;
      case Activation::Tanh:
        launch_activation_backward<Activation::Tanh>(stream, dst, d_dst, n);
        break;
      case Activation::Sigmoid:
        launch_activation_backward<Activation::Sigmoid>(stream, dst, d_dst, n);
        break;
      case Activation::None:
        break;  // d_dst already is the pre-activation gradient
    }
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t handle = be_.cudnn();
    if (s_.has_bias && d_bias) {
      XO_CUDNN_CHECK(
          cudnnConvolutionBackwardBias(handle, &one, y_.d, d_dst, &zero, bias_.d, d_bias));
    }
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
  // Runs each direction once on zeroed scratch tensors and waits for it. The trainer records its
  // first step into a CUDA Graph without an eager step before, so without this cuDNN's first call
  // of an algorithm (its lazy set-up: plan building, kernel loading, shared-memory attributes)
  // would happen under stream capture; here it happens at plan time, and an algorithm that fails
  // to run fails here, with cuDNN's message, rather than inside a recording.
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
  TensorDesc x_, y_, bias_;  // src/d_src [N, C, H, W], dst/d_dst [N, K, OH, OW], bias [1, K, 1, 1]
  FilterDesc w_;             // weights [K, C, R, R]
  ConvDesc fwd_conv_, bwd_data_conv_, bwd_filter_conv_;  // one per direction: math types differ
  Choice<cudnnConvolutionFwdAlgo_t> fwd_;
  Choice<cudnnConvolutionBwdFilterAlgo_t> bwd_filter_;
  Choice<cudnnConvolutionBwdDataAlgo_t> bwd_data_;
  size_t workspace_bytes_ = 0;
  DeviceBuffer workspace_;  // shared by the three directions (one stream: never concurrent)
};

}  // namespace

std::unique_ptr<Conv2dKernel> make_conv2d(CudaBackend& be, const Conv2dShape& shape) {
  return std::make_unique<GpuConv2d>(be, shape);
}

}  // namespace xo::cuda
