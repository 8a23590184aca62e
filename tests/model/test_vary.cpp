// A model family along one axis: depth, width, batch and sequence, and the errors where an axis
// does not apply.
#include <gtest/gtest.h>

#include "model/spec.h"
#include "model/vary.h"
#include "support/expect_error.h"

namespace xo {
namespace {

TEST(Vary, ParsesValuesAndRanges) {
  const AxisValues v = parse_vary("depth=2..4,8");
  EXPECT_EQ(v.axis, Axis::Depth);
  EXPECT_EQ(v.values, (std::vector<int64_t>{2, 3, 4, 8}));
  EXPECT_EQ(parse_vary("batch=16,32").values, (std::vector<int64_t>{16, 32}));
  for (const char* bad :
       {"batch", "batch=", "batch=0", "batch=1,,2", "batch=4..2", "batch=x", "size=3"}) {
    EXPECT_THROW(parse_vary(bad), UserError) << bad;
  }
}

// A range ending at INT64_MAX never ended (`v <= hi` holds for every int64); ranges and lists are
// bounded at 1000 values, each error naming the text.
TEST(Vary, RangesNearTheLargestIntegerEndAndCountsAreBounded) {
  const AxisValues top = parse_vary("batch=9223372036854775805..9223372036854775807");
  EXPECT_EQ(top.values,
            (std::vector<int64_t>{9223372036854775805, 9223372036854775806, 9223372036854775807}));
  EXPECT_EQ(parse_vary("width=1..1000").values.size(), 1000u);
  testing::expect_user_error([] { parse_vary("width=1..1001"); },
                             {"--vary 'width=1..1001'", "range '1..1001'", "at most 1000 values"});
  testing::expect_user_error([] { parse_vary("batch=1..9223372036854775807"); },
                             {"range '1..9223372036854775807'", "at most 1000 values"});
  testing::expect_user_error([] { parse_vary("batch=1..600,1..600"); },
                             {"--vary 'batch=1..600,1..600'", "expected at most 1000"});
  testing::expect_user_error([] { parse_vary("batch=9223372036854775808"); },
                             {"'9223372036854775808' is not a positive integer"});
}

// Each unit of depth copies a block: a depth near INT64_MAX is refused before any is copied.
TEST(Vary, AnAbsurdDepthIsRefusedBeforeItsLayersAreBuilt) {
  testing::expect_user_error(
      [] { vary_spec(*builtin_spec("mnist-mlp"), Axis::Depth, 9223372036854775807); },
      {"mnist-mlp", "cannot vary depth", "more than 1000 Linear layers"});
  EXPECT_EQ(vary_spec(*builtin_spec("mnist-mlp"), Axis::Depth, 1000).layers.back().out, 10);
}

TEST(Vary, DepthOfDiscIsTheBuiltInModel) {
  const ModelSpec s = vary_spec(*builtin_spec("disc-12"), Axis::Depth, 5);
  EXPECT_EQ(s.name, "disc-5");
  EXPECT_EQ(parameter_count(s), parameter_count(*builtin_spec("disc-5")));
  EXPECT_THROW(vary_spec(*builtin_spec("disc-4"), Axis::Depth, 13), UserError);
}

TEST(Vary, DepthOfAnMlpRepeatsOrDropsTheHiddenBlock) {
  const ModelSpec mlp = *builtin_spec("mnist-mlp");  // 784-512-512-10 with dropout
  auto linears = [](const ModelSpec& s) {
    int n = 0;
    for (const auto& l : s.layers) n += l.type == LayerType::Linear;
    return n;
  };
  for (int depth : {2, 3, 5}) {
    const ModelSpec s = vary_spec(mlp, Axis::Depth, depth);
    EXPECT_EQ(linears(s), depth);
    EXPECT_EQ(s.layers.back().out, 10);
    EXPECT_EQ(s.name, "mnist-mlp[depth=" + std::to_string(depth) + "]");
  }
  // 784*512+512 + (depth-2) * (512*512+512) + 512*10+10
  EXPECT_EQ(parameter_count(vary_spec(mlp, Axis::Depth, 5)),
            784 * 512 + 512 + 3 * (512 * 512 + 512) + 512 * 10 + 10);
  EXPECT_THROW(vary_spec(*builtin_spec("mnist-cnn"), Axis::Depth, 3), UserError);
}

TEST(Vary, WidthBatchAndSequence) {
  const ModelSpec w = vary_spec(*builtin_spec("mnist-mlp"), Axis::Width, 64);
  EXPECT_EQ(parameter_count(w), 784 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10);
  const ModelSpec b = vary_spec(*builtin_spec("mnist-cnn"), Axis::Batch, 32);
  EXPECT_EQ(b.train.batch, 32);
  EXPECT_EQ(b.name, "mnist-cnn[batch=32]");
  const ModelSpec q = vary_spec(*builtin_spec("imdb-lstm"), Axis::Sequence, 40);
  EXPECT_EQ(q.input, (std::vector<int64_t>{40}));
  testing::expect_user_error([] { vary_spec(*builtin_spec("disc-4"), Axis::Sequence, 40); },
                             {"disc-4", "cannot vary sequence"});
}

}  // namespace
}  // namespace xo
