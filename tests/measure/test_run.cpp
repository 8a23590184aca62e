// measure_run's hashes, what `crossover replay` compares: the same spec trained twice gives the
// same data and final-parameter hashes; the profile steps after training leave the parameters
// and BatchNorm's running statistics as the epochs left them; another seed gives other hashes.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "measure/run.h"
#include "model/spec.h"

namespace xo {
namespace {

// An MLP with BatchNorm, whose running statistics the profile steps move and put back.
ModelSpec batchnorm_mlp(uint64_t seed) {
  ModelSpec spec = parse_spec(
      "[model]\nname = \"bn\"\ninput = [2]\nlayers = [ { type = \"linear\", out = 8 },\n"
      "  { type = \"batchnorm1d\" }, { type = \"relu\" }, { type = \"linear\", out = 2 } ]\n"
      "loss = \"cross_entropy\"\n[train]\nbatch = 50\nepochs = 2\n[data]\nsource = \"disc\"\n"
      "samples = 200\n",
      "bn.toml");
  spec.train.seed = seed;
  return spec;
}

TEST(MeasureRun, TheHashesAreThoseOfTheDataAndOfTheTrainedParameters) {
  auto cpu = make_backend(parse_device("cpu", 1));
  MeasureSettings plain;
  plain.exec.node_time_steps = 0;
  plain.sample_interval_s = 1;
  MeasureSettings profiled = plain;
  profiled.exec.node_time_steps = 5;
  const RunRecord a = measure_run(*cpu, batchnorm_mlp(0), plain);
  const RunRecord b = measure_run(*cpu, batchnorm_mlp(0), profiled);
  ASSERT_EQ(a.params_hash.size(), 16u);
  ASSERT_EQ(a.data_hash.size(), 16u);
  EXPECT_EQ(b.result.node_timed_steps, 5);
  EXPECT_EQ(a.data_hash, b.data_hash);
  EXPECT_EQ(a.params_hash, b.params_hash);  // the profile steps changed nothing
  const RunRecord c = measure_run(*cpu, batchnorm_mlp(1), plain);
  EXPECT_NE(c.data_hash, a.data_hash);  // the disc generator draws from the seed
  EXPECT_NE(c.params_hash, a.params_hash);
}

}  // namespace
}  // namespace xo
