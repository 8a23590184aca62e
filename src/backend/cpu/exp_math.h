// Exponentials the compiler vectorises, for the CPU loops that take one per element (the
// softmax's, the LSTM's gates): libm's expf is a call per element, which GCC turns into libmvec's
// vector calls only under -ffast-math. The files that use them are built with -fno-trapping-math
// (src/CMakeLists.txt), without which GCC keeps a branch per element where both sides of a choice
// are computed.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace xo::cpu {

// exp(x) for x <= 0 (softmax's shifted logits): 2^n exp(r) with n = round(x / ln 2) and
// r = x - n ln 2 in [-ln 2 / 2, ln 2 / 2] (ln 2 split in two for an exact n ln 2), exp(r) by
// Cephes' degree-6 polynomial for expf: within a few ulp of exp (CrossEntropyKernel test). Below
// -87.6 (exp(x) under FLT_MIN, where 2^n would not be a normal float) it gives 0. A NaN stays NaN.
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
  // 2^n, n >= -126 where kept (a NaN's n taken as 0: its e is NaN already)
  const int32_t exponent = (static_cast<int32_t>(under || n != n ? 0.0f : n) + 127) << 23;
  return under ? 0.0f : e * std::bit_cast<float>(exponent);
}

// sigmoid(x) = 1 / (1 + exp(-x)) from e = exp(-|x|) in (0, 1]: 1 / (1 + e) for x >= 0, e / (1 + e)
// below, so that the exponential never overflows.
inline float sigmoid_exp(float x) {
  const float e = shifted_exp(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

// tanh(x) = (1 - e) / (1 + e) with e = exp(-2|x|), the sign of x.
inline float tanh_exp(float x) {
  const float e = shifted_exp(-2.0f * std::fabs(x));
  const float t = (1.0f - e) / (1.0f + e);
  return x >= 0.0f ? t : -t;
}

}  // namespace xo::cpu
