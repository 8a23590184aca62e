#include "data/imdb.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/file.h"
#include "core/function_ref.h"
#include "core/interrupt.h"
#include "core/random.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kPad = 0;
constexpr int32_t kOutOfVocabulary = 1;
constexpr int32_t kFirstWord = 2;
constexpr int kLabels = 2;
// Bump the digit when the tokenizer or the layout changes: old caches then fail the magic check.
constexpr char kCacheMagic[8] = {'X', 'O', 'I', 'M', 'D', 'B', '2', '\n'};

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

// Calls on_token for each token of a review (the rules are in imdb.h).
template <typename OnToken>
void tokenize(const std::string& text, OnToken&& on_token) {
  constexpr std::string_view kBreak = "<br />";
  std::string current;
  auto flush = [&] {
    const size_t b = current.find_first_not_of('\'');
    if (b != std::string::npos) {
      const size_t e = current.find_last_not_of('\'');
      on_token(std::string_view(current).substr(b, e - b + 1));
    }
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
}

// The .txt files of a folder, sorted by name. A missing folder, one without reviews, or a .txt
// entry that is not a readable file (a broken link, a folder) is an error naming it.
std::vector<fs::path> reviews_in(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw UserError(
        fmt::format("{}: missing (expected the aclImdb layout: train/pos, train/neg, "
                    "test/pos, test/neg folders of .txt reviews)",
                    folder.string()));
  }
  std::vector<fs::path> files;
  fs::directory_iterator it(folder, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".txt") continue;
    const fs::file_status status = fs::status(it->path(), ec);
    if (ec || !fs::is_regular_file(status)) {
      throw UserError(fmt::format("{}: cannot read this review ({})", it->path().string(),
                                  ec ? ec.message() : "not a regular file"));
    }
    files.push_back(it->path());
  }
  if (ec) throw UserError(fmt::format("{}: cannot list: {}", folder.string(), ec.message()));
  if (files.empty()) {
    throw UserError(fmt::format("{}: no .txt reviews in this folder", folder.string()));
  }
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
  d.classes = kLabels;
  d.x.resize(samples * seq_len);
  d.y.resize(samples);
  d.description = std::move(description);
  return d;
}

uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// The words of a corpus as it is read: a dense index per distinct word, its count in the training
// reviews, and per review only the indices of its last seq_len tokens (all that x keeps), so the
// 50,000 reviews of aclImdb never sit in memory as strings.
struct Corpus {
  std::unordered_map<std::string, int32_t> index;
  std::vector<std::string> words;
  std::vector<int64_t> train_count;
  std::vector<std::vector<int32_t>> tails[4];  // train/neg, train/pos, test/neg, test/pos

  void add_review(const std::string& text, int part, int64_t seq_len) {
    const bool train = part < 2;
    std::vector<int32_t> tokens;
    tokenize(text, [&](std::string_view token) {
      auto [it, added] = index.try_emplace(std::string(token), static_cast<int32_t>(words.size()));
      if (added) {
        words.emplace_back(token);
        train_count.push_back(0);
      }
      if (train) ++train_count[it->second];
      tokens.push_back(it->second);
    });
    if (static_cast<int64_t>(tokens.size()) > seq_len) {
      tokens.erase(tokens.begin(), tokens.end() - seq_len);
    }
    tails[part].push_back(std::move(tokens));
  }

  // Word index -> id: training words by decreasing count (ties alphabetically) get 2, 3, ...;
  // the rest, and words seen only in the test reviews, are out of vocabulary.
  std::vector<int32_t> ids(int64_t vocab) const {
    std::vector<int32_t> ranked;
    for (size_t w = 0; w < words.size(); ++w) {
      if (train_count[w] > 0) ranked.push_back(static_cast<int32_t>(w));
    }
    const size_t kept = std::min<size_t>(ranked.size(), static_cast<size_t>(vocab - kFirstWord));
    std::partial_sort(ranked.begin(), ranked.begin() + kept, ranked.end(),
                      [&](int32_t a, int32_t b) {
                        return train_count[a] != train_count[b] ? train_count[a] > train_count[b]
                                                                : words[a] < words[b];
                      });
    std::vector<int32_t> id(words.size(), kOutOfVocabulary);
    for (size_t r = 0; r < kept; ++r) id[ranked[r]] = static_cast<int32_t>(r) + kFirstWord;
    return id;
  }
};

// Cache layout (native byte order: the cache never leaves the machine): magic, the key's length
// and bytes, int64 train and test counts, per split int32 labels then int32 ids, and an FNV-1a
// checksum of everything before it.
std::string encode(const DataSplit& s, const std::string& key) {
  std::string out(kCacheMagic, sizeof(kCacheMagic));
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  const uint64_t key_size = key.size();
  put(&key_size, sizeof(key_size));
  put(key.data(), key.size());
  for (const Dataset* d : {&s.train, &s.test}) put(&d->samples, sizeof(int64_t));
  for (const Dataset* d : {&s.train, &s.test}) {
    put(d->y.data(), sizeof(int32_t) * d->y.size());
    const std::vector<int32_t> ids(d->x.begin(), d->x.end());
    put(ids.data(), sizeof(int32_t) * ids.size());
  }
  const uint64_t checksum = fnv1a(out);
  put(&checksum, sizeof(checksum));
  return out;
}

// Fills `s` from a cache file's bytes; false (and `s` unusable) unless they are a complete,
// undamaged cache for `key` whose labels and ids are in range.
bool decode(const std::string& bytes, const std::string& key, const ImdbOptions& o, DataSplit& s) {
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    if (bytes.size() - at < n) return false;
    std::memcpy(p, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[sizeof(kCacheMagic)];
  uint64_t key_size = 0, checksum = 0;
  int64_t counts[2];
  if (bytes.size() < sizeof(checksum)) return false;
  std::memcpy(&checksum, bytes.data() + bytes.size() - sizeof(checksum), sizeof(checksum));
  if (fnv1a(std::string_view(bytes).substr(0, bytes.size() - sizeof(checksum))) != checksum ||
      !get(magic, sizeof(magic)) || std::memcmp(magic, kCacheMagic, sizeof(magic)) != 0 ||
      !get(&key_size, sizeof(key_size)) || key_size != key.size() ||
      bytes.compare(at, key.size(), key) != 0) {
    return false;
  }
  at += key.size();
  if (!get(counts, sizeof(counts))) return false;
  // Each sample takes (1 + seq_len) * 4 bytes, so a count past the file's size is damage.
  const uint64_t row_bytes = static_cast<uint64_t>(1 + o.seq_len) * sizeof(int32_t);
  const uint64_t left = bytes.size() - at - sizeof(checksum);
  if (counts[0] < 0 || counts[1] < 0 || static_cast<uint64_t>(counts[0]) > left / row_bytes ||
      static_cast<uint64_t>(counts[1]) > left / row_bytes ||
      static_cast<uint64_t>(counts[0] + counts[1]) * row_bytes != left) {
    return false;
  }
  Dataset* parts[2] = {&s.train, &s.test};
  std::vector<int32_t> ids;
  for (int k = 0; k < 2; ++k) {
    Dataset& d = *parts[k];
    d = make_dataset(counts[k], o.seq_len, "");
    ids.resize(d.samples * o.seq_len);
    get(d.y.data(), sizeof(int32_t) * d.y.size());
    get(ids.data(), sizeof(int32_t) * ids.size());
    for (int32_t y : d.y) {
      if (y < 0 || y >= kLabels) return false;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= o.vocab) return false;
      d.x[i] = static_cast<float>(ids[i]);
    }
  }
  return true;
}

// The cache key: the corpus's absolute path, its review count and newest modification time, and
// the options. Reading every file's time also finds the unreadable ones before any work.
std::string cache_key(const fs::path& dir, const std::vector<fs::path> (&files)[4],
                      const ImdbOptions& o) {
  int64_t count = 0;
  fs::file_time_type newest = fs::file_time_type::min();
  for (const auto& folder : files) {
    for (const auto& f : folder) {
      std::error_code ec;
      const fs::file_time_type t = fs::last_write_time(f, ec);
      if (ec) throw UserError(fmt::format("{}: cannot read: {}", f.string(), ec.message()));
      newest = std::max(newest, t);
      ++count;
    }
  }
  return fmt::format("{}|{}|{}|{}|{}", fs::absolute(dir).lexically_normal().string(), count,
                     newest.time_since_epoch().count(), o.vocab, o.seq_len);
}

}  // namespace

DataSplit imdb_from_reviews(FunctionRef<bool(int& part, std::string& text)> next,
                            const ImdbOptions& o) {
  Corpus corpus;
  int part = 0;
  std::string text;
  for (int64_t n = 0; next(part, text); ++n) {
    // 50,000 reviews take seconds to tokenize: a poll every 256.
    if (n % 256 == 0) throw_if_stop_requested("reading the IMDB reviews");
    XO_ASSERT(part >= 0 && part < 4);  // the caller numbers the parts
    corpus.add_review(text, part, o.seq_len);
  }
  const std::vector<int32_t> id = corpus.ids(o.vocab);
  DataSplit result;
  Dataset* splits[2] = {&result.train, &result.test};
  std::vector<int32_t> seq;
  for (int split = 0; split < 2; ++split) {
    const auto& neg = corpus.tails[2 * split];
    const auto& pos = corpus.tails[2 * split + 1];
    Dataset& d = *splits[split];
    d = make_dataset(static_cast<int64_t>(neg.size() + pos.size()), o.seq_len, "");
    int64_t row = 0;
    for (int label = 0; label < kLabels; ++label) {
      for (const auto& tail : label == 0 ? neg : pos) {
        seq.clear();
        for (int32_t w : tail) seq.push_back(id[w]);
        write_row(seq, o.seq_len, d.x.data() + row * o.seq_len);
        d.y[row++] = label;
      }
    }
  }
  return result;
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
  // Every folder is listed first, so a missing one is reported before any work. The order is the
  // samples' order: neg (label 0) before pos (label 1) in each split.
  const char* kParts[4] = {"train/neg", "train/pos", "test/neg", "test/pos"};
  std::vector<fs::path> files[4];
  for (int k = 0; k < 4; ++k) files[k] = reviews_in(dir / kParts[k]);

  const std::string key = cache_key(dir, files, o);
  const fs::path cache = cache_dir / fmt::format("imdb-{:016x}.bin", fnv1a(key));
  auto describe = [&](DataSplit& s) {
    const std::string summary =
        fmt::format("imdb: {} train / {} test reviews ({}), vocab {}, length {}", s.train.samples,
                    s.test.samples, dir.string(), o.vocab, o.seq_len);
    s.train.description = summary + ", train split";
    s.test.description = summary + ", test split";
  };

  ImdbData result;
  // A cache that is missing, damaged or for other inputs is rebuilt.
  if (fs::is_regular_file(cache, ec) && decode(read_file(cache), key, o, result.split)) {
    result.from_cache = true;
    describe(result.split);
    return result;
  }

  size_t part = 0, file = 0;
  result.split = imdb_from_reviews(
      [&](int& review_part, std::string& text) {
        while (part < 4 && file == files[part].size()) {
          ++part;
          file = 0;
        }
        if (part == 4) return false;
        review_part = static_cast<int>(part);
        text = read_file(files[part][file++]);
        return true;
      },
      o);
  try {
    replace_file_atomic(cache, encode(result.split, key));
  } catch (const UserError& e) {
    throw UserError(fmt::format(
        "{} (the IMDB token cache; make {} writable, or set XDG_CACHE_HOME to a writable folder)",
        e.what(), cache_dir.string()));
  }
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
      if (i % 256 == 0) throw_if_stop_requested("generating the imdb-synthetic data set");
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
