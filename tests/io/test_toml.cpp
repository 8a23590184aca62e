// The TOML reader shared by specs and the catalog: typed getters, the dotted key of every value,
// and the one wording of its errors ("FILE:LINE: dotted.key: what was expected (and what was
// found)"); plus the TOML text helpers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "io/toml.h"
#include "support/expect_error.h"

namespace xo {
namespace {

using testing::user_error;

constexpr const char* kText = R"(top = 1
[server]
name = "alpha"
port = 8080
ratio = 0.5
ratios = [0.25, 2]
enabled = true
day = 2024-02-29
when = "2023-02-29"
mode = "fast"
"odd key" = 3

[[entry]]
id = "a.b"
)";

TEST(TomlReader, ReadsTypedValuesAtTheirDottedKeys) {
  const TomlDocument doc(kText, "t.toml");
  const TomlTable root = doc.root();
  EXPECT_EQ(root.path(), "");
  EXPECT_EQ(root.get("top").integer(), 1);
  const TomlTable server = root.get("server").table("a [server] table");
  EXPECT_EQ(server.path(), "server");
  EXPECT_EQ(server.line(), 2);
  EXPECT_EQ(server.get("name").string(), "alpha");
  EXPECT_EQ(server.get("name").non_empty_string(), "alpha");
  EXPECT_EQ(server.get("port").integer_at_least(1), 8080);
  EXPECT_EQ(server.get("port").number(), 8080.0);  // an integer is a number
  EXPECT_EQ(server.get("ratio").number(kUnitOpen), 0.5);
  EXPECT_TRUE(server.get("enabled").boolean());
  EXPECT_EQ(server.get("day").date(), "2024-02-29");  // a bare TOML date reads as text
  EXPECT_EQ(server.get("mode").choice("mode", {"slow", "fast"}), 1u);
  const std::vector<TomlValue> ratios = server.get("ratios").list("a list");
  ASSERT_EQ(ratios.size(), 2u);
  EXPECT_EQ(ratios[1].path(), "server.ratios[1]");
  EXPECT_EQ(ratios[1].line(), 6);
  EXPECT_EQ(ratios[1].number(), 2.0);
  EXPECT_EQ(server.get("odd key").path(), "server.\"odd key\"");
  EXPECT_FALSE(server.get("absent"));
  EXPECT_TRUE(server.get("name").is_string());
  EXPECT_FALSE(server.get("name").is_number());
  EXPECT_EQ(server.keys(), (std::vector<std::string>{"name", "port", "ratio", "ratios", "enabled",
                                                     "day", "when", "mode", "odd key"}));
  const std::vector<TomlValue> entries = root.get("entry").list("[[entry]] tables");
  ASSERT_EQ(entries.size(), 1u);
  const TomlTable entry = entries[0].table("an entry").renamed(toml_path("entry", "a.b"));
  EXPECT_EQ(entry.get("id").path(), "entry.\"a.b\".id");
}

TEST(TomlReader, EveryErrorNamesFileLineKeyAndExpectation) {
  const TomlDocument doc(kText, "t.toml");
  const TomlTable server = doc.root().get("server").table("a [server] table");
  // Absent keys point at their table's line.
  EXPECT_EQ(user_error([&] { server.get("host").string(); }),
            "t.toml:2: server.host: missing (expected a string)");
  EXPECT_EQ(user_error([&] { doc.root().get("client").table("a [client] table"); }),
            "t.toml:1: client: missing (expected a [client] table)");
  EXPECT_EQ(user_error([&] { server.get("name").integer(); }),
            "t.toml:3: server.name: got the string \"alpha\" (expected an integer)");
  EXPECT_EQ(user_error([&] { server.get("ratio").integer(); }),
            "t.toml:5: server.ratio: got the float 0.5 (expected an integer)");
  EXPECT_EQ(user_error([&] { server.get("ratios").number(); }),
            "t.toml:6: server.ratios: got the list [0.25, 2] (expected a finite number)");
  EXPECT_EQ(user_error([&] { server.get("enabled").string("a name"); }),
            "t.toml:7: server.enabled: got the boolean true (expected a name)");
  EXPECT_EQ(user_error([&] { server.get("port").boolean(); }),
            "t.toml:4: server.port: got the integer 8080 (expected true or false)");
  EXPECT_EQ(user_error([&] { server.get("when").date(); }),
            "t.toml:9: server.when: got the string \"2023-02-29\" (expected a date YYYY-MM-DD "
            "with a valid month and day)");
  EXPECT_EQ(user_error([&] {
              server.get("mode").choice("mode", {"slow", "safe"});
            }),
            "t.toml:10: server.mode: unknown mode 'fast' (expected one of: slow, safe)");
  EXPECT_EQ(user_error([&] {
              server.get("port").choice("mode", {"slow", "safe"});
            }),
            "t.toml:4: server.port: got the integer 8080 (expected the mode, one of: slow, safe)");
  EXPECT_EQ(user_error([&] { server.get("name").fail("taken"); }), "t.toml:3: server.name: taken");
}

TEST(TomlReader, RangeChecksSayTheValueAndTheBound) {
  const TomlDocument doc("a = -4\nb = 0\nc = 1.0\nd = -1e-4\n", "r.toml");
  const TomlTable t = doc.root();
  EXPECT_EQ(user_error([&] { t.get("a").integer_at_least(1, "width"); }),
            "r.toml:1: a: width -4 must be a positive integer");
  EXPECT_EQ(user_error([&] { t.get("a").integer_at_least(0); }),
            "r.toml:1: a: -4 must be an integer >= 0");
  EXPECT_EQ(t.get("b").integer_at_least(0), 0);
  EXPECT_EQ(user_error([&] { t.get("b").number(kPositive); }), "r.toml:2: b: 0.0 must be > 0");
  EXPECT_EQ(user_error([&] { t.get("c").number(kUnitOpen, "a decay"); }),
            "r.toml:3: c: 1.0 must be in [0, 1) (a decay)");
  EXPECT_EQ(t.get("c").number(kUnitClosed), 1.0);
  EXPECT_EQ(user_error([&] { t.get("d").number(kNonNegative); }),
            "r.toml:4: d: -0.0001 must be >= 0");
  EXPECT_EQ((Range{0, true, 2, false}).text(), "in (0, 2]");
}

TEST(TomlReader, NonFiniteNumbersAreRefused) {
  const TomlDocument doc("a = inf\nb = nan\n", "n.toml");
  EXPECT_FALSE(doc.root().get("a").is_number());
  EXPECT_EQ(user_error([&] { doc.root().get("a").number(); }),
            "n.toml:1: a: got the float inf (expected a finite number)");
  EXPECT_EQ(user_error([&] { doc.root().get("b").number(); }),
            "n.toml:2: b: got the float nan (expected a finite number)");
}

TEST(TomlReader, UnknownKeysAreNamedInTheOrderOfTheFile) {
  // toml++ keeps keys sorted by name: "alpha" would come first, but "zeta" is first in the file.
  const TomlDocument doc("[t]\nname = 1\nzeta = 2\nalpha = 3\n", "k.toml");
  const TomlTable t = doc.root().get("t").table("a table");
  EXPECT_EQ(user_error([&] { t.only_keys({"name"}); }),
            "k.toml:3: t.zeta: unknown key (expected one of: name)");
  t.only_keys({"name", "zeta", "alpha"});  // all known: no error
}

TEST(TomlReader, SyntaxErrorsNameLineAndColumn) {
  const std::string message = user_error([] { TomlDocument("a = 1\nb = \n", "s.toml"); });
  EXPECT_EQ(message.rfind("s.toml:2: TOML syntax error (column ", 0), 0u) << message;
}

TEST(TomlReader, DescribesLongListsBySize) {
  const TomlDocument doc("l = [\"one\", \"two\", \"three\", \"four\", \"five\", \"six\"]\ne = []\n",
                         "d.toml");
  EXPECT_EQ(doc.root().get("l").describe(), "a list of 6 items");
  EXPECT_EQ(doc.root().get("e").describe(), "an empty list");
  EXPECT_EQ(doc.root().get("x").describe(), "nothing");
}

TEST(TomlText, FailAtWithoutALineOmitsIt) {
  EXPECT_EQ(user_error([] { fail_at("built-in", kNoLine, "model.input", "empty"); }),
            "built-in: model.input: empty");
  EXPECT_EQ(user_error([] { fail_at("f.toml", 7, "k", "bad"); }), "f.toml:7: k: bad");
}

TEST(TomlText, StringsFloatsAndPaths) {
  EXPECT_EQ(toml_string("a \"q\" \\ \n\t\x01"), "\"a \\\"q\\\" \\\\ \\n\\t\\u0001\"");
  EXPECT_EQ(toml_float(0), "0.0");
  EXPECT_EQ(toml_float(-1), "-1.0");
  EXPECT_EQ(toml_float(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(toml_float(1e22), "1e+22");
  EXPECT_EQ(toml_path("", "model"), "model");
  EXPECT_EQ(toml_path("instance", "aws-g5_x1"), "instance.aws-g5_x1");
  EXPECT_EQ(toml_path("instance", "aws-g5.xlarge"), "instance.\"aws-g5.xlarge\"");
  EXPECT_EQ(toml_path("a", ""), "a.\"\"");
}

}  // namespace
}  // namespace xo
