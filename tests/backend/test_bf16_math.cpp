// The CPU's f32 -> bf16 rows (backend/cpu/bf16_math.h) against bf16_bits element by element: the
// same bits for every kind of value (ties both ways, subnormals, NaNs, infinities, the largest
// finite floats), at every length and alignment, the streamed stores too. Built with the library's
// flags (-march=native), so on a CPU with AVX-512 BF16 this is the vector path against the scalar
// one; elsewhere both are the scalar one.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/bf16_math.h"
#include "core/random.h"

namespace xo::cpu {
namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Values that each take another branch of the rounding, and ordinary ones around them.
std::vector<float> kinds_of_values() {
  std::vector<float> v = {
      0.0f,
      -0.0f,
      1.0f,
      -1.0f,
      3.14159265f,
      1e-30f,
      -2.5e30f,
      from_bits(0x3f808000u),  // a tie, even below: rounds down
      from_bits(0x3f818000u),  // a tie, odd below: rounds up
      from_bits(0x3f807fffu),
      from_bits(0x3f808001u),
      from_bits(0x00000001u),             // the smallest subnormal
      from_bits(0x807fffffu),             // the largest negative subnormal
      from_bits(0x00400000u),             // a subnormal that rounds to a bf16 one
      std::numeric_limits<float>::min(),  // the smallest normal
      std::numeric_limits<float>::max(),  // rounds to infinity
      -std::numeric_limits<float>::max(),
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(),
      from_bits(0x7f800001u),  // a signalling NaN: quietened
      from_bits(0xffc12345u),  // a negative NaN with a payload
  };
  Rng rng(7);
  for (int i = 0; i < 200; ++i) v.push_back(static_cast<float>(rng.uniform(-4.0, 4.0)));
  return v;
}

TEST(Bf16Math, RowsGiveBf16BitsForEveryKindOfValueLengthAndAlignment) {
  const std::vector<float> values = kinds_of_values();
  std::vector<float> src(160);
  std::vector<uint16_t> dst(160 + 32), want(160);
  using Row = void (*)(const float*, uint16_t*, int64_t);
  for (const auto& [name, row] : {std::pair<const char*, Row>{"bf16_row", bf16_row},
                                  {"bf16_row_streamed", bf16_row_streamed}}) {
    // Each value at every position of a 32-wide block, and a subnormal in some blocks only.
    for (size_t start = 0; start < values.size(); start += 37) {
      for (size_t i = 0; i < src.size(); ++i) src[i] = values[(start + i * 7) % values.size()];
      for (size_t i = 0; i < src.size(); ++i) want[i] = bf16_bits(src[i]);
      for (const int64_t n : {0, 1, 31, 32, 33, 64, 95, 160}) {
        for (const int64_t offset : {0, 1, 8, 31}) {  // dst + offset: 2-byte steps off a line
          std::fill(dst.begin(), dst.end(), uint16_t{0xdead});
          row(src.data(), dst.data() + offset, n);
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(dst[static_cast<size_t>(offset + i)], want[static_cast<size_t>(i)])
                << name << ": element " << i << " of " << n << " (at offset " << offset
                << "), f32 bits 0x" << std::hex
                << std::bit_cast<uint32_t>(src[static_cast<size_t>(i)]);
          }
          EXPECT_EQ(dst[static_cast<size_t>(offset + n)], 0xdead) << name << ": wrote past n";
        }
      }
    }
  }
}

// bf16_bits itself, on the values whose bits are known: the rounding the rows must reproduce.
TEST(Bf16Math, Bf16BitsRoundsToNearestEvenAndKeepsNansQuiet) {
  struct Case {
    uint32_t f32;
    uint16_t bf16;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80u}, {0x3f808000u, 0x3f80u}, {0x3f818000u, 0x3f82u},
      {0x3f807fffu, 0x3f80u}, {0x3f808001u, 0x3f81u}, {0x7f7fffffu, 0x7f80u},
      {0x00000001u, 0x0000u}, {0x00408000u, 0x0040u}, {0x7f800001u, 0x7fc0u},
      {0xffc12345u, 0xffc1u}, {0xff800000u, 0xff80u}, {0x80000000u, 0x8000u},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(bf16_bits(from_bits(c.f32)), c.bf16) << std::hex << "f32 bits 0x" << c.f32;
  }
}

}  // namespace
}  // namespace xo::cpu
