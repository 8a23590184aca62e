#!/usr/bin/python3
"""Data-parallel training on this machine's cores: N ranks x 1 thread (mpirun) against 1 process x
N threads, the same global batch, for disc-12 and mnist-cnn (issue 13's target: at least 85% of the
throughput). Each configuration runs --repeat times, interleaved, each a fresh process of
`crossover train NAME --steps S`; the figure is the median over runs of the median step. Prints a
Markdown table with the step's phases (forward+backward, communicate beyond backward, optimizer)
and the throughput ratio; --json writes every run.

Two more configurations split the ranks' shortfall into its parts: "a rank's share alone" (one
process x 1 thread training batch / N: a rank's own work with nothing else running; N times its
throughput is what N ranks could reach with no contention and no summing) and "N shares at once"
(N such processes started together, not communicating: what the ranks' contention for the memory
and the caches costs before any gradient is summed). Their "of 1 process" is N x their throughput.

  /usr/bin/python3 bench/data_parallel.py [--crossover build/crossover] [--ranks 2] [--repeat 3]
                                           [--precision f32|bf16] [--reduce shared,...]
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


def summary(j):
    p = j["step_phases_ms"]
    return {"step_ms": j["median_step_ms"], "samples_per_s": j["samples_per_second"],
            "forward_backward_ms": p["forward_backward"], "communicate_ms": p["communicate"],
            "optimizer_ms": p["optimizer"], "timings_contaminated": j.get("timings_contaminated"),
            "batch": j["batch"]}


def run(crossover, model, steps, ranks, threads, reduce, precision="f32", batch=None,
        apart=1):
    """ranks > 1: one mpirun job. apart > 1: that many separate processes started at once (the
    slowest one's figures, as the ranks' step waits for the slowest)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [crossover, "train", model, "--steps", str(steps), "--threads", str(threads),
               "--checkpoint-every", "off", "-q", "--precision", precision]
        if batch:
            cmd += ["--batch", str(batch)]
        if ranks > 1:
            cmd = ["mpirun", "-np", str(ranks)] + cmd + ["--reduce", reduce]
        env = dict(os.environ, **MPI_ENV)
        outs = [os.path.join(tmp, f"r{i}.json") for i in range(apart)]
        procs = [subprocess.Popen(cmd + ["--json", out], cwd=tmp, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for out in outs]
        for proc in procs:
            text, _ = proc.communicate()
            if proc.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed:\n{text}")
        results = []
        for out in outs:
            with open(out) as f:
                results.append(summary(json.load(f)))
    return max(results, key=lambda r: r["step_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crossover", default="build/crossover")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", default="disc-12:40,mnist-cnn:40", help="NAME:STEPS,...")
    ap.add_argument("--precision", default="f32", help="f32 or bf16 (the CPU's AMX or AVX-512 BF16)")
    ap.add_argument("--reduce", default="shared,after-backward,overlap",
                    help="the ranks' reduce modes to run, comma-separated")
    ap.add_argument("--json")
    a = ap.parse_args()
    a.crossover = os.path.abspath(a.crossover)
    n = a.ranks
    whole = "1 process x %d threads" % n
    alone, together = "a rank's share alone (x %d)" % n, "%d shares at once, not summed (x %d)" % (n, n)
    # name, ranks, threads, reduce, processes apart; the shares train batch / n.
    configs = [(whole, 1, n, "", 1), (alone, 1, 1, "", 1), (together, 1, 1, "", n)]
    configs += [("%d ranks x 1 thread, %s" % (n, r), n, 1, r, 1) for r in a.reduce.split(",")]
    results = {}
    for spec in a.models.split(","):
        model, steps = spec.split(":")
        runs = {c[0]: [] for c in configs}
        for _ in range(a.repeat):
            batch = None
            for name, ranks, threads, reduce, apart in configs:
                share = batch // n if name in (alone, together) else None
                r = run(a.crossover, model, int(steps), ranks, threads, reduce, a.precision,
                        share, apart)
                if name in (alone, together):
                    r["samples_per_s"] *= n
                batch = batch or r["batch"]
                runs[name].append(r)
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
