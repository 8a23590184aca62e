// The sections of report.html, each drawn from the typed report. A section returns "" when the
// report holds nothing for it, and the page then leaves it out (with its link in the navigation).
#pragma once

#include <string>

#include "report/document.h"
#include "report/html_parts.h"

namespace xo::html {

// html_advice.cpp: what the advisor concluded, predicted and priced.
// The verdict first: its sentence, the crossover, and what its times are.
std::string verdict_html(const Report& report);
std::string advice_html(const Report& report);
std::string predictions_html(const Report& report, const DeviceColours& colours);
std::string cost_html(const Report& report, const DeviceColours& colours);

// html_sweep.cpp: time per 100 epochs along the swept axis, one line per device, the crossovers
// marked.
std::string sweep_html(const Report& report, const DeviceColours& colours);

// html_runs.cpp: what each run measured.
std::string runs_html(const Report& report, const DeviceColours& colours);
std::string peaks_html(const Report& report, const DeviceColours& colours);
std::string phases_html(const Report& report, const DeviceColours& colours);
std::string layers_html(const Report& report);

// html_timelines.cpp: utilisation over time, small multiples per run.
std::string timelines_html(const Report& report, const DeviceColours& colours);

// html_machine.cpp: the machine the report was measured on.
std::string machine_html(const Report& report);

}  // namespace xo::html
