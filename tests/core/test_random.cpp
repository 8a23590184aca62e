// Dropout's counter-based masks, pinned: every recorded run with dropout (results.json, a
// checkpoint) replays bit for bit only while dropout_keep draws the same bits, on the CPU, a GPU
// and in any split of the work (tests/backend/test_ops.cpp checks each backend's kernel against
// dropout_keep). The bits below were computed from the function's definition outside the engine
// (SplitMix64's finalizer, in Python), before its loop was vectorised.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/random.h"

namespace xo {
namespace {

std::string mask(uint64_t seed, uint64_t step, uint64_t first, double p) {
  std::string bits;
  for (uint64_t i = 0; i < 64; ++i)
    bits += dropout_keep(seed, step, first + i, dropout_threshold(p)) ? '1' : '0';
  return bits;
}

TEST(DropoutMask, DrawsTheBitsRecordedRunsWereTrainedWith) {
  EXPECT_EQ(mask(42, 7, 1000, 0.5),
            "0100010001001000100011011000011111000011111110011010000011001110");
  EXPECT_EQ(mask(0, 0, 0, 0.2),
            "1111001100111111111111100111011110111011111111110111111101101111");
}

TEST(DropoutMask, AStepsStreamAndAnElementsDrawMakeTheSameMask) {
  const uint64_t stream = dropout_stream(42, 7);
  for (uint64_t i = 0; i < 64; ++i)
    EXPECT_EQ(dropout_draw(stream, 1000 + i) >= dropout_threshold(0.5),
              dropout_keep(42, 7, 1000 + i, dropout_threshold(0.5)))
        << i;
}

}  // namespace
}  // namespace xo
