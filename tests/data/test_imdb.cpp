// The IMDB loaders: exact ids on a tiny corpus the test writes (frequency ranking,
// out-of-vocabulary, padding, truncation), the cache, the error cases, and the synthetic set's
// properties.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "data/imdb.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

class ImdbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = root_ / "aclImdb";
    cache_ = root_ / "cache";
    review("train/pos/0_9.txt", "A great movie. Great cast!<br /><br />GREAT.");
    review("train/pos/1_8.txt", "great fun");
    review("train/neg/0_1.txt", "Bad movie, bad 'plot' and it's boring");
    review("test/pos/0_10.txt", "great unknownword movie");
    // Tokenizer corners: "<br />" between words, lone apostrophes, digits, inner apostrophes.
    review("test/neg/0_2.txt", "BAD<br />movie ''' 'bad' 10/10 rock'n'roll");
  }
  void review(const std::string& path, const std::string& text) {
    fs::create_directories((corpus_ / path).parent_path());
    std::ofstream(corpus_ / path) << text;
  }
  const testing::TempDir temp_{"xo_imdb"};
  const fs::path root_ = temp_.path();
  fs::path corpus_, cache_;
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
  // bad movie bad 10 10 rock'n'roll: words seen only in the test reviews are out of vocabulary.
  EXPECT_EQ(row(test, 0), (std::vector<float>{3, 4, 3, 1, 1, 1}));
  EXPECT_EQ(row(test, 1), (std::vector<float>{0, 0, 0, 2, 1, 4}));
  EXPECT_NE(train.description.find("imdb: 3 train / 2 test reviews"), std::string::npos);
}

TEST_F(ImdbTest, TiesAreBrokenAlphabeticallyAndVocabCapsTheIds) {
  // vocab 8 keeps great, bad, movie, then the first three count-1 words: a, and, boring.
  const ImdbData data = load_imdb_corpus(corpus_, {8, 7}, cache_);
  EXPECT_EQ(row(data.split.train, 0), (std::vector<float>{3, 4, 3, 1, 6, 1, 7}));
  EXPECT_EQ(row(data.split.train, 1), (std::vector<float>{0, 5, 2, 4, 2, 1, 2}));
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

TEST_F(ImdbTest, ACacheWithAFlippedByteIsRebuilt) {
  const ImdbData first = load_imdb_corpus(corpus_, {5, 6}, cache_);
  ASSERT_TRUE(load_imdb_corpus(corpus_, {5, 6}, cache_).from_cache);
  for (const auto& entry : fs::directory_iterator(cache_)) {
    std::fstream f(entry.path(), std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(-12, std::ios::end);  // the last id of the test split, before the checksum
    f.put('\x7f');
  }
  const ImdbData rebuilt = load_imdb_corpus(corpus_, {5, 6}, cache_);
  EXPECT_FALSE(rebuilt.from_cache);
  EXPECT_EQ(rebuilt.split.test.x, first.split.test.x);
  EXPECT_TRUE(load_imdb_corpus(corpus_, {5, 6}, cache_).from_cache);
}

TEST_F(ImdbTest, ANewReviewInvalidatesTheCache) {
  EXPECT_EQ(load_imdb_corpus(corpus_, {5, 6}, cache_).split.train.samples, 3);
  review("train/neg/1_3.txt", "dull");
  const ImdbData data = load_imdb_corpus(corpus_, {5, 6}, cache_);
  EXPECT_FALSE(data.from_cache);
  EXPECT_EQ(data.split.train.samples, 4);
}

TEST_F(ImdbTest, AnUnwritableCacheIsNamed) {
  std::ofstream(root_ / "file") << "not a folder";
  testing::expect_user_error(
      [&] {
        load_imdb_corpus(corpus_, {5, 6}, root_ / "file");
      },
      {(root_ / "file").string(), "IMDB token cache"});
}

TEST_F(ImdbTest, AnUnreadableReviewIsNamed) {
  fs::create_symlink(root_ / "nowhere", corpus_ / "train/pos/2_7.txt");
  testing::expect_user_error(
      [&] {
        load_imdb_corpus(corpus_, {5, 6}, cache_);
      },
      {(corpus_ / "train/pos/2_7.txt").string(), "cannot read"});
  fs::remove(corpus_ / "train/pos/2_7.txt");
  fs::create_directories(corpus_ / "test/neg/1_1.txt");
  testing::expect_user_error(
      [&] {
        load_imdb_corpus(corpus_, {5, 6}, cache_);
      },
      {(corpus_ / "test/neg/1_1.txt").string(), "cannot read", "not a regular file"});
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
  for (const auto& n : counts) {
    leaning += (n[0] + n[1] >= 20) && (2 * n[0] > 3 * n[1] || 2 * n[1] > 3 * n[0]);
  }
  EXPECT_GE(leaning, 40);  // the 2 x 50 sentiment words, about 2:1 by design
  // Zipf-like: the most frequent ranks come first, and ranks past the vocabulary become id 1.
  auto total = [&](size_t id) { return counts[id][0] + counts[id][1]; };
  EXPECT_GT(total(2), total(3));
  EXPECT_GT(total(3), total(5));
  int64_t tokens = 0;
  for (size_t id = 1; id < counts.size(); ++id) tokens += total(id);
  EXPECT_GT(total(1), tokens / 50);
  EXPECT_LT(total(1), tokens / 5);
  EXPECT_EQ(a.train.description.rfind("imdb-synthetic (generated, not real reviews)", 0), 0u);
}

TEST(ImdbSynthetic, SmallOptionsStayInRange) {
  for (const ImdbOptions o : {ImdbOptions{3, 1}, ImdbOptions{4, 2}, ImdbOptions{20, 3}}) {
    const DataSplit d = make_imdb_synthetic(6, 0, o, 1);
    EXPECT_EQ(d.test.samples, 0);
    ASSERT_EQ(d.train.x.size(), static_cast<size_t>(6 * o.seq_len));
    for (float id : d.train.x) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, o.vocab);
    }
  }
  testing::expect_user_error(
      [] {
        make_imdb_synthetic(10, 10, {2, 80}, 1);
      },
      {"imdb-synthetic", "vocab 2 is too small", "at least 3"});
  testing::expect_user_error(
      [] {
        make_imdb_synthetic(10, 10, {100, 0}, 1);
      },
      {"sequence length 0 must be at least 1"});
}

// A bag-of-words naive Bayes fitted on the training split: the signal must be clearly learnable,
// but not so strong that any model gets it right (real IMDB's LSTM reaches about 84%).
TEST(ImdbSynthetic, NaiveBayesBeatsChanceButIsNotPerfect) {
  const ImdbOptions o{1000, 80};
  const DataSplit d = make_imdb_synthetic(2000, 1000, o, 3);
  std::vector<std::array<double, 2>> counts(o.vocab, {1.0, 1.0});  // Laplace smoothing
  for (int64_t i = 0; i < d.train.samples; ++i) {
    for (int64_t k = 0; k < o.seq_len; ++k) {
      const auto id = static_cast<size_t>(d.train.x[i * o.seq_len + k]);
      if (id != 0) counts[id][d.train.y[i]] += 1;
    }
  }
  std::array<double, 2> totals{0, 0};
  for (const auto& n : counts) totals = {totals[0] + n[0], totals[1] + n[1]};
  int correct = 0;
  for (int64_t i = 0; i < d.test.samples; ++i) {
    double score = 0;  // log P(x | pos) - log P(x | neg)
    for (int64_t k = 0; k < o.seq_len; ++k) {
      const auto id = static_cast<size_t>(d.test.x[i * o.seq_len + k]);
      if (id != 0)
        score += std::log(counts[id][1] / totals[1]) - std::log(counts[id][0] / totals[0]);
    }
    correct += (score > 0) == (d.test.y[i] == 1);
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(d.test.samples);
  EXPECT_GT(accuracy, 0.6);
  EXPECT_LT(accuracy, 0.95);
}

}  // namespace
}  // namespace xo
