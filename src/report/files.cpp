#include "report/files.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "report/csv.h"
#include "report/html.h"
#include "report/report_json.h"
#include "report/tune_json.h"
#include "report/tune_text.h"

namespace xo {
namespace {

std::string num(double v) { return csv_number(v); }
std::string num(const std::optional<double>& v) { return v ? num(*v) : std::string(); }

}  // namespace

std::string runs_csv(const Report& report) {
  std::string csv =
      "model,layers,params,device,axis,axis_value,epochs,seconds_per_epoch,seconds_per_100_epochs,"
      "ms_per_step,step_p10_ms,step_p90_ms,step_spread_fraction,gflops,peak_fraction,final_loss,"
      "final_train_error_percent,final_test_accuracy_percent,peak_rss_mib,mean_cpu_percent,ranks,"
      "communicate_ms,reduced_bytes_per_step,hosts,predicted_communicate_ms\n";
  for (const ReportRun& run : report.runs) {
    const RunRecord& row = run.run;
    const TrainResult& r = row.result;
    const bool trained = !r.epochs.empty();  // else no final loss or error to report
    const bool data_parallel = r.ranks > 1;  // else nothing summed across ranks
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
        csv_text(r.model), row.layers, r.params, csv_text(r.device.id), csv_text(row.axis),
        row.axis.empty() ? "" : num(row.axis_value), epochs_completed(r),
        num(run.analysis.seconds_per_epoch), num(100 * run.analysis.seconds_per_epoch),
        num(r.step_ms.median), num(r.step_ms.p10), num(r.step_ms.p90),
        num(relative_spread(r.step_ms)), num(r.gflops), num(run.analysis.peak_fraction),
        trained ? num(r.final_loss) : "", trained ? num(r.final_train_error) : "",
        num(r.final_test_accuracy), num(row.peak_rss_mib),
        row.utilisation ? num(row.utilisation->mean_cpu_percent) : std::string(), r.ranks,
        data_parallel ? num(r.communicate_ms) : std::string(),
        data_parallel ? std::to_string(r.reduced_bytes) : std::string(),
        data_parallel ? std::to_string(r.hosts) : std::string(),
        data_parallel ? num(r.predicted_communicate_ms) : std::string());
  }
  return csv;
}

void write_report(const std::filesystem::path& out_dir, const Report& report) {
  // All three rendered first, so that a failure to render one replaces none. Each file is
  // replaced atomically, never written through a link or onto a FIFO planted in the job's folder
  // (they are the job's own files); when one cannot be written (a full disk), the error names the
  // ones already replaced, since the folder then holds versions of two different moments.
  const std::pair<const char*, std::string> files[] = {
      {"results.json", to_json(report).dump(2) + "\n"},
      {"results.csv", runs_csv(report)},
      {"report.html", render_html_report(report)}};
  std::string written;
  for (const auto& [name, bytes] : files) {
    try {
      replace_file_atomic(out_dir / name, bytes);
    } catch (const UserError& e) {
      if (written.empty()) throw;
      throw UserError(fmt::format("{} ({} already written)", e.what(), written));
    }
    written += (written.empty() ? "" : ", ") + std::string(name);
  }
}

void write_tune_report(const std::filesystem::path& out_dir, const TuneRecord& record,
                       const MachineInfo& machine) {
  const nlohmann::json doc = to_json(record, machine);
  // The search's own files in its folder: replaced, never written through a planted link; written
  // together (published at every start and end of a job, their waits for the disk overlapped):
  // a failure before the renames keeps every previous version.
  AtomicWrites files;
  files.replace(out_dir / "results.json", doc.dump(2) + "\n");
  files.replace(out_dir / "results.csv", tune_csv(record));
  files.replace(out_dir / "report.html", render_tune_html(record, doc["machine"]));
  files.commit();
}

}  // namespace xo
