// `mpirun -np N crossover allreduce`: MPI's all-reduce measured on the ranks of this job at
// several sizes (as nccl-tests' all_reduce_perf reports it: time, algorithm and bus bandwidth)
// against the ring model the advisor prices scale-out with, the model's link measured apart, as a
// ring's steps use it, at sizes between those asked.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "advisor/scale_out.h"
#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/session.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "dist/mpi.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "train/stats.h"

namespace xo::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct AllreduceOptions {
  std::vector<std::string> sizes = {"1M", "2M", "4M", "8M", "16M", "32M", "64M"};
  int repeat = 20;
  std::string json;
};

// "64M", "512K", "1G" (binary multiples, as nccl-tests' -b/-e) or a byte count; a multiple of 4
// (whole floats).
int64_t parse_size(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [rest, ec] = std::from_chars(text.data(), end, value);
  int64_t unit = 1;
  const std::string suffix(rest, end);
  if (suffix == "K" || suffix == "KiB") unit = int64_t{1} << 10;
  if (suffix == "M" || suffix == "MiB") unit = int64_t{1} << 20;
  if (suffix == "G" || suffix == "GiB") unit = int64_t{1} << 30;
  const bool known = suffix.empty() || unit > 1;
  if (ec != std::errc() || !known || value <= 0 || value > (int64_t{16} << 30) / unit ||
      (value * unit) % 4 != 0) {
    throw UserError(fmt::format(
        "--sizes: '{}' is not a size (expected a byte count that is a multiple of 4, or a number "
        "with K, M or G, up to 16G: 1M, 64M)",
        text));
  }
  return value * unit;
}

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

// The link between this job's ranks as a ring all-reduce uses it, at each message size of
// `messages`: on a buffer of the message's size, the reduce-scatter's n-1 steps (send a chunk to
// the next rank while receiving one from the one before into scratch, then add it into the
// buffer's chunk) and the all-gather's n-1 steps (send the chunk last completed while receiving
// the next into the buffer), each phase timed on its own. A ring sends what it has just summed and
// adds what it has just received, so the caches are as a ring leaves them, which transfers of a
// clean buffer and additions on their own do not reproduce (bench/mpi_ring_steps.cpp compares the
// two against MPI_Allreduce).
Link measure_link(const mpi::World& world, int repeat, const std::vector<int64_t>& messages) {
  const int n = world.size(), r = world.rank();
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
    const double rs = timed_median(world, repeat, reduce_scatter);
    const double ag = timed_median(world, repeat, all_gather);
    link.samples.push_back(
        ring_phase_sample(static_cast<double>(chunk), n, rs, ag, link.latency_s));
  }
  link.bytes_per_s = link.samples.back().bytes_per_s;
  link.reduce_s_per_byte = link.samples.back().reduce_s_per_byte;
  return link;
}

struct SizeRow {
  int64_t bytes = 0;
  double measured_s = 0, predicted_s = 0;
};

int run_allreduce(const AllreduceOptions& o, const mpi::World& world) {
  const bool lead = world.rank() == 0;
  if (lead && !o.json.empty()) check_writable_path(o.json, "--json");
  if (world.size() < 2) {
    throw UserError(
        "crossover allreduce needs at least 2 ranks (mpirun -np 2 crossover allreduce)");
  }
  std::vector<int64_t> sizes;
  for (const std::string& s : o.sizes) sizes.push_back(parse_size(s));
  const int n = world.size();
  const std::vector<int64_t> probes = probe_sizes(sizes, n);
  const Link link = measure_link(world, o.repeat, probes);
  std::vector<SizeRow> rows;
  for (const int64_t bytes : sizes) {
    std::vector<float> values(static_cast<size_t>(bytes) / sizeof(float), 1.0f / n);
    const double s = timed_median(
        world, o.repeat, [&] { world.sum(values.data(), static_cast<int64_t>(values.size())); });
    rows.push_back({bytes, s, ring_allreduce_seconds(static_cast<double>(bytes), n, link)});
  }
  if (!lead) return 0;

  fmt::print(
      "MPI all-reduce (sum of f32) on {} ranks ({} on this machine), median of {} after 3 "
      "warm-ups\n"
      "the link, as a ring's steps use it: {:.2f} us per message, and at message sizes between "
      "those measured:\n",
      n, world.local_size(), o.repeat, link.latency_s * 1e6);
  for (const Link::Sample& l : link.samples) {
    fmt::print("  {:>10} ({:>10} chunks): {:.2f} GB/s each way, the sum's additions {:.2f} GB/s\n",
               byte_size(l.bytes * n), byte_size(l.bytes), l.bytes_per_s / 1e9,
               1e-9 / std::max(l.reduce_s_per_byte, 1e-18));
  }
  fmt::print("{:>10} {:>11} {:>12} {:>12} {:>13} {:>8}\n", "size", "measured ms", "algbw GB/s",
             "busbw GB/s", "ring model ms", "error");
  std::vector<double> errors;
  nlohmann::json jrows = nlohmann::json::array();
  for (const SizeRow& row : rows) {
    const double error = row.predicted_s / row.measured_s - 1;
    errors.push_back(std::abs(error));
    const double b = static_cast<double>(row.bytes);
    fmt::print("{:>10} {:>11.3f} {:>12.2f} {:>12.2f} {:>13.3f} {:>+7.1f}%\n", byte_size(b),
               row.measured_s * 1e3, b / row.measured_s / 1e9,
               allreduce_bus_bandwidth(b, n, row.measured_s) / 1e9, row.predicted_s * 1e3,
               100 * error);
    jrows.push_back({{"bytes", row.bytes},
                     {"measured_ms", row.measured_s * 1e3},
                     {"algbw_gbs", b / row.measured_s / 1e9},
                     {"busbw_gbs", allreduce_bus_bandwidth(b, n, row.measured_s) / 1e9},
                     {"predicted_ms", row.predicted_s * 1e3},
                     {"error", error}});
  }
  nlohmann::json jlink = nlohmann::json::array();
  for (const Link::Sample& l : link.samples) {
    jlink.push_back({{"bytes", l.bytes},
                     {"message_bytes", l.bytes * n},
                     {"gbs", l.bytes_per_s / 1e9},
                     {"reduce_gbs", 1e-9 / std::max(l.reduce_s_per_byte, 1e-18)}});
  }
  const TimingStats e = summarize(errors);
  fmt::print("ring model against the measurement: median |error| {:.1f}%, worst {:.1f}%\n",
             100 * e.median, 100 * e.max);
  if (!o.json.empty()) {
    nlohmann::json j{{"schema", "crossover.allreduce/1"},
                     {"created", utc_now()},
                     {"ranks", n},
                     {"local_ranks", world.local_size()},
                     {"repeat", o.repeat},
                     {"link", {{"name", link.name}, {"latency_us", link.latency_s * 1e6}}},
                     {"link_by_size", jlink},
                     {"sizes", jrows},
                     {"median_abs_error", e.median},
                     {"worst_abs_error", e.max},
                     {"machine", to_json(describe_machine())}};
    write_file_atomic(o.json, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace

Command add_allreduce(CLI::App& app) {
  auto o = std::make_shared<AllreduceOptions>();
  CLI::App* sub = app.add_subcommand(
      "allreduce",
      "Under mpirun: MPI's all-reduce measured across the job's ranks at several sizes, against "
      "the ring model the advisor prices scale-out with");
  sub->add_option("--sizes", o->sizes, "Message sizes (bytes, or with K, M, G: 1M,64M)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--repeat", o->repeat, "Timed calls per size (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("--json", o->json, "Write the measurements as JSON to this file");
  return {sub, [o]() -> int {
            if (!mpi::launched()) {
              throw UserError(
                  "crossover allreduce measures MPI's all-reduce across the ranks of a job: run "
                  "it under a launcher (mpirun -np 2 crossover allreduce)");
            }
            const mpi::World world;
            try {
              return run_allreduce(*o, world);
            } catch (const std::exception& e) {
              end_job(world, e);
            }
          }};
}

}  // namespace xo::cli
