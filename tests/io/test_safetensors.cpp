// safetensors: exact round trips, the other float dtypes, and every malformed file named.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "support/expect_error.h"

namespace xo {
namespace {

std::filesystem::path temp(const std::string& name) {
  return std::filesystem::path(::testing::TempDir()) / name;
}

// Builds a file by hand: header JSON, then raw bytes.
std::filesystem::path raw_file(const std::string& name, const std::string& header,
                               const std::string& data, int64_t length_override = -1) {
  const auto path = temp(name);
  std::string bytes(8, '\0');
  const uint64_t len =
      length_override >= 0 ? static_cast<uint64_t>(length_override) : header.size();
  std::memcpy(bytes.data(), &len, 8);
  std::ofstream(path, std::ios::binary) << bytes << header << data;
  return path;
}

TEST(Safetensors, RoundTripIsBitExactWithMetadata) {
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
  std::ifstream in(path, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  EXPECT_EQ((8 + len) % 8, 0u) << "data should start 8-byte aligned";
  std::string header(len, ' ');
  in.read(header.data(), static_cast<std::streamsize>(len));
  EXPECT_NE(header.find("\"__metadata__\":{\"format\":\"pt\"}"), std::string::npos) << header;
}

TEST(Safetensors, ReadsHalfBFloatAndDouble) {
  // F16 1.0 = 0x3c00, -2.0 = 0xc000, smallest subnormal 2^-24 = 0x0001; BF16 1.5 = 0x3fc0;
  // F64 0.25.
  std::string data;
  for (uint16_t h : {uint16_t{0x3c00}, uint16_t{0xc000}, uint16_t{0x0001}}) {
    data.append(reinterpret_cast<const char*>(&h), 2);
  }
  const uint16_t bf = 0x3fc0;
  data.append(reinterpret_cast<const char*>(&bf), 2);
  const double d = 0.25;
  data.append(reinterpret_cast<const char*>(&d), 8);
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

struct BadFile {
  std::string name;
  std::string header;
  std::string data;
  int64_t length_override;
  std::vector<std::string> expected;
};

class SafetensorsErrorTest : public ::testing::TestWithParam<BadFile> {};

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
        BadFile{"bad_json", "{not json", "", -1, {"not valid JSON"}},
        BadFile{"unknown_dtype",
                R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})",
                "x",
                -1,
                {"tensor 'w'", "dtype 'I8'"}},
        BadFile{"size_mismatch",
                R"({"w":{"dtype":"F32","shape":[4,2],"data_offsets":[0,28]}})",
                std::string(28, '\0'),
                -1,
                {"tensor 'w'", "hold 28 bytes", "[4, 2]", "needs 32"}},
        BadFile{"out_of_bounds",
                R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                std::string(4, '\0'),
                -1,
                {"tensor 'w'", "outside the 4 data bytes"}},
        BadFile{"overlap",
                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                std::string(12, '\0'),
                -1,
                {"overlap"}},
        BadFile{"missing_field",
                R"({"w":{"dtype":"F32","shape":[1]}})",
                "",
                -1,
                {"tensor 'w'", "data_offsets"}}),
    [](const auto& case_info) { return case_info.param.name; });

TEST(Safetensors, TruncatedFileIsNamed) {
  const auto path = temp("short.safetensors");
  std::ofstream(path, std::ios::binary) << "abc";
  testing::expect_user_error([&] { load_safetensors(path); }, {path.string(), "too short"});
}

}  // namespace
}  // namespace xo
