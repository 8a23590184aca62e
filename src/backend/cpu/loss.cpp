// Softmax cross-entropy on the CPU: loss (mean over the batch, as torch.nn.CrossEntropyLoss), the
// arg-max accuracy and d(loss)/d(logits) = (softmax - onehot) / batch, in one pass per row.
#include <cmath>

#include "backend/cpu/cpu_backend.h"

namespace xo::cpu {
namespace {

class CpuCrossEntropy final : public CrossEntropyKernel {
 public:
  CpuCrossEntropy(int64_t batch, int64_t classes, int64_t normalizer)
      : batch_(batch), classes_(classes), normalizer_(normalizer) {}

  void forward_backward(const float* logits, const int32_t* labels, float* d_logits,
                        LossStats* stats) override {
    const int64_t c = classes_;
    const float inv_batch = 1.0f / static_cast<float>(normalizer_);
    double loss = 0.0;
    int64_t correct = 0;
    for (int64_t r = 0; r < batch_; ++r) {
      const float* x = logits + r * c;
      int64_t arg_max = 0;
      for (int64_t j = 1; j < c; ++j) arg_max = x[j] > x[arg_max] ? j : arg_max;
      const float max = x[arg_max];
      float sum = 0.0f;
      for (int64_t j = 0; j < c; ++j) sum += std::exp(x[j] - max);
      const int32_t label = labels[r];
      // log-sum-exp shifted by the max, so large logits cannot overflow.
      loss += static_cast<double>(std::log(sum) + max - x[label]);
      correct += arg_max == label;
      if (d_logits) {
        float* g = d_logits + r * c;
        const float inv_sum = 1.0f / sum;
        for (int64_t j = 0; j < c; ++j) g[j] = std::exp(x[j] - max) * inv_sum * inv_batch;
        g[label] -= inv_batch;
      }
    }
    stats->loss_sum += loss / static_cast<double>(normalizer_);
    stats->correct += static_cast<double>(correct);
    stats->samples += static_cast<double>(batch_);
  }

 private:
  int64_t batch_, classes_, normalizer_;
};

}  // namespace

std::unique_ptr<CrossEntropyKernel> make_cross_entropy(int64_t batch, int64_t classes,
                                                       int64_t normalizer) {
  return std::make_unique<CpuCrossEntropy>(batch, classes, normalizer);
}

}  // namespace xo::cpu
