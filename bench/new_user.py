#!/usr/bin/python3
"""The new-user scenario of issue 19, run as a user would: a 784-256-256-10 MLP with Adam on a
2,000-row CSV (random pixels, 10 classes), 20 epochs of batch 64, and the question "should I buy
or rent a GPU for this?". Four steps, each printed with what crossover answered:

1. `crossover advise mlp.toml` on a quiet machine: the verdict line.
2. The same again without --out: the finished job is not written over (a dated folder).
3. `crossover train mlp.toml --save /proc/nope/w.safetensors`: refused before any training.
4. `crossover advise mlp.toml` beside a process spinning on every core: the timings flagged, and
   the verdict's time said not to be trusted.

  /usr/bin/python3 bench/new_user.py [--crossover build/crossover]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

SPEC = """[model]
input = [784]
layers = [ { type = "linear", out = 256 }, { type = "relu" }, { type = "linear", out = 256 },
           { type = "relu" }, { type = "linear", out = 10 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "adam", lr = 0.001 }
batch = 64
epochs = 20
shuffle = true
[data]
source = "csv:data.csv"
"""


def run(binary, args, cwd):
    start = time.monotonic()
    p = subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def lines_with(text, *pieces):
    return [line for line in text.splitlines() if any(p in line for p in pieces)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crossover", default="build/crossover")
    a = ap.parse_args()
    binary = os.path.abspath(a.crossover)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "data.csv"), "w") as f:
            f.write(",".join(f"p{i}" for i in range(784)) + ",label\n")
            for _ in range(2000):
                f.write(",".join(f"{rng.random():.4f}" for _ in range(784)) +
                        f",{rng.randrange(10)}\n")
        with open(os.path.join(d, "mlp.toml"), "w") as f:
            f.write(SPEC)

        print("1. advise, quiet machine")
        rc, out, _ = run(binary, ["advise", "mlp.toml"], d)
        for line in lines_with(out, "mlp on cpu", "Verdict", "Crossover", "whole range", "! "):
            print("   " + line)
        first = json.load(open(os.path.join(d, "crossover-results", "results.json")))
        print(f"   exit {rc}; results.json verdict.worth_it = {first['verdict']['worth_it']}")

        print("2. advise again, no --out")
        rc, out, _ = run(binary, ["advise", "mlp.toml"], d)
        for line in lines_with(out, "holds the finished job"):
            print("   " + line)
        folders = sorted(n for n in os.listdir(d) if n.startswith("crossover-results"))
        print(f"   exit {rc}; folders: {', '.join(folders)}")

        print("3. train with an unwritable --save")
        rc, out, seconds = run(binary, ["train", "mlp.toml", "--save", "/proc/nope/w.safetensors"],
                               d)
        for line in lines_with(out, "error", "epoch 1/"):
            print("   " + line)
        print(f"   exit {rc} after {seconds:.2f} s")

        print("4. advise beside a process spinning on every core")
        spinners = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
                    for _ in range(os.cpu_count() or 1)]
        try:
            time.sleep(0.5)
            rc, out, _ = run(binary, ["advise", "mlp.toml", "--out", "busy"], d)
        finally:
            for s in spinners:
                s.kill()
                s.wait()
        for line in lines_with(out, "mlp on cpu", "warning", "Verdict", "! "):
            print("   " + line)
        busy = json.load(open(os.path.join(d, "busy", "results.json")))
        print(f"   exit {rc}; timings_contaminated = {busy['runs'][0]['timings_contaminated']}, "
              f"verdict.caution set = {bool(busy['verdict']['caution'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
