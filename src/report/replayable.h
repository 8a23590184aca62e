// What `crossover replay` checks of a results.json before it runs anything: a file it cannot
// replay as recorded is refused (exit 2) naming the field, never replayed as something else.
#pragma once

#include <string>

#include "report/document.h"

namespace xo {

// The manifest of `recorded` (read from `file`), once the file is one a replay can repeat: it has
// a manifest (a missing one named plainly: written before manifests, or cut from a file that had
// one), it has runs, and each run's epochs (the manifest's, else its spec's) are those it recorded
// unless something cut it short (a stop, early stopping, divergence, --steps). The manifest's
// settings were range-checked as the file was read; no run trained on the Python module's arrays
// (data/arrays.h: not in the file). Throws UserError naming the file, the run and the field.
const Manifest& check_replayable(const Report& recorded, const std::string& file);

}  // namespace xo
