// core/format's byte sizes, as memory errors print them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/format.h"

namespace xo {
namespace {

TEST(Format, ByteSizesTakeTheUnitThatKeepsThemBelowAThousand) {
  struct Case {
    double bytes;
    const char* expected;
  };
  constexpr double KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024, TiB = GiB * 1024;
  for (const Case& c :
       {Case{0, "0 B"}, Case{512, "512 B"}, Case{999, "999 B"}, Case{1000, "0.977 KiB"},
        Case{1536, "1.50 KiB"}, Case{256 * MiB, "256 MiB"}, Case{1023.9 * MiB, "1.00 GiB"},
        Case{41.3 * GiB, "41.3 GiB"}, Case{596 * GiB, "596 GiB"}, Case{4 * TiB, "4.00 TiB"},
        Case{-2 * KiB, "-2.00 KiB"}, Case{std::numeric_limits<double>::quiet_NaN(), "n/a"}}) {
    EXPECT_EQ(byte_size(c.bytes), c.expected) << c.bytes;
  }
}

}  // namespace
}  // namespace xo
