// Every input the ONNX fuzzer once found a crash with (fuzz/regressions/onnx/) is answered with a
// clear error now: a UserError that names the file, never another exception.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/onnx.h"
#include "model/onnx_import.h"

namespace xo {
namespace {

TEST(OnnxRegressions, EveryFuzzFindingIsAUserError) {
  const std::filesystem::path dir =
      std::filesystem::path(CROSSOVER_SOURCE_DIR) / "fuzz" / "regressions" / "onnx";
  int inputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++inputs;
    SCOPED_TRACE(entry.path().string());
    try {
      import_onnx(read_onnx(entry.path()));
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(entry.path().string()), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(inputs, 0);
}

}  // namespace
}  // namespace xo
