// The search's record in its out folder, its progress told through JobHooks: the lines `crossover
// tune` prints (trials on standard output as results, notes on standard error).
#include "job/tune.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>

#include "core/format.h"
#include "distributed/process.h"
#include "job/run_notes.h"
#include "report/files.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "report/tune_json.h"
#include "report/tune_text.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

// The search's files in its out folder and its progress told to `hooks`.
class TuneReporter final : public SearchHooks {
 public:
  TuneReporter(const TuneJob& o, JobHooks& hooks) : o_(o), hooks_(hooks), out_(o.search.out) {}

  ModelSpec read_spec(const std::string& spec) override {
    return o_.given ? *o_.given : resolve_spec_with(spec, o_.data);
  }
  TuneRecord read_record(const std::string& text, const std::string& origin) override {
    return read_tune_record(text, origin);
  }
  TrainResult read_result(const std::string& text, const std::string& origin) override {
    return read_train_result(text, origin);
  }
  Catalog catalog() override { return load_user_catalog(o_.cost); }
  AdviceOptions advice() override { return with_profiles(o_.cost.advice); }

  JobRunner* runner() override { return o_.runner; }
  void publish(const TuneRecord& r) override { write_tune_report(out_, r, describe_machine()); }

  void spec_read(const ModelSpec& base) override { tell_spec_notes(hooks_, base); }
  void fewer_trials(size_t distinct, int64_t samples) override {
    hooks_.note(fmt::format("note: the space holds {} distinct trials, fewer than --samples {}",
                            distinct, samples));
  }
  void nothing_fuses() override {
    if (!o_.quiet) {
      hooks_.note(
          "note: no two trials can train as one (each differs in architecture, batch size or "
          "data): each trains in a process of its own, as with --fuse off");
    }
  }
  void resumed(size_t kept, size_t trials) override {
    hooks_.note(fmt::format("crossover: {} of {} trials in {} are kept; the search goes on", kept,
                            trials, out_.string()));
  }
  void measuring(int k, const std::string& device) override {
    if (!o_.quiet)
      hooks_.note(
          fmt::format("measuring {} trial{} at once on {}...", k, k == 1 ? "" : "s", device));
  }
  void measuring_groups(const std::string& device) override {
    if (!o_.quiet) hooks_.note(fmt::format("measuring fused groups of trials on {}...", device));
  }
  void started(const TuneRecord& r) override;
  void promoted(const HalvingDecision& d) override {
    if (!o_.quiet) hooks_.result(decision_text(d) + "\n");
  }
  void trial_ended(const TrialRecord& t, const TuneRecord& r) override;

 private:
  const TuneJob& o_;
  JobHooks& hooks_;
  fs::path out_;
};

// Why --fuse auto took every ready trial without timing group sizes (measure_fuse_cap).
constexpr const char* kUnmeasuredGroups =
    " (not measured: too few trials, or a search shorter than timing group sizes would take)";
// Why trials at once were not measured (tune/parallel.h's measure_choice).
constexpr const char* kShortSearch =
    " (not measured: a search shorter than measuring trials at once would take)";
// On a GPU it never times them (Search's gpu_fuse_cap says why).
constexpr const char* kGpuGroups = " (as many as are ready: group sizes are not timed on a GPU)";
// Nor for the workers of a runner of the caller's (a Dask cluster): they are not this machine.
constexpr const char* kWorkersGroups =
    " (the ready trials shared among the workers: group sizes are not timed on this machine for "
    "them)";

// "disc-4: 2 trials (grid), lowest by loss; 2 at once on cpu (measured fastest)".
void TuneReporter::started(const TuneRecord& r) {
  if (o_.quiet) return;
  std::vector<std::string> where;
  for (const ParallelChoice& c : r.parallel) {
    // Why the group size is what it is: measured, or under auto not measured (the CPU's reason or
    // the GPU's); an explicit --fuse K needs none.
    std::string why = c.measured                                    ? " (measured fastest)"
                      : o_.search.fuse != kFuseAuto                 ? ""
                      : device_kind_of(c.device) != DeviceKind::Cpu ? kGpuGroups
                      : o_.runner != nullptr                        ? kWorkersGroups
                                                                    : kUnmeasuredGroups;
    // Larger groups than the search's share could time are taken as fast as the largest timed.
    int timed = 0;
    for (const ParallelOption& option : c.options) timed = std::max(timed, option.k);
    if (c.fused > 0 && c.measured && timed < c.fused) {
      why = fmt::format(
          " (timed up to {} a group; larger groups, not timed within the search's "
          "share, taken as fast)",
          timed);
    }
    where.push_back(c.fused > 0
                        ? fmt::format("fused up to {} per group on {}{}", c.fused, c.device, why)
                        : fmt::format("{} at once on {}{}", c.k, c.device,
                                      c.measured       ? " (measured fastest)"
                                      : c.short_search ? kShortSearch
                                                       : ""));
  }
  hooks_.result(fmt::format("{}: {} trials ({}), {} by {}; {}\n", terminal_safe(r.model),
                            r.trials.size(), r.mode, r.higher_is_better ? "best" : "lowest",
                            r.objective, fmt::join(where, ", ")));
}

// "t01 train.optimizer.lr=0.05: finished after 2 epochs, loss 0.4321, 1.2 s on cpu (2 threads)".
void TuneReporter::trial_ended(const TrialRecord& t, const TuneRecord& r) {
  if (o_.quiet) return;
  std::vector<std::string> v;
  for (const auto& [k, x] : t.values) v.push_back(fmt::format("{}={}", k, x));
  const std::string values = fmt::format("{}", fmt::join(v, " "));
  const std::string figure = std::isnan(t.objective)
                                 ? terminal_safe(t.error)
                                 : fmt::format("{} {:.4g}", r.objective, t.objective);
  hooks_.result(fmt::format(
      "{} {}: {} after {} epoch{}, {}, {} on {}{}\n", t.id, terminal_safe(values),
      trial_status_name(t.status), t.epochs, t.epochs == 1 ? "" : "s", figure,
      duration(t.process_seconds), t.device,
      t.threads > 0 ? fmt::format(" ({} thread{})", t.threads, t.threads == 1 ? "" : "s")
                    : std::string()));
}

}  // namespace

TuneRecord tune_job(const TuneJob& job, JobHooks& hooks, const mpi::World* world) {
  if (!job.program.empty()) set_crossover_program(job.program);
  TuneReporter reporter(job, hooks);
  return run_search(job.search, reporter, world);
}

}  // namespace xo
