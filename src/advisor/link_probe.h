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

class Backend;

struct TrainResult;

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

// The link between this job's ranks as a ring all-reduce uses it, measured at each message size of
// `messages` (bytes, any order): its latency per message, and per size the rate of a step's
// transfer and of its addition (see Link). Every rank calls it.
Link measure_link(const mpi::World& world, int repeat, std::vector<int64_t> messages);

// A data-parallel run's check of the scale-out model: where its communicate phase is the gradients'
// all-reduce alone (after-backward) or the all-reduce staged through the host (host-staged), the
// link between the job's ranks measured at the sizes of the run's buckets and the ring's time for
// those buckets, into `r`'s predicted_communicate_ms, link_latency_us and link_gbs; host-staged,
// plus the gradients' copy from `device` to page-locked host memory and back as the step makes
// it, measured (staging_ms). Every rank calls it after training (nothing where the run was
// interrupted on any rank).
void predict_communicate(const mpi::World& world, Backend& device, TrainResult& r);

// The link measured at sizes around `sizes` (each a multiple of 4 bytes), then MPI's all-reduce of
// f32 sums at each size, `repeat` timed calls each.
AllreduceRecord measure_allreduce(const mpi::World& world, const std::vector<int64_t>& sizes,
                                  int repeat);

}  // namespace xo
