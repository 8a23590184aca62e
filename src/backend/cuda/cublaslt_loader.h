// cuBLASLt, opened when a CUDA backend first needs it (cublaslt_loader.cpp), not when crossover
// starts.
#pragma once

#include <cstddef>
#include <string>

namespace xo::cuda {

// Opens cuBLASLt and finds every entry point crossover calls, once per process; returns the file
// opened. Throws UserError naming what was tried where the library or an entry point is missing.
std::string load_cublaslt();
// cuBLASLt's version (major x 10000 + minor x 100 + patch), asked of the opened library.
size_t cublaslt_version();

}  // namespace xo::cuda
