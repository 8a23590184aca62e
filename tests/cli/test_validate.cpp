// `crossover validate` and `crossover devices --profile` as a user runs them: the leave-one-out
// table printed and written, this machine's profile written as a data/profiles file, and bad
// input refused before any work.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "measure/profile.h"
#include "support/cli.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

using testing::run_cli;

TEST(Validate, ItMeasuresThisMachineAndPrintsAndWritesTheTable) {
  const testing::TempDir dir("cli_validate");
  const auto json = dir.path() / "table.json";
  const auto md = dir.path() / "table.md";
  const auto profile = dir.path() / "profile.json";
  const testing::CliResult r = run_cli(
      "validate --models disc-2,disc-3 --repeat 2 --steps 20 --threads 1 --json " + json.string() +
      " --markdown " + md.string() + " --write-profile " + profile.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("own profile"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("median |error|"), std::string::npos) << r.output;
  // The measured rows: this machine's own (a profile of two models is named apart from the
  // shipped one), and the shipped devices' (their measurements are committed).
  const auto table = nlohmann::json::parse(read_file(json));
  bool own = false, shipped_cross = false;
  for (const auto& row : table) {
    const std::string device = row["device"];
    if (row["own"].get<bool>() && device.size() > 7 &&
        device.compare(device.size() - 7, 7, "-subset") == 0) {
      own = true;
      ASSERT_EQ(row["entries"].size(), 2u) << row;
      for (const auto& e : row["entries"]) {
        EXPECT_GT(e["predicted_ms"].get<double>(), 0) << e;
        EXPECT_GT(e["measured_ms"].get<double>(), 0) << e;
      }
      EXPECT_TRUE(row["median_abs_error"].is_number());
    }
    if (!row["own"].get<bool>() && !row["entries"].empty()) shipped_cross = true;
  }
  EXPECT_TRUE(own) << table.dump(1);
  EXPECT_TRUE(shipped_cross) << table.dump(1);
  EXPECT_NE(read_file(md).find("| disc-3 |"), std::string::npos);
  // The profile file reads back with the steps just measured, as data/profiles/ files do.
  const DeviceProfile p = parse_profile(read_file(profile), profile.string());
  EXPECT_TRUE(p.has_kernels());
  ASSERT_EQ(p.measured.size(), 2u);
  EXPECT_EQ(p.measured[0].model, "disc-2");
  EXPECT_NE(p.measured[0].source.find("2 runs"), std::string::npos) << p.measured[0].source;
  EXPECT_EQ(p.threads, 1);
}

TEST(Validate, BadInputIsRefusedBeforeAnyWork) {
  const testing::TempDir dir("cli_validate_bad");
  testing::CliResult r = run_cli("validate --models disc-2,nonesuch --repeat 1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("'nonesuch' is not a built-in model"), std::string::npos) << r.output;
  // An output that cannot be written is found before anything is measured.
  const auto file = dir.path() / "file";
  write_file_atomic(file, "x");
  r = run_cli("validate --models disc-2 --json " + (file / "table.json").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(r.output.find("profiling"), std::string::npos) << r.output;
  r = run_cli("validate --repeat 0");
  EXPECT_EQ(r.status, 2) << r.output;
  r = run_cli("devices --profile --no-probe");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("crossover: error:"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace xo
