// libFuzzer target: arbitrary bytes as an ONNX file, read and mapped onto crossover's layers. A
// UserError is the expected answer to bad input; anything else (a crash, a sanitizer report,
// another exception, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/onnx.h"
#include "model/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const xo::OnnxGraph graph =
        xo::parse_onnx(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    const xo::OnnxImport imported = xo::import_onnx(graph);
    xo::infer_shapes(imported.spec);
  } catch (const xo::UserError&) {
  }
  return 0;
}
