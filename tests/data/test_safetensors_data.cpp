// A data set as a safetensors file (data.source = "safetensors:PATH"): tensor x the samples,
// tensor y their labels or targets. What it reads, and each way a file can be wrong, named.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "io/safetensors.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

NamedTensor samples(std::vector<int64_t> shape, std::vector<float> data) {
  return {"x", std::move(shape), std::move(data)};
}
NamedTensor labels(std::vector<float> data, const char* dtype = "I64") {
  const auto n = static_cast<int64_t>(data.size());
  return {"y", {n}, std::move(data), dtype};
}

TEST(SafetensorsData, ReadsSamplesOfAnyShapeWithTheirLabels) {
  testing::TempDir dir("tensors-data");
  const auto path = dir.path() / "d.safetensors";
  // Three samples of 2x2 (an image's channels and pixels are one sample's features).
  save_safetensors(path,
                   {labels({1, 0, 2}), samples({3, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})});
  const Dataset d = load_safetensors_data(path, 3, 4);
  EXPECT_EQ(d.samples, 3);
  EXPECT_EQ(d.features, 4);
  EXPECT_EQ(d.classes, 3);
  EXPECT_EQ(d.x, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(d.y, (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(d.description, "safetensors: " + path.string() + " (3 samples, 4 features)");
}

TEST(SafetensorsData, ARegressionKeepsItsTargetsBits) {
  testing::TempDir dir("tensors-data");
  const auto path = dir.path() / "d.safetensors";
  save_safetensors(path, {samples({2, 1}, {0.5f, 1.5f}), labels({-2.25f, 1e-3f}, "F32")});
  const Dataset d = load_safetensors_data(path, 0, 0);
  ASSERT_EQ(d.y.size(), 2u);
  EXPECT_EQ(std::bit_cast<float>(d.y[0]), -2.25f);
  EXPECT_EQ(std::bit_cast<float>(d.y[1]), 1e-3f);
}

struct BadFile {
  const char* name;
  std::vector<NamedTensor> tensors;
  int64_t classes, features;
  std::vector<std::string> expected;
};

void PrintTo(const BadFile& f, std::ostream* os) { *os << f.name; }

class SafetensorsDataError : public ::testing::TestWithParam<BadFile> {};

TEST_P(SafetensorsDataError, IsRefusedNamingTheFileAndTheTensor) {
  testing::TempDir dir("tensors-data");
  const auto path = dir.path() / "bad.safetensors";
  save_safetensors(path, GetParam().tensors);
  std::vector<std::string> expected = GetParam().expected;
  expected.insert(expected.begin(), path.string() + ": ");
  testing::expect_user_error(
      [&] { load_safetensors_data(path, GetParam().classes, GetParam().features); }, expected);
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();

INSTANTIATE_TEST_SUITE_P(
    Cases, SafetensorsDataError,
    ::testing::Values(
        BadFile{"no_y",
                {samples({2, 1}, {0, 1})},
                2,
                0,
                {"no tensor 'y'", "expected 'x', the samples", "the file holds 'x'"}},
        BadFile{"no_x", {labels({0, 1})}, 2, 0, {"no tensor 'x'", "class labels [samples]"}},
        BadFile{"no_samples",
                {samples({0, 3}, {}), labels({})},
                2,
                0,
                {"tensor 'x' has shape [0, 3]", "at least one sample"}},
        BadFile{"other_features",
                {samples({2, 3}, {0, 1, 2, 3, 4, 5}), labels({0, 1})},
                2,
                2,
                {"tensor 'x' of shape [2, 3] holds 3 numbers a sample", "input takes 2"}},
        BadFile{"fewer_labels",
                {samples({3, 1}, {0, 1, 2}), labels({0, 1})},
                2,
                0,
                {"tensor 'y' has shape [2]", "expected [3]: one label for each sample"}},
        BadFile{"labels_of_two_dimensions",
                {samples({2, 1}, {0, 1}), NamedTensor{"y", {2, 1}, {0, 1}, "I64"}},
                2,
                0,
                {"tensor 'y' has shape [2, 1]", "expected [2]"}},
        BadFile{"label_out_of_range",
                {samples({2, 1}, {0, 1}), labels({0, 2})},
                2,
                0,
                {"tensor 'y': label 2 of sample 1 is out of range", "from 0 to 1"}},
        BadFile{"label_not_an_integer",
                {samples({2, 1}, {0, 1}), labels({0.5f, 1}, "F32")},
                2,
                0,
                {"tensor 'y': label 0.5 of sample 0 is out of range", "an integer"}},
        BadFile{"sample_not_finite",
                {samples({2, 2}, {0, 1, 2, kNaN}), labels({0, 1})},
                2,
                0,
                {"tensor 'x': number 1 of sample 1 is nan", "a finite number"}},
        BadFile{"target_not_finite",
                {samples({2, 1}, {0, 1}), labels({0, kNaN}, "F32")},
                0,
                0,
                {"tensor 'y': sample 1 is nan", "a finite target"}}),
    [](const auto& param) { return std::string(param.param.name); });

TEST(SafetensorsData, AFileThatIsNotSafetensorsIsNamed) {
  testing::TempDir dir("tensors-data");
  const auto path = dir.path() / "points.csv";
  testing::expect_user_error([&] { load_safetensors_data(path, 2, 0); }, {path.string()});
}

}  // namespace
}  // namespace xo
