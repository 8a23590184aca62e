// `mpirun -np N crossover allreduce`: MPI's all-reduce measured on the ranks of this job at
// several sizes (as nccl-tests' all_reduce_perf reports it: time, algorithm and bus bandwidth)
// against the ring model the advisor prices scale-out with, the model's link measured apart, as a
// ring's steps use it, at sizes between those asked.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <vector>

#include "advisor/link_probe.h"
#include "advisor/scale_out.h"
#include "cli/commands.h"
#include "cli/messages.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "distributed/mpi.h"
#include "report/machine.h"
#include "report/report_json.h"

namespace xo::cli {
namespace {

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

// The link and the table, on rank 0's terminal.
void print_allreduce(const AllreduceRecord& r) {
  const int n = r.ranks;
  fmt::print(
      "MPI all-reduce (sum of f32) on {} ranks ({} on this machine), median of {} after 3 "
      "warm-ups\n"
      "the link, as a ring's steps use it: {:.2f} us per message, and at message sizes between "
      "those measured:\n",
      n, r.local_ranks, r.repeat, r.link.latency_s * 1e6);
  for (const Link::Sample& l : r.link.samples) {
    fmt::print("  {:>10} ({:>10} chunks): {:.2f} GB/s each way, the sum's additions {:.2f} GB/s\n",
               byte_size(l.bytes * n), byte_size(l.bytes), l.bytes_per_s / 1e9,
               1e-9 / std::max(l.reduce_s_per_byte, 1e-18));
  }
  fmt::print("{:>10} {:>11} {:>12} {:>12} {:>13} {:>8}\n", "size", "measured ms", "algbw GB/s",
             "busbw GB/s", "ring model ms", "error");
  for (const AllreduceSize& row : r.sizes) {
    const double b = static_cast<double>(row.bytes);
    fmt::print("{:>10} {:>11.3f} {:>12.2f} {:>12.2f} {:>13.3f} {:>+7.1f}%\n", byte_size(b),
               row.measured_s * 1e3, b / row.measured_s / 1e9,
               allreduce_bus_bandwidth(b, n, row.measured_s) / 1e9, row.predicted_s * 1e3,
               100 * row.error());
  }
  fmt::print("ring model against the measurement: median |error| {:.1f}%, worst {:.1f}%\n",
             100 * r.median_abs_error, 100 * r.worst_abs_error);
}

int run_allreduce(const AllreduceOptions& o, const mpi::World& world) {
  const bool lead = world.rank() == 0;
  if (lead && !o.json.empty()) check_writable_path(o.json, "--json");
  if (world.size() < 2) {
    throw UserError(
        "crossover allreduce needs at least 2 ranks (mpirun -np 2 crossover allreduce)");
  }
  std::vector<int64_t> sizes;
  for (const std::string& s : o.sizes) sizes.push_back(parse_size(s));
  const AllreduceRecord record = measure_allreduce(world, sizes, o.repeat);
  if (!lead) return kExitOk;
  print_allreduce(record);
  if (!o.json.empty()) {
    const nlohmann::json j = to_json(AllreduceDocument{record, describe_machine(), utc_now()});
    write_file_atomic(o.json, j.dump(2) + "\n");
  }
  return kExitOk;
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
