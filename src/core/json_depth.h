// A bound on how deeply a JSON document nests, checked on its text before any JSON library sees it.
#pragma once

#include <string_view>

namespace xo {

// nlohmann-json parses and dumps nested arrays and objects by recursion, one stack frame per level
// or more, so a file of a few hundred kilobytes of '[' overflows the stack. No document crossover
// writes (results.json, checkpoints, the peaks cache, a safetensors header) nests deeper than 10.
constexpr int kMaxJsonDepth = 64;

// Throws UserError naming `origin` when `text` opens arrays or objects more than `max_depth` deep.
// Brackets inside strings do not count; the text need not be valid JSON (the parser judges that).
void check_json_depth(std::string_view text, std::string_view origin,
                      int max_depth = kMaxJsonDepth);

}  // namespace xo
