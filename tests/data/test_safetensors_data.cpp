// A data set as a safetensors file (data.source = "safetensors:PATH"): tensor x the samples,
// tensor y their labels or targets. What it reads, and each way a file can be wrong, named.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "core/file.h"
#include "data/dataset.h"
#include "data/source.h"
#include "io/safetensors.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

template <typename T>
std::vector<T> values(std::span<const T> s) {
  return {s.begin(), s.end()};
}

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
  EXPECT_EQ(values(d.inputs()), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(values(d.labels()), (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(d.description, "safetensors: " + path.string() + " (3 samples, 4 features)");
}

// float32 samples are read where the file's mapped bytes hold them (no copy of a data set of
// hundreds of megabytes), and stay as they were read when the file is replaced (as crossover
// replaces its files: a new one renamed over the name).
TEST(SafetensorsData, Float32SamplesAreReadInPlaceAndOutliveTheFileReplaced) {
  testing::TempDir dir("tensors-data");
  const auto path = dir.path() / "d.safetensors";
  save_safetensors(path, {samples({2, 2}, {1, 2, 3, 4}), labels({1, 0})});
  const Dataset d = load_safetensors_data(path, 2, 2);
  EXPECT_TRUE(d.borrowed());
  EXPECT_TRUE(d.x.empty());
  save_safetensors(path, {samples({2, 2}, {5, 6, 7, 8}), labels({0, 1})});
  std::filesystem::remove(path);
  EXPECT_EQ(values(d.inputs()), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(values(d.labels()), (std::vector<int32_t>{1, 0}));
  // The training part of a validation split is a view of the same bytes.
  DataSplit split{d, {}, {}};
  split_validation(split, 0.5, "spec");
  EXPECT_EQ(split.train.inputs().data(), d.inputs().data());
  EXPECT_EQ(values(split.validation.inputs()), (std::vector<float>{3, 4}));
}

// Samples a file holds in another dtype, or float32 at an offset no float may start at (a header
// whose length is not a multiple of 4: the format recommends 8, other writers may not pad), are
// converted to a copy the data set keeps.
TEST(SafetensorsData, SamplesInAnotherDtypeOrMisalignedAreConverted) {
  testing::TempDir dir("tensors-data");
  const std::string header = R"({"x":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},)"
                             R"("y":{"dtype":"I64","shape":[2],"data_offsets":[8,24]}} )";
  ASSERT_NE(header.size() % 4, 0u);
  std::string file(8, '\0');
  const uint64_t length = header.size();
  std::memcpy(file.data(), &length, sizeof(length));
  file += header;
  const float x[] = {0.25f, -3.5f};
  const int64_t y[] = {1, 0};
  file.append(reinterpret_cast<const char*>(x), sizeof(x));
  file.append(reinterpret_cast<const char*>(y), sizeof(y));
  const auto misaligned = dir.path() / "misaligned.safetensors";
  write_file_atomic(misaligned, file);
  const Dataset a = load_safetensors_data(misaligned, 2, 1);
  EXPECT_EQ(values(a.inputs()), (std::vector<float>{0.25f, -3.5f}));
  EXPECT_EQ(values(a.labels()), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.inputs().data()) % alignof(float), 0u);

  const auto doubles = dir.path() / "f64.safetensors";
  // The same samples as F64.
  std::string h = R"({"x":{"dtype":"F64","shape":[2,1],"data_offsets":[0,16]},)"
                  R"("y":{"dtype":"I64","shape":[2],"data_offsets":[16,32]}})";
  h.append((8 - (8 + h.size()) % 8) % 8, ' ');
  std::string g(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(g.data(), &n, sizeof(n));
  g += h;
  const double xd[] = {0.25, -3.5};
  g.append(reinterpret_cast<const char*>(xd), sizeof(xd));
  g.append(reinterpret_cast<const char*>(y), sizeof(y));
  write_file_atomic(doubles, g);
  EXPECT_EQ(values(load_safetensors_data(doubles, 2, 1).inputs()),
            (std::vector<float>{0.25f, -3.5f}));
}

TEST(SafetensorsData, ARegressionKeepsItsTargetsBits) {
  testing::TempDir dir("tensors-data");
  const auto path = dir.path() / "d.safetensors";
  save_safetensors(path, {samples({2, 1}, {0.5f, 1.5f}), labels({-2.25f, 1e-3f}, "F32")});
  const Dataset d = load_safetensors_data(path, 0, 0);
  ASSERT_EQ(d.labels().size(), 2u);
  EXPECT_EQ(std::bit_cast<float>(d.labels()[0]), -2.25f);
  EXPECT_EQ(std::bit_cast<float>(d.labels()[1]), 1e-3f);
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
