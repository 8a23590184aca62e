#include "data/source.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/idx.h"

namespace xo {
namespace {

constexpr std::string_view kCsv = "csv:";
constexpr std::string_view kIdx = "idx:";
constexpr std::string_view kImdb = "imdb:";

}  // namespace

DataSplit load_data(const ModelSpec& spec, int64_t classes, const std::string& csv_override) {
  int64_t features = 1;
  for (int64_t d : spec.input) features *= d;
  if (!csv_override.empty()) return {load_csv(csv_override, classes, features), {}};
  const std::string& source = spec.data.source;
  if (source == "disc") {
    DataSplit split{make_disc(spec.data.samples, spec.train.seed), {}};
    if (spec.data.test_samples > 0) {
      // Another stream of the same generator: points the model never saw.
      split.test = make_disc(spec.data.test_samples, spec.train.seed ^ 0x7e577e57ULL);
    }
    return split;
  }
  if (source.starts_with(kCsv))
    return {load_csv(source.substr(kCsv.size()), classes, features), {}};
  if (source == "fashion-mnist") return load_fashion_mnist();
  if (source.starts_with(kIdx)) return load_idx_folder(source.substr(kIdx.size()), source);
  throw UserError(fmt::format(
      "{}: data.source '{}': expected disc, csv:PATH, fashion-mnist, idx:DIR, imdb:DIR or "
      "imdb-synthetic",
      spec.origin, source));
}

}  // namespace xo
