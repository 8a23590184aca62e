// The cells of crossover's CSV files, written one way everywhere.
#pragma once

#include <string>

namespace xo {

// A text cell from a spec or a results file: a leading = + - @ (a spreadsheet formula) gets an
// apostrophe, control characters are escaped, and a comma or a quote makes it quoted (RFC 4180).
std::string csv_text(const std::string& raw);
// A number as the CSV files write it (6 significant digits); empty where it was not measured.
std::string csv_number(double v);

}  // namespace xo
