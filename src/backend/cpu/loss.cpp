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
#include "backend/cpu/exp_math.h"
#include "core/error.h"

namespace xo::cpu {
namespace {

// log(s) for a softmax's sum of shifted exponentials (each in (0, 1], the largest 1, so s in
// [1, classes]) as one vectorisable expression: s = 2^k m with m in [sqrt(1/2), sqrt(2)), log(m)
// by Cephes' polynomial for logf, k ln 2 with ln 2 split in two. A NaN stays NaN.
inline float sum_log(float s) {
  const auto bits = std::bit_cast<int32_t>(s);
  // m in [1, 2), halved above sqrt(2); both computed, so that the loop holds no branch.
  const float whole = std::bit_cast<float>((bits & 0x007fffff) | 0x3f800000);
  const bool high = whole > 1.41421356f;
  const float m = high ? whole * 0.5f : whole;
  const int32_t k = (bits >> 23) - 127 + (high ? 1 : 0);
  const float f = m - 1.0f, f2 = f * f;
  float p = 7.0376836292e-2f;
  p = std::fma(p, f, -1.1514610310e-1f);
  p = std::fma(p, f, 1.1676998740e-1f);
  p = std::fma(p, f, -1.2420140846e-1f);
  p = std::fma(p, f, 1.4249322787e-1f);
  p = std::fma(p, f, -1.6668057665e-1f);
  p = std::fma(p, f, 2.0000714765e-1f);
  p = std::fma(p, f, -2.4999993993e-1f);
  p = std::fma(p, f, 3.3333331174e-1f);
  const auto kf = static_cast<float>(k);
  float y = f * f2 * p;
  y = std::fma(kf, -2.12194440e-4f, y);
  y = std::fma(-0.5f, f2, y);
  const float log = f + y + kf * 0.693359375f;
  return s == s ? log : s;
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
    if (classes_ != 2) return any_classes(logits, labels, d_logits, stats);
    if (d_logits) return two_classes<true>(logits, labels, d_logits, stats);
    two_classes<false>(logits, labels, d_logits, stats);
  }

 private:
  // Two classes (the disc models'): the rows are the vector's lanes, so that a batch's softmax,
  // loss, accuracy and gradient are one vectorised loop, where a row at a time is scalar code and
  // a call to logf each. The same arithmetic as any_classes' but the log (sum_log, within a few
  // ulp of logf) and the order in which the rows' losses are summed (in double, lane by lane).
  template <bool Gradient>
  void two_classes(const float* logits, const int32_t* labels, float* d_logits,
                   LossStats* stats) const {
    const float inv_norm = 1.0f / static_cast<float>(normalizer_);
    double loss = 0.0;
    int64_t correct = 0;
#pragma omp simd reduction(+ : loss, correct)
    for (int64_t r = 0; r < batch_; ++r) {
      const float x0 = logits[2 * r], x1 = logits[2 * r + 1];
      const float max = x1 > x0 ? x1 : x0;
      const int32_t arg_max = x1 > x0 ? 1 : 0;  // the first of the largest, as the scan's
      const float e0 = shifted_exp(x0 - max), e1 = shifted_exp(x1 - max);
      const float sum = e0 + e1;
      const int32_t label = labels[r];
      loss += static_cast<double>(sum_log(sum) - ((label == 1 ? x1 : x0) - max));
      correct += arg_max == label ? 1 : 0;
      if constexpr (Gradient) {
        const float scale = inv_norm / sum;
        d_logits[2 * r] = e0 * scale - (label == 0 ? inv_norm : 0.0f);
        d_logits[2 * r + 1] = e1 * scale - (label == 1 ? inv_norm : 0.0f);
      }
    }
    stats->loss_sum += loss / static_cast<double>(normalizer_);
    stats->correct += static_cast<double>(correct);
    stats->samples += static_cast<double>(batch_);
  }

  void any_classes(const float* logits, const int32_t* labels, float* d_logits, LossStats* stats) {
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
