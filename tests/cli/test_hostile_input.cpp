// The command line against input an attacker or a careless user writes: sizes that overflow,
// counts beyond the machine, edited results files, CSV typos. Each ends in a clear error (exit 2)
// or a note, never an "internal error", a hang or gigabytes allocated first.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using Result = xo::testing::CliResult;

Result run(const std::string& args) { return xo::testing::run_cli(args); }

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

void expect_user_error(const Result& r, const std::string& piece) {
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("crossover: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(piece), std::string::npos) << "'" << piece << "' not in: " << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

// oneDNN failed to create its memory objects with 100000 threads ("internal error: could not
// create a memory object"): the count is clamped to the cores, with a note.
TEST(CliHostileInput, ThreadsBeyondTheCoresAreClampedWithANote) {
  const Result r = run("train disc-2 --epochs 1 --threads 100000 -q");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("note: --threads 100000: this machine has "), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

// A layer of 10^8 outputs per sample: built first, the model took a minute and 6 GB before the
// check of its activations said no. It is refused from the spec, at once.
TEST(CliHostileInput, AModelTooBigForItsActivationsIsRefusedAtOnce) {
  const xo::testing::TempDir dir("cli_tall");
  const fs::path spec = dir.path() / "tall.toml";
  write(spec,
        "[model]\nname = \"tall\"\ninput = [2]\nlayers = [\n"
        "  { type = \"linear\", out = 100000000 }, { type = \"relu\" },\n"
        "  { type = \"linear\", out = 2 },\n]\nloss = \"cross_entropy\"\n"
        "[train]\nbatch = 100000\nepochs = 1\n[data]\nsource = \"disc\"\nsamples = 100000\n");
  const auto start = std::chrono::steady_clock::now();
  const Result r = run("train " + spec.string() + " -q");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect_user_error(r, "model 'tall' on cpu needs at least ");
  EXPECT_NE(r.output.find("activations "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" are free"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 10.0) << r.output;
}

// A shape whose product wrapped (3 x 6148914691236517206 = 2^64 + 2) trained a two-feature model.
TEST(CliHostileInput, AShapeThatWouldOverflowIsRefused) {
  const xo::testing::TempDir dir("cli_wrap");
  const fs::path spec = dir.path() / "wrap.toml";
  write(spec,
        "[model]\nname = \"wrap\"\ninput = [3, 6148914691236517206]\nlayers = [\n"
        "  { type = \"flatten\" }, { type = \"linear\", out = 2 },\n]\n"
        "loss = \"cross_entropy\"\n");
  expect_user_error(run("train " + spec.string() + " -q"), "model.input");
  const Result epochs = run("train disc-2 --epochs 4611686018427387904 -q");
  expect_user_error(epochs, "train.epochs 4611686018427387904 x 10 steps per epoch");
}

// A range ending at INT64_MAX looped for ever.
TEST(CliHostileInput, AVaryRangeNearTheLargestIntegerIsBounded) {
  expect_user_error(run("sweep disc-2 --vary batch=1..9223372036854775807 --devices cpu"),
                    "integers beyond 2^53 are not taken");
  expect_user_error(run("sweep disc-2 --vary batch=1..100000 --devices cpu"),
                    "an integer range of at most 1000");
}

// The first data line with a typo was taken for a header and dropped without a word.
TEST(CliHostileInput, ACsvTypoInTheFirstLineIsReported) {
  const xo::testing::TempDir dir("cli_csv");
  const fs::path csv = dir.path() / "typo.csv";
  write(csv, "0.5,O.3,1\n0.1,0.2,0\n0.3,0.4,1\n");
  expect_user_error(run("train disc-2 --epochs 1 -q --data " + csv.string()),
                    csv.string() + ":1: column 2 is 'O.3', not a number");
}

// A FIFO given as data, spec or initial weights: `train` once blocked in open() for ever (a
// SIGTERM was caught and did not end it). Each is refused by its kind at once, and within 20 s
// even if that regressed.
TEST(CliHostileInput, AFifoIsRefusedByItsKindNotWaitedOn) {
  const xo::testing::TempDir dir("cli_fifo");
  const fs::path fifo = dir.path() / "fifo.csv";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string bounded = "--version >/dev/null && timeout 20 " + std::string(CROSSOVER_BINARY);
  const std::string expected = fifo.string() + ": a FIFO, not read (expected a regular file)";
  expect_user_error(run(bounded + " train disc-2 --epochs 1 -q --data " + fifo.string()), expected);
  const fs::path spec = dir.path() / "fifo.toml";
  ASSERT_EQ(mkfifo(spec.c_str(), 0600), 0);
  expect_user_error(run(bounded + " train " + spec.string() + " -q"),
                    spec.string() + ": not a file");
  expect_user_error(run(bounded + " train disc-2 --epochs 1 -q --init " + fifo.string()), expected);
}

// `cost` on an edited results.json: a step time of zero or below gave "inf ms +inf%", a `runs`
// that is not a list an internal error from the JSON library.
TEST(CliHostileInput, CostRefusesAnEditedResultsFileNamingTheField) {
  const xo::testing::TempDir dir("cli_edited");
  const fs::path out = dir.path() / "out";
  const Result made =
      run("run --models disc-2 --devices cpu --epochs 2 --threads 1 --out " + out.string());
  ASSERT_EQ(made.status, 0) << made.output;
  nlohmann::json original;
  std::ifstream(out / "results.json") >> original;
  const auto edited = [&](const std::string& name, auto edit) {
    nlohmann::json j = original;
    edit(j);
    const fs::path path = dir.path() / (name + ".json");
    write(path, j.dump());
    return path.string();
  };
  for (const double bad : {-3.0, 0.0}) {
    const std::string file = edited("step", [&](nlohmann::json& j) {
      j["runs"][0]["step_ms"]["median"] = bad;
      j["runs"][0]["median_step_ms"] = bad;
    });
    const Result r = run("cost " + file);
    expect_user_error(r, file + ": run 'disc-2' on cpu: step_ms.median: ");
    EXPECT_EQ(r.output.find("inf"), std::string::npos) << r.output;
  }
  const std::string peak =
      edited("peak", [](nlohmann::json& j) { j["peaks"][0]["matmul_gflops"] = -1; });
  expect_user_error(run("cost " + peak),
                    "peaks[0]: matmul_gflops: expected a number >= 1e-09, found a number (-1)");
  for (const nlohmann::json& runs :
       {nlohmann::json("disc-2"), nlohmann::json::object(), nlohmann::json(3)}) {
    const std::string file = edited("runs", [&](nlohmann::json& j) { j["runs"] = runs; });
    expect_user_error(run("cost " + file), "runs: expected an array");
  }
  const std::string items = edited("items", [](nlohmann::json& j) { j["runs"][0] = 5; });
  expect_user_error(run("cost " + items), "runs[0]: expected an object");
}

// A path that cannot be created is the user's to fix: it is named, with the reason.
TEST(CliHostileInput, AnOutputFolderThatCannotBeCreatedIsNamed) {
  const xo::testing::TempDir dir("cli_paths");
  const fs::path file = dir.path() / "a-file";
  write(file, "x");
  const Result r = run("run --models disc-2 --devices cpu --epochs 1 --threads 1 --out " +
                       (file / "below").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(file.string()), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

}  // namespace
