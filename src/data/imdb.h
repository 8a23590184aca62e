// The IMDB sentiment data of Keras's imdb_lstm example: the original review corpus (aclImdb) turned
// into fixed-length token-id sequences, or a synthetic stand-in with the same shapes.
#pragma once

#include <filesystem>
#include <string>

#include "core/function_ref.h"
#include "data/dataset.h"

namespace xo {

struct ImdbOptions {
  // Ids: 0 = padding, 1 = out of vocabulary, 2 ... vocab-1 = words by decreasing frequency in the
  // training reviews (ties broken alphabetically), so vocab - 2 words are kept.
  int64_t vocab = 20000;
  // Each review keeps its last seq_len tokens and is left-padded with 0 (Keras's pad_sequences).
  int64_t seq_len = 80;
};

struct ImdbData {
  DataSplit split;
  bool from_cache = false;
};

// DIR/train/pos, DIR/train/neg, DIR/test/pos, DIR/test/neg: folders of .txt reviews (label 1 for
// pos). Tokens are the maximal runs of [a-z0-9'] of the lower-cased text ("<br />" is a space;
// apostrophes at a token's ends are dropped). Samples are ordered neg then pos, files by name.
// The result is cached in cache_dir under a name derived from the corpus path, its file count and
// newest modification time, vocab and seq_len; a damaged cache is rebuilt (from_cache says which
// happened). x holds the ids as floats. Throws UserError naming the folder or file: a missing
// folder, a folder without .txt files, an unreadable review, a cache that cannot be written,
// vocab < 3 or seq_len < 1.
// The reviews' token-id sequences as load_imdb_corpus builds them (the rules above, no cache). Each
// call of `next` gives one review: its part (0 train/neg, 1 train/pos, 2 test/neg, 3 test/pos) and
// its text; it returns false after the last. One review at a time, so that a corpus of 50,000 files
// never sits in memory as text.
DataSplit imdb_from_reviews(FunctionRef<bool(int& part, std::string& text)> next,
                            const ImdbOptions& options);

ImdbData load_imdb_corpus(const std::filesystem::path& dir, const ImdbOptions& options,
                          const std::filesystem::path& cache_dir);

// Sequences with IMDB's shapes and class balance (exactly half positive): Zipf-distributed word
// ranks over a universe twice the vocabulary (ranks past it become the out-of-vocabulary id 1),
// review lengths from seq_len / 2 to 3 seq_len (shorter ones left-padded), and a learnable signal:
// a seeded set of words is more frequent in positive reviews and another in negative ones.
// Deterministic for a seed on every machine.
DataSplit make_imdb_synthetic(int64_t train_samples, int64_t test_samples,
                              const ImdbOptions& options, uint64_t seed);

}  // namespace xo
