#include "advisor/link_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "backend/backend.h"
#include "distributed/mpi.h"
#include "train/stats.h"
#include "train/trainer.h"

namespace xo {
namespace {

using Clock = std::chrono::steady_clock;

// The median over `repeat` timed calls of `work` (after 3 warm-ups), each call's time the slowest
// rank's: a collective is done when its last rank is.
double timed_median(const mpi::World& world, int repeat, const std::function<void()>& work) {
  for (int i = 0; i < 3; ++i) work();
  std::vector<double> seconds;
  for (int i = 0; i < repeat; ++i) {
    world.barrier();
    const auto t0 = Clock::now();
    work();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    world.max(&s, 1);
    seconds.push_back(s);
  }
  return summarize(seconds).median;
}

// The message sizes the link is measured at: one between each two sizes asked (their geometric
// mean), one below the smallest and one above the largest (by a factor of sqrt 2), each a whole
// number of floats per rank. The model then predicts every size asked from the sizes around it,
// as the advisor predicts a model's gradients from a link it measured at other sizes.
std::vector<int64_t> probe_sizes(std::vector<int64_t> sizes, int ranks) {
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<double> at = {static_cast<double>(sizes.front()) / std::sqrt(2.0)};
  for (size_t i = 1; i < sizes.size(); ++i) {
    at.push_back(std::sqrt(static_cast<double>(sizes[i - 1]) * static_cast<double>(sizes[i])));
  }
  at.push_back(static_cast<double>(sizes.back()) * std::sqrt(2.0));
  const int64_t unit = 4 * static_cast<int64_t>(ranks);
  std::vector<int64_t> out;
  for (const double bytes : at) {
    out.push_back(std::max<int64_t>(unit, std::llround(bytes / static_cast<double>(unit)) * unit));
  }
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

// At each message size of `messages`: on a buffer of the message's size, the reduce-scatter's n-1
// steps (send a chunk to the next rank while receiving one from the one before into scratch, then
// add it into the buffer's chunk) and the all-gather's n-1 steps (send the chunk last completed
// while receiving the next into the buffer), each phase timed on its own and, over a network, the
// two back to back (their split from the former, their sum from the latter). A ring sends what it
// has just summed and adds what it has just received, so the caches are as a ring leaves them,
// which transfers of a clean buffer and additions on their own do not reproduce
// (bench/mpi_ring_steps.cpp compares the two against MPI_Allreduce).
Link measure_link(const mpi::World& world, int repeat, std::vector<int64_t> messages) {
  const int n = world.size(), r = world.rank();
  // Whole floats per rank, ascending (Link::at interpolates between neighbours).
  const int64_t unit = 4 * static_cast<int64_t>(n);
  for (int64_t& bytes : messages) bytes = std::max<int64_t>(unit, (bytes + unit - 1) / unit * unit);
  std::sort(messages.begin(), messages.end());
  messages.erase(std::unique(messages.begin(), messages.end()), messages.end());
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  const int64_t largest = *std::max_element(messages.begin(), messages.end());
  std::vector<float> buffer(static_cast<size_t>(largest / 4), 0.0f),
      scratch(buffer.size() / n + 1, 0.0f);
  Link link;
  link.name = world.local_size() == n ? "shared memory (one machine, measured)"
                                      : "the job's network (measured)";
  link.latency_s = timed_median(
      world, repeat * 5, [&] { world.exchange(buffer.data(), scratch.data(), 8, next, previous); });
  const auto chunk_of = [n](int index) { return ((index % n) + n) % n; };
  for (const int64_t bytes : messages) {
    const size_t floats = static_cast<size_t>(bytes) / 4 / n;  // one rank's chunk
    const int64_t chunk = static_cast<int64_t>(floats) * 4;
    float* data = buffer.data();
    const auto reduce_scatter = [&] {
      for (int k = 0; k < n - 1; ++k) {
        const float* send = data + floats * chunk_of(r - k);
        float* sum = data + floats * chunk_of(r - k - 1);
        world.exchange(send, scratch.data(), chunk, next, previous);
        for (size_t i = 0; i < floats; ++i) sum[i] += scratch[i];
      }
    };
    const auto all_gather = [&] {
      for (int k = 0; k < n - 1; ++k) {
        world.exchange(data + floats * chunk_of(r - k + 1), data + floats * chunk_of(r - k), chunk,
                       next, previous);
      }
    };
    double rs = timed_median(world, repeat, reduce_scatter);
    double ag = timed_median(world, repeat, all_gather);
    // Over a network, the phases as a ring runs them, back to back: a phase timed alone starts on
    // an idle link, one that follows another does not (2 simulated hosts at 1 Gbit/s: the phases
    // back to back took about MPI's all-reduce's time, alone far less). Each phase takes its
    // share. Not through shared memory, where the phases timed alone predict MPI's all-reduce
    // closely and back to back far too slow (docs/benchmarks.md, "Across simulated hosts").
    if (world.local_size() < world.size()) {
      const double ring = timed_median(world, repeat, [&] {
        reduce_scatter();
        all_gather();
      });
      if (rs + ag > 0 && ring > rs + ag) {
        const double stretch = ring / (rs + ag);
        rs *= stretch;
        ag *= stretch;
      }
    }
    link.samples.push_back(
        ring_phase_sample(static_cast<double>(chunk), n, rs, ag, link.latency_s));
  }
  link.bytes_per_s = link.samples.back().bytes_per_s;
  link.reduce_s_per_byte = link.samples.back().reduce_s_per_byte;
  return link;
}

namespace {

// Host-staged: the whole gradients' download to page-locked host memory and upload back, as
// DataParallel::reduce makes them each step; the median of `repeat` timed copies, the slowest
// rank's.
double staging_seconds(const mpi::World& world, Backend& device, int64_t bytes, int repeat) {
  const auto size = static_cast<size_t>(bytes);
  const DeviceBuffer on_device = device.allocate(size), host = device.allocate_host(size);
  device.fill_zero(on_device.as<void>(), size);
  device.synchronize();
  return timed_median(world, repeat, [&] {
    device.download(host.as<void>(), on_device.as<void>(), size);
    device.upload(on_device.as<void>(), host.as<void>(), size);
    device.synchronize();
  });
}

}  // namespace

void predict_communicate(const mpi::World& world, Backend& device, TrainResult& r) {
  const int n = world.size();
  const bool staged = r.reduce_mode == "host-staged";
  if (n < 2 || (r.reduce_mode != "after-backward" && !staged) || r.reduce_buckets.empty()) return;
  int64_t interrupted = r.interrupted ? 1 : 0;
  world.max(&interrupted, 1);
  if (interrupted) return;
  const Link link = measure_link(world, 9, r.reduce_buckets);
  double seconds = 0;
  for (const int64_t bytes : r.reduce_buckets) {
    seconds += ring_allreduce_seconds(static_cast<double>(bytes), n, link);
  }
  if (staged) {
    int64_t total = 0;
    for (const int64_t bytes : r.reduce_buckets) total += bytes;
    const double copies = staging_seconds(world, device, total, 9);
    r.staging_ms = copies * 1e3;
    seconds += copies;
  }
  const int64_t largest = *std::max_element(r.reduce_buckets.begin(), r.reduce_buckets.end());
  r.predicted_communicate_ms = seconds * 1e3;
  r.link_latency_us = link.latency_s * 1e6;
  r.link_gbs = link.at(static_cast<double>(largest) / n).bytes_per_s / 1e9;
}

AllreduceRecord measure_allreduce(const mpi::World& world, const std::vector<int64_t>& sizes,
                                  int repeat) {
  AllreduceRecord record;
  record.ranks = world.size();
  record.local_ranks = world.local_size();
  record.repeat = repeat;
  const int n = world.size();
  record.link = measure_link(world, repeat, probe_sizes(sizes, n));
  std::vector<double> errors;
  for (const int64_t bytes : sizes) {
    std::vector<float> values(static_cast<size_t>(bytes) / sizeof(float), 1.0f / n);
    const double s = timed_median(
        world, repeat, [&] { world.sum(values.data(), static_cast<int64_t>(values.size())); });
    record.sizes.push_back(
        {bytes, s, ring_allreduce_seconds(static_cast<double>(bytes), n, record.link)});
    errors.push_back(std::abs(record.sizes.back().error()));
  }
  const TimingStats e = summarize(errors);
  record.median_abs_error = e.median;
  record.worst_abs_error = e.max;
  return record;
}

}  // namespace xo
