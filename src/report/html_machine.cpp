// report.html's machine section: what the report was measured on, as a property table.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/format.h"
#include "report/html_sections.h"

namespace xo::html {
namespace {

// A count exactly, any other number to 4 significant digits.
std::string number_html(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return na();
  return cell(*v == std::floor(*v) && std::fabs(*v) < 1e15 ? exact_count(v)
                                                           : significant(*v, 4, true));
}

}  // namespace

std::string machine_html(const Report& report) {
  if (!report.machine) return "";
  const MachineInfo& m = *report.machine;
  // Libraries by name, as results.json lists them.
  std::vector<std::pair<std::string, std::string>> libraries = m.libraries;
  std::sort(libraries.begin(), libraries.end());
  std::string library_list;
  for (const auto& [name, version] : libraries)
    library_list += (library_list.empty() ? "" : "; ") + escape(name) + ": " + text_cell(version);
  const std::optional<double> logical_cpus =
      m.logical_cpus ? std::optional<double>(static_cast<double>(*m.logical_cpus)) : std::nullopt;
  // The properties people look for first.
  const std::vector<std::vector<std::string>> rows = {
      {"cpu", text_cell(m.cpu)},
      {"logical cpus", number_html(logical_cpus)},
      {"cpu cores", text_cell(m.cpu_cores)},
      {"memory (GiB)", number_html(m.memory_gib)},
      {"os", text_cell(m.os)},
      {"hostname", text_cell(m.hostname)},
      {"gpus", text_list(m.gpus)},
      {"nvidia driver", text_cell(m.nvidia_driver)},
      {"devices", text_list(m.devices)},
      {"devices unavailable", text_list(m.devices_unavailable)},
      {"compiler", text_cell(m.compiler)},
      {"flags", text_cell(m.flags)},
      {"libraries", library_list.empty() ? "none" : library_list},
      {"crossover", text_cell(m.crossover)},
      {"date", text_cell(m.date)},
      {"avx512", m.avx512 ? "yes" : "no"}};
  std::vector<std::vector<std::string>> all = rows;
  // What `crossover replay` needs to run the job again: the build and the command.
  if (report.manifest) {
    const Manifest& f = *report.manifest;
    all.push_back({"commit", text_cell(f.build.commit)});
    all.push_back(
        {"build", text_cell(f.build.type + (f.build.cuda ? ", CUDA " + f.build.cuda_architectures
                                                         : ", no CUDA"))});
    all.push_back({"command line", "<code>" + escape(f.command_line) + "</code>"});
  }
  return html_table({{"property"}, {"value"}}, all, "machine");
}

}  // namespace xo::html
