#!/usr/bin/python3
"""Tests of scripts/gpu_report.py, the GPU check's report: work folders of the shape scripts/gpu-check
leaves (figures trimmed from the H100 run in bench/results/2026-11-23-gpu-check.*), the report
written by running the script, then read back by parsing its Markdown tables and lines.

    /usr/bin/python3 tests/scripts/test_gpu_report.py
"""
import copy
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "gpu_report.py")

CPU_PEAK, GPU_PEAK = 1107.3, 50925.3

# model: (params, CPU ms, GPU graph ms, GPU no-graph ms, GPU tf32 ms, GPU bf16 ms, GPU GFLOP/s,
#         CPU GFLOP/s, CPU final loss, GPU final loss, PyTorch eager ms, PyTorch graph ms)
DISC = {
    "disc-2": (22, 0.006648, 0.030464, 0.037696, 0.03024, 0.030368, 0.2626, 1.2, 0.30735093734286445,
               0.3073509264615243, 1.1209017562866213, 0.05380415916442871),
    "disc-8": (44710, 0.213854, 0.118272, 0.138432, 0.118048, 0.118144, 224.2, 124.0,
               0.17395196941012023, 0.17146409743039215, 2.282943344116211, 0.24346240043640135),
    "disc-12": (11201190, 10.236995, 0.472064, 0.53216, 0.327712, 0.327392, 14226.5, 656.0,
                3.772919626384973, 3.7729219120740893, 2.9191494750976563, 0.6989459228515624),
}
# model: (params, CPU ms, GPU graph ms, PyTorch eager ms, PyTorch graph ms)
CLASSIC = {
    "mnist-mlp": (669706, 1.180121, 0.099552, 1.483294677734375, 0.2178700828552246),
    "mnist-cnn": (1199882, 16.146005, 0.786336, 2.134701461791992, 0.90399169921875),
    "imdb-lstm": (2692225, 24.3215085, 0.756944, 2.839473876953125, 0.7538380813598633),
}

STEPS = [
    ("gpu", "ok", "0", "0", "nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,"
                            "compute_cap --format=csv,noheader"),
    ("deps", "ok", "0", "1", "dpkg -x .gpu-deps/*.deb .gpu-deps/root (unless Debian's libdnnl-dev "
                             "is installed)"),
    ("configure", "ok", "0", "7", "cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release "
                                  "-DCROSSOVER_CUDA=ON"),
    ("build", "ok", "0", "47", "cmake --build build-gpu --parallel 16"),
    ("tests", "ok", "0", "4", "build-gpu/tests/crossover_tests --gtest_filter=\\*Gpu\\*:\\*Cuda\\*:Ops/\\*"),
    ("devices", "ok", "0", "3", "build-gpu/crossover devices --reprobe"),
    ("sweep", "ok", "0", "19", "build-gpu/crossover run --out bench/out/gpu-check-work/run-graph "
                               "--devices cpu,cuda"),
    ("torch", "ok", "0", "36", "python3 bench/gpu_vs_torch.py --out bench/out/gpu-check-work/torch.json"),
    ("classic", "ok", "0", "49", "build-gpu/crossover run --out bench/out/gpu-check-work/run-classic "
                                 "--devices cpu,cuda --models mnist-mlp,mnist-cnn,imdb-lstm --epochs 1"),
    ("nograph", "ok", "0", "3", "build-gpu/crossover run --out bench/out/gpu-check-work/run-nograph "
                                "--devices cuda --no-graph"),
    ("tf32", "ok", "0", "2", "build-gpu/crossover run --out bench/out/gpu-check-work/run-tf32 "
                             "--devices cuda --precision tf32"),
    ("bf16", "ok", "0", "3", "build-gpu/crossover run --out bench/out/gpu-check-work/run-bf16 "
                             "--devices cuda --precision bf16"),
]

META = [("date", "2026-11-23"), ("quick", "0"), ("commit", "de8082d"),
        ("cpu", "Intel(R) Xeon(R) Processor"), ("cores", "16"), ("os", "Ubuntu 24.04.3 LTS, glibc 2.39"),
        ("deps", "the system's (libdnnl-dev 2.6.3)"),
        ("note", "Fashion-MNIST: read from $CROSSOVER_FASHION_MNIST_DIR."),
        ("nvcc", "Cuda compilation tools, release 13.0, V13.0.88"),
        ("configure", "cmake -S . -B build-gpu -G Ninja -DCROSSOVER_CUDA=ON"),
        ("cmake_summary", "crossover 0.1.0: Release, oneDNN 2.6.3, cuda=ON 13.0.88 (90)"),
        ("cuda_architectures", "90"), ("disc_length", "100 epochs, as the specs say"),
        ("note", "Fashion-MNIST: read from $CROSSOVER_FASHION_MNIST_DIR."),
        ("classic_length", "--epochs 1")]

DEVICES_LOG = """\
cpu: Intel(R) Xeon(R) Processor
  threads: 16
  library: oneDNN 2.6.3 (OpenMP)
  cores: 16
  measured peak: 1107.3 GFLOP/s f32 matmul (2048^3), 132.9 GB/s memory, fixed costs 0.00 us per step + 3.24 us per layer (probed 2026-11-23T07:40:25Z)
cuda:0: NVIDIA H100 80GB HBM3
  memory: 79.2 GiB
  library: cuBLASLt 13.1.0, cuDNN 9.14.0, CUDA runtime 13.0
  measured peak: 50925.3 GFLOP/s f32 matmul (8192^3), 2714.0 GB/s memory, fixed costs 20.16 us per step + 9.51 us per layer (probed 2026-11-23T07:40:27Z)
NVML: driver 580.159.04, 1 GPU(s)
"""

MACHINE = {"cpu": "Intel(R) Xeon(R) Processor", "cpu_cores": 16, "memory_gib": 125.8,
           "compiler": "GNU 13.3.0", "libraries": {"oneDNN": "2.6.3"}}
PEAKS = [{"device": "cpu", "matmul_gflops": CPU_PEAK, "bandwidth_gbs": 132.9, "cached": True,
          "probed": "2026-11-23T07:40:25Z"},
         {"device": "cuda:0", "matmul_gflops": GPU_PEAK, "bandwidth_gbs": 2714.0, "cached": True,
          "probed": "2026-11-23T07:40:27Z"}]


def run(model, device, params, ms, gflops=None, final_loss=None, graph=None, precision="f32"):
    """One entry of results.json's runs, with the fields the report reads."""
    kind = device.split(":")[0]
    peak = CPU_PEAK if kind == "cpu" else GPU_PEAK
    return {"model": model, "params": params, "device": device,
            "device_info": {"kind": kind, "precision": precision}, "precision": precision,
            "recorded_step": kind == "cuda" if graph is None else graph, "epochs": 100,
            "final_loss": final_loss, "median_step_ms": ms, "gflops": gflops,
            "peak_fraction": gflops / peak if gflops is not None else None}


def results_docs():
    """{work folder: results.json} for the five runs of an all-ok check."""
    graph, nograph, tf32, bf16 = [], [], [], []
    for m, (p, cpu, g, ng, tf, bf, ggf, cgf, cl, gl, _, _) in DISC.items():
        graph += [run(m, "cpu", p, cpu, cgf, cl), run(m, "cuda:0", p, g, ggf, gl)]
        nograph.append(run(m, "cuda:0", p, ng, graph=False))
        tf32.append(run(m, "cuda:0", p, tf, precision="tf32"))
        bf16.append(run(m, "cuda:0", p, bf, precision="bf16"))
    classic = []
    for m, (p, cpu, g, _, _) in CLASSIC.items():
        classic += [run(m, "cpu", p, cpu), run(m, "cuda:0", p, g)]
    sweep = {"crossovers": [{"faster": "cuda:0", "slower": "cpu", "params": 13147.001604305446,
                             "axis_value": 7.1, "between": [7, 8]}],
             "series": []}
    doc = lambda runs, **extra: {"schema": "crossover.report/2", "machine": MACHINE,  # noqa: E731
                                 "peaks": PEAKS, "runs": runs, **extra}
    return {"run-graph": doc(graph, sweep=sweep), "run-nograph": doc(nograph),
            "run-tf32": doc(tf32), "run-bf16": doc(bf16), "run-classic": doc(classic)}


def timing(ms):
    return {"median_step_ms": ms, "min_step_ms": ms, "max_step_ms": ms, "cv": 0.01, "blocks": 20,
            "steps_per_block": 25, "warmup_steps": 20}


def torch_doc():
    models = {m: {"params": v[0], "eager": timing(v[-2]), "graph": timing(v[-1])}
              for m, v in list(DISC.items()) + list(CLASSIC.items())}
    return {"schema": "crossover.bench.gpu_vs_torch/1", "torch": "2.11.0+cu130", "torch_cuda": "13.0",
            "device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "cudnn": 91900,
            "settings": {"matmul.allow_tf32": False, "cudnn.allow_tf32": False},
            "timing": {"warmup_steps": 20, "blocks": 20, "steps_per_block": 25,
                       "method": "median over blocks of (block time / steps)"},
            "models": models}


def gtest_doc(failed=()):
    """60 GPU tests, one skipped; the names in `failed` fail."""
    tests = [{"name": f"Case{i}", "result": "COMPLETED"} for i in range(59)]
    tests.append({"name": "NeedsTwoGpus", "result": "SKIPPED"})
    for name in failed:
        tests.append({"name": name, "result": "COMPLETED",
                      "failures": [{"failure": "test_cuda.cpp:42\nExpected equality of these values:"
                                               "\n  cpu_loss\n  gpu_loss"}]})
    return {"tests": len(tests), "disabled": 0, "testsuites": [{"name": "CudaBackend",
                                                                "testsuite": tests}]}


class Work:
    """A work folder as scripts/gpu-check leaves it; every part can be changed before writing."""

    def __init__(self):
        self.steps = list(STEPS)
        self.meta = list(META)
        self.gpu_csv = "NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB, 9.0\n"
        self.results = results_docs()
        self.torch = torch_doc()
        self.gtest = gtest_doc()
        self.logs = {"devices": DEVICES_LOG, "tests": "[==========] 60 tests ran.\n"}

    def write(self, folder):
        def put(name, text):
            path = os.path.join(folder, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)

        put("steps.tsv", "".join("\t".join(s) + "\n" for s in self.steps))
        put("meta.tsv", "".join(f"{k}\t{v}\n" for k, v in self.meta))
        if self.gpu_csv is not None:
            put("gpu.csv", self.gpu_csv)
        for run_folder, doc in self.results.items():
            put(os.path.join(run_folder, "results.json"), json.dumps(doc))
        if self.torch is not None:
            put("torch.json", json.dumps(self.torch))
        if self.gtest is not None:
            put("gtest.json", json.dumps(self.gtest))
        for name, text in self.logs.items():
            put(os.path.join("logs", f"{name}.log"), text)


def compose(work):
    """Runs the script on `work`; (exit status, the report, the --out folder's files by name)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = os.path.join(tmp, "work"), os.path.join(tmp, "out")
        work.write(folder)
        report = os.path.join(tmp, "results", "2026-11-23-gpu-check.md")
        proc = subprocess.run([sys.executable, SCRIPT, folder, report, out], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            return proc.returncode, proc.stderr, {}
        with open(report) as f:
            text = f.read()
        files = {}
        for name in sorted(os.listdir(out)):
            path = os.path.join(out, name)
            if name.endswith(".tar.gz"):
                with tarfile.open(path) as tar:
                    files[name] = sorted(tar.getnames())
            else:
                with open(path) as f:
                    files[name] = f.read()
        return proc.returncode, text, files


# -- reading the Markdown back ---------------------------------------------------------------------

def sections(text):
    """{heading (without #): its lines} for each heading of the report; "" holds the lines above the
    first ## heading."""
    out, current = {"": []}, ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:]
            out[current] = []
        else:
            out[current].append(line)
    return out


def cells(line):
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [p.strip().replace("\\|", "|") for p in parts[1:-1]]


def table(lines):
    """The first Markdown table in `lines`: a list of {column: cell}; checks the separator row and
    that every row has the header's number of cells."""
    start = next(i for i, l in enumerate(lines) if l.startswith("|"))
    header = cells(lines[start])
    separator = cells(lines[start + 1])
    assert len(separator) == len(header) and all(re.fullmatch(r"-+:?|:?-+", c) for c in separator), \
        lines[start + 1]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        row = cells(line)
        assert len(row) == len(header), f"{len(row)} cells, {len(header)} columns: {line}"
        rows.append(dict(zip(header, row)))
    return rows


def by_first_column(rows):
    return {next(iter(r.values())): r for r in rows}


def bullets(lines):
    return [l[2:] for l in lines if l.startswith("- ")]


def find_section(secs, prefix):
    return next(v for k, v in secs.items() if k.startswith(prefix))


class AllStepsOk(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rc, cls.text, cls.files = compose(Work())
        cls.secs = sections(cls.text)

    def test_the_script_succeeds_and_heads_the_report(self):
        self.assertEqual(self.rc, 0, self.text)
        top = self.secs[""]
        self.assertEqual(top[0], "# crossover GPU check, 2026-11-23")
        self.assertIn("**All steps ok.**", top)

    def test_machine(self):
        # A two-column table with empty headers: read as {first cell: second cell}.
        lines = self.secs["Machine"]
        rows = dict(cells(l) for l in lines if l.startswith("| ") and not l.startswith("| |"))
        self.assertEqual(rows["GPU"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(rows["GPU memory"], "81559 MiB")
        self.assertEqual(rows["compute capability"], "9.0")
        self.assertEqual(rows["NVIDIA driver"], "580.159.04")
        self.assertEqual(rows["CUDA runtime, cuBLASLt, cuDNN (crossover devices)"],
                         "cuBLASLt 13.1.0, cuDNN 9.14.0, CUDA runtime 13.0")
        self.assertEqual(rows["cores"], "16 logical CPUs, 16 cores per socket")
        self.assertEqual(rows["memory"], "126 GiB")
        self.assertEqual(rows["compiler, oneDNN"], "GNU 13.3.0, oneDNN 2.6.3")
        self.assertEqual(rows["PyTorch"], "2.11.0+cu130 (CUDA 13.0, cuDNN 91900) on NVIDIA H100 80GB HBM3")
        self.assertEqual(rows["commit"], "de8082d")

    def test_commands_table_lists_every_step_in_order(self):
        rows = table(self.secs["Commands"])
        self.assertEqual([r["step"] for r in rows], [s[0] for s in STEPS])
        self.assertTrue(all(r["status"] == "ok" for r in rows))
        self.assertEqual(rows[3]["seconds"], "47")
        self.assertEqual(rows[3]["command"], "`cmake --build build-gpu --parallel 16`")
        # A repeated note is printed once.
        self.assertEqual(bullets(self.secs["Commands"]),
                         ["Fashion-MNIST: read from $CROSSOVER_FASHION_MNIST_DIR."])

    def test_gpu_tests_count(self):
        self.assertIn("`--gtest_filter='*Gpu*:*Cuda*:Ops/*'`: **60 tests: 59 passed, 0 failed, "
                      "1 skipped** (disabled: 0).", self.secs["GPU tests"])
        self.assertNotIn("Failures:", self.secs["GPU tests"])

    def test_peaks(self):
        lines = bullets(find_section(self.secs, "Measured peaks"))
        self.assertTrue(lines[0].startswith("cpu (Intel(R) Xeon(R) Processor): 1107.3 GFLOP/s"))
        self.assertTrue(lines[1].startswith("cuda:0 (NVIDIA H100 80GB HBM3): 50925.3 GFLOP/s"))
        self.assertIn("NVML: driver 580.159.04, 1 GPU(s)", lines)
        self.assertIn("the sweep's results.json: cuda:0: 50925.3 GFLOP/s f32 matmul, 2714.0 GB/s "
                      "(cached 2026-11-23T07:40:27Z)", lines)

    def test_disc_times(self):
        heading = "disc sweep: median ms per training step (100 epochs, as the specs say)"
        rows = by_first_column(table(self.secs[heading]))
        self.assertEqual(list(rows), [f"disc-{l}" for l in range(2, 13)])
        d2 = rows["disc-2"]
        self.assertEqual((d2["params"], d2["crossover CPU"], d2["crossover GPU (graph)"],
                          d2["GPU no graph"], d2["GPU tf32"], d2["GPU bf16"], d2["PyTorch eager"],
                          d2["PyTorch CUDA Graph"]),
                         ("22", "0.0066", "0.0305", "0.0377", "0.0302", "0.0304", "1.121", "0.0538"))
        self.assertEqual(d2["PyTorch eager / crossover graph"], "36.8x ✓")
        self.assertEqual(d2["PyTorch graph / crossover graph"], "1.77x")
        self.assertEqual(rows["disc-12"]["crossover CPU"], "10.237")
        self.assertEqual(rows["disc-12"]["PyTorch eager / crossover graph"], "6.18x ✓")
        # disc-9 ... disc-11 have no target; disc-3 is missing from every file.
        self.assertEqual(rows["disc-3"]["crossover CPU"], "n/a (no cpu run of disc-3 in results.json)")
        self.assertEqual(rows["disc-3"]["PyTorch eager"], "n/a (disc-3 not timed)")
        self.assertEqual(rows["disc-3"]["PyTorch eager / crossover graph"],
                         "n/a (a time is missing)")
        self.assertEqual(rows["disc-10"]["params"], "n/a")

    def test_disc_peak_fraction_and_losses(self):
        rows = by_first_column(table(find_section(self.secs, "disc sweep: fraction")))
        d12 = rows["disc-12"]
        self.assertEqual(d12["GPU GFLOP/s"], "14226.5")
        self.assertEqual(d12["% of cuBLASLt f32 peak"], "27.9% ✗ (target ≥50%)")
        self.assertEqual(d12["CPU % of its peak"], "59.2%")
        self.assertEqual((d12["CPU final loss"], d12["GPU final loss"]), ("3.77292", "3.77292"))
        self.assertEqual(d12["relative difference"], "6.06e-07")
        self.assertEqual(rows["disc-8"]["relative difference"], "1.43e-02")
        self.assertEqual(rows["disc-2"]["% of cuBLASLt f32 peak"], "0.0%")

    def test_crossover_point(self):
        lines = bullets(self.secs["Where the GPU starts to beat the CPU"])
        self.assertEqual(lines[0], "crossover (measured here): the GPU (cuda:0) is faster than the CPU "
                                   "from **13,147 parameters** (depth 7.10, between disc-7 and disc-8)")

    def test_classic(self):
        rows = by_first_column(table(find_section(self.secs, "Classic networks")))
        self.assertEqual(list(rows), ["mnist-mlp", "mnist-cnn", "imdb-lstm"])
        mlp = rows["mnist-mlp"]
        self.assertEqual((mlp["params"], mlp["crossover CPU"], mlp["crossover GPU (graph)"],
                          mlp["GPU / CPU speed-up"], mlp["PyTorch eager (GPU)"],
                          mlp["PyTorch eager / crossover GPU"]),
                         ("669706", "1.180", "0.0996", "11.9x", "1.483", "14.9x ✓"))
        self.assertEqual(rows["imdb-lstm"]["PyTorch eager / crossover GPU"], "3.75x ✓")

    def test_targets(self):
        met, missed = bullets(self.secs["Targets"])
        self.assertEqual(met, "met (6): disc-2 PyTorch eager / crossover graph ≥10x; disc-8 PyTorch "
                              "eager / crossover graph ≥10x; disc-12 PyTorch eager / crossover graph "
                              "≥1.5x; mnist-mlp PyTorch eager / crossover GPU ≥2x; mnist-cnn PyTorch "
                              "eager / crossover GPU ≥2x; imdb-lstm PyTorch eager / crossover GPU ≥2x")
        missing = [f"disc-{l} PyTorch eager / crossover graph ≥10x: n/a" for l in range(3, 8)]
        self.assertEqual(missed, f"not met or not measured (6): {'; '.join(missing)}; disc-12 "
                                 "crossover GPU ≥50% of the cuBLASLt f32 peak: 0.28 < 0.5")

    def test_no_failed_step_logs(self):
        self.assertNotIn("Failed steps: the end of their logs", self.secs)
        self.assertIn("PyTorch peer", self.secs)

    def test_out_folder(self):
        self.assertEqual(sorted(self.files), ["gpu-check.json", "gpu-check.md", "logs.tar.gz",
                                              "results-bf16.json", "results-classic.json",
                                              "results-graph.json", "results-nograph.json",
                                              "results-tf32.json"])
        self.assertEqual(self.files["gpu-check.md"], self.text)
        self.assertEqual(self.files["logs.tar.gz"], ["gpu.csv", "gtest.json", "logs/devices.log",
                                                     "logs/tests.log", "meta.tsv", "steps.tsv",
                                                     "torch.json"])
        compiled = json.loads(self.files["gpu-check.json"])
        self.assertEqual(compiled["schema"], "crossover.gpu-check/1")
        self.assertEqual(compiled["cuda_peak_gflops_devices"], GPU_PEAK)
        self.assertEqual(compiled["crossover_params"], 13147.001604305446)
        self.assertEqual(compiled["disc"]["disc-12"]["gpu_graph_ms"], DISC["disc-12"][2])
        self.assertIsNone(compiled["disc"]["disc-3"]["cpu_ms"])
        self.assertEqual(compiled["classic"]["mnist-cnn"]["torch_graph_ms"], CLASSIC["mnist-cnn"][4])
        self.assertEqual(len(compiled["targets_met"]), 6)
        self.assertEqual(compiled["tests"], {"failures": []})
        self.assertEqual(compiled["steps"]["build"]["seconds"], "47")
        self.assertEqual(json.loads(self.files["results-classic.json"]),
                         results_docs()["run-classic"])


class FailedStepsAreFlagged(unittest.TestCase):
    def test_a_failed_test_step(self):
        work = Work()
        work.steps[4] = ("tests", "FAILED", "1", "4", "build-gpu/tests/crossover_tests")
        work.gtest = gtest_doc(failed=["GpuMatchesCpu"])
        work.logs["tests"] = "[  FAILED  ] CudaBackend.GpuMatchesCpu (3 ms)\n1 FAILED TEST\n"
        rc, text, files = compose(work)
        self.assertEqual(rc, 0, text)
        secs = sections(text)
        self.assertIn("**Steps not ok:** tests (FAILED).", secs[""])
        rows = by_first_column(table(secs["Commands"]))
        self.assertEqual(rows["tests"]["status"], "FAILED (rc 1)")
        gpu_tests = secs["GPU tests"]
        self.assertIn("`--gtest_filter='*Gpu*:*Cuda*:Ops/*'`: **61 tests: 59 passed, 1 failed, "
                      "1 skipped** (disabled: 0).", gpu_tests)
        self.assertIn("<details><summary>CudaBackend.GpuMatchesCpu</summary>", gpu_tests)
        self.assertIn("  gpu_loss", gpu_tests)
        logs = secs["Failed steps: the end of their logs"]
        self.assertIn("<details><summary>tests (FAILED)</summary>", logs)
        self.assertIn("1 FAILED TEST", logs)
        self.assertEqual(json.loads(files["gpu-check.json"])["tests"],
                         {"failures": ["CudaBackend.GpuMatchesCpu"]})

    def test_steps_that_timed_out_or_were_skipped_are_not_ok(self):
        work = Work()
        work.steps[6] = ("sweep", "timed out (budget)", "124", "300", "build-gpu/crossover run")
        work.steps[11] = ("bf16", "skipped (time budget)", "", "0", "build-gpu/crossover run")
        work.logs["sweep"] = "".join(f"epoch {i}\n" for i in range(1, 61))
        del work.results["run-graph"], work.results["run-bf16"]
        rc, text, _ = compose(work)
        secs = sections(text)
        self.assertIn("**Steps not ok:** sweep (timed out (budget)), bf16 (skipped (time budget)).",
                      secs[""])
        rows = by_first_column(table(secs["Commands"]))
        self.assertEqual(rows["sweep"]["status"], "timed out (budget) (rc 124)")
        self.assertEqual(rows["bf16"]["status"], "skipped (time budget)")
        disc = by_first_column(table(find_section(secs, "disc sweep: median")))
        self.assertEqual(disc["disc-8"]["crossover GPU (graph)"], "n/a (step 'sweep' timed out (budget))")
        self.assertEqual(disc["disc-8"]["GPU bf16"], "n/a (step 'bf16' skipped (time budget))")
        self.assertEqual(disc["disc-8"]["GPU tf32"], "0.1180")
        # The end of the log (its last 40 lines) of a step that has one; bf16 never ran, so none.
        logs = secs["Failed steps: the end of their logs"]
        self.assertIn("<details><summary>sweep (timed out (budget))</summary>", logs)
        self.assertEqual([l for l in logs if l.startswith("epoch")],
                         [f"epoch {i}" for i in range(21, 61)])
        self.assertFalse(any("bf16" in l for l in logs))

    def test_no_gpu(self):
        # gpu-check stops after the gpu step when there is none: one step and its log.
        work = Work()
        work.steps = [("gpu", "FAILED", "1", "0", "nvidia-smi -L")]
        work.meta = [("date", "2026-11-23"), ("quick", "1")]
        work.gpu_csv, work.torch, work.gtest, work.results = None, None, None, {}
        work.logs = {"gpu": "nvidia-smi: not found (no NVIDIA driver here)\n"}
        rc, text, files = compose(work)
        self.assertEqual(rc, 0, text)
        secs = sections(text)
        self.assertIn("**Steps not ok:** gpu (FAILED).", secs[""])
        self.assertIn("(--quick, report composed", secs[""][2])
        machine = dict(cells(l) for l in secs["Machine"] if l.startswith("| ") and "|---" not in l)
        self.assertEqual(machine["GPU"], "n/a (step 'gpu' FAILED)")
        self.assertEqual(machine["GPU memory"], "n/a (nvidia-smi gave nothing)")
        self.assertEqual(machine["PyTorch"], "n/a (no GPU)")
        self.assertEqual(machine["memory"], "n/a (no results.json)")
        self.assertEqual(secs["GPU tests"][1], "n/a (no GPU)")
        rows = by_first_column(table(find_section(secs, "disc sweep: median")))
        self.assertEqual(rows["disc-2"]["crossover CPU"], "n/a (no GPU)")
        self.assertEqual(rows["disc-2"]["PyTorch eager"], "n/a (no GPU)")
        self.assertEqual(bullets(secs["Where the GPU starts to beat the CPU"])[0],
                         "crossover (measured here): n/a (no GPU)")
        met, missed = bullets(secs["Targets"])
        self.assertEqual(met, "met (0): none")
        self.assertTrue(missed.startswith("not met or not measured (12): disc-2 PyTorch eager / "
                                          "crossover graph ≥10x: n/a;"))
        self.assertNotIn("PyTorch peer", secs)
        self.assertIn("nvidia-smi: not found (no NVIDIA driver here)",
                      secs["Failed steps: the end of their logs"])
        self.assertEqual(sorted(files), ["gpu-check.json", "gpu-check.md", "logs.tar.gz"])

    def test_runs_that_are_not_what_the_column_says(self):
        work = Work()
        for r in work.results["run-nograph"]["runs"]:
            r["recorded_step"] = True  # --no-graph did not take
        for r in work.results["run-tf32"]["runs"]:
            r["precision"] = "f32"
        rc, text, _ = compose(work)
        rows = by_first_column(table(find_section(sections(text), "disc sweep: median")))
        self.assertEqual(rows["disc-8"]["GPU no graph"], "0.1384 (graph!)")
        self.assertEqual(rows["disc-8"]["GPU tf32"], "0.1180 (precision f32!)")

    def test_pytorch_failures_are_shown(self):
        work = Work()
        work.torch["models"]["disc-2"]["graph"] = {
            "error": "Traceback\nRuntimeError: CUDA error: operation not permitted | when capturing"}
        work.torch["models"]["mnist-mlp"]["graph"] = {"error": "not measured (--no-graph)"}
        rc, text, _ = compose(work)
        secs = sections(text)
        rows = by_first_column(table(find_section(secs, "disc sweep: median")))
        self.assertEqual(rows["disc-2"]["PyTorch CUDA Graph"],
                         "n/a (failed: RuntimeError: CUDA error: operation not permitted | when "
                         "capturing)")
        self.assertEqual(rows["disc-2"]["PyTorch graph / crossover graph"], "n/a (a time is missing)")
        classic = by_first_column(table(find_section(secs, "Classic networks")))
        self.assertEqual(classic["mnist-mlp"]["PyTorch CUDA Graph"], "n/a (not measured (--no-graph))")
        self.assertEqual(bullets(secs["PyTorch peer"]),
                         ["disc-2 graph failed: `RuntimeError: CUDA error: operation not permitted "
                          "| when capturing`"])

    def test_a_target_missed_is_marked(self):
        work = Work()
        slow = copy.deepcopy(work.results)
        for r in slow["run-classic"]["runs"]:
            if r["model"] == "mnist-cnn" and r["device"].startswith("cuda"):
                r["median_step_ms"] = 1.5  # PyTorch eager takes 2.13 ms: 1.42x < 2x
        work.results = slow
        rc, text, _ = compose(work)
        secs = sections(text)
        rows = by_first_column(table(find_section(secs, "Classic networks")))
        self.assertEqual(rows["mnist-cnn"]["PyTorch eager / crossover GPU"], "1.42x ✗ (target ≥2x)")
        self.assertIn("mnist-cnn PyTorch eager / crossover GPU ≥2x: 1.42 < 2",
                      bullets(secs["Targets"])[1])

    def test_the_test_log_stands_in_for_a_missing_gtest_json(self):
        work = Work()
        work.gtest = None
        work.logs["tests"] = ("[ RUN      ] Cuda.Adam\nexpected 1, got 2\n[  FAILED  ] Cuda.Adam (1 ms)\n"
                              "[==========] 2 tests ran.\n[  PASSED  ] 1 test.\n")
        rc, text, _ = compose(work)
        lines = sections(text)["GPU tests"]
        self.assertEqual(lines[1], "From the test log (no gtest JSON: not written):")
        self.assertIn("[==========] 2 tests ran.", lines)
        self.assertIn("<details><summary>Cuda.Adam</summary>", lines)
        self.assertIn("expected 1, got 2", lines)

    def test_no_crossing(self):
        work = Work()
        sweep = work.results["run-graph"]["sweep"]
        sweep["crossovers"] = []
        sweep["series"] = [
            {"device": "cpu", "points": [{"axis_value": 2, "seconds_per_100_epochs": 1.0},
                                         {"axis_value": 12, "seconds_per_100_epochs": 9.0}]},
            {"device": "cuda:0", "points": [{"axis_value": 2, "seconds_per_100_epochs": 3.0},
                                            {"axis_value": 12, "seconds_per_100_epochs": 10.0}]},
            {"device": "H100 (predicted)", "predicted": True, "points": []}]
        rc, text, files = compose(work)
        self.assertEqual(bullets(sections(text)["Where the GPU starts to beat the CPU"])[0],
                         "crossover (measured here): n/a (no crossing: the CPU is faster at every "
                         "depth measured, up to disc-12)")
        self.assertNotIn("crossover_params", json.loads(files["gpu-check.json"]))

    def test_wrong_arguments(self):
        proc = subprocess.run([sys.executable, SCRIPT, "only-one"], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("usage: gpu_report.py WORK REPORT OUT_DIR", proc.stderr)


if __name__ == "__main__":
    unittest.main()
