#!/usr/bin/python3
"""What another busy process does to crossover's CPU timings, and what helps: the new-user
scenario of a 784-256-256-10 MLP with Adam on a 2,000-row CSV, trained quiet and beside a spinning
process, with 2 threads (the default here) or 1, and OpenMP's waiting active (the default) or
passive (OMP_WAIT_POLICY=passive). Prints, per configuration, the median over --repeat runs of the
median step, the mean step (training time over steps: what a user waits for) and the run's
mean_other_cores (crossover's own reading of the other load).

  /usr/bin/python3 bench/contention.py [--crossover build/crossover] [--repeat 5]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

SPEC = """[model]
name = "user-mlp"
input = [784]
layers = [ { type = "linear", out = 256 }, { type = "relu" }, { type = "linear", out = 256 },
           { type = "relu" }, { type = "linear", out = 10 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "adam", lr = 0.001 }
batch = 32
epochs = 5
[data]
source = "csv:u.csv"
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crossover", default="build/crossover")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    binary = os.path.abspath(a.crossover)
    with tempfile.TemporaryDirectory() as folder:
        rng = random.Random(1)
        with open(os.path.join(folder, "u.csv"), "w") as f:
            for i in range(2000):
                f.write(",".join(f"{rng.random():.3f}" for _ in range(784)) + f",{i % 10}\n")
        with open(os.path.join(folder, "u.toml"), "w") as f:
            f.write(SPEC)
        print(f"{'machine':<6} {'threads':>7} {'waiting':<8} {'median step ms':>14} "
              f"{'mean step ms':>12} {'other cores':>11}")
        for busy in (False, True):
            spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if busy else None
            try:
                for threads in (2, 1):
                    for policy in ("active", "passive"):
                        medians, means, other = [], [], []
                        for _ in range(a.repeat):
                            env = dict(os.environ, OMP_WAIT_POLICY=policy)
                            subprocess.run([binary, "train", "u.toml", "--threads", str(threads),
                                            "--checkpoint-every", "off", "--json", "r.json"],
                                           cwd=folder, env=env, check=True,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                            with open(os.path.join(folder, "r.json")) as f:
                                r = json.load(f)
                            medians.append(r["median_step_ms"])
                            steps = sum(1 for _ in r["epochs"]) * 63  # 2,000 rows / 32: 63 steps
                            means.append(1e3 * sum(e["seconds"] for e in r["epochs"]) / steps)
                            other.append(r["mean_other_cores"] or 0.0)
                        print(f"{'busy' if busy else 'quiet':<6} {threads:>7} {policy:<8} "
                              f"{statistics.median(medians):14.3f} {statistics.median(means):12.3f} "
                              f"{statistics.median(other):11.2f}")
            finally:
                if spinner:
                    spinner.kill()
                    spinner.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
