// The IMDB loaders: exact ids on a tiny corpus the test writes (frequency ranking,
// out-of-vocabulary, padding, truncation), the cache, the error cases, and the synthetic set's
// properties.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "data/imdb.h"
#include "support/expect_error.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

class ImdbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("xo_imdb_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    corpus_ = root_ / "aclImdb";
    cache_ = root_ / "cache";
    review("train/pos/0_9.txt", "A great movie. Great cast!<br /><br />GREAT.");
    review("train/pos/1_8.txt", "great fun");
    review("train/neg/0_1.txt", "Bad movie, bad 'plot' and it's boring");
    review("test/pos/0_10.txt", "great unknownword movie");
    review("test/neg/0_2.txt", "bad");
  }
  void TearDown() override { fs::remove_all(root_); }
  void review(const std::string& path, const std::string& text) {
    fs::create_directories((corpus_ / path).parent_path());
    std::ofstream(corpus_ / path) << text;
  }
  fs::path root_, corpus_, cache_;
};

std::vector<float> row(const Dataset& d, int64_t r) {
  return {d.x.begin() + r * d.features, d.x.begin() + (r + 1) * d.features};
}

TEST_F(ImdbTest, RanksWordsByTrainingFrequencyAndPadsOnTheLeft) {
  // Train frequencies: great 4, bad 2, movie 2, then a, and, boring, cast, fun, it's, plot (1
  // each, alphabetical). vocab 5 keeps great=2, bad=3, movie=4; everything else is 1.
  const ImdbData data = load_imdb_corpus(corpus_, {5, 6}, cache_);
  EXPECT_FALSE(data.from_cache);
  const Dataset& train = data.split.train;
  ASSERT_EQ(train.samples, 3);
  EXPECT_EQ(train.features, 6);
  EXPECT_EQ(train.classes, 2);
  EXPECT_EQ(train.y, (std::vector<int32_t>{0, 1, 1}));  // neg first, then pos
  // "bad movie bad plot and it's boring": 7 tokens, the last 6 kept.
  EXPECT_EQ(row(train, 0), (std::vector<float>{4, 3, 1, 1, 1, 1}));
  // "a great movie great cast great": exactly 6.
  EXPECT_EQ(row(train, 1), (std::vector<float>{1, 2, 4, 2, 1, 2}));
  EXPECT_EQ(row(train, 2), (std::vector<float>{0, 0, 0, 0, 2, 1}));  // "great fun", padded
  const Dataset& test = data.split.test;
  EXPECT_EQ(test.y, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(row(test, 0), (std::vector<float>{0, 0, 0, 0, 0, 3}));
  EXPECT_EQ(row(test, 1), (std::vector<float>{0, 0, 0, 2, 1, 4}));
  EXPECT_NE(train.description.find("imdb: 3 train / 2 test reviews"), std::string::npos);
}

TEST_F(ImdbTest, SecondLoadComesFromTheCacheAndADamagedCacheIsRebuilt) {
  const ImdbData first = load_imdb_corpus(corpus_, {5, 6}, cache_);
  const ImdbData second = load_imdb_corpus(corpus_, {5, 6}, cache_);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.split.train.x, first.split.train.x);
  EXPECT_EQ(second.split.test.y, first.split.test.y);
  // Other options are another cache entry.
  EXPECT_FALSE(load_imdb_corpus(corpus_, {6, 6}, cache_).from_cache);
  for (const auto& entry : fs::directory_iterator(cache_)) {
    std::ofstream(entry.path(), std::ios::binary) << "XOIMDB1\ntruncated";
  }
  const ImdbData rebuilt = load_imdb_corpus(corpus_, {5, 6}, cache_);
  EXPECT_FALSE(rebuilt.from_cache);
  EXPECT_EQ(rebuilt.split.train.x, first.split.train.x);
}

TEST_F(ImdbTest, ErrorsNameTheFolderAndWhatIsExpected) {
  testing::expect_user_error([&] { load_imdb_corpus(root_ / "none", {}, cache_); },
                             {"none: not a folder", "train/pos, train/neg"});
  testing::expect_user_error(
      [&] {
        load_imdb_corpus(corpus_, {2, 80}, cache_);
      },
      {"vocab 2 is too small", "at least 3"});
  testing::expect_user_error(
      [&] {
        load_imdb_corpus(corpus_, {100, 0}, cache_);
      },
      {"sequence length 0 must be at least 1"});
  fs::remove(corpus_ / "test/neg/0_2.txt");
  testing::expect_user_error([&] { load_imdb_corpus(corpus_, {}, cache_); },
                             {(corpus_ / "test/neg").string(), "no .txt reviews"});
  fs::remove_all(corpus_ / "train/pos");
  testing::expect_user_error([&] { load_imdb_corpus(corpus_, {}, cache_); },
                             {(corpus_ / "train/pos").string(), "missing"});
}

TEST(ImdbSynthetic, DeterministicBalancedInRangeAndLearnable) {
  const ImdbOptions o{1000, 40};
  const DataSplit a = make_imdb_synthetic(400, 100, o, 7);
  const DataSplit b = make_imdb_synthetic(400, 100, o, 7);
  const DataSplit c = make_imdb_synthetic(400, 100, o, 8);
  EXPECT_EQ(a.train.x, b.train.x);
  EXPECT_EQ(a.test.x, b.test.x);
  EXPECT_NE(a.train.x, c.train.x);
  EXPECT_EQ(a.train.samples, 400);
  EXPECT_EQ(a.test.samples, 100);
  EXPECT_EQ(a.train.features, 40);
  int positives = 0;
  for (int32_t y : a.train.y) positives += y;
  EXPECT_EQ(positives, 200);
  bool padded = false, out_of_vocabulary = false;
  // Per class, how often each id occurs: some ids must lean clearly to one class.
  std::vector<std::array<int, 2>> counts(o.vocab, {0, 0});
  for (int64_t i = 0; i < a.train.samples; ++i) {
    for (int64_t k = 0; k < o.seq_len; ++k) {
      const float id = a.train.x[i * o.seq_len + k];
      ASSERT_GE(id, 0);
      ASSERT_LT(id, o.vocab);
      padded |= id == 0;
      out_of_vocabulary |= id == 1;
      ++counts[static_cast<size_t>(id)][a.train.y[i]];
    }
  }
  EXPECT_TRUE(padded);
  EXPECT_TRUE(out_of_vocabulary);
  int leaning = 0;
  for (const auto& n : counts)
    leaning += (n[0] + n[1] >= 20) && (2 * n[0] > 3 * n[1] || 2 * n[1] > 3 * n[0]);
  EXPECT_GE(leaning, 40);  // the 2 x 50 sentiment words, about 2:1 by design
  EXPECT_NE(a.train.description.find("imdb-synthetic (generated, not real reviews)"),
            std::string::npos);
}

}  // namespace
}  // namespace xo
