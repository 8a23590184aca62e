// Resolves a spec's [data] section (or a --data override, parsed by data_source_argument) to a
// training and a test set in memory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace xo {

// Where the data comes from. "disc" and "imdb-synthetic" are generated; "csv:PATH" reads a CSV
// (PATH relative to the spec file's folder; the parser makes it so), "safetensors:PATH" a
// safetensors file of tensors x and y (load_safetensors_data); "fashion-mnist" reads Debian's
// dataset-fashion-mnist; "idx:DIR" reads MNIST-format files from a folder; "imdb:DIR" reads the
// aclImdb review corpus.
struct DataSpec {
  std::string source = "disc";
  int64_t samples = 1000;    // generated sources: training samples
  int64_t test_samples = 0;  // generated sources: test samples (0: no test split)
  // The test split from a file ("csv:PATH" or "safetensors:PATH", relative to the spec's folder as
  // the source's path), in place of the source's own test split (a spec's `test`); empty: the
  // source's.
  std::string test;
  // Keras's validation_split: this fraction of the training samples, the last ones before any
  // shuffling, held out and evaluated after every epoch (0: none).
  double validation_split = 0;
};

// What the data must fit: the model that trains on it, as plain values.
struct DataRequest {
  std::string origin;          // the spec's file (or "built-in"), for error messages
  std::vector<int64_t> input;  // the shape of one sample
  int64_t classes = 0;         // labels must lie in [0, classes); 0: real targets (mse, a CSV)
  int64_t vocab = 0;           // the first layer's embedding vocabulary; 0: it is no embedding
  uint64_t seed = 0;           // generated data: a spec and a seed name one data set
};

// Sources: disc, csv:PATH and safetensors:PATH (no test set), fashion-mnist, idx:DIR, imdb:DIR,
// imdb-synthetic. Sequence sources take their length from the input shape and their vocabulary
// from the embedding. An empty source (an imported model without a training file) is refused with
// what to write. `data.test` replaces the test split; `data.validation_split` holds out the
// training set's last samples (split_validation).

DataSplit load_data(const DataSpec& data, const DataRequest& model);

// Holds out the training samples after the first floor(samples x (1 - fraction)) as the validation
// set (Keras's validation_split: before any shuffling). Throws UserError, naming `origin`, when
// either part would be empty. A fraction of 0 does nothing.
void split_validation(DataSplit& split, double fraction, const std::string& origin);

// A hash of a split's contents (shapes, features, labels, train and test): 16 hex digits that
// change when any sample does. A checkpoint is refused for other data; results.json records it.
std::string data_fingerprint(const DataSplit& split);

// Each split's data_fingerprint, taken once however many runs share the split (it reads every
// byte: a fused group of 8 mnist-mlp trials read the same 188 MB 16 times for its checkpoints and
// records). Splits are told apart by address: each must outlive its use here, unchanged.
class DataFingerprints {
 public:
  const std::string& of(const DataSplit& split);

 private:
  std::map<const DataSplit*, std::string> known_;
};

}  // namespace xo
