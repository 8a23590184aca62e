// bf16_row: VCVTNE2PS2BF16 rounds to nearest even and quietens a NaN as bf16_bits does, but takes
// a subnormal input as zero; a block of 32 with one (rare in a network's values) goes element by
// element, so a copy made here and one made elsewhere agree bit for bit (a resumed run's first
// step converts the weights itself where an unbroken run reads its optimizer's copy). Streamed
// stores skip reading each line of the copy for ownership before writing it: disc-12's optimizer
// pass at bf16 0.88x the time of ordinary stores on an AMX Xeon (docs/benchmarks.md, "The
// weights' bf16 copy, written past the caches").
#include "backend/cpu/bf16_math.h"

#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
#include <immintrin.h>
#endif

namespace xo::cpu {
namespace {

template <bool Stream>
void convert(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
  constexpr int kSubnormal = 0x20;  // VFPCLASSPS: denormal
  if constexpr (Stream) {
    for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % 64 != 0; ++i) dst[i] = bf16_bits(src[i]);
  }
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
    if (_mm512_fpclass_ps_mask(lo, kSubnormal) | _mm512_fpclass_ps_mask(hi, kSubnormal)) {
      for (int64_t j = i; j < i + 32; ++j) dst[j] = bf16_bits(src[j]);
      continue;
    }
    const auto bits = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    if constexpr (Stream) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), bits);
    } else {
      _mm512_storeu_si512(dst + i, bits);
    }
  }
  if constexpr (Stream) _mm_sfence();  // the streamed stores ordered before what follows
#endif
#pragma omp simd
  for (int64_t j = i; j < n; ++j) dst[j] = bf16_bits(src[j]);
}

}  // namespace

void bf16_row(const float* src, uint16_t* dst, int64_t n) { convert<false>(src, dst, n); }
void bf16_row_streamed(const float* src, uint16_t* dst, int64_t n) { convert<true>(src, dst, n); }

}  // namespace xo::cpu
