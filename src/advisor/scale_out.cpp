// The ring all-reduce and the data-parallel step (see scale_out.h).
#include "advisor/scale_out.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xo {

Link::Sample Link::at(double bytes) const {
  if (samples.empty()) return {bytes, bytes_per_s, reduce_s_per_byte};
  if (bytes <= samples.front().bytes) return samples.front();
  if (bytes >= samples.back().bytes) return samples.back();
  size_t i = 1;
  while (samples[i].bytes < bytes) ++i;
  const Sample& a = samples[i - 1];
  const Sample& b = samples[i];
  const double t = std::log(bytes / a.bytes) / std::log(b.bytes / a.bytes);
  const auto between = [t](double x, double y) {
    return x > 0 && y > 0 ? std::exp(std::log(x) + t * (std::log(y) - std::log(x)))
                          : x + t * (y - x);
  };
  return {bytes, between(a.bytes_per_s, b.bytes_per_s),
          between(a.reduce_s_per_byte, b.reduce_s_per_byte)};
}

Link::Sample ring_phase_sample(double chunk_bytes, int ranks, double reduce_scatter_s,
                               double all_gather_s, double latency_s) {
  const double steps = std::max(1, ranks - 1);
  const double transfer = all_gather_s / steps,
               addition = (reduce_scatter_s - all_gather_s) / steps;
  // A transfer no longer than the latency probe (noise at tiny sizes): at least a nanosecond.
  return {chunk_bytes, chunk_bytes / std::max(transfer - latency_s, 1e-9),
          std::max(addition, 0.0) / chunk_bytes};
}

double ring_allreduce_seconds(double bytes, int ranks, const Link& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = ranks;
  const double chunk = bytes / n;
  const double steps = 2 * (n - 1);
  const Link::Sample rate = link.at(chunk);
  return steps * (link.latency_s + chunk / rate.bytes_per_s) +
         (n - 1) * chunk * rate.reduce_s_per_byte;
}

double Ring::allreduce_seconds(double bytes) const {
  if (hosts <= 1) return ring_allreduce_seconds(bytes, per_host, inside);
  if (per_host <= 1) return ring_allreduce_seconds(bytes, hosts, between);
  if (bytes <= 0) return 0;
  const double n = ranks();
  const double chunk = bytes / n;
  const double steps = 2 * (n - 1), crossing = 2.0 * (hosts - 1);
  const Link::Sample device = inside.at(chunk);
  const double share = between.at(chunk).bytes_per_s;  // per_host channels, a chunk/per_host each
  const double rate = std::min(device.bytes_per_s, share);
  return steps * chunk / rate + (steps - crossing) * inside.latency_s +
         crossing * between.latency_s + (n - 1) * chunk * device.reduce_s_per_byte;
}

double allreduce_bus_bandwidth(double bytes, int ranks, double seconds) {
  if (seconds <= 0 || ranks <= 1) return 0;
  return bytes / seconds * 2.0 * (ranks - 1) / ranks;
}

double communicate_bus_gbs(int64_t bytes, int ranks, double communicate_ms,
                           const std::string& reduce_mode) {
  if (ranks <= 1 || reduce_mode != "after-backward" || !std::isfinite(communicate_ms)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return allreduce_bus_bandwidth(static_cast<double>(bytes), ranks, communicate_ms * 1e-3) / 1e9;
}

DataParallelStep predict_data_parallel(double whole_batch_s, double slice_s, double gradient_bytes,
                                       int ranks, const Link& link, double bucket_bytes,
                                       bool overlapped) {
  return predict_data_parallel(whole_batch_s, slice_s, gradient_bytes, Ring{1, ranks, link, Link{}},
                               bucket_bytes, overlapped);
}

DataParallelStep predict_data_parallel(double whole_batch_s, double slice_s, double gradient_bytes,
                                       const Ring& ring, double bucket_bytes, bool overlapped) {
  DataParallelStep s;
  const int ranks = ring.ranks();
  s.ranks = ranks;
  s.compute_s = slice_s;
  s.allreduce_s = ring.allreduce_seconds(gradient_bytes);
  const double backward_s = slice_s * 2.0 / 3.0;
  const double last_bucket_s = ring.allreduce_seconds(std::min(bucket_bytes, gradient_bytes));
  s.exposed_s = ranks <= 1   ? 0
                : overlapped ? std::max(s.allreduce_s - backward_s, last_bucket_s)
                             : s.allreduce_s;
  s.step_s = s.compute_s + s.exposed_s;
  s.efficiency = s.step_s > 0 ? whole_batch_s / (ranks * s.step_s) : 1;
  return s;
}

}  // namespace xo
