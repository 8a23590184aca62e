// Turns a [data] section into data sets: generated, or read from the files it names.
#include "data/source.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "data/idx.h"
#include "data/imdb.h"

namespace xo {
namespace {

constexpr std::string_view kCsv = "csv:";
constexpr std::string_view kIdx = "idx:";
constexpr std::string_view kImdb = "imdb:";

// The sequence options of a model whose first layer is an embedding over its [steps] input.
ImdbOptions sequence_options(const DataSpec& data, const DataRequest& model) {
  if (model.vocab <= 0 || model.input.size() != 1) {
    throw UserError(fmt::format(
        "{}: data.source '{}' holds token sequences: the model needs input = [length] and an "
        "embedding as its first layer",
        model.origin, data.source));
  }
  ImdbOptions o;
  o.vocab = model.vocab;
  o.seq_len = model.input[0];
  return o;
}

}  // namespace

DataSplit load_data(const DataSpec& data, const DataRequest& model) {
  int64_t features = 1;
  for (int64_t d : model.input) features *= d;
  const std::string& source = data.source;
  if (source.empty()) {
    throw UserError(fmt::format(
        "{}: no data to train on: name it in a [data] table (source = \"csv:PATH\", "
        "\"fashion-mnist\", \"idx:DIR\", \"imdb:DIR\" or \"imdb-synthetic\"; for an ONNX model, "
        "in the TOML file of the same name beside it) or pass --data",
        model.origin));
  }
  if (source == "disc") {
    DataSplit split{make_disc(data.samples, model.seed), {}};
    if (data.test_samples > 0) {
      // Another stream of the same generator: points the model never saw.
      split.test = make_disc(data.test_samples, model.seed ^ 0x7e577e57ULL);
    }
    return split;
  }
  if (source.starts_with(kCsv)) {
    return {load_csv(source.substr(kCsv.size()), model.classes, features), {}};
  }
  if (source == "fashion-mnist") return load_fashion_mnist();
  if (source.starts_with(kIdx)) return load_idx_folder(source.substr(kIdx.size()), source);
  if (source == "imdb-synthetic") {
    return make_imdb_synthetic(data.samples, data.test_samples, sequence_options(data, model),
                               model.seed);
  }
  if (source.starts_with(kImdb)) {
    return load_imdb_corpus(source.substr(kImdb.size()), sequence_options(data, model),
                            default_cache_dir())
        .split;
  }
  throw UserError(fmt::format(
      "{}: data.source '{}': expected disc, csv:PATH, fashion-mnist, idx:DIR, imdb:DIR or "
      "imdb-synthetic",
      model.origin, source));
}

std::string data_fingerprint(const DataSplit& split) {
  Hasher h;
  for (const Dataset* d : {&split.train, &split.test}) {
    h.value(d->samples).value(d->features).value(d->classes).values(d->x).values(d->y);
  }
  return h.hex();
}

}  // namespace xo
