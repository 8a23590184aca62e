// The nesting check of JSON text: one pass over the bytes, tracking only strings and brackets.
#include "core/json_depth.h"

#include <fmt/format.h>

#include "core/error.h"

namespace xo {

void check_json_depth(std::string_view text, std::string_view origin, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, which may be a quote
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        throw UserError(
            fmt::format("{}: JSON nested too deep at byte {} (expected at most {} levels of "
                        "arrays and objects)",
                        origin, i, max_depth));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;  // an unmatched closing bracket is the parser's to report
    }
  }
}

}  // namespace xo
