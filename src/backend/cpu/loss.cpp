// The losses on the CPU, each fused with its gradient. Softmax cross-entropy: loss (mean over the
// batch, as torch.nn.CrossEntropyLoss), the arg-max accuracy and d(loss)/d(logits) = (softmax -
// onehot) / batch. Binary cross-entropy on a logit (torch.nn.BCEWithLogitsLoss): loss = softplus(x)
// - y x, accuracy from x > 0, gradient (sigmoid(x) - y) / batch. Mean squared error on one output
// (torch.nn.MSELoss): loss (x - t)^2, gradient 2 (x - t) / batch, no accuracy.
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace xo::cpu {
namespace {

// exp(x) for x <= 0 (softmax's shifted logits) as one expression the compiler vectorises:
// libm's expf is a call per element, which GCC turns into libmvec's vector calls only under
// -ffast-math. 2^n exp(r) with n = round(x / ln 2) and r = x - n ln 2 in [-ln 2 / 2, ln 2 / 2]
// (ln 2 split in two for an exact n ln 2), exp(r) by Cephes' degree-6 polynomial for expf:
// within a few ulp of exp (CrossEntropyKernel test). Below -87.6 (exp(x) under FLT_MIN, where
// 2^n would not be a normal float) it gives 0.
inline float shifted_exp(float x) {
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(n, -0.693359375f, x);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float e = std::fma(p, r * r, r) + 1.0f;
  const bool under = x < -87.6f;
  const int32_t exponent = under ? 0 : (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n >= -126
  return under ? 0.0f : e * std::bit_cast<float>(exponent);
}

class CpuCrossEntropy final : public LossKernel {
 public:
  CpuCrossEntropy(int64_t batch, int64_t classes, int64_t normalizer)
      : batch_(batch),
        classes_(classes),
        normalizer_(normalizer),
        exps_(batch * classes),
        row_max_(batch) {}

  void forward_backward(const float* logits, const int32_t* labels, float* d_logits,
                        LossStats* stats) override {
    const int64_t c = classes_, n = batch_ * classes_;
    const float inv_norm = 1.0f / static_cast<float>(normalizer_);
    float* e = exps_.data();
    // exp(x - row max) for the whole batch in one vectorised pass, so the exponentials are
    // computed once for the loss and the gradient; the shift keeps them finite.
    for (int64_t r = 0; r < batch_; ++r) {
      const float* x = logits + r * c;
      float max = x[0];
      for (int64_t j = 1; j < c; ++j) max = x[j] > max ? x[j] : max;
      row_max_[r] = max;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) e[r * c + j] = x[j] - max;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) e[i] = shifted_exp(e[i]);
    double loss = 0.0;
    int64_t correct = 0;
    for (int64_t r = 0; r < batch_; ++r) {
      const float* x = logits + r * c;
      const float* er = e + r * c;
      int64_t arg_max = 0;
      float sum = er[0];
      for (int64_t j = 1; j < c; ++j) {
        arg_max = x[j] > x[arg_max] ? j : arg_max;
        sum += er[j];
      }
      const int32_t label = labels[r];
      // -log softmax(x)[label] = log(sum exp(x - max)) - (x[label] - max), finite for any logits.
      loss += static_cast<double>(std::log(sum) - (x[label] - row_max_[r]));
      correct += arg_max == label;
      if (d_logits) {
        float* g = d_logits + r * c;
        const float scale = inv_norm / sum;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) g[j] = er[j] * scale;
        g[label] -= inv_norm;
      }
    }
    stats->loss_sum += loss / static_cast<double>(normalizer_);
    stats->correct += static_cast<double>(correct);
    stats->samples += static_cast<double>(batch_);
  }

 private:
  int64_t batch_, classes_, normalizer_;
  std::vector<float> exps_;     // [batch, classes] scratch, allocated at plan time
  std::vector<float> row_max_;  // [batch]
};

class CpuBinaryCrossEntropy final : public LossKernel {
 public:
  CpuBinaryCrossEntropy(int64_t batch, int64_t normalizer)
      : batch_(batch), normalizer_(normalizer) {}

  void forward_backward(const float* logits, const int32_t* labels, float* d_logits,
                        LossStats* stats) override {
    const float inv_norm = 1.0f / static_cast<float>(normalizer_);
    double loss = 0.0;
    int64_t correct = 0;
    for (int64_t r = 0; r < batch_; ++r) {
      const float x = logits[r];
      const float y = static_cast<float>(labels[r]);
      // softplus(x) = max(x, 0) + log1p(exp(-|x|)), finite for any x.
      const float softplus = std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x)));
      loss += static_cast<double>(softplus - y * x);
      correct += (x > 0.0f) == (labels[r] == 1);
      if (d_logits) {
        const float e = std::exp(-std::fabs(x));  // sigmoid without overflow for either sign
        const float sigmoid = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
        d_logits[r] = (sigmoid - y) * inv_norm;
      }
    }
    stats->loss_sum += loss / static_cast<double>(normalizer_);
    stats->correct += static_cast<double>(correct);
    stats->samples += static_cast<double>(batch_);
  }

 private:
  int64_t batch_, normalizer_;
};

class CpuMeanSquaredError final : public LossKernel {
 public:
  CpuMeanSquaredError(int64_t batch, int64_t normalizer) : batch_(batch), normalizer_(normalizer) {}

  void forward_backward(const float* outputs, const int32_t* targets, float* d_outputs,
                        LossStats* stats) override {
    const float scale = 2.0f / static_cast<float>(normalizer_);
    double loss = 0.0;
    for (int64_t r = 0; r < batch_; ++r) {
      const float diff = outputs[r] - std::bit_cast<float>(targets[r]);  // a target's bits
      loss += static_cast<double>(diff * diff);
      if (d_outputs) d_outputs[r] = diff * scale;
    }
    stats->loss_sum += loss / static_cast<double>(normalizer_);
    stats->samples += static_cast<double>(batch_);
  }

 private:
  int64_t batch_, normalizer_;
};

}  // namespace

std::unique_ptr<LossKernel> make_loss(LossKind kind, int64_t batch, int64_t classes,
                                      int64_t normalizer) {
  if (kind == LossKind::BinaryCrossEntropy) {
    XO_ASSERT(classes == 1);
    return std::make_unique<CpuBinaryCrossEntropy>(batch, normalizer);
  }
  if (kind == LossKind::MeanSquaredError) {
    XO_ASSERT(classes == 1);
    return std::make_unique<CpuMeanSquaredError>(batch, normalizer);
  }
  return std::make_unique<CpuCrossEntropy>(batch, classes, normalizer);
}

}  // namespace xo::cpu
