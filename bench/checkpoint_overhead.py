#!/usr/bin/env python3
"""What checkpoints cost a training run: each model trained with checkpoints off and with one
every N steps, alternating, several times; the medians of the training time (the step loop and
the evaluations, from `train --json`), the checkpoints written, and the time the step loop waited
for them (the copy to host memory; the write runs on a background thread, whose CPU use shows in
the training time). The cost at the default interval (one checkpoint a minute) follows from the
cost of one checkpoint: that cost divided by 60 s.

    bench/checkpoint_overhead.py [--binary build/crossover] [--repeats 3] [--every 100]
        [--model disc-10] [--model mnist-cnn:1] [--model imdb-lstm:1] (NAME[:EPOCHS]) [--json F]

Measure with nothing else running on the machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT_INTERVAL_S = 60.0


def train(binary, model, epochs, every, workdir):
    out = os.path.join(workdir, "r.json")
    args = [binary, "train", model, "-q", "--json", out, "--checkpoint-every", every,
            "--checkpoint-dir", os.path.join(workdir, "ck")]
    if epochs:
        args += ["--epochs", str(epochs)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, cwd=workdir)
    with open(out) as f:
        r = json.load(f)
    c = r["checkpoints"]
    steps = r["steps_per_epoch"] * len(r["epochs"])
    return r["train_seconds"], c["written"], c["step_loop_wait_ms"], steps


def summarise(model, off, on, every):
    """The rows of one model: medians of (seconds, written, wait_ms, steps) for off and on."""
    t_off = statistics.median(x[0] for x in off)
    t_on = statistics.median(x[0] for x in on)
    written = statistics.median(x[1] for x in on)
    wait_ms = statistics.median(x[2] for x in on)
    per_checkpoint_s = (t_on - t_off) / written if written else float("nan")
    return {
        "model": model,
        "steps": on[0][3],
        "seconds_off": t_off,
        "seconds_on": t_on,
        "every": every,
        "checkpoints": written,
        "overhead_percent": 100 * (t_on - t_off) / t_off,
        "wait_ms_per_checkpoint": wait_ms / written if written else float("nan"),
        "seconds_per_checkpoint": per_checkpoint_s,
        "default_overhead_percent": 100 * max(per_checkpoint_s, 0) / DEFAULT_INTERVAL_S,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default="build/crossover")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--model", action="append")
    p.add_argument("--json", help="also write the rows to this file")
    a = p.parse_args()
    models = a.model or ["disc-10", "mnist-cnn:1", "imdb-lstm:1"]
    binary = os.path.abspath(a.binary)
    every = f"{a.every}steps"
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for m in models:
            name, _, epochs = m.partition(":")
            off, on = [], []
            for _ in range(a.repeats):  # alternating, so drift affects both alike
                off.append(train(binary, name, epochs, "off", workdir))
                on.append(train(binary, name, epochs, every, workdir))
            rows.append(summarise(name, off, on, every))
            r = rows[-1]
            print(f"{r['model']:10} {r['steps']:6} steps  off {r['seconds_off']:8.3f} s  "
                  f"{every} {r['seconds_on']:8.3f} s ({r['checkpoints']:.0f} checkpoints)  "
                  f"{r['overhead_percent']:+6.2f}%  step loop waited "
                  f"{r['wait_ms_per_checkpoint']:.2f} ms each; one checkpoint costs "
                  f"{1e3 * r['seconds_per_checkpoint']:.1f} ms -> "
                  f"{r['default_overhead_percent']:.3f}% at one a minute", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
