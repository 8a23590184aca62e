// The link between the ranks of this MPI job, measured as the ring model of advisor/scale_out.h
// uses it, and MPI's own all-reduce timed against that model (`crossover allreduce`; as
// nccl-tests' all_reduce_perf reports it: time, algorithm and bus bandwidth). Every rank of the
// job calls it: it is a collective.
#pragma once

#include <cstdint>
#include <vector>

#include "advisor/scale_out.h"

namespace xo::mpi {
class World;
}

namespace xo {

// One size: MPI's all-reduce (the slowest rank's time, median of the timed calls) and the ring
// model's prediction over the measured link.
struct AllreduceSize {
  int64_t bytes = 0;
  double measured_s = 0, predicted_s = 0;
  double error() const { return predicted_s / measured_s - 1; }
};

struct AllreduceRecord {
  int ranks = 0, local_ranks = 0;  // the job's, and those on this machine
  int repeat = 0;                  // timed calls per size, after 3 warm-ups
  Link link;                       // measured at sizes between those asked
  std::vector<AllreduceSize> sizes;
  double median_abs_error = 0, worst_abs_error = 0;  // the model against the measurement
};

// The link measured at sizes around `sizes` (each a multiple of 4 bytes), then MPI's all-reduce of
// f32 sums at each size, `repeat` timed calls each.
AllreduceRecord measure_allreduce(const mpi::World& world, const std::vector<int64_t>& sizes,
                                  int repeat);

}  // namespace xo
