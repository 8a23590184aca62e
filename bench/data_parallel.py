#!/usr/bin/python3
"""Data-parallel training on this machine's cores: N ranks x 1 thread (mpirun) against 1 process x
N threads, the same global batch, for disc-12 and mnist-cnn (issue 13's target: at least 85% of the
throughput). Each configuration runs --repeat times, interleaved, each a fresh process of
`crossover train NAME --steps S`; the figure is the median over runs of the median step. Prints a
Markdown table with the step's phases (forward+backward, communicate beyond backward, optimizer)
and the throughput ratio; --json writes every run.

  /usr/bin/python3 bench/data_parallel.py [--crossover build/crossover] [--ranks 2] [--repeat 3]
                                           [--precision f32|bf16]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def run(crossover, model, steps, ranks, threads, reduce, precision="f32"):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [crossover, "train", model, "--steps", str(steps), "--threads", str(threads),
               "--checkpoint-every", "off", "-q", "--json", out, "--precision", precision]
        if ranks > 1:
            cmd = ["mpirun", "-np", str(ranks)] + cmd + ["--reduce", reduce]
        env = dict(os.environ, **MPI_ENV)
        done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
        with open(out) as f:
            j = json.load(f)
    p = j["step_phases_ms"]
    return {"step_ms": j["median_step_ms"], "samples_per_s": j["samples_per_second"],
            "forward_backward_ms": p["forward_backward"], "communicate_ms": p["communicate"],
            "optimizer_ms": p["optimizer"], "timings_contaminated": j.get("timings_contaminated")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crossover", default="build/crossover")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", default="disc-12:40,mnist-cnn:40", help="NAME:STEPS,...")
    ap.add_argument("--precision", default="f32", help="f32 or bf16 (the CPU's AMX or AVX-512 BF16)")
    ap.add_argument("--json")
    a = ap.parse_args()
    a.crossover = os.path.abspath(a.crossover)
    n = a.ranks
    configs = [("1 process x %d threads" % n, 1, n, ""),
               ("%d ranks x 1 thread, shared" % n, n, 1, "shared"),
               ("%d ranks x 1 thread, after-backward" % n, n, 1, "after-backward"),
               ("%d ranks x 1 thread, overlap" % n, n, 1, "overlap")]
    results = {}
    for spec in a.models.split(","):
        model, steps = spec.split(":")
        runs = {c[0]: [] for c in configs}
        for _ in range(a.repeat):
            for name, ranks, threads, reduce in configs:
                runs[name].append(run(a.crossover, model, int(steps), ranks, threads, reduce,
                                       a.precision))
        results[model] = runs
    print("| model | configuration | step ms | forward+backward | communicate | optimizer "
          "| samples/s | of 1 process |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for model, runs in results.items():
        base = None
        for name, *_ in configs:
            med = {k: statistics.median(r[k] for r in runs[name])
                   for k in ("step_ms", "samples_per_s", "forward_backward_ms", "communicate_ms",
                             "optimizer_ms")}
            base = base or med["samples_per_s"]
            print(f"| {model} | {name} | {med['step_ms']:.2f} | {med['forward_backward_ms']:.2f} "
                  f"| {med['communicate_ms']:.2f} | {med['optimizer_ms']:.2f} "
                  f"| {med['samples_per_s']:.0f} | {100 * med['samples_per_s'] / base:.1f}% |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
