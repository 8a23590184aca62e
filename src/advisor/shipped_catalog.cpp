// The catalog crossover ships: data/catalog.toml, built into the binary (the generated
// shipped_catalog.cpp holds its bytes), or the file CROSSOVER_CATALOG names. Apart from
// catalog.cpp so that the parsers alone (fuzz/) link without the generated source.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "advisor/catalog.h"
#include "core/error.h"

namespace xo {

Catalog shipped_catalog() {
  if (const char* env = std::getenv("CROSSOVER_CATALOG"); env && *env) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(env, ec)) {
      throw UserError(fmt::format(
          "CROSSOVER_CATALOG={}: no such file (it names a catalog TOML file that replaces the "
          "built-in one; unset it to use the built-in catalog)",
          env));
    }
    return load_catalog(env);
  }
  return parse_catalog(std::string(shipped_catalog_text()), kShippedCatalogOrigin);
}

}  // namespace xo
