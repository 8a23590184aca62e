#!/usr/bin/python3
"""Issue 14's target on this machine: a 16-trial search of mnist-mlp (Fashion-MNIST, 2 epochs
each: lr x dropout, 4 x 4) run with K trials at once against the same trials one after another.
Each configuration is the whole `crossover tune` command, timed from start to end (start-up, data
loading and evaluation included, as a user waits for it), `--repeat` times; the medians and their
ratio are printed, with the trials' own figures from results.json.

  /usr/bin/python3 bench/tune_parallel.py [--crossover build/crossover] [--repeat 3]

Measure only on a quiet machine: concurrent trials share the cores with anything else running.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SEARCH = ["mnist-mlp", "--vary", "lr=0.0003,0.001,0.003,0.01", "--vary", "dropout.p=0,0.1,0.2,0.4",
          "--epochs", "2", "--quiet"]


def tune(binary, out, extra, search=SEARCH, restart=True):
    """The whole `crossover tune` of `search`: its wall time and its results.json. With `restart`,
    a search already in `out` is discarded by the timed command itself (--restart)."""
    start = time.monotonic()
    p = subprocess.run([binary, "tune", *search, "--out", out, *(["--restart"] if restart else []),
                        *extra], capture_output=True, text=True)
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"crossover tune {' '.join(extra)} failed:\n{p.stdout}{p.stderr}")
    with open(os.path.join(out, "results.json")) as f:
        return wall, json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crossover", default="build/crossover")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    binary = os.path.abspath(a.crossover)
    cores = len(os.sched_getaffinity(0))
    configs = [("one at a time, %d threads each" % cores, ["--parallel", "1"]),
               ("%d at once, 1 thread each" % cores, ["--parallel", str(cores), "--threads", "1"]),
               ("measured default", [])]
    with tempfile.TemporaryDirectory() as tmp:
        walls = {}
        for name, extra in configs:
            times = []
            for i in range(a.repeat):
                wall, r = tune(binary, os.path.join(tmp, "out"), extra)
                times.append(wall)
                trials = r["trials"]
                best = next(t for t in trials if t["id"] == r["best"])
                print(f"{name:34s} run {i + 1}: {wall:7.1f} s wall, trials' processes "
                      f"{sum(t['process_seconds'] for t in trials):7.1f} s, best {r['best']} "
                      f"{r['objective']} {best['objective']:.4g}", flush=True)
                if not extra and i == 0:
                    for c in r["parallel"]:
                        opts = ", ".join(f"K={o['k']}: {o['samples_per_second']:.0f} samples/s"
                                         for o in c["options"])
                        print(f"  measured on {c['device']}: {opts} -> K={c['k']}")
            walls[name] = statistics.median(times)
        base = walls[configs[0][0]]
        print()
        for name, _ in configs:
            print(f"{name:34s} median {walls[name]:7.1f} s   {base / walls[name]:.2f}x the "
                  f"one-at-a-time search")


if __name__ == "__main__":
    main()
