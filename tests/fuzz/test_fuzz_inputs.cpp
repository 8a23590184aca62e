// Every fuzz target's seeds (fuzz/corpus/NAME) and the inputs it once found a crash, a hang or a
// sanitizer report with (fuzz/regressions/NAME) go through the same reader as the target
// (fuzz/readers.h) in the normal build: each is read, or refused with a UserError that names the
// file, never another exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/file.h"
#include "fuzz/readers.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

// Reads every file of fuzz/FOLDER/NAME through the target's reader; returns how many there were.
int replay(const fuzz::Target& target, const char* folder) {
  const fs::path dir = fs::path(CROSSOVER_SOURCE_DIR) / "fuzz" / folder / target.name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  int inputs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++inputs;
    const std::string origin = entry.path().string();
    SCOPED_TRACE(origin);
    try {
      target.read(read_file(entry.path()), origin);
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(origin), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a UserError: " << e.what();
    }
  }
  return inputs;
}

TEST(FuzzInputs, EverySeedIsReadOrAUserError) {
  for (const fuzz::Target& target : fuzz::kTargets) {
    SCOPED_TRACE(target.name);
    // Every target starts from seeds in the repository.
    EXPECT_GT(replay(target, "corpus"), 0);
  }
}

// The seeds of the checkpoint and replay targets are files crossover wrote: each reads whole (so
// that the fuzzer starts past every check, not at the first).
TEST(FuzzInputs, TheCheckpointAndReplaySeedsReadWhole) {
  for (const fuzz::Target& target : fuzz::kTargets) {
    if (std::string(target.name) != "checkpoint" && std::string(target.name) != "replay") continue;
    const fs::path dir = fs::path(CROSSOVER_SOURCE_DIR) / "fuzz" / "corpus" / target.name;
    for (const auto& entry : fs::directory_iterator(dir)) {
      EXPECT_NO_THROW(target.read(read_file(entry.path()), entry.path().string()))
          << entry.path();
    }
  }
}

TEST(FuzzInputs, EveryFindingIsReadOrAUserError) {
  int inputs = 0;
  for (const fuzz::Target& target : fuzz::kTargets) {
    SCOPED_TRACE(target.name);
    inputs += replay(target, "regressions");
  }
  EXPECT_GT(inputs, 0);
}

}  // namespace
}  // namespace xo
