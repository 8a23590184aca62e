#!/usr/bin/python3
"""How long crossover takes to end after SIGTERM (or SIGINT), in each long phase outside the step
loop: generating data, reading a large CSV, probing a device's peaks, evaluating a large test
split. Each case starts `crossover`, waits until it has been in the phase for a while, sends the
signal, and times the exit; it repeats and prints the median and the worst, with the exit code
(130: stopped as asked) and the line naming what was cut short.

  /usr/bin/python3 bench/stop_latency.py [--crossover build/crossover] [--repeat 5]
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

GENERATION = """[model]
name = "long-generation"
input = [1000]
layers = [ { type = "embedding", vocab = 1000, out = 4 }, { type = "lstm", out = 4 },
           { type = "linear", out = 1 } ]
loss = "bce"
[train]
batch = 64
epochs = 1
[data]
source = "imdb-synthetic"
samples = 100000
test_samples = 0
"""

EVALUATION = """[model]
name = "long-evaluation"
input = [2]
layers = [ { type = "linear", out = 2048 }, { type = "relu" }, { type = "linear", out = 2048 },
           { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
batch = 64
epochs = 2
[data]
source = "disc"
samples = 64
test_samples = 2000000
"""

CSV_MODEL = """[model]
name = "long-csv"
input = [64]
layers = [ { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
batch = 64
epochs = 1
[data]
source = "csv:big.csv"
"""


def write_inputs(folder):
    with open(os.path.join(folder, "generation.toml"), "w") as f:
        f.write(GENERATION)
    with open(os.path.join(folder, "evaluation.toml"), "w") as f:
        f.write(EVALUATION)
    with open(os.path.join(folder, "csv.toml"), "w") as f:
        f.write(CSV_MODEL)
    # 400,000 rows of 64 features: seconds of parsing.
    row = ",".join(["0.125"] * 64)
    with open(os.path.join(folder, "big.csv"), "w") as f:
        for i in range(400_000):
            f.write(f"{row},{i % 2}\n")


def stop_once(binary, args, folder, delay, sig):
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(folder, "cache"))
    p = subprocess.Popen([binary] + args, cwd=folder, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=300)
    seconds = time.monotonic() - t0
    said = [l for l in err.splitlines() if "stopped while" in l or "interrupted" in l]
    return seconds, p.returncode, said[-1] if said else err.strip().splitlines()[-1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crossover", default="build/crossover")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    binary = os.path.abspath(a.crossover)
    cases = [
        # name, arguments, seconds into the run when the signal goes (inside the phase; a list is
        # cycled through, to land at different points of a phase made of different steps)
        ("generating imdb-synthetic", ["train", "generation.toml"], 2.0, signal.SIGTERM),
        ("reading a 400k-row CSV", ["train", "csv.toml"], 0.3, signal.SIGTERM),
        ("evaluating 2M test samples",
         ["train", "evaluation.toml", "--checkpoint-every", "off"], 3.0, signal.SIGINT),
        ("probing peaks (--reprobe)",
         ["advise", "disc-2", "--devices", "cpu", "--reprobe", "--out", "out", "--overwrite"],
         [0.2, 0.5, 0.8, 1.1, 1.4, 1.7], signal.SIGTERM),
    ]
    with tempfile.TemporaryDirectory() as folder:
        write_inputs(folder)
        print(f"{'phase':<28} {'median s':>9} {'worst s':>8}  exit  what it said")
        for name, args, delay, sig in cases:
            times, codes, said = [], set(), ""
            delays = delay if isinstance(delay, list) else [delay]
            for i in range(a.repeat * len(delays)):
                seconds, code, said = stop_once(binary, args, folder, delays[i % len(delays)], sig)
                times.append(seconds)
                codes.add(code)
            print(f"{name:<28} {statistics.median(times):9.3f} {max(times):8.3f}  "
                  f"{','.join(map(str, sorted(codes))):>4}  {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
