// What a search tries: the --vary dimensions of `crossover tune` (any spec key, model/vary.h),
// expanded to a grid or sampled at random, and each trial's spec.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/spec.h"
#include "model/vary.h"

namespace xo {

// One --vary KEY=... argument: a list of values (V1,V2,...; an integer range A..B is every integer
// in it, as the sweep reads it) or, for random samples only, a range A..B of real numbers or
// A..B:log, sampled uniformly in the value or in its logarithm (integers where A and B are).
struct Dimension {
  std::string text;  // the argument as given
  SpecKey key;
  std::vector<std::string> values;  // a list; empty for a range
  bool range = false;
  double low = 0, high = 0;
  bool log = false;
  bool integer = false;
};
// Throws UserError naming the argument and what was expected.
Dimension parse_dimension(const std::string& text);

// One trial's values, in the order of the dimensions: (key as given, value text).
using Assignment = std::vector<std::pair<std::string, std::string>>;

// Every combination of the lists, the last dimension varying fastest. A range of real numbers or
// a log range has no grid: the error says to give --samples.
std::vector<Assignment> grid(const std::vector<Dimension>& dims);
// `n` draws from the dimensions (a list: one of its values; a range: as described above), seeded:
// the same seed draws the same trials. A draw equal to an earlier one is drawn again; a space
// with fewer than `n` distinct points gives them all.
std::vector<Assignment> sample(const std::vector<Dimension>& dims, int64_t n, uint64_t seed);

// The base spec with every value of `a` set (model/vary.h's with_spec_values, in order).
ModelSpec trial_spec(const ModelSpec& base, const std::vector<Dimension>& dims,
                     const Assignment& a);

// What trials that train as one fused group share: the spec without what may differ per trial
// (the training settings but the batch size, the seed, the dropout rates, the initial weights).
// The seed of a generated data set differs per trial too: the group gives each its own data.
std::string fusion_key(ModelSpec spec);

// Each value of each list, and both ends of each range, set on `base` alone: a value the spec does
// not take fails before any trial runs, naming KEY=VALUE.
void check_dimensions(const ModelSpec& base, const std::vector<Dimension>& dims);

}  // namespace xo
