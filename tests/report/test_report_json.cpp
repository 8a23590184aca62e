// The report document's one writer and reader: a document written and read back strictly is the
// same document; every field the writer writes is required by the strict reader, whose errors
// name the file, the run and the field; a lenient read of anything never throws.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "report/report_json.h"
#include "support/expect_error.h"

namespace xo {
namespace {

using json = nlohmann::json;

ReportRun measured_run(const std::string& model, const std::string& device) {
  ReportRun r;
  TrainResult& t = r.run.result;
  t.model = model;
  t.origin = "built-in";
  t.data = "disc (1000 samples)";
  t.params = 1234;
  t.device = {device,
              device == "cpu" ? DeviceKind::Cpu : DeviceKind::Gpu,
              "Test device",
              2,
              "oneDNN 2.6.3",
              "f32",
              {{"driver", "1.0"}}};
  t.batch = 100;
  t.samples = 1000;
  t.steps_per_epoch = 10;
  t.epochs = {{1, 6.5, 40, 0.01, std::nan(""), std::nan("")},
              {2, 4.25, 20, 0.01, std::nan(""), std::nan("")}};
  t.final_loss = 4.25;
  t.final_train_error = 20;
  t.step_ms = {19, 1.0, 1.1, 0.9, 2.0, 0.95, 1.3, 0.05};
  t.flops_per_step = 2e6;
  t.gflops = 2;
  t.samples_per_second = 1e5;
  t.train_seconds = 0.02;
  t.setup_seconds = 0.001;
  t.data_ms = 0.01;
  t.forward_backward_ms = 0.8;
  t.optimizer_ms = 0.1;
  t.steps_taken = 20;
  t.node_timed_steps = 10;
  r.run.layers = 2;
  r.run.axis = "depth";
  r.run.axis_value = 2;
  r.run.spec_toml = "[model]\n";
  r.run.data_hash = "0123456789abcdef";
  r.run.params_hash = device == "cpu" ? "fedcba9876543210" : "00000000ffffffff";
  r.run.work.flops = 2e6;
  r.run.work.bytes = 1e5;
  r.run.peak_rss_mib = 100;
  Utilisation u;
  u.interval_s = 0.1;
  u.samples = 2;
  u.t_s = {0, 0.1};
  u.cpu_percent = {50, 60};
  u.cpu_core_percent = {{40, 60}, {50, 70}};
  u.rss_mib = {90, 100};
  u.mean_cpu_percent = 55;
  u.mean_other_cores = device == "cpu" ? 1.25 : 0.0;  // a busy machine under the CPU run
  u.max_rss_mib = 100;
  r.run.utilisation = u;
  RunAnalysis& a = r.analysis;
  a.seconds_per_epoch = 0.01;
  a.peak_gflops = 400;
  a.peak_fraction = 0.005;
  a.roofline_step_ms = 0.5;
  a.roofline_error_percent = -50;
  a.roofline_bound = "overhead";
  a.phases = StepPhases{0.01, 0.4, 0.5, 0.1};
  a.layer_times = {{"0 linear+relu", 0.2, 0.3, 1e6, 5e4, 2, 0.005, "overhead"}};
  a.loop_phases = {0.01, 0.8, 0.1};
  return r;
}

Report document() {
  Report d;
  d.kind = "sweep";
  d.title = "crossover sweep";
  d.created = "2026-11-23T10:00:00Z";
  d.complete = false;
  MachineInfo m;
  m.cpu = "Test CPU";
  m.logical_cpus = 2;
  m.libraries = {{"fmt", "9.1.0"}, {"oneDNN", "2.6.3"}};
  m.nvidia_driver = "n/a";
  m.devices = {"cpu"};
  d.machine = m;
  Manifest manifest;
  manifest.build = {"0.1.1", "8ded193-dirty", "Release", "GNU 12.2.0", "-O3", true, "90-real"};
  manifest.libraries = {{"oneDNN", "2.6.3"}, {"fmt", "9.1.0"}};
  manifest.device_libraries = {{"cpu", "oneDNN 2.6.3 (OpenMP)"}, {"cuda:0", "cuDNN 9.1.0"}};
  manifest.command_line = "crossover sweep --epochs 2 --out 'my results'";
  manifest.settings = {{"cpu", "cuda:0"}, 2, 0, 1, 10, "tf32", false};
  d.manifest = manifest;
  DevicePeaks p;
  p.device = "cpu";
  p.name = "Test CPU";
  p.matmul_gflops = 400;
  p.bandwidth_gbs = 20;
  d.peaks = {p};
  d.runs = {measured_run("disc-2", "cpu"), measured_run("disc-2", "cuda:0")};
  d.sweep = SweepRecord{
      "depth",
      "params",
      {{"cpu", false, "", {{2, 1234, 1.5}}}, {"t4 (predicted, lower bound)", true, "why", {}}},
      {{"cuda:0", "cpu", 5, 7e5, 4, 6}}};
  // A sweep along ranks has its scaling table (one rank has no communication).
  d.sweep->scaling = {{1, 2.0, 5e4}, {2, 1.25, 8e4, 0.5, 4096, 0.0082, 0.8}};
  DevicePrediction pr;
  pr.model = "disc-2";
  pr.device = "h100";
  pr.name = "H100";
  pr.kind = DeviceKind::Gpu;
  pr.step = {0.001, 0.0005, 0.0002, 0.0003, "FLOPs", {}};
  pr.measured_s = 0.002;
  pr.measured_epoch_s = 0.025;
  pr.assumptions = {"f32"};
  pr.profile = "amd-epyc-2t";
  pr.expected_error = 0.26;
  d.predictions = {pr};
  ValidationRow v;
  v.device = "h100-sxm-gpu-check";
  v.name = "NVIDIA H100 80GB HBM3";
  v.from = "amd-epyc-2t";
  v.how = "from amd-epyc-2t's profile, scaled";
  v.entries = {{"disc-2", 0.046, 0.030}, {"disc-3", 0.055, 0.041}};
  v.median_abs = 0.4;
  v.worst_abs = 0.53;
  ValidationRow unmeasured;
  unmeasured.device = "h100-sxm-gpu-check";
  unmeasured.from = unmeasured.device;
  unmeasured.own = true;
  unmeasured.how = "own profile";
  unmeasured.unmeasured = "no kernel profile";
  d.validation = {v, unmeasured};
  CostTable c;
  c.model = "disc-2";
  c.epochs = 100;
  c.steps_per_epoch = 10;
  c.hours_per_month = 100;
  c.catalog = {"data/catalog.toml"};
  c.local = {{"cpu", "Test CPU", 0.5}};
  c.instances = {
      {"aws-x", "AWS", "x", "h100", 1, "us", 3.0, 0.1, 0.3, std::nullopt, true, "s", "d"}};
  c.ownership = {{"h100", "H100", 30000, 0.1, 0.25, 2.2, 0.1, true, "s", "d"}};
  c.break_even = {{"h100", "H100", "aws-x", true, 3.0, 400.0, std::nullopt, 100}};
  d.cost = c;
  d.verdict = GpuVerdict{"disc-2",
                         100,
                         "cpu",
                         2.5,
                         false,
                         GpuOption{"rent", "aws-x", "AWS x (h100)", "h100", 0.36, 0.3, true, true},
                         false,
                         "A GPU is not worth it for this run: …",
                         "cpu is faster …",
                         "other processes kept 1.0 cores busy",
                         16,
                         "A GPU is not worth it for this run: one trial …"};
  d.advice = std::vector<std::string>{"Fastest here: cpu."};
  return d;
}

TEST(ReportJson, WrittenAndReadBackStrictlyIsTheSameDocument) {
  const json written = to_json(document());
  const Report read = read_report(json::parse(written.dump()), "results.json");
  EXPECT_EQ(to_json(read), written);
  ASSERT_EQ(read.runs.size(), 2u);
  EXPECT_EQ(read.runs[1].run.result.device.kind, DeviceKind::Gpu);
  EXPECT_EQ(written["runs"][1]["device_info"]["kind"], "gpu");
  EXPECT_TRUE(std::isnan(read.runs[0].run.result.final_test_accuracy));  // null: no test set
  EXPECT_FALSE(read.complete);
  ASSERT_EQ(read.sweep->scaling.size(), 2u);
  EXPECT_TRUE(std::isnan(read.sweep->scaling[0].communicate_ms));
  EXPECT_EQ(written["sweep"]["scaling"][0]["communicate_ms"], nullptr);
  EXPECT_EQ(read.sweep->scaling[1].reduced_bytes, 4096);
  // A sweep along another axis has none, and files from before it read without one.
  json depth = written;
  depth["sweep"].erase("scaling");
  EXPECT_TRUE(read_report(depth, "r.json").sweep->scaling.empty());
  json bad = written;
  bad["sweep"]["scaling"][1].erase("ranks");
  testing::expect_user_error([&] { read_report(bad, "bad.json"); },
                             {"bad.json", "ranks", "missing"});
}

// `crossover train --json`'s document: the result with the machine and the other processes' load
// beside it, written and read back through one field list.
TEST(ReportJson, TheTrainDocumentIsReadBackWithItsMachine) {
  TrainDocument doc;
  doc.result = document().runs[0].run.result;
  doc.machine = *document().machine;
  doc.mean_other_cores = 0.5;
  doc.timings_contaminated = true;
  const json written = to_json(doc);
  EXPECT_EQ(written["schema"], "crossover.train/2");
  EXPECT_EQ(written["machine"]["cpu"], "Test CPU");
  const TrainDocument read = read_train_document(written.dump(), "train.json");
  EXPECT_EQ(to_json(read), written);
  EXPECT_EQ(read.mean_other_cores, 0.5);
  EXPECT_TRUE(read.timings_contaminated);
  EXPECT_EQ(to_json(read_train_result(written.dump(), "train.json")), to_json(doc.result));
  json bad = written;
  bad["machine"].erase("os");
  testing::expect_user_error([&] { read_train_document(bad.dump(), "bad.json"); },
                             {"bad.json", "machine", "os", "missing"});
}

// Each epoch's learning rate and early stopping's outcome are read back; files written before
// either existed (no "lr", no "early_stopping") still read, with no rate and no early stopping.
TEST(ReportJson, TheRatePerEpochAndEarlyStoppingAreReadBack) {
  Report report = document();
  TrainResult& t = report.runs[0].run.result;
  t.epochs[0].lr = 0.1;
  t.epochs[1].lr = 0.05;
  t.early_stopping_monitor = "test_loss";
  t.early_stopping_patience = 3;
  t.early_stopping_min_delta = 0.001;
  t.stopped_early = true;
  t.best_epoch = 1;
  t.best_value = 0.3121;
  t.restored_best = true;
  const json written = to_json(report);
  EXPECT_EQ(written["runs"][0]["epoch_log"][1]["lr"], 0.05);
  EXPECT_EQ(written["runs"][0]["early_stopping"]["best_epoch"], 1);
  EXPECT_TRUE(written["runs"][1]["early_stopping"].is_null());
  const Report read = read_report(json::parse(written.dump()), "results.json");
  EXPECT_EQ(to_json(read), written);
  const TrainResult& back = read.runs[0].run.result;
  EXPECT_EQ(back.epochs[1].lr, 0.05);
  EXPECT_EQ(back.early_stopping_monitor, "test_loss");
  EXPECT_EQ(back.early_stopping_patience, 3);
  EXPECT_EQ(back.early_stopping_min_delta, 0.001);
  EXPECT_TRUE(back.stopped_early);
  EXPECT_EQ(back.best_epoch, 1);
  EXPECT_EQ(back.best_value, 0.3121);
  EXPECT_TRUE(back.restored_best);

  json older = written;
  for (json& run : older["runs"]) {
    run.erase("early_stopping");
    for (json& e : run["epoch_log"]) e.erase("lr");
  }
  const Report old = read_report(older, "old.json");
  EXPECT_TRUE(std::isnan(old.runs[0].run.result.epochs[0].lr));
  EXPECT_TRUE(old.runs[0].run.result.early_stopping_monitor.empty());
  EXPECT_FALSE(old.runs[0].run.result.stopped_early);
}

TEST(ReportJson, EveryFieldIsRequiredAndTheErrorNamesFileRunAndField) {
  const json written = to_json(document());
  for (const char* field : {"median_step_ms", "spec_toml", "step_flops", "epoch_log", "layers",
                            "utilisation", "loop_phases_ms"}) {
    json cut = written;
    cut["runs"][1].erase(field);
    testing::expect_user_error([&] { read_report(cut, "cut.json"); },
                               {"cut.json", "run 'disc-2' on cuda:0", field, "missing"});
  }
  json cut = written;
  cut.erase("complete");
  testing::expect_user_error([&] { read_report(cut, "cut.json"); },
                             {"cut.json", "complete", "missing"});
  json wrong = written;
  wrong["runs"][0]["params"] = "many";
  testing::expect_user_error(
      [&] { read_report(wrong, "w.json"); },
      {"w.json", "run 'disc-2' on cpu", "params", "expected an integer", "found a string"});
  wrong = written;
  wrong["cost"]["instances"][0]["run_hours"] = true;
  testing::expect_user_error([&] { read_report(wrong, "w.json"); },
                             {"w.json", "cost.instances[0]", "run_hours", "found a boolean"});
  wrong = written;
  wrong["validation"][0]["entries"][1]["measured_ms"] = "soon";
  testing::expect_user_error([&] { read_report(wrong, "w.json"); },
                             {"w.json", "validation[0]", "measured_ms", "found a string"});
  wrong = written;
  wrong["predictions"][0]["expected_error"] = "small";
  testing::expect_user_error([&] { read_report(wrong, "w.json"); },
                             {"predictions[0]", "expected_error"});
  wrong = written;
  wrong["predictions"][0]["kind"] = "tpu";
  testing::expect_user_error([&] { read_report(wrong, "w.json"); },
                             {"predictions[0]", "kind", "\"cpu\" or \"gpu\""});
  testing::expect_user_error(
      [&] {
        read_report(json{{"schema", "x/1"}}, "x.json");
      },
      {"x.json", "not a crossover results.json"});
}

TEST(ReportJson, TheManifestIsReadBackWholeAndEveryFieldOfItIsRequired) {
  const json written = to_json(document());
  const Report read = read_report(json::parse(written.dump()), "results.json");
  ASSERT_TRUE(read.manifest.has_value());
  const Manifest& m = *read.manifest;
  EXPECT_EQ(m.build.commit, "8ded193-dirty");
  EXPECT_TRUE(m.build.cuda);
  EXPECT_EQ(m.build.cuda_architectures, "90-real");
  EXPECT_EQ(m.command_line, "crossover sweep --epochs 2 --out 'my results'");
  EXPECT_EQ(m.settings.epochs, 2);
  EXPECT_EQ(m.settings.threads, 1);
  EXPECT_EQ(m.settings.precision, "tf32");
  EXPECT_FALSE(m.settings.record_step);
  EXPECT_EQ(m.settings.devices, (std::vector<std::string>{"cpu", "cuda:0"}));
  ASSERT_EQ(m.device_libraries.size(), 2u);
  EXPECT_EQ(read.runs[1].run.params_hash, "00000000ffffffff");
  EXPECT_EQ(read.runs[0].run.data_hash, "0123456789abcdef");
  // No epochs override: null, read back as none.
  json no_override = written;
  no_override["manifest"]["settings"]["epochs"] = nullptr;
  EXPECT_FALSE(read_report(no_override, "r.json").manifest->settings.epochs.has_value());
  for (const char* field : {"commit", "build", "libraries", "command_line", "settings"}) {
    json cut = written;
    cut["manifest"].erase(field);
    testing::expect_user_error([&] { read_report(cut, "cut.json"); },
                               {"cut.json", "manifest", field, "missing"});
  }
  json cut = written;
  cut["manifest"]["settings"].erase("threads");
  testing::expect_user_error([&] { read_report(cut, "cut.json"); },
                             {"cut.json", "manifest.settings", "threads", "missing"});
  cut = written;
  cut["manifest"]["build"]["cuda"] = "yes";
  testing::expect_user_error([&] { read_report(cut, "cut.json"); },
                             {"manifest.build", "cuda", "expected true or false"});
  cut = written;
  cut["manifest"] = nullptr;
  testing::expect_user_error([&] { read_report(cut, "cut.json"); },
                             {"cut.json", "manifest", "expected an object"});
  // With a manifest, every run has its hashes.
  for (const char* field : {"data_hash", "params_hash"}) {
    cut = written;
    cut["runs"][0].erase(field);
    testing::expect_user_error([&] { read_report(cut, "cut.json"); },
                               {"cut.json", "run 'disc-2' on cpu", field, "missing"});
  }
}

TEST(ReportJson, FilesWrittenBeforeTheManifestStillReadStrictly) {
  // crossover 0.1.0 wrote no manifest and no hashes: `cost` and the page still read such files,
  // only `replay` needs what they lack.
  json old = to_json(document());
  old.erase("manifest");
  for (json& run : old["runs"]) {
    run.erase("data_hash");
    run.erase("params_hash");
  }
  const Report read = read_report(old, "old.json");
  EXPECT_FALSE(read.manifest.has_value());
  ASSERT_EQ(read.runs.size(), 2u);
  EXPECT_TRUE(read.runs[0].run.params_hash.empty());
  EXPECT_EQ(read.runs[0].run.result.model, "disc-2");
}

TEST(ReportJson, SchemaOneFilesReadWithTheirNamesAndTheirLossSummedOverBatches) {
  // crossover.report/1 named percentages without `_percent`, the cost's utilisation without
  // `_fraction`, and summed the training loss over an epoch's batches: read as schema 2 means.
  const json now = to_json(document());
  json old = now;
  old["schema"] = "crossover.report/1";
  auto rename = [](json& j, const char* from, const char* to) {
    if (!j.contains(from)) return;
    j[to] = j[from];
    j.erase(from);
  };
  for (json& run : old["runs"]) {
    const double steps = run["steps_per_epoch"].get<double>();
    for (json& e : run["epoch_log"]) {
      e["loss"] = e["loss"].get<double>() * steps;
      rename(e, "train_error_percent", "train_error");
      rename(e, "test_accuracy_percent", "test_accuracy");
    }
    run["final_loss"] = run["final_loss"].get<double>() * steps;
    rename(run, "final_train_error_percent", "final_train_error");
    rename(run, "final_test_accuracy_percent", "final_test_accuracy");
    rename(run, "majority_class_error_percent", "majority_class_error");
  }
  rename(old["cost"]["assumptions"], "utilisation_fraction", "utilisation");
  // What schema 2 added is absent from schema 1 files, and read as nothing.
  json expected = now;
  old.erase("verdict");
  expected.erase("verdict");
  for (auto* doc : {&old, &expected}) {
    for (json& line : (*doc)["sweep"]["series"]) line["note"] = "";
    for (json& p : (*doc)["predictions"]) {
      p["measured_epoch_s"] = nullptr;
      p["lower_bound"] = false;
    }
  }
  for (json& line : old["sweep"]["series"]) line.erase("note");
  for (json& p : old["predictions"]) {
    p.erase("measured_epoch_s");
    p.erase("lower_bound");
  }
  const Report read = read_report(old, "old.json");
  EXPECT_EQ(to_json(read), expected);
  EXPECT_DOUBLE_EQ(read.runs[0].run.result.epochs[1].loss, 4.25);
  EXPECT_DOUBLE_EQ(read.runs[0].run.result.final_train_error, 20);
  // Schema 1's names are not schema 2's: a current file with an old name is missing a field.
  json mixed = now;
  mixed["runs"][0]["final_train_error"] = 20;
  mixed["runs"][0].erase("final_train_error_percent");
  EXPECT_THROW(read_report(mixed, "mixed.json"), UserError);
}

TEST(ReportJson, ResultsWrittenBeforeSayCudaForAGpu) {
  json old = to_json(document());
  old["runs"][1]["device_info"]["kind"] = "cuda";
  EXPECT_EQ(read_report(old, "old.json").runs[1].run.result.device.kind, DeviceKind::Gpu);
}

TEST(ReportJson, LenientReadingOfAnythingNeverThrows) {
  json mangled = to_json(document());
  mangled["runs"][0]["step_ms"] = "fast";
  mangled["runs"][1] = 5;
  mangled["cost"]["instances"] = json::object();
  mangled["sweep"]["series"][0]["points"] = {{{"params", "many"}}};
  mangled["manifest"]["settings"] = 5;
  mangled["manifest"]["libraries"] = {{"oneDNN", 2}};
  for (const json& doc : {mangled, json(), json(42), json::array(), json{{"runs", "x"}}}) {
    EXPECT_NO_THROW(read_report(doc, "any.json", ReadMode::Lenient)) << doc.dump();
  }
  const Report r = read_report(mangled, "m.json", ReadMode::Lenient);
  ASSERT_EQ(r.runs.size(), 1u);  // the run that is not an object is left out
  EXPECT_EQ(r.runs[0].run.result.model, "disc-2");
  ASSERT_TRUE(r.manifest.has_value());  // what is left of it
  EXPECT_EQ(r.manifest->build.commit, "8ded193-dirty");
}

// `crossover allreduce --json`: the link and each size in the file's units, read back into the
// record; the rates and errors derived for the file's readers are written, not read.
TEST(ReportJson, TheAllreduceDocumentIsWrittenAndReadBackThroughOneList) {
  AllreduceDocument doc;
  doc.created = "2026-11-26T21:00:00Z";
  doc.machine.cpu = "Test CPU";
  AllreduceRecord& r = doc.record;
  r.ranks = 2;
  r.local_ranks = 2;
  r.repeat = 20;
  r.link.name = "shared memory (one machine, measured)";
  r.link.latency_s = 2.5e-6;
  r.link.samples = {{4096, 4e9, 1e-10}, {65536, 8e9, 2e-10}};
  r.sizes = {{8192, 4e-6, 5e-6}, {131072, 2e-5, 1.8e-5}};
  r.median_abs_error = 0.15;
  r.worst_abs_error = 0.25;
  const json written = to_json(doc);
  EXPECT_EQ(written["schema"], "crossover.allreduce/1");
  EXPECT_DOUBLE_EQ(written["link"]["latency_us"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(written["link_by_size"][1]["message_bytes"].get<double>(), 131072);
  EXPECT_DOUBLE_EQ(written["sizes"][0]["measured_ms"].get<double>(), 4e-3);
  EXPECT_DOUBLE_EQ(written["sizes"][0]["error"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(written["sizes"][0]["algbw_gbs"].get<double>(), 8192 / 4e-6 / 1e9);
  const AllreduceDocument read = read_allreduce_document(written.dump(), "ar.json");
  EXPECT_EQ(read.record.sizes.size(), 2u);
  EXPECT_DOUBLE_EQ(read.record.sizes[1].predicted_s, 1.8e-5);
  EXPECT_DOUBLE_EQ(read.record.link.samples[0].bytes_per_s, 4e9);
  EXPECT_DOUBLE_EQ(read.record.link.bytes_per_s, 8e9);  // the largest sample's
  EXPECT_EQ(read.machine.cpu, "Test CPU");
  EXPECT_EQ(to_json(read).dump(), written.dump());
  json bad = written;
  bad["sizes"][1].erase("measured_ms");
  testing::expect_user_error([&] { read_allreduce_document(bad.dump(), "bad.json"); },
                             {"bad.json", "measured_ms", "missing"});
  testing::expect_user_error([&] { read_allreduce_document("{}", "x.json"); },
                             {"x.json", "not a crossover allreduce --json file"});
}

}  // namespace
}  // namespace xo
