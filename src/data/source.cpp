#include "data/source.h"

#include <fmt/format.h>

#include "core/error.h"

namespace xo {

Dataset load_data(const ModelSpec& spec, int64_t classes, const std::string& csv_override) {
  int64_t features = 1;
  for (int64_t d : spec.input) features *= d;
  if (!csv_override.empty()) return load_csv(csv_override, classes, features);
  const std::string& source = spec.data.source;
  if (source == "disc") return make_disc(spec.data.samples, spec.train.seed);
  constexpr std::string_view kCsv = "csv:";
  if (source.rfind(kCsv, 0) == 0) return load_csv(source.substr(kCsv.size()), classes, features);
  throw UserError(
      fmt::format("{}: data.source '{}': expected \"disc\" or \"csv:PATH\"", spec.origin, source));
}

}  // namespace xo
