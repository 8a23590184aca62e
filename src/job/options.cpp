#include "job/options.h"

#include <fmt/format.h>

#include "advisor/cost.h"
#include "core/error.h"
#include "job/hooks.h"
#include "job/run_notes.h"
#include "measure/run_record.h"

namespace xo {

std::filesystem::path default_checkpoint_dir(const std::string& model) {
  return std::filesystem::path("crossover-checkpoints") / model;
}

CheckpointOptions checkpoint_options(const CheckpointFlags& f, const std::filesystem::path& dir,
                                     JobHooks& hooks) {
  CheckpointOptions c;
  c.every = parse_checkpoint_interval(f.every, "--checkpoint-every");
  c.resume = f.resume || f.resume_if_any;
  if (c.resume && f.restart) throw UserError("--resume and --restart: choose one");
  if (!c.every.enabled() && !c.resume) return c;  // no folder: no checkpoints
  c.dir = dir;
  if (const auto steps = newest_checkpoint(dir); steps && !c.resume) {
    if (!f.restart) {
      throw UserError(fmt::format(
          "{} holds the checkpoint of an unfinished run (at step {}): --resume continues it, "
          "--restart discards it and starts afresh",
          dir.string(), *steps));
    }
    remove_checkpoints(dir);
    hooks.note(fmt::format("note: discarded the checkpoint in {} (--restart)", dir.string()));
  }
  // A resume with nothing to resume is bad input (exit code 2): starting over instead would hide
  // that the run meant to be continued is not there (another folder, another model's name).
  if (f.resume && !newest_checkpoint(dir)) {
    throw UserError(fmt::format(
        "--resume: no checkpoint to resume from in {} (a run stopped before its first checkpoint, "
        "or another --checkpoint-dir); run without --resume to train from the beginning",
        dir.string()));
  }
  return c;
}

ModelSpec resolve_spec_with(const std::string& name_or_path, const DataFlags& f) {
  ModelSpec spec = resolve_spec(name_or_path);
  if (!f.data.empty()) spec.data.source = data_source_argument(f.data, "--data");
  if (!f.test_data.empty()) {
    const std::string test = data_source_argument(f.test_data, "--test-data");
    if (!test.starts_with("csv:") && !test.starts_with("safetensors:")) {
      throw UserError(fmt::format(
          "--test-data {}: not a file of samples (expected a CSV or safetensors file of the "
          "training data's columns)",
          f.test_data));
    }
    spec.data.test = test;
    spec.data.test_samples = 0;  // the file is the test split
  }
  if (!f.init.empty()) {
    // Absolute: the spec may be recorded and trained elsewhere (a search's trial folder).
    spec.init = std::filesystem::absolute(f.init).lexically_normal().string();
    spec.init_weights.reset();
  }
  return spec;
}

ModelSpec trained_spec_with(const std::string& command, const std::string& name_or_path,
                            const DataFlags& f, JobHooks& hooks) {
  const ModelSpec spec = resolve_spec_with(name_or_path, f);
  tell_spec_notes(hooks, spec);
  if (spec.init.empty() && !spec.init_weights) {
    throw UserError(fmt::format(
        "{} {}: no trained weights (the spec names none): give --init FILE, the weights `crossover "
        "train --save FILE` wrote",
        command, name_or_path));
  }
  return spec;
}

Catalog load_user_catalog(const CostOptions& o) {
  check_assumptions(o.advice.ownership);
  Catalog c = shipped_catalog();
  for (const std::string& file : o.catalogs) c = merge_catalogs(std::move(c), load_catalog(file));
  for (const std::string& p : o.prices) apply_price_override(c, p);
  return c;
}

Manifest job_manifest(const MeasureOptions& o, const std::vector<std::string>& devices,
                      const std::vector<RunRecord>& runs) {
  Manifest m;
  m.build = this_build();
  m.libraries = build_libraries();
  for (const RunRecord& run : runs) {
    const DeviceInfo& d = run.result.device;
    bool listed = false;
    for (const auto& [id, library] : m.device_libraries) listed |= id == d.id;
    if (!listed) m.device_libraries.emplace_back(d.id, d.library);
  }
  m.command_line = o.command_line;
  m.settings = o.settings;
  m.settings.devices = devices;
  return m;
}

MeasureOptions measure_options(const ExecutionSettings& s) {
  MeasureOptions o;
  o.settings = s;
  return o;
}

}  // namespace xo
