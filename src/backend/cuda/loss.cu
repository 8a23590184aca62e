// The losses on the GPU, each fused with its gradient, with the CPU's math (loss.cpp):
// - softmax cross-entropy (torch.nn.CrossEntropyLoss): per sample log(sum exp(x - max)) -
//   (x[label] - max), arg-max accuracy (the first index of the largest logit), gradient
//   (softmax - onehot) / normalizer;
// - binary cross-entropy on one logit (torch.nn.BCEWithLogitsLoss): softplus(x) - y x with
//   softplus(x) = max(x, 0) + log1p(exp(-|x|)), accuracy from x > 0, gradient
//   (sigmoid(x) - y) / normalizer, the sigmoid computed without overflow for either sign;
// - mean squared error on one output (torch.nn.MSELoss): (x - t)^2 with the target t the float
//   whose bits travel in the label slot, gradient (x - t) * (2 / normalizer), no accuracy.
// One kernel per call: it computes each sample's loss and hit (one warp per sample for
// cross-entropy, one thread per sample for BCE) into buffers allocated at plan time and writes the
// gradient; then the last of its blocks to finish (a counter in device memory that the blocks
// count themselves into, reset by that last block for the next call) sums the samples in double in
// a fixed order and adds to the LossStats in device memory, so the sums are the same on every run
// (no float atomics) and no second launch is needed (the step is a chain of launches: each one
// costs a few microseconds on a small model).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = kThreads / kWarp;

// Where a loss kernel's blocks end: every block counts itself done, and the last one sums
// row_loss and row_hit of the whole batch in double (each thread a fixed stride of samples, then a
// tree of fixed shape in shared memory) into the stats, then resets the counter. Deterministic for
// a given batch.
__device__ void sum_batch_in_last_block(const float* row_loss, const int32_t* row_hit,
                                        int64_t batch, double normalizer, LossStats* stats,
                                        unsigned* done) {
  __shared__ bool last;
  __shared__ double loss[kThreads];
  __shared__ double hits[kThreads];
  __threadfence();  // this block's rows are visible device-wide before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  double l = 0.0, h = 0.0;
  for (int64_t i = threadIdx.x; i < batch; i += kThreads) {  // L2 reads: other blocks wrote them
    l += static_cast<double>(__ldcg(row_loss + i));
    h += static_cast<double>(__ldcg(row_hit + i));
  }
  loss[threadIdx.x] = l;
  hits[threadIdx.x] = h;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      hits[threadIdx.x] += hits[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    stats->loss_sum += loss[0] / normalizer;
    stats->correct += hits[0];
    stats->samples += static_cast<double>(batch);
    *done = 0;
  }
}

// Fused models: blockIdx.y is the model, whose rows (of `width` values) follow the last model's in
// every buffer, with its own stats (model_stats[t]) and its own count of finished blocks (done +
// t). One call (model_stats null): model 0, `stats`.
struct ModelRows {
  int64_t rows = 0, width = 0;
  LossStats* const* model_stats = nullptr;
};
__device__ __forceinline__ LossStats* model_offsets(const ModelRows& tr, LossStats* stats,
                                                    const float*& x, const int32_t*& labels,
                                                    float*& d_x, float*& row_loss,
                                                    int32_t*& row_hit, unsigned*& done) {
  const int64_t t = blockIdx.y;
  x += t * tr.rows * tr.width;
  labels += t * tr.rows;
  if (d_x != nullptr) d_x += t * tr.rows * tr.width;
  row_loss += t * tr.rows;
  row_hit += t * tr.rows;
  done += t;
  return tr.model_stats != nullptr ? tr.model_stats[t] : stats;
}

// One warp per sample (grid-stride over samples; the whole warp shares a sample, so the shuffles
// see every lane). Blocks of kThreads.
__global__ void cross_entropy_kernel(const float* logits, const int32_t* labels, int64_t batch,
                                     int64_t classes, float inv_norm, float* d_logits,
                                     float* row_loss, int32_t* row_hit, double normalizer,
                                     LossStats* stats, unsigned* done, ModelRows models) {
  stats = model_offsets(models, stats, logits, labels, d_logits, row_loss, row_hit, done);
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
  for (int64_t r = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp; r < batch;
       r += warps) {
    const float* x = logits + r * classes;
    // Largest logit and its first index: each lane scans its columns in order (strictly greater
    // keeps the first), then the lanes merge preferring the larger value, and on a tie the lower
    // index, which is the CPU's left-to-right scan.
    float best = -INFINITY;
    int64_t best_j = INT64_MAX;
    for (int64_t j = lane; j < classes; j += kWarp) {
      const float v = x[j];
      if (best_j == INT64_MAX || v > best) {
        best = v;
        best_j = j;
      }
    }
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(kFullMask, best, offset);
      const int64_t other_j = __shfl_xor_sync(kFullMask, best_j, offset);
      if (other_j != INT64_MAX &&
          (best_j == INT64_MAX || other > best || (other == best && other_j < best_j))) {
        best = other;
        best_j = other_j;
      }
    }
    const float max = best;
    // sum exp(x - max): the shift keeps every term in (0, 1], so the sum is finite.
    float sum = 0.0f;
    for (int64_t j = lane; j < classes; j += kWarp) sum += expf(x[j] - max);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(kFullMask, sum, offset);
    }
    const int32_t label = labels[r];
    const float x_label = x[label];
    // Every lane has read what it needs from x before any lane writes d_logits, which may be the
    // same memory as logits.
    __syncwarp();
    if (lane == 0) {
      row_loss[r] = logf(sum) - (x_label - max);
      row_hit[r] = best_j == label ? 1 : 0;
    }
    if (d_logits != nullptr) {
      float* g = d_logits + r * classes;
      const float scale = inv_norm / sum;
      for (int64_t j = lane; j < classes; j += kWarp) {
        float v = expf(x[j] - max) * scale;
        if (j == label) v -= inv_norm;
        g[j] = v;
      }
    }
  }
  sum_batch_in_last_block(row_loss, row_hit, batch, normalizer, stats, done);
}

// One thread per sample; blocks of kThreads.
__global__ void binary_cross_entropy_kernel(const float* logits, const int32_t* labels,
                                            int64_t batch, float inv_norm, float* d_logits,
                                            float* row_loss, int32_t* row_hit, double normalizer,
                                            LossStats* stats, unsigned* done, ModelRows models) {
  stats = model_offsets(models, stats, logits, labels, d_logits, row_loss, row_hit, done);
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < batch;
       r += int64_t{gridDim.x} * blockDim.x) {
    const float x = logits[r];
    const int32_t label = labels[r];
    const float y = static_cast<float>(label);
    const float e = expf(-fabsf(x));  // in (0, 1]: no overflow for either sign
    const float softplus = (x < 0.0f ? 0.0f : x) + log1pf(e);  // std::max(x, 0.0f) + ...
    row_loss[r] = softplus - y * x;
    row_hit[r] = (x > 0.0f) == (label == 1) ? 1 : 0;
    if (d_logits != nullptr) {
      const float sigmoid = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
      d_logits[r] = (sigmoid - y) * inv_norm;
    }
  }
  sum_batch_in_last_block(row_loss, row_hit, batch, normalizer, stats, done);
}

// One thread per sample; blocks of kThreads. row_hit is 0: a regression has no accuracy.
__global__ void mean_squared_error_kernel(const float* outputs, const int32_t* targets,
                                          int64_t batch, float scale, float* d_outputs,
                                          float* row_loss, int32_t* row_hit, double normalizer,
                                          LossStats* stats, unsigned* done, ModelRows models) {
  stats = model_offsets(models, stats, outputs, targets, d_outputs, row_loss, row_hit, done);
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < batch;
       r += int64_t{gridDim.x} * blockDim.x) {
    const float diff = outputs[r] - __int_as_float(targets[r]);  // the target's bits
    row_loss[r] = __fmul_rn(diff, diff);  // rounded as the CPU rounds it, never fused
    row_hit[r] = 0;
    if (d_outputs != nullptr) d_outputs[r] = __fmul_rn(diff, scale);
  }
  sum_batch_in_last_block(row_loss, row_hit, batch, normalizer, stats, done);
}

// The loss of one call, or of fused models (`models` of them, rows after rows, each with its own
// stats: ModelRows).
class GpuLoss final : public LossKernel, public FusedLoss {
 public:
  GpuLoss(CudaBackend& be, LossKind kind, int64_t batch, int64_t classes, int64_t normalizer,
          const std::vector<LossStats*>& model_stats = {})
      : be_(be),
        kind_(kind),
        batch_(batch),
        classes_(classes),
        normalizer_(normalizer),
        models_(std::max<int64_t>(1, static_cast<int64_t>(model_stats.size()))),
        row_loss_(be.allocate(static_cast<size_t>(models_ * batch) * sizeof(float))),
        row_hit_(be.allocate(static_cast<size_t>(models_ * batch) * sizeof(int32_t))),
        done_(be.allocate(static_cast<size_t>(models_) * sizeof(unsigned))) {
    XO_ASSERT(batch > 0 && classes > 0 && normalizer > 0);
    be.fill_zero(done_.as<unsigned>(), static_cast<size_t>(models_) * sizeof(unsigned));
    if (kind != LossKind::CrossEntropy) XO_ASSERT(classes == 1);
    if (!model_stats.empty()) {
      model_stats_ = be.allocate(model_stats.size() * sizeof(LossStats*));
      be.upload(model_stats_.as<LossStats*>(), model_stats.data(),
                model_stats.size() * sizeof(LossStats*));
    }
  }

  void forward_backward(const float* logits, const int32_t* labels, float* d_logits,
                        LossStats* stats) override {
    XO_ASSERT(!model_stats_);
    launch(logits, labels, d_logits, stats);
  }
  void run(const float* logits, const int32_t* labels, float* d_logits) override {
    XO_ASSERT(model_stats_);
    launch(logits, labels, d_logits, nullptr);
  }

 private:
  void launch(const float* logits, const int32_t* labels, float* d_logits, LossStats* stats) {
    const float inv_norm = 1.0f / static_cast<float>(normalizer_);
    float* row_loss = row_loss_.as<float>();
    int32_t* row_hit = row_hit_.as<int32_t>();
    const double normalizer = static_cast<double>(normalizer_);
    unsigned* done = done_.as<unsigned>();
    const ModelRows models{batch_, classes_,
                           model_stats_ ? model_stats_.as<LossStats*>() : nullptr};
    const auto k = static_cast<unsigned>(models_);
    if (kind_ == LossKind::CrossEntropy) {
      XO_CUDA_LAUNCH(cross_entropy_kernel, dim3(blocks_for(batch_ * kWarp), k), kThreads, 0,
                     be_.stream(), logits, labels, batch_, classes_, inv_norm, d_logits, row_loss,
                     row_hit, normalizer, stats, done, models);
    } else if (kind_ == LossKind::MeanSquaredError) {
      XO_CUDA_LAUNCH(mean_squared_error_kernel, dim3(blocks_for(batch_), k), kThreads, 0,
                     be_.stream(), logits, labels, batch_, 2.0f / static_cast<float>(normalizer_),
                     d_logits, row_loss, row_hit, normalizer, stats, done, models);
    } else {
      XO_CUDA_LAUNCH(binary_cross_entropy_kernel, dim3(blocks_for(batch_), k), kThreads, 0,
                     be_.stream(), logits, labels, batch_, inv_norm, d_logits, row_loss, row_hit,
                     normalizer, stats, done, models);
    }
  }

  CudaBackend& be_;
  LossKind kind_;
  int64_t batch_, classes_, normalizer_;
  int64_t models_;            // 1 for one call's loss
  DeviceBuffer row_loss_;     // [models, batch] each sample's loss
  DeviceBuffer row_hit_;      // [models, batch] 1 where the prediction is right
  DeviceBuffer done_;         // [models] blocks of the running call that have finished (0 between)
  DeviceBuffer model_stats_;  // [models] each model's stats; empty for one call's loss
};

}  // namespace

std::unique_ptr<LossKernel> make_loss(CudaBackend& be, LossKind kind, int64_t batch,
                                      int64_t classes, int64_t normalizer) {
  return std::make_unique<GpuLoss>(be, kind, batch, classes, normalizer);
}

std::unique_ptr<FusedLoss> make_fused_loss(CudaBackend& be, LossKind kind, int64_t rows,
                                           int64_t classes, const std::vector<LossStats*>& stats) {
  XO_ASSERT(!stats.empty());
  return std::make_unique<GpuLoss>(be, kind, rows, classes, rows, stats);
}

}  // namespace xo::cuda
