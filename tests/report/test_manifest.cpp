// The manifest's pieces: the command line quoted so a shell reads it back unchanged, this build's
// description, and the entries that differ between a recorded manifest and machine and this one.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "report/manifest.h"

namespace xo {
namespace {

TEST(Manifest, TheCommandLineIsQuotedAsAShellReadsIt) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const Case cases[] = {
      {{"build/crossover", "run", "--models", "disc-2,disc-3", "--epochs", "2"},
       "build/crossover run --models disc-2,disc-3 --epochs 2"},
      {{"crossover", "run", "--out", "my results"}, "crossover run --out 'my results'"},
      {{"crossover", "train", "it's.toml"}, "crossover train 'it'\\''s.toml'"},
      {{"crossover", "cost", "x.json", "--price", "aws-g5.xlarge=0.75"},
       "crossover cost x.json --price aws-g5.xlarge=0.75"},
      {{"crossover", "run", "--out", ""}, "crossover run --out ''"},
      {{"crossover", "run", "--out", "$HOME/*"}, "crossover run --out '$HOME/*'"},
  };
  for (const Case& c : cases) EXPECT_EQ(shell_command_line(c.args), c.expected);
}

// The shell reads the quoted line back as the same arguments.
TEST(Manifest, AShellReadsTheQuotedArgumentsBackUnchanged) {
  const std::vector<std::string> args = {"printf", "[%s]", "a b", "it's", "$HOME", "\"q\"", "*"};
  const std::string cmd = "sh -c " + shell_command_line({shell_command_line(args)});
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 256> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  pclose(pipe);
  EXPECT_EQ(out, "[a b][it's][$HOME][\"q\"][*]");
}

TEST(Manifest, ThisBuildSaysWhatItIs) {
  const BuildInfo b = this_build();
  EXPECT_EQ(b.version, CROSSOVER_VERSION);
  EXPECT_FALSE(b.commit.empty());  // a hash, perhaps "-dirty", or "unknown" outside a checkout
  EXPECT_FALSE(b.type.empty());
  EXPECT_FALSE(b.compiler.empty());
  EXPECT_EQ(b.cuda, !b.cuda_architectures.empty());
  const auto libraries = build_libraries();
  ASSERT_FALSE(libraries.empty());
  EXPECT_EQ(libraries[0].first, "oneDNN");
}

TEST(Manifest, DifferencesNameTheEntryAndBothValues) {
  Manifest recorded;
  recorded.build = {"0.1.1", "abc", "Release", "GNU 12.2.0", "-O3", false, ""};
  recorded.libraries = {{"oneDNN", "2.6.3"}, {"fmt", "9.1.0"}};
  MachineInfo there;
  there.cpu = "CPU A";
  there.logical_cpus = 16;
  Manifest here = recorded;
  MachineInfo machine = there;
  EXPECT_TRUE(manifest_differences(recorded, &there, here, machine).empty());

  here.build.version = "0.2.0";
  here.build.cuda = true;
  here.build.cuda_architectures = "90-real";
  here.libraries = {{"oneDNN", "3.0.0"}, {"fmt", "9.1.0"}, {"zlib", "1.2.13"}};
  machine.cpu = "CPU B";
  machine.logical_cpus = 2;
  machine.gpus = {"NVIDIA H100"};
  const auto d = manifest_differences(recorded, &there, here, machine);
  const auto has = [&](const std::string& entry, const std::string& was, const std::string& is) {
    for (const ManifestDifference& x : d) {
      if (x.entry == entry) return x.recorded == was && x.here == is;
    }
    return false;
  };
  EXPECT_TRUE(has("crossover", "0.1.1", "0.2.0"));
  EXPECT_TRUE(has("CUDA", "off", "on (90-real)"));
  EXPECT_TRUE(has("library oneDNN", "2.6.3", "3.0.0"));
  EXPECT_TRUE(has("library zlib", "none", "1.2.13"));
  EXPECT_TRUE(has("CPU", "CPU A", "CPU B"));
  EXPECT_TRUE(has("threads available", "16", "2"));
  EXPECT_TRUE(has("GPUs", "none", "NVIDIA H100"));
  EXPECT_EQ(d.size(), 7u);  // fmt, the commit and the flags are the same
  // Without the recorded machine, only the build and libraries are compared.
  EXPECT_EQ(manifest_differences(recorded, nullptr, here, machine).size(), 4u);
}

}  // namespace
}  // namespace xo
