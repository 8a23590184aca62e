// The report on the terminal: the runs as one table with the peaks and the advice under it, the
// predicted step times, and the cost tables. Figures come from the typed report and are formatted
// by core/format.h, as report.html formats them.
#pragma once

#include <filesystem>
#include <string>

#include "report/document.h"

namespace xo {

// `run` and `sweep`: the table, the peaks, notes, the advice and where the report was written.
std::string summary_text(const Report& report, const std::filesystem::path& out, bool stopped);
// `advise` and `cost`: predicted step times of the report's model on every device.
std::string predictions_text(const Report& report);
// A sweep along ranks: each rank count's step, throughput, communication and efficiency.
std::string scaling_text(const std::vector<ScalingPoint>& points);
// The validation (leave-one-out) table: each device's predictions against its measurements.
std::string validation_text(const std::vector<ValidationRow>& rows);
// The same table model by model as Markdown (`validate --markdown`, docs/benchmarks.md).
std::string validation_markdown(const std::vector<ValidationRow>& rows);
// Whether the stated errors hold on the held-out rows, kind by kind (advisor's calibrate), as a
// table; `markdown`: as Markdown.
std::string calibration_text(const std::vector<CalibrationRow>& rows, bool markdown = false);
// The cost of a run here, on every instance and owned device, and when buying pays off.
std::string cost_text(const CostTable& cost);
// The verdict: its sentence, the crossover, and how the time here was measured.
std::string verdict_text(const GpuVerdict& v);
// The advice as a list ("- ..." a line).
std::string advice_text(const std::vector<std::string>& advice);

}  // namespace xo
