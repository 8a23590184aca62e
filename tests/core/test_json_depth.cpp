// The JSON nesting check that runs before every JSON parse of a file (core/json_depth.h).
#include <gtest/gtest.h>

#include <string>

#include "core/json_depth.h"
#include "support/expect_error.h"

namespace xo {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonDepth, AcceptsUpToTheLimit) {
  check_json_depth(nested(kMaxJsonDepth), "a.json");
  check_json_depth(R"({"a": [1, {"b": [2, 3]}], "c": {}})", "a.json");
  check_json_depth("", "a.json");
}

TEST(JsonDepth, RefusesOneLevelMoreNamingTheFile) {
  testing::expect_user_error([] { check_json_depth(nested(kMaxJsonDepth + 1), "deep.json"); },
                             {"deep.json: JSON nested too deep at byte 64",
                              "expected at most 64 levels of arrays and objects"});
  testing::expect_user_error([] { check_json_depth(R"({"a": {"b": [[]]}})", "small.json", 3); },
                             {"small.json: JSON nested too deep at byte 13"});
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  const std::string brackets(1000, '[');
  check_json_depth("{\"key\": \"" + brackets + "\"}", "a.json");
  // An escaped quote does not end the string; an escaped backslash before the quote does.
  check_json_depth(R"(["a\"[[[[", "b\\"])", "a.json", 1);
  testing::expect_user_error([] { check_json_depth(R"(["b\\", [[]]])", "a.json", 2); },
                             {"a.json: JSON nested too deep"});
}

TEST(JsonDepth, ClosingBracketsBeyondTheOpenOnesAreLeftToTheParser) {
  check_json_depth("]]]]" + nested(3), "a.json", 3);
}

}  // namespace
}  // namespace xo
