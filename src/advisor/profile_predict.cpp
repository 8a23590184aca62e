#include "advisor/profile_predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "advisor/catalog.h"
#include "core/error.h"
#include "model/fused_network.h"
#include "model/layer.h"
#include "model/work.h"
#include "train/stats.h"

namespace xo {
namespace {

// An element-wise kernel touching more than this streams from memory rather than the caches.
constexpr double kStreamingBytes = 4e6;

// Which kernel of a step a sample stands for, and so which fixed cost it carries: a node's
// kernels (forward and backward) or one small kernel (loss, optimizer, merge, batch gather).
enum class Part { Node, Small };

struct Rates {
  const ExecutionPolicy* policy;
  DeviceKind kind;
  int threads;
  double gflops, bandwidth_gbs, layer_overhead_us;
};

Rates rates_of(const DeviceProfile& p) {
  return {&p.policy,
          p.kind,
          std::max(1, p.threads),
          p.peaks.matmul_gflops,
          p.peaks.bandwidth_gbs,
          p.peaks.layer_overhead_us};
}
Rates rates_of(const TargetDevice& t) {
  return {&t.policy, t.kind,          std::max(1, t.threads),
          t.gflops,  t.bandwidth_gbs, t.layer_overhead_us};
}

// The threads a kernel of `s` runs on: one in a shard or for a matmul below the backend's
// single-thread size (an element-wise kernel is bandwidth-bound and counted on all), else all.
int threads_used(const KernelSample& s, const Rates& r) {
  if (r.kind != DeviceKind::Cpu) return 1;
  const bool one =
      s.shards > 1 || (s.matmul_flops > 0 && s.matmul_flops < r.policy->single_thread_flops);
  return one ? 1 : r.threads;
}

// The matmul rate a kernel of `s` gets: its threads' share of the device's.
double flops_per_us(const KernelSample& s, const Rates& r) {
  return r.gflops * 1e3 * threads_used(s, r) / (r.kind == DeviceKind::Cpu ? r.threads : 1);
}

// The roofline of `s` on `r`, microseconds; whether its FLOPs bound it.
double roofline_us(const KernelSample& s, const Rates& r, bool* flops_bound = nullptr) {
  const double tf = s.flops / flops_per_us(s, r), tb = s.bytes / (r.bandwidth_gbs * 1e3);
  if (flops_bound) *flops_bound = tf >= tb;
  return std::max(tf, tb);
}

double fixed_us(Part part, const Rates& r) {
  return part == Part::Node ? r.layer_overhead_us : r.layer_overhead_us / 3;
}

bool same_shape(const KernelSample& a, const KernelSample& b) {
  return a.batch == b.batch && a.in_size == b.in_size && a.out_size == b.out_size;
}

double log_ratio(double a, double b) { return std::abs(std::log((a + 1) / (b + 1))); }

// The sample of the profile nearest to `want`: the same op and variant, the same shard count
// where the profile has one; else the same op with another variant (a 5x5 convolution from the
// 3x3 ones, a Linear without ReLU from those with), to be scaled by the rooflines; else null.
const KernelSample* nearest(const DeviceProfile& p, const KernelSample& want, bool* exact) {
  const KernelSample* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (int pass = 0; pass < 3 && !best; ++pass) {
    for (const KernelSample& s : p.samples) {
      if (s.op != want.op || (pass < 2 && s.variant != want.variant)) continue;
      if (pass == 0 && s.shards != want.shards) continue;
      const double d =
          log_ratio(s.flops, want.flops) + log_ratio(s.bytes, want.bytes) +
          0.5 * log_ratio(static_cast<double>(s.batch), static_cast<double>(want.batch)) +
          log_ratio(s.trials, want.trials) + (s.shards != want.shards ? 10 : 0);
      if (d < best_d) {
        best_d = d;
        best = &s;
      }
    }
  }
  *exact = best && best->variant == want.variant && best->shards == want.shards &&
           best->trials == want.trials && same_shape(*best, want);
  return best;
}

// An LSTM sample's time steps and layers, read back from its work (model/work.cpp: FLOPs
// k * batch * 8h * (in_size + steps * h * (2 * layers - 1)), k = 3 with an input gradient, else 2).
struct Sequence {
  double steps = 1;
  int layers = 1;
};
Sequence sequence_of(const KernelSample& s) {
  Sequence q;
  if (s.op != "lstm" || s.out_size <= 0 || s.batch <= 0) return q;
  if (s.variant.rfind("layers", 0) == 0) q.layers = std::max(1, std::atoi(s.variant.c_str() + 6));
  const double h = s.out_size, k = s.variant.find("dx") != std::string::npos ? 3 : 2;
  const double f = s.flops / (k * static_cast<double>(s.batch) * 8 * h);
  q.steps = std::max(1.0, std::round((f - s.in_size) / (h * (2 * q.layers - 1))));
  return q;
}

struct Accumulator {
  double flops_us = 0, bytes_us = 0, fixed_us = 0;
  int interpolated = 0, unprofiled = 0;

  // Another's kernel `times` over: its times summed, its samples counted once.
  void add(const Accumulator& one, int times) {
    flops_us += times * one.flops_us;
    bytes_us += times * one.bytes_us;
    fixed_us += times * one.fixed_us;
    interpolated += one.interpolated;
    unprofiled += one.unprofiled;
  }
};

// A GPU profile predicting a GPU's recorded step: the graph times, each node's floor the
// profile's own, and what carries both to another GPU (its clock; its rates, at the best
// efficiency the source's kernels reached).
struct GraphScale {
  bool on = false;
  double clock_ratio = 1;      // source clock / target clock (1 when either is not known)
  double best_efficiency = 1;  // the largest fraction of its roofline a source kernel reached
  // How a kernel's time grows with its roofline, per op, as the source's own samples show it:
  // the slope of log(time past the floor) on log(roofline). 1: a constant fraction of the peak
  // (big kernels); near 0: latency, whatever the size (the small kernels a GPU runs most). Where
  // the profile has too few samples of an op: the slope over all its samples.
  std::map<std::string, double> slopes;
  double pooled = 1;  // the same over every sample: for an op with too few samples of its own
  // Ops whose kernels a GPU runs at a latency floor, whatever their FLOPs, until they fill the
  // chip: an LSTM's time steps (one after another, a few kernels each) and a convolution's
  // cuDNN kernels (forward, backward data and filter, the epilogue). Per repetition (an LSTM's
  // time step and layer; a convolution's layer): `floor_us` plus `per_roofline` times its
  // roofline, a straight line fitted over the profile's samples of the op (a power law through
  // the samples' times reaches zero at small sizes, where these stay at their floor).
  struct Line {
    double floor_us = 0, per_roofline = 0;
  };
  std::map<std::string, Line> lines;  // by op: "lstm", "conv2d"
  double slope(const std::string& op) const {
    const auto it = slopes.find(op);
    return it == slopes.end() ? pooled : it->second;
  }
};

// The least-squares line of y on x over `xy`: its slope and intercept; none for fewer than
// `least` points or no spread in x.
struct Line {
  double slope, intercept;
};
std::optional<Line> least_squares(const std::vector<std::pair<double, double>>& xy, size_t least) {
  if (xy.size() < least) return std::nullopt;
  double mx = 0, my = 0;
  for (const auto& [x, y] : xy) {
    mx += x / static_cast<double>(xy.size());
    my += y / static_cast<double>(xy.size());
  }
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : xy) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) * (x - mx);
  }
  if (sxx <= 1e-9) return std::nullopt;
  return Line{sxy / sxx, my - sxy / sxx * mx};
}

// The least-squares slope of y on x over `xy`, clamped to [0.1, 1]; none for fewer than 3 points
// or no spread in x.
std::optional<double> fitted_slope(const std::vector<std::pair<double, double>>& xy) {
  const auto line = least_squares(xy, 3);
  if (!line) return std::nullopt;
  return std::clamp(line->slope, 0.1, 1.0);
}

// How many times a sample's kernels run for one floor of GraphScale::lines: an LSTM's time steps
// times its layers; once for anything else.
double repetitions(const KernelSample& s) {
  if (s.op != "lstm") return 1;
  const Sequence q = sequence_of(s);
  return q.steps * q.layers;
}

// GraphScale::lines[op]: least squares of a repetition's time past its nodes' floor on its
// roofline over the source's recorded samples of `op`; none with fewer than `least` of them.
std::optional<GraphScale::Line> fitted_line(const DeviceProfile& source, const Rates& src,
                                            const std::string& op, size_t least) {
  std::vector<std::pair<double, double>> xy;
  for (const KernelSample& s : source.samples) {
    if (s.op != op || s.graph_total_us() <= 0) continue;
    const double per = repetitions(s);
    xy.emplace_back(roofline_us(s, src) / per,
                    (s.graph_total_us() - 2 * source.graph_node_us) / per);
  }
  const auto line = least_squares(xy, least);
  if (!line) return std::nullopt;
  double mean_x = 0;
  for (const auto& p : xy) mean_x += p.first / static_cast<double>(xy.size());
  GraphScale::Line out;
  out.per_roofline = std::max(0.0, line->slope);  // a falling line: the mean time, flat
  out.floor_us = std::max(0.0, line->intercept + (line->slope - out.per_roofline) * mean_x);
  return out;
}

GraphScale graph_scale(const DeviceProfile& source, const TargetDevice& target, bool own) {
  GraphScale g;
  g.on = source.kind == DeviceKind::Gpu && target.kind == DeviceKind::Gpu &&
         source.has_graph_times() && (own || target.graph);
  if (!g.on) return g;
  const double dst_clock = own ? source.clock_mhz : target.clock_mhz;
  if (source.clock_mhz > 0 && dst_clock > 0) g.clock_ratio = source.clock_mhz / dst_clock;
  const Rates src = rates_of(source);
  g.best_efficiency = 0;
  for (const KernelSample& s : source.samples) {
    if (s.graph_total_us() > 0) {
      g.best_efficiency = std::max(g.best_efficiency, roofline_us(s, src) / s.graph_total_us());
    }
  }
  g.best_efficiency = std::clamp(g.best_efficiency, 0.05, 1.0);
  // Least squares of log(work) on log(roofline) over each op's samples.
  std::map<std::string, std::vector<std::pair<double, double>>> points;
  for (const KernelSample& s : source.samples) {
    const double floor =
        source.graph_node_us * (s.backward_us > 0 || s.graph_backward_us > 0 ? 2 : 1);
    const double work = s.graph_total_us() - floor, roof = roofline_us(s, src);
    if (work > 0 && roof > 0) points[s.op].emplace_back(std::log(roof), std::log(work));
  }
  std::vector<std::pair<double, double>> all;
  for (const auto& [op, xy] : points) {
    all.insert(all.end(), xy.begin(), xy.end());
    if (const auto b = fitted_slope(xy)) g.slopes[op] = *b;
  }
  g.pooled = fitted_slope(all).value_or(1.0);
  for (const auto& [op, least] : {std::pair<std::string, size_t>{"lstm", 2}, {"conv2d", 3}}) {
    if (const auto line = fitted_line(source, src, op, least)) g.lines[op] = *line;
  }
  return g;
}

// A kernel's time from one CPU to another of another thread count, as a ratio. A multi-threaded
// matmul, with as much work per thread on both: the time scales by the chips' rates per thread. A
// kernel streaming from memory: by the bandwidths (per thread for a matmul scaled to the threads).
// A kernel on one thread whose data stay in the caches, and the fixed costs (dispatch,
// bookkeeping), are one core's work: taken as equal, since a chip's rate over its cores (its
// all-core clock) understates one core's speed on a many-core chip, and no single-core rate is
// probed.
double across_cpus_ratio(const KernelSample& want, const Rates& src, const Rates& dst,
                         bool flops_bound) {
  if (want.bytes >= kStreamingBytes && !flops_bound) {
    return want.matmul_flops > 0
               ? (src.bandwidth_gbs / src.threads) / (dst.bandwidth_gbs / dst.threads)
               : src.bandwidth_gbs / dst.bandwidth_gbs;
  }
  if (flops_bound && threads_used(want, dst) > 1) {
    return (src.gflops / src.threads) / (dst.gflops / dst.threads);
  }
  return 1.0;
}

// The work of `look` (a shape the profile lacks) from its nearest sample's `work`: a GPU's recorded
// LSTM or convolution as GraphScale::lines says; else the sample's moved by the ratio of their
// rooflines raised to its op's slope.
double interpolated_work(double work, const KernelSample& sample, const KernelSample& look,
                         const Rates& src, const GraphScale& graph) {
  if (const auto line = graph.lines.find(look.op); graph.on && line != graph.lines.end()) {
    return repetitions(look) * line->second.floor_us +
           line->second.per_roofline * roofline_us(look, src);
  }
  const double here = roofline_us(sample, src);
  return here > 0 ? work * std::pow(roofline_us(look, src) / here, graph.slope(look.op)) : work;
}

// The time of the kernel(s) `want` stands for, on the target: from the source's nearest sample,
// moved to this shape by the roofline's ratio on the source (on a GPU raised to its op's slope,
// GraphScale), then to the target by the ratio of the rate that bounds it there (between GPUs, the
// latency part by the clocks); the fixed part by the two devices' fixed costs.
double kernel_us(const DeviceProfile& source, const TargetDevice& target, bool own,
                 const GraphScale& graph, const KernelSample& want, Part part, Accumulator& acc) {
  const Rates src = rates_of(source), dst = own ? src : rates_of(target);
  const bool across_cpus = !own && source.kind == DeviceKind::Cpu && target.kind == DeviceKind::Cpu;
  // Between CPUs of other thread counts, the kernel on the target is taken to behave as the
  // source's kernel with as much work per thread: its shape scaled by the ratio of the threads
  // each runs it on, then by the per-thread rates.
  KernelSample look = want;
  const bool matmul = want.matmul_flops > 0;
  if (across_cpus && matmul) {
    const double k = static_cast<double>(threads_used(want, src)) / threads_used(want, dst);
    look.flops *= k;
    look.bytes *= k;
    look.matmul_flops *= k;
    look.batch = std::max<int64_t>(1, std::llround(static_cast<double>(look.batch) * k));
  }
  bool exact = false;
  const KernelSample* s = nearest(source, look, &exact);
  bool flops_bound = false;
  if (!s) {
    // Not in the profile at all: the roofline on the target, with its fixed cost.
    ++acc.unprofiled;
    const double roof = roofline_us(want, dst, &flops_bound);
    (flops_bound ? acc.flops_us : acc.bytes_us) += roof;
    acc.fixed_us += fixed_us(part, dst);
    return roof + fixed_us(part, dst);
  }
  // In a recorded step a node's fixed part is the graph's own floor per kernel (forward and
  // backward: two at least); otherwise the probe's per-layer cost.
  const double measured = graph.on ? s->graph_total_us() : s->total_us();
  const double floor =
      graph.on ? source.graph_node_us * (part == Part::Node ? 2 : 1) : fixed_us(part, src);
  const double fixed_src = std::min(measured, floor);
  double work = measured - fixed_src;
  if (!exact) {
    ++acc.interpolated;
    work = interpolated_work(work, *s, look, src, graph);
  }
  roofline_us(look, src, &flops_bound);
  double fixed = fixed_src;
  if (across_cpus) {
    work *= across_cpus_ratio(want, src, dst, flops_bound);
  } else if (!own && graph.on) {
    // One GPU's recorded step to another's. The kernel's time at its roofline on the source
    // scales by the rate that bounds it (FLOPs or bandwidth, the datasheets' ratio); the rest,
    // latency (a node's floor, a kernel too small to fill the chip), by the clocks. No kernel
    // beats the target's roofline at the best efficiency the source's kernels reached.
    const double roof_src = std::min(work, roofline_us(look, src)),
                 roof_dst = roofline_us(look, dst);
    const double rate_ratio = roof_src > 0 ? roof_dst / roofline_us(look, src) : 1;
    work = std::max((work - roof_src) * graph.clock_ratio + roof_src * rate_ratio,
                    roof_dst / graph.best_efficiency);
    fixed *= graph.clock_ratio;
  } else if (!own) {
    const double ratio = flops_bound ? flops_per_us(want, src) / flops_per_us(want, dst)
                                     : src.bandwidth_gbs / dst.bandwidth_gbs;
    work *= ratio;
    if (target.kind != source.kind) fixed = fixed_us(part, dst);
  }
  (flops_bound ? acc.flops_us : acc.bytes_us) += work;
  acc.fixed_us += fixed;
  return work + fixed;
}

// The prediction's totals and what bounds it, from the kernels' sum `us` and its parts.
void finish(ProfilePrediction& out, double us, const Accumulator& acc) {
  out.kernels_s = (us - acc.fixed_us) * 1e-6;
  out.flops_s = acc.flops_us * 1e-6;
  out.bytes_s = acc.bytes_us * 1e-6;
  out.fixed_s = acc.fixed_us * 1e-6;
  out.seconds = us * 1e-6;
  out.interpolated = acc.interpolated;
  out.unprofiled = acc.unprofiled;
  out.bound = acc.fixed_us >= acc.flops_us && acc.fixed_us >= acc.bytes_us ? "overhead"
              : acc.flops_us >= acc.bytes_us                               ? "FLOPs"
                                                                           : "bytes";
}

// The step's loss on `batch` rows (of `shards` concurrent ones), its optimizer's pass over the
// parameters, and the batch gathered from the epoch's order: the small kernels of every step.
KernelSample loss_sample(const ModelSpec& spec, const ModelLayout& layout, int64_t batch,
                         int shards) {
  KernelSample loss;
  loss.op = "loss";
  loss.variant = loss_name(spec.loss);
  loss.batch = batch;
  loss.shards = shards;
  loss.in_size = static_cast<double>(layout.outputs);
  loss.bytes = 4.0 * 3 * static_cast<double>(batch) * loss.in_size;
  return loss;
}
KernelSample optimizer_sample(const ModelSpec& spec, const ModelLayout& layout) {
  KernelSample opt;
  opt.op = "optimizer";
  opt.variant = optimizer_type_name(spec.train.optimizer.type);
  opt.batch = 1;
  opt.in_size = static_cast<double>(layout.flat_size);
  opt.bytes = optimizer_bytes_per_param(spec.train.optimizer) * opt.in_size;
  return opt;
}
// The sum of `shards` batch shards' gradients.
KernelSample merge_sample(const ModelLayout& layout, int shards) {
  KernelSample merge;
  merge.op = "accumulate";
  merge.batch = 1;
  merge.shards = shards;
  merge.in_size = static_cast<double>(layout.flat_size);
  merge.bytes = 12.0 * merge.in_size * (shards - 1);
  return merge;
}
KernelSample gather_sample(const ModelLayout& layout, int64_t batch) {
  KernelSample gather;
  gather.op = "batch";
  gather.batch = batch;
  gather.in_size = static_cast<double>(layout.input_features);
  gather.bytes = 8.0 * static_cast<double>(batch) * gather.in_size;
  return gather;
}

// The step's own fixed cost: the source's where the software is the same kind of device, the
// target's probe (or assumption) across kinds; one parallel region when `shards` run at once.
double step_fixed_us(const DeviceProfile& source, const TargetDevice& target, bool own,
                     const GraphScale& graph, int shards) {
  double fixed = graph.on ? source.graph_step_fixed_us * graph.clock_ratio
                 : own || target.kind == source.kind ? source.step_fixed_us
                                                     : target.step_overhead_us;
  if (shards > 1) fixed += source.shard_fork_us;
  return fixed;
}

}  // namespace

TargetDevice make_target(std::string id, std::string name, DeviceKind kind, int threads,
                         const DeviceRates& r, const ExecutionPolicy& policy, std::string rates) {
  TargetDevice t;
  t.id = std::move(id);
  t.name = std::move(name);
  t.kind = kind;
  t.threads = kind == DeviceKind::Cpu ? threads : 0;
  t.gflops = r.gflops;
  t.bandwidth_gbs = r.bandwidth_gbs;
  t.step_overhead_us = r.step_overhead_us;
  t.layer_overhead_us = r.layer_overhead_us;
  t.policy = policy;
  t.rates = std::move(rates);
  t.graph = kind == DeviceKind::Gpu;  // crossover records a GPU's step unless told not to
  return t;
}

TargetDevice profile_target(const DeviceProfile& p) {
  TargetDevice t = make_target(p.id, p.name, p.kind, p.threads, probed_rates(p.peaks), p.policy,
                               fmt::format("probed {}", p.peaks.probed.substr(0, 10)));
  t.sm_count = p.sm_count;
  t.clock_mhz = p.clock_mhz;
  t.architecture = architecture_of(p.kind, p.name);
  if (p.kind == DeviceKind::Cpu) t.precision = p.peaks.precision;
  return t;
}

std::string ProfilePrediction::how() const {
  return own ? "own profile" : fmt::format("from {}'s profile, scaled", source);
}

ProfilePrediction predict_with_profile(const ModelSpec& spec, int64_t batch,
                                       const DeviceProfile& source, const TargetDevice& target,
                                       bool own, int shards) {
  const ModelLayout layout = model_layout(spec);
  ProfilePrediction out;
  out.source = source.id;
  out.own = own;
  double train_flops = 0;
  bool batch_norm = !layout.buffers.empty();
  for (const Node& n : layout.nodes) {
    train_flops += static_cast<double>(batch) * n.forward_flops * (n.gradient_below ? 3 : 2);
  }
  const ExecutionPolicy& policy = own ? source.policy : target.policy;
  out.shards = batch_norm ? 1 : shards > 0 ? shards : policy.shards(batch, train_flops);
  out.shards = static_cast<int>(std::min<int64_t>(out.shards, batch));
  const int64_t slice = batch / out.shards + (batch % out.shards ? 1 : 0);  // the longest shard
  Accumulator acc;
  const GraphScale graph = graph_scale(source, target, own);
  out.graph = graph.on;
  double us = 0;
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    if (is_view(layout.nodes[i], true)) continue;
    ++out.nodes;
    us += kernel_us(source, target, own, graph, node_sample(layout, i, slice, out.shards),
                    Part::Node, acc);
  }
  us += kernel_us(source, target, own, graph, loss_sample(spec, layout, slice, out.shards),
                  Part::Small, acc);
  us += kernel_us(source, target, own, graph, optimizer_sample(spec, layout), Part::Small, acc);
  if (out.shards > 1) {
    us += kernel_us(source, target, own, graph, merge_sample(layout, out.shards), Part::Small, acc);
  }
  if (spec.train.shuffle) {
    us += kernel_us(source, target, own, graph, gather_sample(layout, batch), Part::Small, acc);
  }
  const double step_fixed = step_fixed_us(source, target, own, graph, out.shards);
  acc.fixed_us += step_fixed;
  us += step_fixed;
  finish(out, us, acc);
  return out;
}

bool has_trials_samples(const DeviceProfile& p) {
  return std::any_of(p.samples.begin(), p.samples.end(),
                     [](const KernelSample& s) { return s.trials > 0; });
}

namespace {

// Trials that step apart: each its own step, as alone, one trial after another (a CPU's
// convolutional models), or side by side on the workers, the step the busiest worker's.
ProfilePrediction predict_apart(const ModelSpec& spec, const ModelLayout& layout, int64_t batch,
                                int trials, FusedStepping stepping, const ExecutionPolicy& policy,
                                const DeviceProfile& source, const TargetDevice& target, bool own) {
  // Side by side, each trial in one batch shard.
  const bool side = stepping == FusedStepping::SideBySide;
  ProfilePrediction out = predict_with_profile(spec, batch, source, target, own, side ? 1 : 0);
  const int workers = side ? std::clamp(policy.shard_threads, 1, trials) : 1;
  // Side by side, a model whose products pass one thread's runs them on its worker's one thread:
  // its step as long as its step alone on all the threads times their number (perfect scaling; on
  // 2 threads measured 3-17% faster than that).
  const bool as_alone = steps_alone_on_one_thread(layout.nodes, layout.tensors, batch, policy);
  const int slower = side && !as_alone ? std::max(1, policy.shard_threads) : 1;
  const double steps = static_cast<double>((trials + workers - 1) / workers * slower);
  for (double* s : {&out.seconds, &out.kernels_s, &out.fixed_s, &out.flops_s, &out.bytes_s})
    *s *= steps;
  return out;
}

}  // namespace

ProfilePrediction predict_fused_with_profile(const ModelSpec& spec, int64_t batch, int trials,
                                             const DeviceProfile& source,
                                             const TargetDevice& target, bool own) {
  XO_ASSERT(trials >= 1 && batch >= 1);
  const ModelLayout layout = model_layout(spec);
  // The groups that run concurrently, one per worker (model/fused_network.h): a CPU's shard
  // threads, one on a GPU; the step is the longest group's.
  const ExecutionPolicy& policy = own ? source.policy : target.policy;
  const FusedStepping stepping =
      fused_stepping(layout.nodes, layout.tensors, batch, target.kind, policy, trials);
  if (stepping != FusedStepping::Together)
    return predict_apart(spec, layout, batch, trials, stepping, policy, source, target, own);
  ProfilePrediction out;
  out.source = source.id;
  out.own = own;
  const int groups =
      target.kind == DeviceKind::Cpu ? std::clamp(policy.shard_threads, 1, trials) : 1;
  const int per_group = (trials + groups - 1) / groups;
  out.shards = groups;
  Accumulator acc;
  const GraphScale graph = graph_scale(source, target, own);
  out.graph = graph.on;
  double us = 0;
  // A kernel `times` over, one after another on the group's worker.
  auto add = [&](const KernelSample& want, Part part, int times) {
    Accumulator one;
    us += times * kernel_us(source, target, own, graph, want, part, one);
    acc.add(one, times);
  };
  // A group's Linear is a kernel over its trials (on a CPU register-blocked for narrow layers; on
  // a GPU the trials spread over the multiprocessors): timed as such where a profile of the
  // target's kind has it (op "trials_linear").
  const bool trials_kernel = target.kind == source.kind && has_trials_samples(source);
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    const Node& n = layout.nodes[i];
    if (is_view(n, true)) continue;
    ++out.nodes;
    // A Linear of the group's trials is one kernel with a trial dimension: the profile's own
    // sample of it, or else one Linear as many times taller (the same FLOPs and launches); every
    // other node trial by trial.
    if (n.kind == NodeKind::Linear && trials_kernel) {
      add(trials_linear_sample(layout, i, batch, per_group, groups), Part::Node, 1);
    } else if (n.kind == NodeKind::Linear) {
      add(node_sample(layout, i, batch * per_group, groups), Part::Node, 1);
    } else {
      add(node_sample(layout, i, batch, groups), Part::Node, per_group);
    }
  }
  // The trials' own loss, optimizer step and gather (a fused trial always gathers): on a GPU one
  // kernel each for the group's trials, as tall as their work together (Backend::fused_step); on
  // a CPU trial by trial on the group's worker.
  const bool batched = target.kind == DeviceKind::Gpu;
  const int times = batched ? 1 : per_group;
  const int64_t rows = batched ? batch * per_group : batch;
  KernelSample optimizer = optimizer_sample(spec, layout);
  if (batched) {
    optimizer.in_size *= per_group;
    optimizer.bytes *= per_group;
  }
  add(loss_sample(spec, layout, rows, groups), Part::Small, times);
  add(optimizer, Part::Small, times);
  add(gather_sample(layout, rows), Part::Small, times);
  const double step_fixed = step_fixed_us(source, target, own, graph, groups);
  acc.fixed_us += step_fixed;
  us += step_fixed;
  finish(out, us, acc);
  return out;
}

namespace {

// What identifies a sample's shape (its times and work aside).
std::string sample_key(const KernelSample& s) {
  return fmt::format("{}|{}|{}|{}|{}|{}", s.op, s.variant, s.batch, s.shards, s.in_size,
                     s.out_size);
}

// The samples a profile measurement takes for `spec` on a device of `threads` shard threads (as
// measure/profile.cpp's Profiler::model does): each node, the loss and the merge whole and in
// shards, the optimizer, the batch gather.
std::set<std::string> sample_keys(const ModelSpec& spec, int threads) {
  const ModelLayout layout = model_layout(spec);
  const int64_t batch = spec.train.batch;
  std::set<std::string> keys;
  std::vector<int> modes = {1};
  if (threads > 1 && layout.buffers.empty() && batch >= 2 * threads) modes.push_back(threads);
  for (const int shards : modes) {
    const int64_t slice = batch / shards + (batch % shards ? 1 : 0);
    for (size_t i = 0; i < layout.nodes.size(); ++i) {
      if (!is_view(layout.nodes[i], true)) {
        keys.insert(sample_key(node_sample(layout, i, slice, shards)));
      }
    }
    keys.insert(sample_key(loss_sample(spec, layout, slice, shards)));
    if (shards > 1) keys.insert(sample_key(merge_sample(layout, shards)));
  }
  keys.insert(sample_key(optimizer_sample(spec, layout)));
  if (spec.train.shuffle) keys.insert(sample_key(gather_sample(layout, batch)));
  return keys;
}

}  // namespace

namespace {

// The sample keys of `others` and of the profile grid at a device's shard threads, taken once for
// leaving each model out of a profile in turn (a profile holds tens of thousands of samples, the
// validation leaves out every measured model of every profile).
class HoldoutKeys {
 public:
  HoldoutKeys(const std::vector<ModelSpec>& others, int threads) : threads_(threads) {
    for (const ModelSpec& o : others) others_.emplace_back(o.name, sample_keys(o, threads));
    for (const auto& [name, keys] : others_) {
      for (const std::string& k : keys) ++count_[k];
    }
    for (const ModelSpec& o : measure_grid_specs()) {
      for (const std::string& k : sample_keys(o, threads)) ++count_[k];
    }
  }

  // `profile` less the samples that `spec` takes and nothing else does (no other of `others`, by
  // name, and no grid spec).
  DeviceProfile without(const DeviceProfile& profile, const ModelSpec& spec) const {
    const std::set<std::string> mine = sample_keys(spec, threads_);
    auto only_mine = [&](const std::string& key) {
      if (!mine.count(key)) return false;
      const auto it = count_.find(key);
      int theirs = it == count_.end() ? 0 : it->second;
      for (const auto& [name, keys] : others_) theirs -= name == spec.name && keys.count(key);
      return theirs == 0;
    };
    DeviceProfile out = profile;
    std::erase_if(out.samples, [&](const KernelSample& s) { return only_mine(sample_key(s)); });
    return out;
  }

 private:
  int threads_;
  std::vector<std::pair<std::string, std::set<std::string>>> others_;  // name, its keys
  std::map<std::string, int> count_;  // how many of others_ and the grid take each key
};

}  // namespace

DeviceProfile without_model(const DeviceProfile& profile, const ModelSpec& spec,
                            const std::vector<ModelSpec>& others) {
  return HoldoutKeys(others, profile.policy.shard_threads).without(profile, spec);
}

bool profile_has_model(const DeviceProfile& profile, const ModelSpec& spec, int64_t batch) {
  ModelSpec at = spec;
  at.train.batch = batch;
  std::set<std::string> have;
  for (const KernelSample& s : profile.samples) have.insert(sample_key(s));
  const ModelLayout layout = model_layout(at);
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    if (!is_view(layout.nodes[i], true) &&
        !have.count(sample_key(node_sample(layout, i, batch, 1))))
      return false;
  }
  return profile.has_kernels();
}

namespace {

// A row of the validation table for d's measured models predicted from s, before its entries.
ValidationRow validation_row(const DeviceProfile& d, const DeviceProfile& s, Holdout holdout) {
  ValidationRow row;
  row.device = d.id;
  row.name = d.name;
  row.from = s.id;
  row.own = &s == &d;
  row.holdout = holdout;
  row.from_kind = s.kind;
  row.from_architecture = architecture_of(s.kind, s.name);
  row.kind = prediction_kind(s.kind, row.from_architecture, d.kind, architecture_of(d.kind, d.name),
                             row.own);
  row.how = holdout == Holdout::None ? "own profile"
            : holdout == Holdout::Model
                ? "own profile, each model's own kernels left out (and models never profiled)"
                : fmt::format("from {}'s profile, scaled by {}'s probed peaks", s.id, d.id);
  return row;
}

}  // namespace

std::vector<ValidationRow> validate_profiles(const std::vector<DeviceProfile>& profiles) {
  std::vector<ModelSpec> builtins;
  for (const std::string& name : builtin_spec_names()) {
    if (auto spec = builtin_spec(name)) builtins.push_back(std::move(*spec));
  }
  std::map<int, HoldoutKeys> holdout_keys;  // by shard threads
  auto without = [&](const DeviceProfile& s, const ModelSpec& spec) {
    const int threads = s.policy.shard_threads;
    auto it = holdout_keys.find(threads);
    if (it == holdout_keys.end()) it = holdout_keys.try_emplace(threads, builtins, threads).first;
    return it->second.without(s, spec);
  };
  std::vector<ValidationRow> rows;
  // The predictions of d's measured models from s (with each model left out of s in turn when
  // `holdout` is Model) as one row.
  auto row_of = [&](const DeviceProfile& d, const DeviceProfile& s, Holdout holdout) {
    const bool own = &s == &d;
    ValidationRow row = validation_row(d, s, holdout);
    const TargetDevice target = profile_target(d);
    std::vector<double> errors;
    for (const MeasuredStep& m : d.measured) {
      // A built-in model, or one measured from its spec (never profiled: it counts for the
      // models a profile did not measure, with its kernels from neighbouring shapes).
      const std::optional<ModelSpec> spec =
          m.spec_toml.empty() ? builtin_spec(m.model)
                              : std::optional(parse_spec(m.spec_toml, d.id + ": " + m.model));
      if (!spec) continue;
      if (!m.spec_toml.empty() && holdout == Holdout::None) continue;
      const ProfilePrediction p =
          holdout == Holdout::Model && m.spec_toml.empty()
              ? predict_with_profile(*spec, m.batch, without(s, *spec), target, own)
              : predict_with_profile(*spec, m.batch, s, target, own);
      row.entries.push_back({m.model, p.seconds * 1e3, m.step_ms, p.unprofiled});
      if (m.slowest_ms > 0) row.spread = std::max(row.spread, m.slowest_ms / m.step_ms - 1);
      errors.push_back(std::abs(row.entries.back().error()));
    }
    if (!errors.empty()) {
      row.median_abs = summarize(errors).median;
      row.worst_abs = *std::max_element(errors.begin(), errors.end());
    }
    return row;
  };
  for (const DeviceProfile& d : profiles) {
    if (d.measured.empty()) continue;
    if (!d.has_kernels()) {
      ValidationRow row = validation_row(d, d, Holdout::None);
      row.unmeasured = fmt::format("no kernel profile of {} was measured{}", d.id,
                                   d.note.empty() ? "" : fmt::format(" ({})", d.note));
      rows.push_back(row);
    } else {
      for (const Holdout h : {Holdout::None, Holdout::Model}) {
        ValidationRow row = row_of(d, d, h);
        if (!row.entries.empty()) rows.push_back(std::move(row));
      }
    }
    for (const DeviceProfile& s : profiles) {
      if (&s == &d || !s.has_kernels()) continue;  // a profile of peaks only predicts nothing
      // A GPU's kernels say nothing of a CPU's (they missed by thousands of percent), and a CPU
      // is never predicted from them while a CPU profile ships: no row of that kind.
      if (s.kind == DeviceKind::Gpu && d.kind == DeviceKind::Cpu) continue;
      // A CPU's kernels timed at bf16 predict only a CPU at bf16, and f32's only f32 (and GPUs).
      if (s.kind == DeviceKind::Cpu &&
          s.peaks.precision != (d.kind == DeviceKind::Cpu ? d.peaks.precision : ""))
        continue;
      ValidationRow row = row_of(d, s, Holdout::Device);
      if (!row.entries.empty()) rows.push_back(std::move(row));
    }
  }
  return rows;
}

const char* prediction_kind_name(PredictionKind k) {
  switch (k) {
    case PredictionKind::Own:
      return "this device, a model it did not measure";
    case PredictionKind::SameArchitecture:
      return "another GPU of the profile's architecture";
    case PredictionKind::OtherArchitecture:
      return "a GPU of another architecture";
    case PredictionKind::CpuFromCpu:
      return "another CPU";
    case PredictionKind::GpuFromCpu:
      return "a GPU from a CPU's profile";
    case PredictionKind::CpuFromGpu:
      return "a CPU from a GPU's profile";
  }
  return "?";
}

PredictionKind prediction_kind(DeviceKind from, const std::string& from_architecture, DeviceKind to,
                               const std::string& to_architecture, bool own) {
  if (own) return PredictionKind::Own;
  if (from == DeviceKind::Cpu) {
    return to == DeviceKind::Cpu ? PredictionKind::CpuFromCpu : PredictionKind::GpuFromCpu;
  }
  if (to == DeviceKind::Cpu) return PredictionKind::CpuFromGpu;
  return !from_architecture.empty() && from_architecture == to_architecture
             ? PredictionKind::SameArchitecture
             : PredictionKind::OtherArchitecture;
}

std::string architecture_of(DeviceKind kind, const std::string& name) {
  if (kind != DeviceKind::Gpu) return "";
  static const Catalog catalog = shipped_catalog();
  DeviceInfo d;
  d.kind = kind;
  d.name = name;
  for (const CatalogDevice& c : catalog.devices) {
    if (!c.architecture.empty() && same_model(c, d)) return c.architecture;
  }
  return "";
}

namespace {

// Where a kind has no held-out row: the kinds whose rows stand in for it, nearest first (a GPU of
// another architecture is at least as far off as one of the same architecture, which is at least
// as far off as the profile's own GPU).
std::vector<PredictionKind> nearer_kinds(PredictionKind k) {
  switch (k) {
    case PredictionKind::OtherArchitecture:
      return {PredictionKind::SameArchitecture, PredictionKind::Own};
    case PredictionKind::SameArchitecture:
    case PredictionKind::CpuFromCpu:
    case PredictionKind::GpuFromCpu:
    case PredictionKind::CpuFromGpu:
      return {PredictionKind::Own};
    case PredictionKind::Own:
      return {};
  }
  return {};
}

// Where a prediction comes from, for its expected error: the profile, its device kind and
// architecture.
struct Source {
  std::string id;
  DeviceKind kind;
  std::string architecture;
};

// The held-out rows of `kind` from `from` (when `same_profile`; else from any profile of its device
// kind and architecture), `skip_model` left out of their entries (for calibrate: "" leaves
// nothing out), summed up: the median of the rows' medians (a typical row's: one profile's
// predictions of several devices of the kind miss by more on some), the largest worst; none
// without an entry.
std::optional<ExpectedError> rows_of_kind(const std::vector<ValidationRow>& rows,
                                          const Source& from, PredictionKind kind,
                                          bool same_profile, const std::string& skip_model) {
  std::optional<ExpectedError> out;
  std::vector<double> medians;
  for (const ValidationRow& r : rows) {
    if (r.holdout == Holdout::None || r.kind != kind) continue;
    if (same_profile ? r.from != from.id
                     : r.from_kind != from.kind || r.from_architecture != from.architecture)
      continue;
    std::vector<double> errors;
    for (const ValidationRow::Entry& e : r.entries) {
      if (e.model != skip_model) errors.push_back(std::abs(e.error()));
    }
    if (errors.empty()) continue;
    if (!out) out.emplace();
    out->kind = kind;
    medians.push_back(summarize(errors).median);
    out->median = summarize(medians).median;
    out->worst = std::max(out->worst, *std::max_element(errors.begin(), errors.end()));
    out->spread = std::max(out->spread, r.spread);
    out->rows += fmt::format(
        "{}{}{}", out->rows.empty() ? "" : "; ", r.device,
        r.own ? fmt::format(", {}", holdout_name(r.holdout)) : fmt::format(" from {}", r.from));
  }
  return out;
}

std::optional<ExpectedError> expected_error_without(const std::vector<ValidationRow>& rows,
                                                    const Source& from, PredictionKind kind,
                                                    const std::string& skip_model) {
  // The rows of this very profile first (its own device's, or its predictions of other devices
  // of this kind); where the table has none (a profile measured on this machine, not shipped),
  // those of every profile.
  for (const bool same_profile : {true, false}) {
    if (auto out = rows_of_kind(rows, from, kind, same_profile, skip_model)) return out;
  }
  for (const PredictionKind nearer : nearer_kinds(kind)) {
    for (const bool same_profile : {true, false}) {
      if (auto out = rows_of_kind(rows, from, nearer, same_profile, skip_model)) {
        out->at_least = true;
        return out;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ExpectedError> expected_error(const std::vector<ValidationRow>& rows,
                                            const DeviceProfile& from, PredictionKind kind) {
  return expected_error_without(rows, {from.id, from.kind, architecture_of(from.kind, from.name)},
                                kind, "");
}

bool CalibrationRow::holds() const {
  return entries > 0 && coverage() >= 0.9 && median_ratio <= 1.5 && median_ratio >= 1 / 1.5;
}

std::vector<CalibrationRow> calibrate(const std::vector<ValidationRow>& rows) {
  std::map<PredictionKind, std::vector<std::pair<double, ExpectedError>>> by_kind;
  for (const ValidationRow& r : rows) {
    if (r.holdout == Holdout::None) continue;
    for (const ValidationRow::Entry& e : r.entries) {
      const auto stated =
          expected_error_without(rows, {r.from, r.from_kind, r.from_architecture}, r.kind, e.model);
      if (stated && !stated->at_least) by_kind[r.kind].emplace_back(std::abs(e.error()), *stated);
    }
  }
  std::vector<CalibrationRow> out;
  for (const auto& [kind, list] : by_kind) {
    CalibrationRow c;
    c.kind = kind;
    std::vector<double> measured, stated, ratios;
    for (const auto& [error, e] : list) {
      ++c.entries;
      c.covered += error <= e.worst ? 1 : 0;
      measured.push_back(error);
      stated.push_back(e.median);
      ratios.push_back(e.median > 0 ? error / e.median : error > 0 ? 1e9 : 1);
    }
    c.measured_median = summarize(measured).median;
    c.stated_median = summarize(stated).median;
    c.median_ratio = summarize(ratios).median;
    out.push_back(c);
  }
  return out;
}

}  // namespace xo
