// A results.json's manifest: what a replay needs beside the runs (each run carries its spec text,
// the hash of its data and of its final parameters, and its device): the build that measured them,
// the libraries, the command line and the job's execution settings. Also how a recorded manifest
// and machine differ from this build and machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/machine.h"

namespace xo {

// The files written before the manifest was added: `crossover replay` cannot replay them.
inline constexpr const char* kManifestSince = "0.1.1";

struct BuildInfo {
  std::string version;  // CROSSOVER_VERSION
  // The source's git commit, "-dirty" with uncommitted changes, "unknown" outside a checkout.
  std::string commit;
  std::string type;  // CMAKE_BUILD_TYPE
  std::string compiler;
  std::string cxx_flags;
  bool cuda = false;
  std::string cuda_architectures;  // empty without CUDA
};

// The settings of a measuring job that change its outcome (how long, on which devices, on how
// many threads, in which arithmetic), as `run`, `sweep`, `advise` and `cost` took them.
// The ranges a manifest's settings are read in: what a person could have asked for, so that an
// edited file cannot make a replay train for ever or start a million threads.
inline constexpr int64_t kMaxEpochs = 1'000'000'000;
inline constexpr int64_t kMaxSteps = int64_t{1} << 53;
inline constexpr int64_t kMaxThreads = 4096;

struct ExecutionSettings {
  std::vector<std::string> devices;  // the devices the job measured on, resolved ("cpu", "cuda:0")
  std::optional<int64_t> epochs;     // every spec's epochs overridden (each spec text says so too)
  int64_t max_steps = 0;             // 0: every epoch
  int threads = 0;                   // as asked; 0: every core (each run's device says how many)
  int node_time_steps = 0;
  std::string precision = "f32";
  bool record_step = true;
};

struct Manifest {
  BuildInfo build;
  std::vector<std::pair<std::string, std::string>> libraries;  // name, version the build uses
  // Device id, its libraries as the device reports them (DeviceInfo::library): the oneDNN that
  // was loaded, or cuBLASLt, cuDNN and the CUDA runtime.
  std::vector<std::pair<std::string, std::string>> device_libraries;
  std::string command_line;  // as typed, shell-quoted
  ExecutionSettings settings;
};

// This build: version, commit, type, compiler, flags and CUDA.
BuildInfo this_build();
// The libraries this build was compiled against: oneDNN, fmt, nlohmann_json.
std::vector<std::pair<std::string, std::string>> build_libraries();
// The git commit the build saw; defined in a source the build generates (cmake/commit.cmake).
const char* source_commit();

// Arguments joined with spaces, each quoted as a POSIX shell needs it to read it back unchanged.
std::string shell_command_line(const std::vector<std::string>& args);

// One entry that differs between a recorded manifest (and machine) and this one.
struct ManifestDifference {
  std::string entry;  // "crossover", "commit", "CPU", "library oneDNN", ...
  std::string recorded, here;
};

// What differs between the recorded build, libraries and machine and this ones: crossover's
// version and commit, the build's type, compiler, flags and CUDA, each library's version, the
// CPU model, the threads available and the GPUs (the machine's entries only where
// `recorded_machine` is given). Device libraries are left to each run's comparison. Empty: the same
// everywhere.
std::vector<ManifestDifference> manifest_differences(const Manifest& recorded,
                                                     const MachineInfo* recorded_machine,
                                                     const Manifest& here,
                                                     const MachineInfo& here_machine);

}  // namespace xo
