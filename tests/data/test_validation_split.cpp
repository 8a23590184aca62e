// The validation split as Keras's validation_split: the training set's last samples (before any
// shuffling) held out, floor(n (1 - fraction)) kept, refused where either part would be empty;
// and a test CSV loaded in place of the source's test split.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/source.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

using testing::expect_user_error;

DataSplit numbered(int64_t samples) {
  DataSplit s;
  s.train.samples = samples;
  s.train.features = 2;
  s.train.classes = 3;
  for (int64_t i = 0; i < samples; ++i) {
    s.train.x.push_back(static_cast<float>(i));
    s.train.x.push_back(static_cast<float>(-i));
    s.train.y.push_back(static_cast<int32_t>(i % 3));
  }
  s.train.description = "numbered";
  return s;
}

TEST(ValidationSplit, HoldsOutTheLastSamplesAsKerasDoes) {
  DataSplit s = numbered(10);
  split_validation(s, 0.3, "spec.toml");
  EXPECT_EQ(s.train.samples, 7);  // floor(10 x (1 - 0.3))
  EXPECT_EQ(s.validation.samples, 3);
  EXPECT_EQ(s.train.x.size(), 14u);
  EXPECT_EQ(s.validation.x, (std::vector<float>{7, -7, 8, -8, 9, -9}));
  EXPECT_EQ(s.validation.y, (std::vector<int32_t>{1, 2, 0}));
  EXPECT_EQ(s.validation.features, 2);
  EXPECT_EQ(s.validation.classes, 3);
  EXPECT_EQ(s.train.y.back(), 0);  // sample 6
  DataSplit half = numbered(5);
  split_validation(half, 0.5, "spec.toml");
  EXPECT_EQ(half.train.samples, 2);  // floor(2.5), as Keras: not rounded to 3
  DataSplit none = numbered(5);
  split_validation(none, 0, "spec.toml");
  EXPECT_EQ(none.train.samples, 5);
  EXPECT_EQ(none.validation.samples, 0);
}

TEST(ValidationSplit, EitherPartEmptyIsRefusedNamingTheSpec) {
  DataSplit s = numbered(3);
  expect_user_error([&] { split_validation(s, 0.7, "spec.toml"); },
                    {"spec.toml: data.validation_split = 0.7 of 3 training samples leaves 0 to "
                     "train on and 3 to validate"});
  DataSplit one = numbered(1);
  expect_user_error([&] { split_validation(one, 0.5, "spec.toml"); },
                    {"leaves 0 to train on and 1 to validate", "at least one of each"});
}

TEST(ValidationSplit, ATestCsvReplacesTheTestSplitAndIsCheckedLikeTheTrainingSet) {
  const testing::TempDir dir("test_csv_split");
  std::ofstream(dir.path() / "train.csv") << "a,b,label\n0,1,0\n1,0,1\n2,2,0\n3,1,1\n";
  std::ofstream(dir.path() / "test.csv") << "a,b,label\n5,5,1\n";
  std::ofstream(dir.path() / "wide.csv") << "a,b,c,label\n5,5,5,1\n";
  DataSpec spec;
  spec.source = "csv:" + (dir.path() / "train.csv").string();
  spec.test = "csv:" + (dir.path() / "test.csv").string();
  spec.validation_split = 0.25;
  const DataRequest request{"spec.toml", {2}, 2, 0, 0};
  const DataSplit split = load_data(spec, request);
  EXPECT_EQ(split.train.samples, 3);
  EXPECT_EQ(split.validation.samples, 1);
  ASSERT_EQ(split.test.samples, 1);
  EXPECT_EQ(split.test.x, (std::vector<float>{5, 5}));
  spec.test = "csv:" + (dir.path() / "wide.csv").string();
  expect_user_error([&] { load_data(spec, request); }, {"wide.csv", "3 feature"});
}

}  // namespace
}  // namespace xo
