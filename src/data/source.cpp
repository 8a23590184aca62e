// Turns a [data] section into data sets: generated, or read from the files it names.
#include "data/source.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "data/rows.h"

namespace xo {
namespace {

constexpr std::string_view kCsv = "csv:";
constexpr std::string_view kIdx = "idx:";
constexpr std::string_view kImdb = "imdb:";
constexpr std::string_view kSafetensors = "safetensors:";

// A file of samples with their labels or targets: a CSV or a safetensors file.
bool is_sample_file(const std::string& source) {
  return source.starts_with(kCsv) || source.starts_with(kSafetensors);
}

Dataset load_sample_file(const std::string& source, int64_t classes, int64_t features) {
  if (source.starts_with(kSafetensors)) {
    return load_safetensors_data(source.substr(kSafetensors.size()), classes, features);
  }
  return load_csv(source.substr(kCsv.size()), classes, features);
}

// The numbers in one sample: the product of the model's input shape.
int64_t sample_features(const DataRequest& model) {
  int64_t features = 1;
  for (int64_t d : model.input) features *= d;
  return features;
}

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

namespace {

DataSplit load_source(const DataSpec& data, const DataRequest& model);

}  // namespace

void split_validation(DataSplit& split, double fraction, const std::string& origin) {
  if (fraction <= 0) return;
  Dataset& train = split.train;
  // As Keras (train_validation_split): the first floor(n (1 - fraction)) samples train, the rest
  // validate.
  const auto kept =
      static_cast<int64_t>(std::floor(static_cast<double>(train.samples) * (1.0 - fraction)));
  const int64_t held = train.samples - kept;
  if (kept < 1 || held < 1) {
    throw UserError(fmt::format(
        "{}: data.validation_split = {} of {} training samples leaves {} to train on and {} to "
        "validate (expected at least one of each)",
        origin, fraction, train.samples, kept, held));
  }
  split.validation = sample_rows(train, kept, train.samples);
  split.validation.description = fmt::format("the last {} samples of {} (validation_split {})",
                                             held, train.description, fraction);
  if (train.borrowed()) {
    std::string description = std::move(train.description);
    train = sample_rows(train, 0, kept);
    train.description = std::move(description);
  } else {  // the first samples kept where they are: no copy of the training set
    train.x.resize(static_cast<size_t>(kept * train.features));
    train.y.resize(static_cast<size_t>(kept));
    train.samples = kept;
  }
}

Dataset sample_rows(const Dataset& data, int64_t begin, int64_t end) {
  XO_ASSERT(0 <= begin && begin <= end && end <= data.samples);
  Dataset part{end - begin, data.features, data.classes, {}, {}, data.description};
  const auto f = static_cast<size_t>(data.features);
  const auto b = static_cast<size_t>(begin), e = static_cast<size_t>(end);
  if (data.borrowed()) {
    part.borrowed_x = data.borrowed_x + b * f;
    part.borrowed_y = data.borrowed_y ? data.borrowed_y + b : nullptr;
    part.owner = data.owner;
    return part;
  }
  const std::span<const float> x = data.inputs();
  const std::span<const int32_t> y = data.labels();
  part.x.assign(x.begin() + static_cast<ptrdiff_t>(b * f),
                x.begin() + static_cast<ptrdiff_t>(e * f));
  part.y.assign(y.begin() + static_cast<ptrdiff_t>(b), y.begin() + static_cast<ptrdiff_t>(e));
  return part;
}

DataSplit load_data(const DataSpec& data, const DataRequest& model) {
  if (model.classes == 0 && !is_sample_file(data.source)) {
    throw UserError(fmt::format(
        "{}: loss \"mse\" regresses a real-valued target, which only a file of samples brings "
        "(a CSV's last column, a safetensors file's 'y'); data.source '{}' has class labels "
        "(expected source = \"csv:PATH\" or \"safetensors:PATH\", or a classification loss)",
        model.origin, data.source));
  }
  DataSplit split = load_source(data, model);
  if (!data.test.empty()) {
    // Only a file of samples names a test split on its own (the parser makes it so).
    split.test = load_sample_file(data.test, model.classes, split.train.features);
  }
  split_validation(split, data.validation_split, model.origin);
  return split;
}

namespace {

DataSplit load_source(const DataSpec& data, const DataRequest& model) {
  const int64_t features = sample_features(model);
  const std::string& source = data.source;
  if (source.empty()) {
    throw UserError(
        fmt::format("{}: no data to train on: name it in a [data] table (source = \"csv:PATH\", "
                    "\"safetensors:PATH\", \"fashion-mnist\", \"idx:DIR\", \"imdb:DIR\" or "
                    "\"imdb-synthetic\"; for an ONNX model, "
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
  if (is_sample_file(source)) return {load_sample_file(source, model.classes, features), {}};
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
      "{}: data.source '{}': expected disc, csv:PATH, safetensors:PATH, fashion-mnist, idx:DIR, "
      "imdb:DIR or imdb-synthetic",
      model.origin, source));
}

}  // namespace

std::string data_fingerprint(const DataSplit& split) {
  Hasher h;
  for (const Dataset* d : {&split.train, &split.test, &split.validation}) {
    h.value(d->samples)
        .value(d->features)
        .value(d->classes)
        .values(d->inputs())
        .values(d->labels());
  }
  return h.hex();
}

const std::string& DataFingerprints::of(const DataSplit& split) {
  auto [at, fresh] = known_.try_emplace(&split);
  if (fresh) at->second = data_fingerprint(split);
  return at->second;
}

Dataset load_rows(const DataSpec& data, const DataRequest& model) {
  if (data.source.starts_with(kCsv)) {
    const std::string path = data.source.substr(kCsv.size());
    return parse_csv_rows(read_file(path), path, sample_features(model));
  }
  DataSpec rows = data;
  rows.test.clear();
  rows.validation_split = 0;
  return load_data(rows, model).train;
}

}  // namespace xo
