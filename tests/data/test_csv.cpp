// CSV parsing details beyond test_data.cpp: a large file, byte order marks, whitespace, number
// syntax, and the error cases it leaves out (non-finite values, stray header rows, line counting).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

// Each suite writes into a fresh folder of its own, removed afterwards, so files from an earlier
// run never leak in.
class CsvTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_.emplace("xo_csv"); }
  static void TearDownTestSuite() { dir_.reset(); }

  static std::filesystem::path write(const std::string& name, const std::string& text) {
    const auto path = *dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

 private:
  static inline std::optional<testing::TempDir> dir_;
};

using CsvParsing = CsvTest;

TEST_F(CsvParsing, LargeFileIsExact) {
  // 60000 rows, the size of the MNIST-style files users bring; values exactly representable.
  constexpr int kRows = 60000;
  constexpr int kClasses = 10;
  std::string text = "a,b,c,label\n";
  for (int i = 0; i < kRows; ++i) {
    text += fmt::format("{},{},{},{}\n", i, -0.5 * i, i % 7 * 0.25, i % kClasses);
  }
  const Dataset d = load_csv(write("large.csv", text), kClasses, 3);
  ASSERT_EQ(d.samples, kRows);
  EXPECT_EQ(d.features, 3);
  EXPECT_EQ(d.classes, kClasses);
  ASSERT_EQ(d.x.size(), 3u * kRows);
  for (int i = 0; i < kRows; i += 997) {
    EXPECT_EQ(d.x[3 * i], static_cast<float>(i));
    EXPECT_EQ(d.x[3 * i + 1], static_cast<float>(-0.5 * i));
    EXPECT_EQ(d.x[3 * i + 2], static_cast<float>(i % 7 * 0.25));
    EXPECT_EQ(d.y[i], i % kClasses);
  }
  EXPECT_NE(d.description.find("60000 rows"), std::string::npos) << d.description;
}

TEST_F(CsvParsing, ByteOrderMarkDoesNotEatTheFirstRow) {
  const Dataset headerless = load_csv(write("bom.csv",
                                            "\xEF\xBB\xBF"
                                            "1,2,1\n3,4,0\n"),
                                      2, 2);
  EXPECT_EQ(headerless.samples, 2);
  EXPECT_EQ(headerless.y, (std::vector<int32_t>{1, 0}));
  const Dataset with_header = load_csv(write("bom_header.csv",
                                             "\xEF\xBB\xBF"
                                             "x,y,label\r\n1,2,1\r\n"),
                                       2, 2);
  EXPECT_EQ(with_header.samples, 1);
}

TEST_F(CsvParsing, WhitespaceCrlfAndNoFinalNewline) {
  const Dataset d =
      load_csv(write("spaces.csv", " x , y ,label\r\n\r\n\t1.5 ,\t-2\t, 1 \r\n  \r\n3,4,0"), 2, 2);
  EXPECT_EQ(d.samples, 2);
  EXPECT_EQ(d.x, (std::vector<float>{1.5f, -2.0f, 3.0f, 4.0f}));
  EXPECT_EQ(d.y, (std::vector<int32_t>{1, 0}));
}

// Classic Mac OS line endings (a lone CR) end lines too: such a file once read as one line of
// 800 feature columns.
TEST_F(CsvParsing, CrOnlyLineEndsAreLineEnds) {
  const Dataset d = load_csv(write("mac.csv", "x,y,label\r1,2,1\r\r3,4,0\r"), 2, 2);
  EXPECT_EQ(d.samples, 2);
  EXPECT_EQ(d.x, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  EXPECT_EQ(d.y, (std::vector<int32_t>{1, 0}));
  testing::expect_user_error([&] { load_csv(write("mac_bad.csv", "1,2,0\r1,2,9\r"), 2, 2); },
                             {"mac_bad.csv:2:", "label 9"});
}

TEST_F(CsvParsing, NumberSyntax) {
  // A leading '+', exponents, and integer-valued labels written as floats (pandas writes "1.0").
  const Dataset d = load_csv(write("numbers.csv", "+2,1e3,-4.5E-1,1.0\n.5,0,7,0e0\n"), 2, 3);
  EXPECT_EQ(d.x, (std::vector<float>{2.0f, 1000.0f, -0.45f, 0.5f, 0.0f, 7.0f}));
  EXPECT_EQ(d.y, (std::vector<int32_t>{1, 0}));
}

// A header has no numeric field; a first line with numbers is data, and a field there that is not
// a number is a typo, reported with its line and column. Taken for a header, the row was dropped
// without a word.
TEST_F(CsvParsing, AHeaderHasNoNumberAndAFirstLineWithATypoIsAnError) {
  const Dataset d = load_csv(write("header.csv", "x1, x2 ,label\n5,6,1\n"), 2, 2);
  EXPECT_EQ(d.samples, 1);
  EXPECT_EQ(d.x, (std::vector<float>{5.0f, 6.0f}));
  const auto typo = write("typo.csv", "0.5,O.3,1\n0.1,0.2,0\n");
  testing::expect_user_error(
      [&] { load_csv(typo, 2, 2); },
      {typo.string() + ":1: column 2 is 'O.3', not a number", "it is data, not a header"});
  const auto partly = write("partly.csv", "1,feature_2,0\n5,6,1\n");
  testing::expect_user_error([&] { load_csv(partly, 2, 2); },
                             {partly.string() + ":1: column 2 is 'feature_2'"});
  // A typo in the label of the first line is the label's error, not a header either.
  const auto label = write("label.csv", "0.5,0.3,l\n0.1,0.2,0\n");
  testing::expect_user_error([&] { load_csv(label, 2, 2); },
                             {label.string() + ":1: label 'l' is not an integer"});
}

TEST_F(CsvParsing, ClassesComeFromTheCaller) {
  const Dataset d = load_csv(write("classes.csv", "0,0\n1,3\n"), 5, 0);
  EXPECT_EQ(d.classes, 5);
  EXPECT_EQ(d.features, 1);
  EXPECT_NE(d.description.find("classes.csv"), std::string::npos) << d.description;
}

struct CsvCase {
  std::string name;
  std::string text;
  int64_t classes;
  int64_t features;
  std::vector<std::string> expected;
  // Names the case in gtest's failure output instead of a byte dump.
  friend void PrintTo(const CsvCase& c, std::ostream* os) { *os << c.name; }
};

class CsvErrors : public CsvTest, public ::testing::WithParamInterface<CsvCase> {};

TEST_P(CsvErrors, NamesFileLineAndProblem) {
  const CsvCase& c = GetParam();
  const auto path = write(c.name + ".csv", c.text);
  std::vector<std::string> expected = c.expected;
  expected.push_back(path.string());
  testing::expect_user_error([&] { load_csv(path, c.classes, c.features); }, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CsvErrors,
    ::testing::Values(
        CsvCase{"nan_feature", "1,2,0\nnan,2,1\n", 2, 0, {":2:", "column 1", "'nan'", "finite"}},
        CsvCase{"minus_inf_feature", "1,-inf,0\n", 2, 0, {":1:", "column 2", "'-inf'", "finite"}},
        CsvCase{"beyond_float", "1,1e39,0\n", 2, 0, {":1:", "column 2", "'1e39'", "finite"}},
        CsvCase{"nan_label", "1,2,0\n1,2,nan\n", 2, 0, {":2:", "label 'nan' is not an integer"}},
        CsvCase{"inf_label", "1,2,0\n1,2,inf\n", 2, 0, {":2:", "label 'inf' is not an integer"}},
        CsvCase{"word_label", "1,2,0\n1,2,cat\n", 2, 0, {":2:", "label 'cat' is not an integer"}},
        CsvCase{"empty_field", "1,2,0\n1,,0\n", 2, 0, {":2:", "column 2 is ''", "not a number"}},
        CsvCase{
            "double_sign", "1,2,0\n1,+-1,0\n", 2, 0, {":2:", "column 2 is '+-1'", "not a number"}},
        CsvCase{"trailing_garbage",
                "1,2,0\n1,2x,0\n",
                2,
                0,
                {":2:", "column 2 is '2x'", "not a number"}},
        CsvCase{"second_header", "x,y,label\n1,2,0\nx,y,label\n", 2, 0, {":3:", "column 1", "'x'"}},
        // Blank lines count: the error is on line 5 of the file, not the third non-blank line.
        CsvCase{"lines_counted", "1,2,0\n\n\r\n3,4,1\n5,6,9\n", 2, 0, {":5:", "label 9", "[0, 1]"}},
        CsvCase{"ten_classes", "1,2,10\n", 10, 0, {":1:", "10 classes", "[0, 9]"}},
        CsvCase{"short_row", "1,2,0\n1,0\n", 2, 0, {":2:", "2 columns", "expected 3", "line 1"}},
        CsvCase{"feature_count_too_few",
                "h,label\n1,0\n",
                2,
                4,
                {":2:", "1 feature columns", "expects 4"}},
        CsvCase{"header_only_one_column", "label\n1\n", 2, 0, {":2:", "at least 2"}},
        CsvCase{"empty_file", "", 2, 0, {"no data rows"}},
        CsvCase{"blank_lines_only", "\n \r\n\t\n", 2, 0, {"no data rows"}},
        // What a message quotes is escaped and kept whole: a NUL once cut it short, an escape
        // sequence reached the terminal.
        CsvCase{"nul_in_a_field",
                std::string("1,2,0\n1,2\0x\x1b[2J,0\n", 18),
                2,
                0,
                {":2:", "column 2 is '2\\0x\\x1b[2J'", "not a number"}}),
    [](const auto& case_info) { return case_info.param.name; });

TEST(CsvFile, MissingFileIsNamed) {
  testing::expect_user_error([] { load_csv("/nonexistent/dir/points.csv", 2, 0); },
                             {"/nonexistent/dir/points.csv", "cannot open"});
}

// A regression CSV (classes = 0, loss mse): the last column is a real target, kept exactly as a
// float's bits in the label slot; a target that is not a finite number names its line.
TEST(CsvRegression, TheLastColumnIsARealTargetKeptAsAFloatsBits) {
  const Dataset d = parse_csv("a,b,target\n1,2,0.5\n3,4,-1e3\n5,6,2\n", "reg.csv", 0, 2);
  ASSERT_EQ(d.samples, 3);
  EXPECT_EQ(d.classes, 0);
  EXPECT_EQ(std::bit_cast<float>(d.y[0]), 0.5f);
  EXPECT_EQ(std::bit_cast<float>(d.y[1]), -1000.0f);
  EXPECT_EQ(std::bit_cast<float>(d.y[2]), 2.0f);
  testing::expect_user_error([] { parse_csv("a,t\n1,2\n3,nan\n", "reg.csv", 0, 1); },
                             {"reg.csv:3:", "target 'nan' is not a finite number"});
  testing::expect_user_error([] { parse_csv("a,t\n1,1e39\n", "reg.csv", 0, 1); },
                             {"reg.csv:2:", "finite float32"});
}

}  // namespace
}  // namespace xo
