#!/usr/bin/env python3
"""The GPU check's report: reads what scripts/gpu-check's steps left in its work folder and writes
the Markdown report, then the report, one compiled JSON, the runs' results.json and a tarball of the
logs into the --out folder (8 files at most).

    python3 scripts/gpu_report.py WORK REPORT OUT_DIR

WORK holds steps.tsv (name, status, rc, seconds, command per line; the last line of a name wins),
meta.tsv (key, value), gpu.csv (nvidia-smi's name, driver, memory, compute capability), gtest.json,
torch.json (bench/gpu_vs_torch.py), logs/NAME.log per step and run-*/results.json (crossover run).
Every number in the report is read from those files; a missing one says why (n/a (reason)).
scripts/gpu-check calls this after every step; tests/scripts/test_gpu_report.py tests it.
"""
import datetime
import glob
import io
import json
import os
import re
import sys
import tarfile

# The steps that ran `crossover run`, and the folder under WORK that each wrote its results.json to.
RUNS = {"sweep": "run-graph", "nograph": "run-nograph", "tf32": "run-tf32", "bf16": "run-bf16",
        "classic": "run-classic"}
DISC = [f"disc-{layers}" for layers in range(2, 13)]
CLASSIC = ["mnist-mlp", "mnist-cnn", "imdb-lstm"]
# What --out may receive: a results.json above this stays in the tarball, and a tarball above the
# second limit keeps only the last MiB of each log (the machine returns files of limited size).
RESULTS_LIMIT = 15 * 1024 * 1024
TARBALL_LIMIT = 16 * 1024 * 1024
LOG_TAIL_BYTES = 1024 * 1024


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def load_json(path):
    """(document, None) or (None, why not)."""
    try:
        with open(path) as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, "not written"
    except (OSError, ValueError) as e:
        return None, f"unreadable: {e}"


def na(reason):
    return f"n/a ({reason})"


def fmt_ms(v):
    if v is None:
        return None
    if v >= 100:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.3f}"
    return f"{v:.4f}"


def ratio_cell(num, den, target=None):
    if num is None or den is None or den <= 0:
        return "n/a (a time is missing)"
    r = num / den
    cell = f"{r:.2f}x" if r < 10 else f"{r:.1f}x"
    if target is not None:
        cell += " ✓" if r >= target else f" ✗ (target ≥{target:g}x)"
    return cell


def gflops_cell(run, why):
    if run and isinstance(run.get("gflops"), (int, float)):
        return f"{run['gflops']:.1f}"
    return na(why or "no gflops")


def peak_fraction_cell(run, why):
    if not run:
        return na(why), None
    v = run.get("peak_fraction")
    if not isinstance(v, (int, float)):
        return na("no measured peak in results.json"), None
    return f"{100 * v:.1f}%", v


def final_loss_cell(run, why):
    if not run:
        return na(why), None
    v = run.get("final_loss")
    if not isinstance(v, (int, float)):
        return na("no complete epoch" if run.get("epochs") == 0 else "no final loss"), None
    return f"{v:.6g}", v


class Inputs:
    """Everything the steps wrote under WORK, and how to find one number in it or say why not."""

    def __init__(self, work):
        self.work = work
        self.steps = {}  # name -> {status, rc, seconds, command}; the last line of a name wins
        for line in read(os.path.join(work, "steps.tsv")).splitlines():
            parts = line.split("\t")
            if len(parts) >= 5:
                self.steps[parts[0]] = {"status": parts[1], "rc": parts[2], "seconds": parts[3],
                                        "command": parts[4]}
        self.meta, self.meta_list = {}, []  # meta_list keeps repeated keys ("note")
        for line in read(os.path.join(work, "meta.tsv")).splitlines():
            k, _, v = line.partition("\t")
            self.meta[k] = v
            self.meta_list.append((k, v))
        self.results = {step: load_json(os.path.join(work, folder, "results.json"))
                        for step, folder in RUNS.items()}
        self.torch, self.torch_err = load_json(os.path.join(work, "torch.json"))
        self.devices_log = read(os.path.join(work, "logs", "devices.log"))

    def why_missing(self, step):
        """Why a step's numbers are missing: the reason printed next to n/a (None: it is ok)."""
        s = self.steps.get(step)
        gpu = self.steps.get("gpu")
        if gpu and gpu["status"] != "ok" and step != "gpu":
            return "no GPU"
        if not s:
            return f"step '{step}' not run"
        if s["status"] == "ok":
            return None
        return f"step '{step}' {s['status']}"

    def find_run(self, step, model, kind):
        """(run, None) or (None, reason) for `model` on a device of `kind` (cpu or cuda)."""
        doc, err = self.results[step]
        if doc is None:
            return None, self.why_missing(step) or f"results.json {err}"
        for r in doc.get("runs", []):
            info = r.get("device_info") or {}
            if r.get("model") == model and (info.get("kind") == kind or
                                            str(r.get("device", "")).split(":")[0] == kind):
                return r, None
        if kind == "cuda" and self.steps.get("gpu", {}).get("status") != "ok":
            return None, "no GPU"
        if step in self.steps and self.steps[step]["status"] != "ok":
            return None, f"step '{step}' {self.steps[step]['status']}"
        return None, f"no {kind} run of {model} in results.json"

    def ms_cell(self, step, model, kind, expect_graph=None, expect_precision=None):
        """(cell, median ms or None) of a run; a run that is not the one asked for says so."""
        r, reason = self.find_run(step, model, kind)
        if r is None:
            return na(reason), None
        v = r.get("median_step_ms")
        if not isinstance(v, (int, float)):
            return na("no median_step_ms"), None
        cell = fmt_ms(v)
        notes = []
        if expect_graph is not None and bool(r.get("recorded_step")) != expect_graph:
            notes.append("graph" if r.get("recorded_step") else "not a graph")
        if expect_precision and r.get("precision") != expect_precision:
            notes.append(f"precision {r.get('precision')}")
        if notes:
            cell += f" ({', '.join(notes)}!)"
        return cell, v

    def torch_cell(self, model, kind):
        """(cell, median ms or None) of PyTorch's `kind` (eager or graph) timing of `model`."""
        if self.torch is None:
            return na(self.why_missing("torch") or f"torch.json {self.torch_err}"), None
        if not str(self.torch.get("device", "")).startswith("cuda"):
            return na(f"PyTorch ran on {self.torch.get('device')}, not a GPU"), None
        row = self.torch.get("models", {}).get(model)
        if row is None:
            return na(f"{model} not timed"), None
        t = row.get(kind, {})
        if "median_step_ms" in t:
            return fmt_ms(t["median_step_ms"]), t["median_step_ms"]
        err = (t.get("error") or "no result").strip().splitlines()
        text = err[-1] if err[-1].startswith("not measured") else "failed: " + err[-1]
        return na(text[:160].replace("|", "\\|")), None

    def params(self, step, model):
        """The model's parameter count from either run of `step`, else from PyTorch's timing."""
        cpu_r, _ = self.find_run(step, model, "cpu")
        gpu_r, _ = self.find_run(step, model, "cuda")
        params = (cpu_r or gpu_r or {}).get("params")
        if params is None and self.torch:
            params = self.torch.get("models", {}).get(model, {}).get("params")
        return params


class Report:
    """The Markdown lines, the targets judged along the way, and the compiled figures."""

    def __init__(self):
        self.lines = []
        self.targets_met, self.targets_missed = [], []
        self.compiled = {"disc": {}, "classic": {}}
        self.failures = []  # (test name, output) of failed GPU tests
        self.cuda_peak = None

    def add(self, line):
        self.lines.append(line)

    def judge(self, name, value, target):
        if value is None:
            self.targets_missed.append(f"{name}: n/a")
        elif value >= target:
            self.targets_met.append(name)
        else:
            self.targets_missed.append(f"{name}: {value:.2f} < {target:g}")


def header_section(rep, inp, date, now):
    quick = inp.meta.get("quick") == "1"
    failed_steps = [n for n, s in inp.steps.items() if s["status"] not in ("ok",)]
    rep.add(f"# crossover GPU check, {date}")
    rep.add("")
    rep.add(f"Written by `scripts/gpu-check` ({'--quick, ' if quick else ''}report composed "
            f"{now.strftime('%Y-%m-%d %H:%M:%S')}). Every number below is read from "
            "the files the run wrote (crossover's results.json, bench/gpu_vs_torch.py's JSON, the "
            "test and `crossover devices` output); a missing one says why.")
    rep.add("")
    if failed_steps:
        not_ok = ", ".join("%s (%s)" % (n, inp.steps[n]["status"]) for n in failed_steps)
        rep.add(f"**Steps not ok:** {not_ok}.")
    else:
        rep.add("**All steps ok.**" if inp.steps else "**No step ran.**")
    rep.add("")


def machine_section(rep, inp):
    rep.add("## Machine")
    rep.add("")
    gpu_csv = read(os.path.join(inp.work, "gpu.csv")).strip()
    library = re.search(r"^cuda:\d+: .*\n(?:  .*\n)*?  library: (.*)$", inp.devices_log, re.M)
    machine = {}
    for step in ("sweep", "classic", "nograph"):
        doc = inp.results[step][0]
        if doc and doc.get("machine"):
            machine = doc["machine"]
            break
    gpu_fields = [f.strip() for f in gpu_csv.splitlines()[0].split(",")] if gpu_csv else []
    no_smi = "n/a (nvidia-smi gave nothing)"
    torch = inp.torch
    rows = [
        ("GPU", gpu_fields[0] if len(gpu_fields) > 0
         else na(inp.why_missing("gpu") or "nvidia-smi gave nothing")),
        ("GPU memory", gpu_fields[2] if len(gpu_fields) > 2 else no_smi),
        ("compute capability", gpu_fields[3] if len(gpu_fields) > 3 else no_smi),
        ("NVIDIA driver", gpu_fields[1] if len(gpu_fields) > 1
         else na(inp.why_missing("gpu") or "nvidia-smi gave nothing")),
        ("CUDA runtime, cuBLASLt, cuDNN (crossover devices)",
         library.group(1) if library
         else na(inp.why_missing("devices") or "no cuda device in `crossover devices`")),
        ("nvcc", inp.meta.get("nvcc", "n/a (not recorded)")),
        ("CPU", inp.meta.get("cpu") or machine.get("cpu") or "n/a (not recorded)"),
        ("cores", f"{inp.meta.get('cores', 'n/a')} logical CPUs"
                  + (f", {machine['cpu_cores']} cores per socket"
                     if machine.get("cpu_cores") else "")),
        ("memory", f"{machine['memory_gib']:.0f} GiB"
                   if isinstance(machine.get("memory_gib"), (int, float))
                   else "n/a (no results.json)"),
        ("OS", inp.meta.get("os", "n/a")),
        ("compiler, oneDNN", f"{machine.get('compiler', 'n/a')}, oneDNN "
                             f"{(machine.get('libraries') or {}).get('oneDNN', 'n/a')}"
                             if machine else "n/a (no results.json)"),
        ("Debian packages", inp.meta.get("deps", "n/a (deps step not run)")),
        ("PyTorch", f"{torch.get('torch')} (CUDA {torch.get('torch_cuda')}, cuDNN "
                    f"{torch.get('cudnn', 'n/a')}) on {torch.get('gpu', torch.get('device'))}"
                    if torch else na(inp.why_missing("torch") or f"torch.json {inp.torch_err}")),
        ("commit", inp.meta.get("commit", "n/a")),
    ]
    rep.add("| | |")
    rep.add("|---|---|")
    for k, v in rows:
        rep.add(f"| {k} | {v} |")
    rep.add("")


def commands_section(rep, inp):
    rep.add("## Commands")
    rep.add("")
    rep.add("| step | status | seconds | command |")
    rep.add("|---|---|---:|---|")
    for name, s in inp.steps.items():
        rc = "" if s["rc"] in ("0", "") else " (rc " + s["rc"] + ")"
        command = s["command"].replace("|", "\\|")
        rep.add(f"| {name} | {s['status']}{rc} | {s['seconds']} | `{command}` |")
    rep.add("")
    meta = inp.meta
    if meta.get("configure"):
        rep.add(f"Configure: `{meta['configure']}`")
        rep.add("")
    if meta.get("cmake_summary"):
        rep.add(f"CMake: `{meta['cmake_summary']}` (CUDA architectures: "
                f"{meta.get('cuda_architectures', 'n/a')})")
        rep.add("")
    notes = list(dict.fromkeys(v for k, v in inp.meta_list if k == "note"))
    for v in notes:
        rep.add(f"- {v}")
    if notes:
        rep.add("")


def tests_section(rep, inp):
    rep.add("## GPU tests")
    rep.add("")
    gtest, gtest_err = load_json(os.path.join(inp.work, "gtest.json"))
    test_log = read(os.path.join(inp.work, "logs", "tests.log"))
    failures = rep.failures
    if gtest:
        total = skipped = failed = 0
        for suite in gtest.get("testsuites", []):
            for t in suite.get("testsuite", []):
                total += 1
                if t.get("result") == "SKIPPED" or t.get("skipped"):
                    skipped += 1
                elif t.get("failures"):
                    failed += 1
                    msgs = "\n".join(f.get("failure", "") for f in t["failures"])
                    failures.append((f"{suite.get('name')}.{t.get('name')}", msgs))
        rep.add(f"`--gtest_filter='*Gpu*:*Cuda*:Ops/*'`: **{total} tests: "
                f"{total - failed - skipped} passed, {failed} failed, {skipped} skipped** "
                f"(disabled: {gtest.get('disabled', 0)}).")
    elif test_log:
        summary = [l for l in test_log.splitlines()
                   if re.match(r"\[  (PASSED|FAILED|SKIPPED) ", l) or "tests ran" in l]
        rep.add("From the test log (no gtest JSON: " + str(gtest_err) + "):")
        rep.add("")
        rep.add("```")
        rep.lines.extend(summary[-20:] or test_log.splitlines()[-20:])
        rep.add("```")
        failed_test = r"^\[ RUN      \] (\S+)\n(.*?)^\[  FAILED  \] \1"
        for m in re.finditer(failed_test, test_log, re.M | re.S):
            failures.append((m.group(1), m.group(2)))
    else:
        rep.add(na(inp.why_missing("tests") or "no test output"))
    rep.add("")
    if failures:
        rep.add("Failures:")
        rep.add("")
        for name, text in failures[:30]:
            body = text.strip().splitlines()
            rep.add(f"<details><summary>{name}</summary>")
            rep.add("")
            rep.add("```")
            rep.lines.extend(body[:40])
            if len(body) > 40:
                rep.add(f"... ({len(body) - 40} more lines)")
            rep.add("```")
            rep.add("</details>")
        if len(failures) > 30:
            rep.add(f"... and {len(failures) - 30} more failures (logs.tar.gz: tests.log)")
        rep.add("")


def peaks_section(rep, inp):
    rep.add("## Measured peaks (`crossover devices --reprobe`)")
    rep.add("")
    log = inp.devices_log
    peak_lines = re.findall(r"^(\S+): (.*)\n(?:  (?!measured).*\n)*  measured peak: (.*)$", log,
                            re.M)
    if peak_lines:
        for dev, name, peak in peak_lines:
            rep.add(f"- {dev} ({name}): {peak}")
            m = re.match(r"([0-9.]+) GFLOP/s f32 matmul", peak)
            if dev.startswith("cuda") and m:
                rep.cuda_peak = float(m.group(1))
    else:
        rep.add(f"- {na(inp.why_missing('devices') or 'no peak in the devices output')}")
    nvml = re.search(r"^NVML: .*$", log, re.M)
    if nvml:
        rep.add(f"- {nvml.group(0)}")
    for m in re.finditer(r"^not available: .*$", log, re.M):
        rep.add(f"- {m.group(0)}")
    # The peak the sweep's runs were measured against (its results.json), if any.
    sweep_doc = inp.results["sweep"][0]
    if sweep_doc:
        for p in sweep_doc.get("peaks", []):
            rep.add(f"- the sweep's results.json: {p.get('device')}: "
                    f"{p.get('matmul_gflops', 0):.1f} GFLOP/s f32 matmul, "
                    f"{p.get('bandwidth_gbs', 0):.1f} GB/s "
                    f"({'cached' if p.get('cached') else 'probed'} {p.get('probed')})")
    rep.add("")


def disc_times_section(rep, inp):
    disc_how = inp.meta.get("disc_length", "run length not recorded")
    rep.add(f"## disc sweep: median ms per training step ({disc_how})")
    rep.add("")
    rep.add("crossover: `crossover run` (GPU: f32, the whole step one CUDA Graph, unless said). "
            "PyTorch: bench/gpu_vs_torch.py on the same GPU, f32 with TF32 off. Target for PyTorch "
            "eager / crossover graph: ≥10x for disc-2 … disc-8, ≥1.5x for disc-12.")
    rep.add("")
    rep.add("| model | params | crossover CPU | crossover GPU (graph) | GPU no graph | GPU tf32 | "
            "GPU bf16 | PyTorch eager | PyTorch CUDA Graph | PyTorch eager / crossover graph | "
            "PyTorch graph / crossover graph |")
    rep.add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model in DISC:
        params = inp.params("sweep", model)
        cpu_c, cpu_v = inp.ms_cell("sweep", model, "cpu")
        g_c, g_v = inp.ms_cell("sweep", model, "cuda", expect_graph=True, expect_precision="f32")
        ng_c, ng_v = inp.ms_cell("nograph", model, "cuda", expect_graph=False)
        tf_c, tf_v = inp.ms_cell("tf32", model, "cuda", expect_precision="tf32")
        bf_c, bf_v = inp.ms_cell("bf16", model, "cuda", expect_precision="bf16")
        te_c, te_v = inp.torch_cell(model, "eager")
        tg_c, tg_v = inp.torch_cell(model, "graph")
        layers = int(model[5:])
        target = 10 if layers <= 8 else (1.5 if layers == 12 else None)
        ratio = ratio_cell(te_v, g_v, target)
        if target is not None:
            rep.judge(f"{model} PyTorch eager / crossover graph ≥{target:g}x",
                      te_v / g_v if te_v and g_v else None, target)
        rep.add(f"| {model} | {params if params is not None else 'n/a'} | {cpu_c} | {g_c} | "
                f"{ng_c} | {tf_c} | {bf_c} | {te_c} | {tg_c} | {ratio} | "
                f"{ratio_cell(tg_v, g_v)} |")
        rep.compiled["disc"][model] = {"params": params, "cpu_ms": cpu_v, "gpu_graph_ms": g_v,
                                       "gpu_nograph_ms": ng_v, "gpu_tf32_ms": tf_v,
                                       "gpu_bf16_ms": bf_v, "torch_eager_ms": te_v,
                                       "torch_graph_ms": tg_v}
    rep.add("")


def disc_peaks_section(rep, inp):
    rep.add("## disc sweep: fraction of the GPU's peak, and the CPU's and GPU's final loss")
    rep.add("")
    rep.add("% of peak: crossover's GFLOP/s on the GPU (f32, graph) over the cuBLASLt f32 matmul "
            "peak its results.json holds (target ≥50% at disc-12). Final loss: the last epoch's "
            "summed loss on each device (same data and initial weights; the math is the same, so "
            "they agree to f32 rounding).")
    rep.add("")
    rep.add("| model | GPU GFLOP/s | % of cuBLASLt f32 peak | CPU GFLOP/s | CPU % of its peak | "
            "CPU final loss | GPU final loss | relative difference |")
    rep.add("|---|---:|---:|---:|---:|---:|---:|---:|")
    for model in DISC:
        cpu_r, cpu_why = inp.find_run("sweep", model, "cpu")
        gpu_r, gpu_why = inp.find_run("sweep", model, "cuda")
        gpu_pf_c, gpu_pf = peak_fraction_cell(gpu_r, gpu_why)
        cpu_pf_c, _ = peak_fraction_cell(cpu_r, cpu_why)
        if model == "disc-12":
            if gpu_pf is not None:
                gpu_pf_c += " ✓" if gpu_pf >= 0.5 else " ✗ (target ≥50%)"
            rep.judge("disc-12 crossover GPU ≥50% of the cuBLASLt f32 peak", gpu_pf, 0.5)
        cl_c, cl = final_loss_cell(cpu_r, cpu_why)
        gl_c, gl = final_loss_cell(gpu_r, gpu_why)
        if cl is not None and gl is not None:
            rel = abs(gl - cl) / max(abs(cl), 1e-30)
            rel_c = f"{rel:.2e}"
        else:
            rel, rel_c = None, "n/a (a loss is missing)"
        rep.add(f"| {model} | {gflops_cell(gpu_r, gpu_why)} | {gpu_pf_c} | "
                f"{gflops_cell(cpu_r, cpu_why)} | {cpu_pf_c} | {cl_c} | {gl_c} | {rel_c} |")
        rep.compiled["disc"][model].update({"gpu_peak_fraction": gpu_pf, "cpu_final_loss": cl,
                                            "gpu_final_loss": gl,
                                            "final_loss_relative_difference": rel})
    rep.add("")


def crossover_text(rep, inp):
    """Where the GPU's time per step drops below the CPU's, from the sweep's results.json."""
    sweep_doc = inp.results["sweep"][0]
    if not (sweep_doc and sweep_doc.get("sweep")):
        return na(inp.why_missing("sweep") or "no sweep in results.json")
    sw = sweep_doc["sweep"]
    found = [c for c in sw.get("crossovers", [])
             if str(c.get("faster", "")).startswith("cuda") and c.get("slower") == "cpu"]
    back = [c for c in sw.get("crossovers", [])
            if str(c.get("slower", "")).startswith("cuda") and c.get("faster") == "cpu"]
    if found:
        c = found[0]
        between = c.get("between") or []
        text = (f"the GPU ({c['faster']}) is faster than the CPU from **{c['params']:,.0f} "
                f"parameters** (depth {c['axis_value']:.2f}, between disc-{between[0]:.0f} and "
                f"disc-{between[1]:.0f})" if len(between) == 2 else
                f"the GPU is faster from **{c['params']:,.0f} parameters**")
        rep.compiled["crossover_params"] = c["params"]
        for c2 in found[1:] + back:
            text += (f"; another crossing: {c2['faster']} faster than {c2['slower']} from "
                     f"{c2['params']:,.0f} parameters")
        return text
    series = {s["device"]: {p["axis_value"]: p["seconds_per_100_epochs"] for p in s["points"]}
              for s in sw.get("series", []) if not s.get("predicted")}
    cpu_s = series.get("cpu")
    gpu_s = next((v for k, v in series.items() if k.startswith("cuda")), None)
    if cpu_s and gpu_s:
        common = sorted(set(cpu_s) & set(gpu_s))
        if common and all(gpu_s[a] < cpu_s[a] for a in common):
            return (f"n/a (no crossing: the GPU is faster at every depth measured, from "
                    f"disc-{common[0]:.0f})")
        if common and all(gpu_s[a] >= cpu_s[a] for a in common):
            return (f"n/a (no crossing: the CPU is faster at every depth measured, up to "
                    f"disc-{common[-1]:.0f})")
        return "n/a (no crossing recorded in results.json)"
    return na("the sweep has no " + ("GPU" if cpu_s else "CPU") + " series"
              + (" (no GPU)" if inp.why_missing("gpu") else ""))


def crossover_section(rep, inp):
    rep.add("## Where the GPU starts to beat the CPU")
    rep.add("")
    rep.add(f"- crossover (measured here): {crossover_text(rep, inp)}")
    rep.add("- the classic experiment: ~700,000 parameters")
    rep.add("")


def classic_section(rep, inp):
    length = inp.meta.get("classic_length", "run length not recorded")
    rep.add(f"## Classic networks: median ms per training step ({length})")
    rep.add("")
    rep.add("Target: PyTorch eager on the GPU / crossover on the GPU ≥2x.")
    rep.add("")
    rep.add("| model | params | crossover CPU | crossover GPU (graph) | GPU / CPU speed-up | "
            "PyTorch eager (GPU) | PyTorch CUDA Graph | PyTorch eager / crossover GPU |")
    rep.add("|---|---:|---:|---:|---:|---:|---:|---:|")
    for model in CLASSIC:
        params = inp.params("classic", model)
        cpu_c, cpu_v = inp.ms_cell("classic", model, "cpu")
        g_c, g_v = inp.ms_cell("classic", model, "cuda", expect_graph=True)
        te_c, te_v = inp.torch_cell(model, "eager")
        tg_c, tg_v = inp.torch_cell(model, "graph")
        rep.judge(f"{model} PyTorch eager / crossover GPU ≥2x",
                  te_v / g_v if te_v and g_v else None, 2)
        rep.add(f"| {model} | {params if params is not None else 'n/a'} | {cpu_c} | {g_c} | "
                f"{ratio_cell(cpu_v, g_v)} | {te_c} | {tg_c} | {ratio_cell(te_v, g_v, 2)} |")
        rep.compiled["classic"][model] = {"params": params, "cpu_ms": cpu_v, "gpu_graph_ms": g_v,
                                          "torch_eager_ms": te_v, "torch_graph_ms": tg_v}
    rep.add("")


def targets_section(rep):
    rep.add("## Targets")
    rep.add("")
    rep.add(f"- met ({len(rep.targets_met)}): "
            + ("; ".join(rep.targets_met) if rep.targets_met else "none"))
    rep.add(f"- not met or not measured ({len(rep.targets_missed)}): "
            + ("; ".join(rep.targets_missed) if rep.targets_missed else "none"))
    rep.add("")


def torch_section(rep, inp):
    if not inp.torch:
        return
    torch = inp.torch
    rep.add("## PyTorch peer")
    rep.add("")
    t = torch.get("timing", {})
    rep.add(f"torch {torch.get('torch')}, settings {json.dumps(torch.get('settings'))}; "
            f"{t.get('warmup_steps')} warm-up steps, then {t.get('blocks')} blocks of "
            f"{t.get('steps_per_block')} steps: {t.get('method')}.")
    rep.add("")
    for model, row in torch.get("models", {}).items():
        for kind in ("eager", "graph"):
            err = row.get(kind, {}).get("error")
            if err and not err.startswith("not measured"):
                rep.add(f"- {model} {kind} failed: `{err.splitlines()[-1][:300]}`")
    rep.add("")


def failed_logs_section(rep, inp):
    failed_steps = [n for n, s in inp.steps.items() if s["status"] not in ("ok",)]
    bad = [n for n in failed_steps if os.path.exists(os.path.join(inp.work, "logs", f"{n}.log"))]
    if not bad:
        return
    rep.add("## Failed steps: the end of their logs")
    rep.add("")
    for n in bad:
        tail = read(os.path.join(inp.work, "logs", f"{n}.log")).rstrip().splitlines()[-40:]
        rep.add(f"<details><summary>{n} ({inp.steps[n]['status']})</summary>")
        rep.add("")
        rep.add("```")
        rep.lines.extend(l[:400] for l in tail)
        rep.add("```")
        rep.add("</details>")
        rep.add("")


def compose(work, now=None):
    """(the Markdown report, the compiled figures as a dict) of what WORK holds."""
    inp = Inputs(work)
    rep = Report()
    now = now or datetime.datetime.now()
    date = inp.meta.get("date", datetime.date.today().isoformat())
    header_section(rep, inp, date, now)
    machine_section(rep, inp)
    commands_section(rep, inp)
    tests_section(rep, inp)
    peaks_section(rep, inp)
    disc_times_section(rep, inp)
    disc_peaks_section(rep, inp)
    crossover_section(rep, inp)
    classic_section(rep, inp)
    targets_section(rep)
    torch_section(rep, inp)
    failed_logs_section(rep, inp)
    compiled = rep.compiled
    compiled.update({"schema": "crossover.gpu-check/1", "date": date, "meta": inp.meta,
                     "steps": inp.steps, "cuda_peak_gflops_devices": rep.cuda_peak,
                     "targets_met": rep.targets_met, "targets_missed": rep.targets_missed,
                     "tests": {"failures": [n for n, _ in rep.failures]},
                     "torch": inp.torch})
    return "\n".join(rep.lines) + "\n", compiled


def write_outputs(work, report_path, out_dir, text, compiled):
    """The report at REPORT; in OUT_DIR the report, the compiled JSON, the runs' results.json and
    logs.tar.gz."""
    os.makedirs(os.path.dirname(report_path), exist_ok=True)
    with open(report_path + ".tmp", "w") as f:
        f.write(text)
    os.replace(report_path + ".tmp", report_path)

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gpu-check.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out_dir, "gpu-check.json"), "w") as f:
        json.dump(compiled, f, indent=1)
    for folder in RUNS.values():
        src = os.path.join(work, folder, "results.json")
        dst = os.path.join(out_dir, f"results-{folder[4:]}.json")
        if os.path.exists(src) and os.path.getsize(src) <= RESULTS_LIMIT:
            with open(src, "rb") as a, open(dst, "wb") as b:
                b.write(a.read())
        elif os.path.exists(src):  # too big to come back: keep it in the tarball instead
            with open(dst, "w") as f:
                f.write(json.dumps({"omitted": f"{os.path.getsize(src)} bytes; see logs.tar.gz"}))
    tar_path = os.path.join(out_dir, "logs.tar.gz")
    with tarfile.open(tar_path + ".tmp", "w:gz") as tar:
        for path in sorted(glob.glob(os.path.join(work, "logs", "*.log"))) + [
                os.path.join(work, n) for n in ("steps.tsv", "meta.tsv", "gtest.json", "torch.json",
                                                "gpu.csv", "fused.tgz", "unseen.tgz")]:
            if os.path.exists(path):
                tar.add(path, arcname=os.path.relpath(path, work))
        for folder in RUNS.values():
            src = os.path.join(work, folder, "results.json")
            if os.path.exists(src) and os.path.getsize(src) > RESULTS_LIMIT:
                tar.add(src, arcname=f"{folder}/results.json")
    os.replace(tar_path + ".tmp", tar_path)
    if os.path.getsize(tar_path) > TARBALL_LIMIT:  # logs that large: keep only their ends
        with tarfile.open(tar_path, "w:gz") as tar:
            for path in sorted(glob.glob(os.path.join(work, "logs", "*.log"))):
                with open(path, "rb") as f:
                    data = f.read()[-LOG_TAIL_BYTES:]
                info = tarfile.TarInfo(os.path.relpath(path, work))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def main(argv):
    if len(argv) != 3:
        print("usage: gpu_report.py WORK REPORT OUT_DIR", file=sys.stderr)
        return 2
    work, report_path, out_dir = argv
    text, compiled = compose(work)
    write_outputs(work, report_path, out_dir, text, compiled)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
