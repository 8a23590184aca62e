// cuBLASLt, loaded when a CUDA backend first needs it rather than when crossover starts: the
// library's own initialisation is slow, and every command (a CPU run, `--version`, each model
// process of a search) paid it while it was linked (docs/benchmarks.md, "A command's start
// without cuBLASLt"). The cuBLASLt functions crossover calls are
// defined here with the header's own signatures (the compiler checks them against cublasLt.h), each
// calling the library's, found by dlsym once the library is open.
#include "backend/cuda/cublaslt_loader.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "core/error.h"

namespace xo::cuda {
namespace {

#define XO_STRING_OF(x) #x
#define XO_STRING(x) XO_STRING_OF(x)

// The entry points, as the library defines them.
struct CublasLtApi {
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtGetVersion) version = nullptr;
  decltype(&::cublasLtGetStatusName) status_name = nullptr;
  decltype(&::cublasLtGetStatusString) status_string = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  std::string path;  // the file opened
  std::string why;   // empty once every entry point is found
};

CublasLtApi open_cublaslt() {
  CublasLtApi api;
  // The library the build compiled against, then the one the loader finds by its soname
  // (LD_LIBRARY_PATH, the system's paths).
  const std::string soname = "libcublasLt.so." XO_STRING(CUBLAS_VER_MAJOR);
  void* library = nullptr;
  std::string tried;
  for (const std::string& path : {std::string(CROSSOVER_CUBLASLT_PATH), soname}) {
    if (path.empty()) continue;
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) {
      api.path = path;
      break;
    }
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", path, dlerror());
  }
  if (!library) {
    api.why = "cuBLASLt could not be opened: tried " + tried;
    return api;
  }
  auto find = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, name));
    if (!fn && api.why.empty()) api.why = fmt::format("{} lacks {}", api.path, name);
  };
  find(api.create, "cublasLtCreate");
  find(api.destroy, "cublasLtDestroy");
  find(api.version, "cublasLtGetVersion");
  find(api.status_name, "cublasLtGetStatusName");
  find(api.status_string, "cublasLtGetStatusString");
  find(api.matmul, "cublasLtMatmul");
  find(api.heuristic, "cublasLtMatmulAlgoGetHeuristic");
  find(api.desc_create, "cublasLtMatmulDescCreate");
  find(api.desc_destroy, "cublasLtMatmulDescDestroy");
  find(api.desc_set, "cublasLtMatmulDescSetAttribute");
  find(api.preference_create, "cublasLtMatmulPreferenceCreate");
  find(api.preference_destroy, "cublasLtMatmulPreferenceDestroy");
  find(api.preference_set, "cublasLtMatmulPreferenceSetAttribute");
  find(api.layout_create, "cublasLtMatrixLayoutCreate");
  find(api.layout_destroy, "cublasLtMatrixLayoutDestroy");
  find(api.layout_set, "cublasLtMatrixLayoutSetAttribute");
  return api;  // the library stays open for the process's life
}

const CublasLtApi& api() {
  static const CublasLtApi loaded = open_cublaslt();
  return loaded;
}

// The opened library with every entry point; a UserError saying why where it cannot be had.
const CublasLtApi& loaded() {
  const CublasLtApi& a = api();
  if (!a.why.empty()) throw UserError(a.why);
  return a;
}

// The entry point `fn` of the opened library.
template <typename Fn>
Fn entry(Fn CublasLtApi::*fn) {
  return loaded().*fn;
}

}  // namespace

std::string load_cublaslt() { return loaded().path; }

size_t cublaslt_version() { return cublasLtGetVersion(); }

}  // namespace xo::cuda

using xo::cuda::CublasLtApi;
using xo::cuda::entry;

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* handle) {
  return entry(&CublasLtApi::create)(handle);
}
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t handle) {
  return entry(&CublasLtApi::destroy)(handle);
}
size_t CUBLASWINAPI cublasLtGetVersion(void) { return entry(&CublasLtApi::version)(); }
const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  return entry(&CublasLtApi::status_name)(status);
}
const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  return entry(&CublasLtApi::status_string)(status);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
    cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
    const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
    const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
    cudaStream_t stream) {
  return entry(&CublasLtApi::matmul)(handle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc,
                                     D, Ddesc, algo, workspace, workspaceSizeInBytes, stream);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  return entry(&CublasLtApi::heuristic)(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc,
                                        preference, requestedAlgoCount, heuristicResultsArray,
                                        returnAlgoCount);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  return entry(&CublasLtApi::desc_create)(matmulDesc, computeType, scaleType);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return entry(&CublasLtApi::desc_destroy)(matmulDesc);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void* buf, size_t sizeInBytes) {
  return entry(&CublasLtApi::desc_set)(matmulDesc, attr, buf, sizeInBytes);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return entry(&CublasLtApi::preference_create)(pref);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return entry(&CublasLtApi::preference_destroy)(pref);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
    size_t sizeInBytes) {
  return entry(&CublasLtApi::preference_set)(pref, attr, buf, sizeInBytes);
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  return entry(&CublasLtApi::layout_create)(matLayout, type, rows, cols, ld);
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return entry(&CublasLtApi::layout_destroy)(matLayout);
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             const void* buf, size_t sizeInBytes) {
  return entry(&CublasLtApi::layout_set)(matLayout, attr, buf, sizeInBytes);
}

}  // extern "C"
