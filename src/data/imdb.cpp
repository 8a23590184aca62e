#include "data/imdb.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/file.h"
#include "core/random.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kPad = 0;
constexpr int32_t kOutOfVocabulary = 1;
constexpr int32_t kFirstWord = 2;
constexpr char kCacheMagic[8] = {'X', 'O', 'I', 'M', 'D', 'B', '1', '\n'};

void check_options(const ImdbOptions& o, const std::string& where) {
  if (o.vocab < 3) {
    throw UserError(
        fmt::format("{}: vocab {} is too small (expected at least 3: padding, "
                    "out-of-vocabulary and one word)",
                    where, o.vocab));
  }
  if (o.seq_len < 1) {
    throw UserError(fmt::format("{}: sequence length {} must be at least 1", where, o.seq_len));
  }
}

// The tokens of one review (see load_imdb_corpus).
std::vector<std::string> tokenize(const std::string& text) {
  constexpr std::string_view kBreak = "<br />";
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    const size_t b = current.find_first_not_of('\'');
    const size_t e = current.find_last_not_of('\'');
    if (b != std::string::npos) tokens.push_back(current.substr(b, e - b + 1));
    current.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, kBreak.size(), kBreak) == 0) {
      flush();
      i += kBreak.size() - 1;
      continue;
    }
    const char ch = text[i];
    const char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'') {
      current += c;
    } else {
      flush();
    }
  }
  flush();
  return tokens;
}

// The .txt files of a folder, sorted by name; a missing folder or none is an error.
std::vector<fs::path> reviews_in(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw UserError(
        fmt::format("{}: missing (expected the aclImdb layout: train/pos, train/neg, "
                    "test/pos, test/neg folders of .txt reviews)",
                    folder.string()));
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  if (files.empty())
    throw UserError(fmt::format("{}: no .txt reviews in this folder", folder.string()));
  std::sort(files.begin(), files.end());
  return files;
}

// Keeps the last seq_len ids, left-padded: one row of x.
void write_row(const std::vector<int32_t>& ids, int64_t seq_len, float* row) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t pad = std::max<int64_t>(0, seq_len - n);
  std::fill(row, row + pad, static_cast<float>(kPad));
  for (int64_t k = pad; k < seq_len; ++k) row[k] = static_cast<float>(ids[n - (seq_len - k)]);
}

Dataset make_dataset(int64_t samples, int64_t seq_len, std::string description) {
  Dataset d;
  d.samples = samples;
  d.features = seq_len;
  d.classes = 2;
  d.x.resize(samples * seq_len);
  d.y.resize(samples);
  d.description = std::move(description);
  return d;
}

uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Cache layout: magic, then int64 train and test counts, then per split int32 labels and ids.
std::string encode(const DataSplit& s, int64_t seq_len) {
  std::string out(kCacheMagic, sizeof(kCacheMagic));
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  for (const Dataset* d : {&s.train, &s.test}) put(&d->samples, sizeof(int64_t));
  for (const Dataset* d : {&s.train, &s.test}) {
    put(d->y.data(), sizeof(int32_t) * d->y.size());
    std::vector<int32_t> ids(d->x.begin(), d->x.end());
    put(ids.data(), sizeof(int32_t) * ids.size());
  }
  (void)seq_len;
  return out;
}

// Empty optional-like result (samples 0) when the bytes are not a complete cache.
bool decode(const std::string& bytes, int64_t seq_len, DataSplit& s) {
  size_t at = sizeof(kCacheMagic);
  if (bytes.size() < at + 2 * sizeof(int64_t) ||
      std::memcmp(bytes.data(), kCacheMagic, sizeof(kCacheMagic)) != 0) {
    return false;
  }
  int64_t counts[2];
  std::memcpy(counts, bytes.data() + at, sizeof(counts));
  at += sizeof(counts);
  if (counts[0] < 0 || counts[1] < 0) return false;
  const uint64_t need = static_cast<uint64_t>(counts[0] + counts[1]) * (1 + seq_len) * 4;
  if (bytes.size() - at != need) return false;
  Dataset* parts[2] = {&s.train, &s.test};
  for (int k = 0; k < 2; ++k) {
    Dataset& d = *parts[k];
    d = make_dataset(counts[k], seq_len, "");
    std::memcpy(d.y.data(), bytes.data() + at, sizeof(int32_t) * d.samples);
    at += sizeof(int32_t) * d.samples;
    std::vector<int32_t> ids(d.samples * seq_len);
    std::memcpy(ids.data(), bytes.data() + at, sizeof(int32_t) * ids.size());
    at += sizeof(int32_t) * ids.size();
    for (size_t i = 0; i < ids.size(); ++i) d.x[i] = static_cast<float>(ids[i]);
  }
  return true;
}

}  // namespace

fs::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return fs::path(xdg) / "crossover";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".cache" / "crossover";
  }
  return fs::temp_directory_path() / "crossover";
}

ImdbData load_imdb_corpus(const fs::path& dir, const ImdbOptions& o, const fs::path& cache_dir) {
  check_options(o, dir.string());
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw UserError(
        fmt::format("{}: not a folder (expected the aclImdb review corpus with "
                    "train/pos, train/neg, test/pos and test/neg)",
                    dir.string()));
  }
  // Every folder is listed first, so a missing one is reported before any work.
  const char* kParts[4] = {"train/neg", "train/pos", "test/neg", "test/pos"};
  std::vector<std::vector<fs::path>> files;
  for (const char* part : kParts) files.push_back(reviews_in(dir / part));

  // The cache key: the corpus's path, file count and newest modification time, and the options.
  int64_t count = 0, newest = 0;
  for (const auto& folder : files) {
    for (const auto& f : folder) {
      ++count;
      newest = std::max<int64_t>(newest, fs::last_write_time(f).time_since_epoch().count());
    }
  }
  const std::string key =
      fmt::format("{}|{}|{}|{}|{}", fs::absolute(dir).lexically_normal().string(), count, newest,
                  o.vocab, o.seq_len);
  const fs::path cache = cache_dir / fmt::format("imdb-{:016x}.bin", fnv1a(key));
  const std::string summary_dir = dir.string();
  auto describe = [&](DataSplit& s) {
    const std::string summary =
        fmt::format("imdb: {} train / {} test reviews ({}), vocab {}, length {}", s.train.samples,
                    s.test.samples, summary_dir, o.vocab, o.seq_len);
    s.train.description = summary + ", train split";
    s.test.description = summary + ", test split";
  };

  ImdbData result;
  if (fs::is_regular_file(cache, ec)) {
    if (decode(read_file(cache), o.seq_len, result.split)) {
      result.from_cache = true;
      describe(result.split);
      return result;
    }
  }

  // Tokenize everything; the vocabulary comes from the training reviews only.
  std::vector<std::vector<std::vector<std::string>>> tokens(4);
  std::unordered_map<std::string, int64_t> frequency;
  for (int k = 0; k < 4; ++k) {
    for (const auto& f : files[k]) {
      tokens[k].push_back(tokenize(read_file(f)));
      if (k < 2) {
        for (const auto& t : tokens[k].back()) ++frequency[t];
      }
    }
  }
  std::vector<std::pair<std::string, int64_t>> ranked(frequency.begin(), frequency.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::unordered_map<std::string, int32_t> ids;
  for (size_t r = 0; r < ranked.size() && static_cast<int64_t>(r) < o.vocab - kFirstWord; ++r) {
    ids.emplace(ranked[r].first, static_cast<int32_t>(r) + kFirstWord);
  }
  Dataset* parts[2] = {&result.split.train, &result.split.test};
  for (int split = 0; split < 2; ++split) {
    const auto& neg = tokens[2 * split];
    const auto& pos = tokens[2 * split + 1];
    Dataset& d = *parts[split];
    d = make_dataset(static_cast<int64_t>(neg.size() + pos.size()), o.seq_len, "");
    int64_t row = 0;
    for (int label = 0; label < 2; ++label) {
      for (const auto& review : label == 0 ? neg : pos) {
        std::vector<int32_t> seq;
        seq.reserve(review.size());
        for (const auto& t : review) {
          auto it = ids.find(t);
          seq.push_back(it == ids.end() ? kOutOfVocabulary : it->second);
        }
        write_row(seq, o.seq_len, d.x.data() + row * o.seq_len);
        d.y[row++] = label;
      }
    }
  }
  write_file_atomic(cache, encode(result.split, o.seq_len));
  describe(result.split);
  return result;
}

DataSplit make_imdb_synthetic(int64_t train_samples, int64_t test_samples, const ImdbOptions& o,
                              uint64_t seed) {
  check_options(o, "imdb-synthetic");
  if (train_samples < 1 || test_samples < 0) {
    throw UserError(
        fmt::format("imdb-synthetic: {} training and {} test samples (expected at "
                    "least 1 and 0)",
                    train_samples, test_samples));
  }
  constexpr double kSignal = 0.08;  // share of tokens drawn from the own class's words
  constexpr double kNoise = 0.04;   // share drawn from the other class's words
  constexpr int64_t kSentimentWords = 50;
  Rng rng(seed ^ 0x1adb5eedULL);
  // Word ranks over a universe twice the vocabulary; rank r has weight 1 / (r + 1).
  const int64_t universe = 2 * (o.vocab - kFirstWord);
  std::vector<double> cdf(universe);
  double total = 0;
  for (int64_t r = 0; r < universe; ++r) cdf[r] = total += 1.0 / static_cast<double>(r + 1);
  auto zipf_id = [&]() {
    const double u = rng.uniform() * total;
    const int64_t r = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    return r < o.vocab - kFirstWord ? static_cast<int32_t>(r) + kFirstWord : kOutOfVocabulary;
  };
  // Two disjoint sets of sentiment words among the in-vocabulary ids (not the rarest ones).
  std::vector<int32_t> words[2];
  const int64_t span = std::max<int64_t>(1, std::min<int64_t>(o.vocab - kFirstWord, 2000));
  while (static_cast<int64_t>(words[0].size() + words[1].size()) <
         std::min<int64_t>(2 * kSentimentWords, span)) {
    const auto id = static_cast<int32_t>(kFirstWord + rng.below(static_cast<uint64_t>(span)));
    if (std::find(words[0].begin(), words[0].end(), id) != words[0].end() ||
        std::find(words[1].begin(), words[1].end(), id) != words[1].end()) {
      continue;
    }
    words[words[0].size() <= words[1].size() ? 0 : 1].push_back(id);
  }
  auto make = [&](int64_t samples, const char* part) {
    Dataset d = make_dataset(samples, o.seq_len,
                             fmt::format("imdb-synthetic (generated, not real reviews): {} {} "
                                         "sequences, vocab {}, length {}, seed {}",
                                         samples, part, o.vocab, o.seq_len, seed));
    std::vector<int32_t> seq;
    for (int64_t i = 0; i < samples; ++i) {
      const int label = static_cast<int>(i % 2);
      const int64_t length =
          o.seq_len / 2 +
          static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * o.seq_len + o.seq_len / 2 + 1)));
      seq.clear();
      for (int64_t k = 0; k < std::max<int64_t>(length, 1); ++k) {
        const double u = rng.uniform();
        const auto& own = words[label];
        const auto& other = words[1 - label];
        if (u < kSignal && !own.empty()) {
          seq.push_back(own[rng.below(own.size())]);
        } else if (u < kSignal + kNoise && !other.empty()) {
          seq.push_back(other[rng.below(other.size())]);
        } else {
          seq.push_back(zipf_id());
        }
      }
      write_row(seq, o.seq_len, d.x.data() + i * o.seq_len);
      d.y[i] = label;
    }
    return d;
  };
  DataSplit split;
  split.train = make(train_samples, "train");
  if (test_samples > 0) split.test = make(test_samples, "test");
  return split;
}

}  // namespace xo
