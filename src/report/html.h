// report.html: the report document (crossover.report/2) as one self-contained page, with its
// charts as inline SVG drawn here, so it opens offline and loads nothing from anywhere else.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "report/document.h"

namespace xo {

// The page for `report`. Every section whose data is present is drawn; a missing or non-finite
// figure reads "n/a", and every string from the document is escaped (model names come from spec
// files).
std::string render_html_report(const Report& report);

// The page for a results.json document as read leniently (report/report_json.h): what cannot be
// read is shown as missing, and no shape of document makes it throw.
std::string render_html_report(const nlohmann::json& report);

// render_html_report written to `file` atomically (write_file_atomic).
void write_html_report(const std::filesystem::path& file, const Report& report);

}  // namespace xo
