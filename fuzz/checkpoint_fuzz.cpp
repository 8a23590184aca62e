// libFuzzer target: arbitrary bytes through xo::fuzz::read_checkpoint (fuzz/readers.h says what it
// reads). A UserError is the expected answer to bad input; anything else (a crash, a sanitizer
// report, another exception, a hang, a memory blow-up) is a finding.
#include "readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return xo::fuzz::run_target(xo::fuzz::read_checkpoint, data, size,
                              "fuzz-checkpoint/step-000000000006.json");
}
