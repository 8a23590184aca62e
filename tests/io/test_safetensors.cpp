// safetensors: exact round trips, the header layout we write, the other float dtypes (every F16
// bit pattern), and every malformed file named with the problem.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

constexpr size_t kLengthBytes = 8;  // the little-endian u64 in front of the JSON header
constexpr size_t kAlignment = 8;    // we pad so that the data starts 8-byte aligned

// Each suite writes into a fresh folder of its own, removed afterwards, so files from an earlier
// run never leak in.
class SafetensorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_.emplace("xo_safetensors"); }
  static void TearDownTestSuite() { dir_.reset(); }

  static std::filesystem::path temp(const std::string& name) { return *dir_ / name; }

  // Builds a file by hand: the header length (or `length_override`), the header JSON, raw data.
  static std::filesystem::path raw_file(const std::string& name, const std::string& header,
                                        const std::string& data, int64_t length_override = -1) {
    const auto path = temp(name);
    std::string bytes(kLengthBytes, '\0');
    const uint64_t len =
        length_override >= 0 ? static_cast<uint64_t>(length_override) : header.size();
    std::memcpy(bytes.data(), &len, kLengthBytes);
    std::ofstream(path, std::ios::binary) << bytes << header << data;
    return path;
  }

 private:
  static inline std::optional<testing::TempDir> dir_;
};

using Safetensors = SafetensorsTest;

template <typename T>
void append(std::string& bytes, T value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// Splits a file we wrote into its header length, header text and data.
struct Layout {
  uint64_t header_len = 0;
  std::string header;
  std::string data;
};

Layout read_layout(const std::filesystem::path& path) {
  const std::string file = read_file(path);
  Layout l;
  EXPECT_GE(file.size(), kLengthBytes);
  std::memcpy(&l.header_len, file.data(), kLengthBytes);
  EXPECT_LE(kLengthBytes + l.header_len, file.size());
  l.header = file.substr(kLengthBytes, l.header_len);
  l.data = file.substr(kLengthBytes + l.header_len);
  return l;
}

TEST_F(Safetensors, RoundTripIsBitExactWithMetadata) {
  std::vector<NamedTensor> tensors = {{"0.weight", {4, 2}, {}}, {"0.bias", {4}, {}}, {"s", {}, {}}};
  for (int i = 0; i < 8; ++i) tensors[0].data.push_back(0.1f * static_cast<float>(i) - 0.3f);
  tensors[1].data = {1e-38f, -0.0f, 3.4e38f, 1.0f / 3.0f};
  tensors[2].data = {42.0f};
  const auto path = temp("roundtrip.safetensors");
  save_safetensors(path, tensors, {{"format", "pt"}});
  const auto back = load_safetensors(path);
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back[i].name, tensors[i].name);
    EXPECT_EQ(back[i].shape, tensors[i].shape);
    ASSERT_EQ(back[i].data.size(), tensors[i].data.size());
    EXPECT_EQ(0, std::memcmp(back[i].data.data(), tensors[i].data.data(), 4 * back[i].data.size()));
  }
  const Layout l = read_layout(path);
  EXPECT_EQ((kLengthBytes + l.header_len) % kAlignment, 0u) << "data should start 8-byte aligned";
  EXPECT_NE(l.header.find("\"__metadata__\":{\"format\":\"pt\"}"), std::string::npos) << l.header;
}

TEST_F(Safetensors, NonFiniteValuesRoundTripBitExact) {
  const std::vector<float> special = {
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(), -0.0f};
  const auto path = temp("special.safetensors");
  save_safetensors(path, {{"v", {5}, special}});
  const auto back = load_safetensors(path);
  ASSERT_EQ(back.size(), 1u);
  ASSERT_EQ(back[0].data.size(), special.size());
  for (size_t i = 0; i < special.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(back[0].data[i]), std::bit_cast<uint32_t>(special[i])) << i;
  }
}

TEST_F(Safetensors, HeaderIsPaddedForEveryNameLength) {
  // Name lengths 1..16 move the unpadded header through every residue modulo 8.
  for (size_t name_len = 1; name_len <= 2 * kAlignment; ++name_len) {
    SCOPED_TRACE(fmt::format("name length {}", name_len));
    const std::vector<NamedTensor> tensors = {{std::string(name_len, 'w'), {3}, {1, 2, 3}},
                                              {"b", {1}, {4}}};
    const auto path = temp(fmt::format("pad{}.safetensors", name_len));
    save_safetensors(path, tensors);
    const Layout l = read_layout(path);
    EXPECT_EQ((kLengthBytes + l.header_len) % kAlignment, 0u);
    // The padding is trailing spaces only, and no more than needed.
    const size_t json_end = l.header.find_last_not_of(' ') + 1;
    EXPECT_EQ(l.header[json_end - 1], '}');
    EXPECT_LT(l.header.size() - json_end, kAlignment);
    EXPECT_EQ(l.data.size(), 4 * sizeof(float));
    EXPECT_TRUE(nlohmann::json::accept(l.header)) << l.header;
    EXPECT_EQ(load_safetensors(path).size(), 2u);
  }
}

TEST_F(Safetensors, OffsetsAreContiguousInTheGivenOrder) {
  // Not alphabetical: the file's data follows the caller's order, and so does the read.
  const std::vector<NamedTensor> tensors = {
      {"z", {2, 2}, {1, 2, 3, 4}}, {"a", {3}, {5, 6, 7}}, {"m", {0, 4}, {}}, {"k", {1}, {8}}};
  const auto path = temp("order.safetensors");
  save_safetensors(path, tensors);
  const Layout l = read_layout(path);
  const auto header = nlohmann::json::parse(l.header);
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    const auto& entry = header.at(t.name);
    EXPECT_EQ(entry.at("dtype"), "F32") << t.name;
    EXPECT_EQ(entry.at("shape").get<std::vector<int64_t>>(), t.shape) << t.name;
    const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    EXPECT_EQ(offsets, (std::vector<uint64_t>{offset, offset + sizeof(float) * t.data.size()}))
        << t.name;
    offset += sizeof(float) * t.data.size();
  }
  EXPECT_EQ(l.data.size(), offset);
  EXPECT_FALSE(header.contains("__metadata__")) << "no metadata was given";
  const auto back = load_safetensors(path);
  ASSERT_EQ(back.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(back[i].name, tensors[i].name);
    EXPECT_EQ(back[i].shape, tensors[i].shape);
    EXPECT_EQ(back[i].data, tensors[i].data);
  }
}

TEST_F(Safetensors, NoTensorsAtAll) {
  const auto path = temp("empty.safetensors");
  save_safetensors(path, {}, {{"note", "nothing here"}});
  EXPECT_TRUE(load_safetensors(path).empty());
  EXPECT_EQ((kLengthBytes + read_layout(path).header_len) % kAlignment, 0u);
  // Without metadata either, the header is still an object (once written as "null").
  save_safetensors(path, {});
  EXPECT_TRUE(load_safetensors(path).empty());
}

TEST_F(Safetensors, RepeatedNameIsACallerBug) {
  const auto path = temp("repeated.safetensors");
  EXPECT_THROW(save_safetensors(path, {{"w", {1}, {1}}, {"w", {1}, {2}}}), InternalError);
  EXPECT_THROW(save_safetensors(path, {{"__metadata__", {1}, {1}}}), InternalError);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(Safetensors, EmptyTensorsOverlapNothing) {
  // Empty tensors may share an offset with each other and with the start of a non-empty one, or
  // point inside one: they hold no bytes. They come back in the file's order.
  std::string data;
  append(data, 1.0f);
  append(data, 2.0f);
  const auto t = load_safetensors(
      raw_file("empty_tensors.safetensors",
               R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("inside":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
               R"("z0":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]},)"
               R"("a0":{"dtype":"F16","shape":[3,0],"data_offsets":[8,8]},)"
               R"("huge0":{"dtype":"F32","shape":[4294967296,0,4294967296],"data_offsets":[8,8]}})",
               data));
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].name, "w");
  EXPECT_EQ(t[0].data, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(t[1].name, "inside");
  EXPECT_EQ(t[2].name, "z0");
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(t[2].data.empty());
  EXPECT_EQ(t[3].name, "a0");
  // A zero dimension empties the tensor, however large the others.
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{int64_t{1} << 32, 0, int64_t{1} << 32}));
}

TEST_F(Safetensors, ReadsHalfBFloatAndDouble) {
  // F16 1.0 = 0x3c00, -2.0 = 0xc000, smallest subnormal 2^-24 = 0x0001; BF16 1.5 = 0x3fc0;
  // F64 0.25.
  std::string data;
  for (uint16_t h : {uint16_t{0x3c00}, uint16_t{0xc000}, uint16_t{0x0001}}) append(data, h);
  append(data, uint16_t{0x3fc0});
  append(data, 0.25);
  const auto path = raw_file(
      "dtypes.safetensors",
      R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},"b":{"dtype":"BF16","shape":[1],)"
      R"("data_offsets":[6,8]},"d":{"dtype":"F64","shape":[1,1],"data_offsets":[8,16]}})",
      data);
  const auto t = load_safetensors(path);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].data, (std::vector<float>{1.0f, -2.0f, 0x1p-24f}));
  EXPECT_EQ(t[1].data, std::vector<float>{1.5f});
  EXPECT_EQ(t[2].data, std::vector<float>{0.25f});
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{1, 1}));
}

// IEEE half precision from its definition: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
double half_reference(uint16_t h) {
  constexpr int kMantissaBits = 10;
  constexpr int kBias = 15;
  constexpr int kMaxExponent = 31;
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int exponent = (h >> kMantissaBits) & kMaxExponent;
  const int mantissa = h & ((1 << kMantissaBits) - 1);
  if (exponent == kMaxExponent) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - kBias - kMantissaBits);
  return sign * std::ldexp(mantissa + (1 << kMantissaBits), exponent - kBias - kMantissaBits);
}

TEST_F(Safetensors, EveryHalfBitPatternConvertsExactly) {
  constexpr size_t kPatterns = 1 << 16;
  std::string data;
  for (size_t i = 0; i < kPatterns; ++i) append(data, static_cast<uint16_t>(i));
  // BF16 is the top half of a float32: every pattern converts by a shift.
  for (size_t i = 0; i < kPatterns; ++i) append(data, static_cast<uint16_t>(i));
  const size_t half_bytes = 2 * kPatterns;
  const auto path = raw_file("all_halves.safetensors",
                             fmt::format(R"({{"h":{{"dtype":"F16","shape":[{}],)"
                                         R"("data_offsets":[0,{}]}},"b":{{"dtype":"BF16",)"
                                         R"("shape":[256,256],"data_offsets":[{},{}]}}}})",
                                         kPatterns, half_bytes, half_bytes, 2 * half_bytes),
                             data);
  const auto t = load_safetensors(path);
  ASSERT_EQ(t.size(), 2u);
  ASSERT_EQ(t[0].name, "h");
  ASSERT_EQ(t[0].data.size(), kPatterns);
  ASSERT_EQ(t[1].data.size(), kPatterns);
  for (size_t i = 0; i < kPatterns; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const double expected = half_reference(h);
    const float f16 = t[0].data[i];
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(f16)) << fmt::format("F16 {:#06x}", i);
    } else {
      // Every half is exactly a float, including the sign of zero.
      EXPECT_EQ(std::bit_cast<uint32_t>(f16), std::bit_cast<uint32_t>(static_cast<float>(expected)))
          << fmt::format("F16 {:#06x}: {} vs {}", i, f16, expected);
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(t[1].data[i]), static_cast<uint32_t>(h) << 16)
        << fmt::format("BF16 {:#06x}", i);
  }
  // Spot values, as a reader would check them by hand.
  EXPECT_EQ(t[0].data[0x7bff], 65504.0f);         // largest finite half
  EXPECT_EQ(t[0].data[0x0400], 0x1p-14f);         // smallest normal half
  EXPECT_EQ(t[0].data[0x03ff], 1023 * 0x1p-24f);  // largest subnormal half
  EXPECT_EQ(t[1].data[0xbf00], -0.5f);
}

TEST_F(Safetensors, DoubleRoundsToNearestFloat) {
  std::string data;
  for (double v : {0.1, -1e-300, 1.0 / 3.0}) append(data, v);
  const auto t = load_safetensors(raw_file(
      "double.safetensors", R"({"d":{"dtype":"F64","shape":[3],"data_offsets":[0,24]}})", data));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].data, (std::vector<float>{0.1f, -0.0f, 1.0f / 3.0f}));
}

TEST_F(Safetensors, MetadataOfAnyShapeIsIgnored) {
  std::string data;
  append(data, 2.0f);
  const auto t =
      load_safetensors(raw_file("metadata.safetensors",
                                R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("__metadata__":{"format":"pt","version":{"nested":[1,2]}}}  )",
                                data));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].name, "w");
  EXPECT_EQ(t[0].data, std::vector<float>{2.0f});
}

TEST_F(Safetensors, SizeMismatchMessageInFull) {
  const auto path = raw_file("w.safetensors",
                             R"({"0.weight":{"dtype":"F32","shape":[4,2],"data_offsets":[0,28]}})",
                             std::string(28, '\0'));
  try {
    load_safetensors(path);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              path.string() +
                  ": tensor '0.weight': data_offsets [0, 28] hold 28 bytes but shape [4, 2] of "
                  "F32 needs 32");
  }
}

struct BadFile {
  std::string name;
  std::string header;
  std::string data;
  int64_t length_override;
  std::vector<std::string> expected;
  // Names the case in gtest's failure output instead of a byte dump.
  friend void PrintTo(const BadFile& c, std::ostream* os) { *os << c.name; }
};

class SafetensorsErrorTest : public SafetensorsTest,
                             public ::testing::WithParamInterface<BadFile> {};

TEST_P(SafetensorsErrorTest, NamesFileAndProblem) {
  const BadFile& c = GetParam();
  const auto path = raw_file(c.name + ".safetensors", c.header, c.data, c.length_override);
  std::vector<std::string> expected = c.expected;
  expected.push_back(path.string());
  testing::expect_user_error([&] { load_safetensors(path); }, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, SafetensorsErrorTest,
    ::testing::Values(
        BadFile{"header_past_end", "{}", "", 4096, {"header length 4096", "past the end"}},
        BadFile{"huge_header_length", "{}", "", INT64_MAX, {"past the end"}},
        BadFile{"bad_json", "{not json", "", -1, {"not valid JSON"}},
        BadFile{"empty_header", "", "", -1, {"not valid JSON"}},
        BadFile{"header_not_object", "[1, 2]", "", -1, {"not a JSON object"}},
        BadFile{"nested_too_deep",
                R"({"w": {"dtype": "F32", "shape": )" + std::string(100, '[') +
                    std::string(100, ']') + R"(, "data_offsets": [0, 0]}})",
                "",
                -1,
                {"(header): JSON nested too deep", "expected at most 64 levels"}},
        BadFile{"entry_not_object", R"({"w": 5})", "", -1, {"tensor 'w'", "not a JSON object"}},
        BadFile{"unknown_dtype",
                R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})",
                "x",
                -1,
                {"tensor 'w'", "dtype 'I8'", "expected F32, F64, F16, BF16 or I64"}},
        BadFile{"dtype_not_string",
                R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})",
                std::string(4, '\0'),
                -1,
                {"tensor 'w'", "dtype"}},
        BadFile{"size_mismatch",
                R"({"w":{"dtype":"F32","shape":[4,2],"data_offsets":[0,28]}})",
                std::string(28, '\0'),
                -1,
                {"tensor 'w'", "hold 28 bytes", "[4, 2]", "needs 32"}},
        BadFile{"half_size_mismatch",
                R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}})",
                std::string(4, '\0'),
                -1,
                {"tensor 'w'", "hold 4 bytes", "F16 needs 6"}},
        BadFile{"out_of_bounds",
                R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                std::string(4, '\0'),
                -1,
                {"tensor 'w'", "outside the 4 data bytes"}},
        BadFile{"offsets_reversed",
                R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})",
                std::string(8, '\0'),
                -1,
                {"tensor 'w'", "[8, 4]", "outside"}},
        BadFile{"overlap",
                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                std::string(12, '\0'),
                -1,
                {"'a'", "'b'", "overlap"}},
        BadFile{"missing_field",
                R"({"w":{"dtype":"F32","shape":[1]}})",
                "",
                -1,
                {"tensor 'w'", "data_offsets"}},
        BadFile{"three_offsets",
                R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
                std::string(8, '\0'),
                -1,
                {"tensor 'w'", "data_offsets"}},
        BadFile{"negative_offset",
                R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})",
                std::string(4, '\0'),
                -1,
                {"tensor 'w'", "data_offsets", "non-negative"}},
        BadFile{"negative_dimension",
                R"({"w":{"dtype":"F32","shape":[-1,-4],"data_offsets":[0,16]}})",
                std::string(16, '\0'),
                -1,
                {"tensor 'w'", "shape", "non-negative"}},
        BadFile{"fractional_dimension",
                R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})",
                std::string(8, '\0'),
                -1,
                {"tensor 'w'", "shape"}},
        // 2^32 * 2^32 elements wrap a 64-bit count to 0, which would match empty data.
        BadFile{"shape_overflow",
                R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                "",
                -1,
                {"tensor 'w'", "too large"}}),
    [](const auto& case_info) { return case_info.param.name; });

TEST_F(Safetensors, TruncatedFileIsNamed) {
  const auto path = temp("short.safetensors");
  std::ofstream(path, std::ios::binary) << "abc";
  testing::expect_user_error([&] { load_safetensors(path); }, {path.string(), "too short"});
}

TEST_F(Safetensors, DataCutShortIsNamed) {
  // A file we wrote, cut off in the middle of its last tensor (an interrupted copy).
  const auto path = temp("cut.safetensors");
  save_safetensors(path, {{"a", {2}, {1, 2}}, {"b", {3}, {3, 4, 5}}});
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - sizeof(float));
  testing::expect_user_error([&] { load_safetensors(path); },
                             {path.string(), "tensor 'b'", "[8, 20]", "outside the 16 data bytes"});
}

TEST_F(Safetensors, MissingFileIsNamed) {
  const auto path = temp("does_not_exist.safetensors");
  testing::expect_user_error([&] { load_safetensors(path); }, {path.string(), "cannot open"});
}

}  // namespace
}  // namespace xo
