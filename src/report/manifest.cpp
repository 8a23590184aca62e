#include "report/manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>  // its version, for the libraries
#include <string>
#include <string_view>

namespace xo {
namespace {

std::string version_text(int major, int minor, int patch) {
  return fmt::format("{}.{}.{}", major, minor, patch);
}

// Characters a POSIX shell reads literally outside quotes.
bool shell_safe(const std::string& arg) {
  return !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_-+=/.,:@%").find(c) != std::string_view::npos;
  });
}

// CMake joins empty flag variables with spaces: " -O3 -DNDEBUG" reads as "-O3 -DNDEBUG".
std::string trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(' ');
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(' ') - first + 1));
}

std::string join(const std::vector<std::string>& items) {
  return items.empty() ? std::string("none") : fmt::format("{}", fmt::join(items, ", "));
}

const std::string* find_value(const std::vector<std::pair<std::string, std::string>>& pairs,
                              const std::string& name) {
  for (const auto& [k, v] : pairs) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace

BuildInfo this_build() {
  BuildInfo b;
  b.version = CROSSOVER_VERSION;
  b.commit = source_commit();
  b.type = CROSSOVER_BUILD_TYPE;
  b.compiler = CROSSOVER_COMPILER;
  b.cxx_flags = trimmed(CROSSOVER_CXX_FLAGS);
  b.cuda = CROSSOVER_BUILD_CUDA != 0;
  b.cuda_architectures = CROSSOVER_CUDA_ARCHITECTURES;
  return b;
}

std::vector<std::pair<std::string, std::string>> build_libraries() {
  return {{"oneDNN", CROSSOVER_DNNL_VERSION},
          {"fmt", version_text(FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100)},
          {"nlohmann_json", version_text(NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                                         NLOHMANN_JSON_VERSION_PATCH)}};
}

std::string shell_command_line(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& arg : args) {
    if (!line.empty()) line += ' ';
    if (shell_safe(arg)) {
      line += arg;
      continue;
    }
    // Inside single quotes nothing is special but the quote itself, written as '\''.
    line += '\'';
    for (char c : arg) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

std::vector<ManifestDifference> manifest_differences(const Manifest& recorded,
                                                     const MachineInfo* recorded_machine,
                                                     const Manifest& here,
                                                     const MachineInfo& here_machine) {
  std::vector<ManifestDifference> out;
  const auto compare = [&](std::string entry, const std::string& a, const std::string& b) {
    if (a != b) out.push_back({std::move(entry), a, b});
  };
  const BuildInfo &a = recorded.build, &b = here.build;
  compare("crossover", a.version, b.version);
  compare("commit", a.commit, b.commit);
  compare("build type", a.type, b.type);
  compare("compiler", a.compiler, b.compiler);
  compare("C++ flags", a.cxx_flags, b.cxx_flags);
  const auto cuda = [](const BuildInfo& x) {
    return x.cuda ? fmt::format("on ({})", x.cuda_architectures) : std::string("off");
  };
  compare("CUDA", cuda(a), cuda(b));
  // Every library named on either side, in the recorded order, then the new ones.
  std::vector<std::string> names;
  for (const auto& [name, version] : recorded.libraries) names.push_back(name);
  for (const auto& [name, version] : here.libraries) {
    if (!find_value(recorded.libraries, name)) names.push_back(name);
  }
  for (const std::string& name : names) {
    const std::string* was = find_value(recorded.libraries, name);
    const std::string* is = find_value(here.libraries, name);
    compare("library " + name, was ? *was : "none", is ? *is : "none");
  }
  if (recorded_machine) {
    const MachineInfo& m = *recorded_machine;
    compare("CPU", m.cpu, here_machine.cpu);
    const auto cpus = [](const MachineInfo& x) {
      return x.logical_cpus ? std::to_string(*x.logical_cpus) : std::string("unknown");
    };
    compare("threads available", cpus(m), cpus(here_machine));
    compare("GPUs", join(m.gpus), join(here_machine.gpus));
  }
  return out;
}

}  // namespace xo
