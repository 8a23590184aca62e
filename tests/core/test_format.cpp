// core/format's byte sizes, as memory errors print them, and terminal_safe, which every name from a
// file goes through before it reaches the terminal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

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

TEST(TerminalSafe, ShowsControlCharactersInsteadOfSendingThem) {
  struct Case {
    std::string text;
    std::string expected;
  };
  for (const Case& c : {
           Case{"disc-12", "disc-12"},
           Case{"\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"},  // colour codes
           Case{"\x1b]0;owned\x07", "\\x1b]0;owned\\x07"},      // a window title
           Case{"two\nlines\ttab\r", "two\\nlines\\ttab\\r"},
           Case{std::string("nul\0byte", 8), "nul\\0byte"},
           Case{"del\x7f", "del\\x7f"},
           Case{"c1 \xc2\x9b"
                "2J",
                "c1 \\xc2\\x9b2J"},  // CSI as a UTF-8 C1 control
           Case{"raw \x9b"
                "2J",
                "raw \\x9b2J"},                     // CSI as a raw byte
           Case{"cut \xe2\x82", "cut \\xe2\\x82"},  // a truncated sequence
           Case{"overlong \xc0\xaf", "overlong \\xc0\\xaf"},
           Case{"evil\xe2\x80\xaetxt.exe", "evil\\u202etxt.exe"},  // right-to-left override
           Case{"µs, é, 日本, 😀", "µs, é, 日本, 😀"},               // printable UTF-8 is kept
           Case{"C:\\path", "C:\\path"},
       }) {
    EXPECT_EQ(terminal_safe(c.text), c.expected) << c.expected;
  }
}

TEST(Format, WrapBreaksEachLineAtSpacesWithinTheWidth) {
  struct Case {
    std::string text;
    size_t width;
    std::string expected;
  };
  for (const Case& c : {
           Case{"short", 10, "short"},
           Case{"one two three four", 9, "one two\n  three\n  four"},
           Case{"exactly ten", 11, "exactly ten"},
           Case{"a\nb c d e", 3, "a\nb c\n  d\n  e"},  // each line alone, its breaks kept
           Case{"unbreakable-word here", 5, "unbreakable-word\n  here"},
           Case{"ends\n", 10, "ends\n"},
       }) {
    EXPECT_EQ(wrap(c.text, c.width), c.expected) << c.text;
  }
  // Every row within the width where the words allow.
  std::string words;
  for (int i = 0; i < 100; ++i) words += "word" + std::to_string(i) + " ";
  const std::string rows = wrap(words, 40);
  size_t start = 0;
  while (start < rows.size()) {
    const size_t end = std::min(rows.find('\n', start), rows.size());
    EXPECT_LE(end - start, 40u) << rows.substr(start, end - start);
    start = end + 1;
  }
}

}  // namespace
}  // namespace xo
