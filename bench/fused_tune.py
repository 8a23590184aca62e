#!/usr/bin/python3
"""Issue 37's end-to-end target on this machine: 16 disc-4 trials of 20 epochs (8 learning rates x
2 seeds, each seed its own disc) as one `crossover tune` with the trials fused (--fuse auto)
against the same 16 trials one process each (--fuse off: the measured default of trials at once,
and one at a time). Each configuration is the whole command, timed from start to end as a user
waits for it, interleaved `--repeat` times; medians and ratios are printed, and every trial's
objective is checked against its unfused value (within 1e-5 relative). Each run is a new search in
a folder of its own, as a user starts one; with --restart each runs in one folder and discards the
search before it (its 16 trials' files deleted inside the timed command, as until 2026-11-29).

  /usr/bin/python3 bench/fused_tune.py [--crossover build/crossover] [--repeat 5] [--restart]
      [--json FILE]

Measure only on a quiet machine: the runs share the cores with anything else running.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_parallel import tune  # noqa: E402  the same whole-command timing

SEARCH = ["disc-4", "--vary", "lr=0.02,0.05,0.1,0.2,0.3,0.4,0.5,0.6", "--vary", "train.seed=1,2",
          "--epochs", "20", "--quiet"]
CONFIGS = [("fused (--fuse auto)", []),
           ("one process each, measured at once (--fuse off)", ["--fuse", "off"]),
           ("one process each, one at a time", ["--fuse", "off", "--parallel", "1"])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crossover", default="build/crossover")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--restart", action="store_true",
                    help="every run in one folder, discarding the search before it (--restart)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    binary = os.path.abspath(a.crossover)
    walls = {name: [] for name, _ in CONFIGS}
    objectives = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeat):
            for c, (name, extra) in enumerate(CONFIGS):  # interleaved: a slow spell hits each
                out = os.path.join(tmp, "out" if a.restart else f"out-{i}-{c}")
                wall, r = tune(binary, out, extra, SEARCH, restart=a.restart)
                walls[name].append(wall)
                objectives.setdefault(name, {t["id"]: t["objective"] for t in r["trials"]})
                print(f"run {i + 1} {name:50s} {wall:6.3f} s", flush=True)
    fused = objectives[CONFIGS[0][0]]
    apart = objectives[CONFIGS[1][0]]
    worst = max(abs(fused[t] - apart[t]) / max(abs(apart[t]), 1e-3) for t in apart)
    medians = {name: statistics.median(w) for name, w in walls.items()}
    print()
    for name, m in medians.items():
        print(f"{name:50s} median {m:6.3f} s (min {min(walls[name]):.3f}, max "
              f"{max(walls[name]):.3f}), {m / medians[CONFIGS[0][0]]:5.2f}x the fused search")
    print(f"largest difference of a trial's objective, fused against one process: {worst:.3g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"search": SEARCH, "restart": a.restart, "walls": walls, "medians": medians,
                       "worst_objective_difference": worst}, f, indent=2)
    if worst > 1e-5:
        sys.exit("a fused trial's objective differs from its unfused value by more than 1e-5")


if __name__ == "__main__":
    main()
