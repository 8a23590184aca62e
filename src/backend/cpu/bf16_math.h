// f32 to bf16 as the CPU's bf16 path rounds: to nearest, ties to even (as PyTorch and oneDNN
// round), a NaN kept a (quiet) NaN, f32's subnormals kept. One element (bf16_bits) and a row
// (bf16_row, bf16_row_streamed: the same bits), for the copies each bf16 step makes: the
// activations and output gradients a product reads, and the weights' copy each optimizer pass
// writes.
#pragma once

#include <cstdint>
#include <cstring>

namespace xo::cpu {

// The bf16 nearest to x, as its bits.
inline uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// dst[i] = bf16_bits(src[i]) for i < n, on the calling thread: 32 at a time by AVX-512 BF16's
// conversion where the build targets it (bf16_math.cpp), so the bits never depend on the path.
void bf16_row(const float* src, uint16_t* dst, int64_t n);
// The same, with stores that bypass the caches: for a copy no one reads before it has left them
// (the optimizer's pass over all the weights: its copy is read in the next step's products).
void bf16_row_streamed(const float* src, uint16_t* dst, int64_t n);

}  // namespace xo::cpu
