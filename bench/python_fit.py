#!/usr/bin/python3
"""Model.fit from Python against `crossover train` on the same model, data and epochs.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_fit.py [--repeats 3] [--json OUT]

For each model (disc-4 for 100 epochs and disc-12 for 10 on the disc data as a CSV file, mnist-cnn
for one epoch on Fashion-MNIST),
in one run and alternating: the `crossover train` process's wall time, and the wall time of
`model.fit(...)` in this process (the arrays already in memory, as a notebook has them), with the
training seconds each reported; medians and the ratio Python / CLI. Then the per-call overhead
of a one-step fit, and the peak resident memory of fitting on 1 GiB of float32 samples (an MLP of
256 inputs over 1,048,576 samples), against the RSS before the call.

Measure on a quiet machine (nothing else building or running): the two share its cores.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BUILD = os.environ.get("CROSSOVER_BUILD_DIR", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
import crossover  # noqa: E402
import peer  # noqa: E402  (bench/, this file's folder)

FASHION = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist (gzip'd IDX)


def disc_csv(folder, samples=1000, seed=0):
    rng = np.random.RandomState(seed)
    x = (rng.randint(0, 1024, size=(samples, 2)) / 1024).astype(np.float32)
    y = (x[:, 0] ** 2 + x[:, 1] ** 2 < 1 / (2 * np.pi)).astype(np.int32)
    path = os.path.join(folder, "disc.csv")
    np.savetxt(path, np.column_stack([x, y]), fmt=["%.10g", "%.10g", "%d"], delimiter=",")
    return path, x, y


def fashion(split):
    x = peer.read_idx(os.path.join(FASHION, f"{split}-images-idx3-ubyte.gz")).astype(np.float32) / 255
    y = peer.read_idx(os.path.join(FASHION, f"{split}-labels-idx1-ubyte.gz")).astype(np.int32)
    return np.ascontiguousarray(x.reshape(-1, 1, 28, 28)), y


def cli_run(model, data, epochs, folder):
    out = os.path.join(folder, "cli.json")
    command = [os.path.join(BUILD, "crossover"), "train", model, "--epochs", str(epochs),
               "--json", out, "--checkpoint-every", "off", "--quiet"]
    if data:
        command += ["--data", data]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=folder)
    wall = time.perf_counter() - start
    with open(out) as f:
        return wall, json.load(f)["train_seconds"]


def python_run(model, x, y, epochs, validation):
    m = crossover.Model(model)
    start = time.perf_counter()
    h = m.fit(x, y, epochs=epochs, validation_data=validation, verbose=0)
    return time.perf_counter() - start, h.result["train_seconds"]


def compare(name, data, x, y, epochs, repeats, folder, validation=None):
    """`validation`: the test split the CLI's source evaluates after each epoch, evaluated by
    fit as validation data (the same work)."""
    cli, py, cli_train, py_train = [], [], [], []
    for _ in range(repeats):
        wall, train = cli_run(name, data, epochs, folder)
        cli.append(wall)
        cli_train.append(train)
        wall, train = python_run(name, x, y, epochs, validation)
        py.append(wall)
        py_train.append(train)
    row = {"model": name, "epochs": epochs, "repeats": repeats,
           "cli_process_s": statistics.median(cli), "python_fit_s": statistics.median(py),
           "cli_train_s": statistics.median(cli_train),
           "python_train_s": statistics.median(py_train)}
    row["ratio_wall"] = row["python_fit_s"] / row["cli_process_s"]
    row["ratio_train"] = row["python_train_s"] / row["cli_train_s"]
    print(f"{name:10} {epochs:3} epochs: crossover train {row['cli_process_s']:.3f} s "
          f"(training {row['cli_train_s']:.3f} s), Model.fit {row['python_fit_s']:.3f} s "
          f"(training {row['python_train_s']:.3f} s): fit / train {row['ratio_wall']:.3f} wall, "
          f"{row['ratio_train']:.3f} training", flush=True)
    return row


def one_step_overhead(repeats=20):
    m = crossover.Model("disc-2")
    x = np.zeros((10, 2), np.float32)
    y = np.zeros(10, np.int32)
    m.fit(x, y, epochs=1, batch_size=10, verbose=0)  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        h = m.fit(x, y, epochs=1, batch_size=10, verbose=0)
        times.append(time.perf_counter() - start)
    step_ms = h.result["step_ms"]["median"] if h.result.get("step_ms") else float("nan")
    row = {"fit_one_step_ms": 1e3 * statistics.median(times), "repeats": repeats,
           "step_ms": step_ms}
    print(f"one-step fit: {row['fit_one_step_ms']:.2f} ms per call (median of {repeats})",
          flush=True)
    return row


def status_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def one_gib_fit():
    """In a process of its own: the 1 GiB array made, the peak resident memory reset to what is
    resident then (/proc/self/clear_refs), one fit, and how far the peak rose above it."""
    spec = """
[model]
name = "wide-input"
input = [256]
layers = [ { type = "linear", out = 64 }, { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
batch = 4096
epochs = 1
"""
    samples = 1 << 20
    x = np.random.RandomState(0).uniform(size=(samples, 256)).astype(np.float32)  # 1 GiB
    y = (x[:, 0] > 0.5).astype(np.int32)
    m = crossover.Model.from_toml(spec, "wide-input.toml")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from the resident set now
    before = status_mib("VmRSS")
    m.fit(x, y, verbose=0)
    peak = status_mib("VmHWM")
    row = {"array_mib": x.nbytes / 2**20, "rss_before_mib": before, "peak_during_fit_mib": peak,
           "raised_mib": peak - before, "raised_fraction": (peak - before) / (x.nbytes / 2**20)}
    print(f"1 GiB fit: resident {before:.0f} MiB before the fit, peak {peak:.0f} MiB during it: "
          f"raised by {row['raised_mib']:.0f} MiB, {100 * row['raised_fraction']:.1f}% of the "
          "array", flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--mnist-repeats", type=int, default=1,
                        help="mnist-cnn's repeats (an epoch takes minutes on two cores)")
    parser.add_argument("--skip-mnist", action="store_true")
    parser.add_argument("--rss-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_only:
        print(json.dumps(one_gib_fit()))
        return
    rows = {"compare": []}
    with tempfile.TemporaryDirectory() as folder:
        data, x, y = disc_csv(folder)
        for name, epochs in (("disc-4", 100), ("disc-12", 10)):
            rows["compare"].append(compare(name, data, x, y, epochs, args.repeats, folder))
        if not args.skip_mnist and os.path.isdir(FASHION):
            fx, fy = fashion("train")
            rows["compare"].append(compare("mnist-cnn", "", fx, fy, 1, args.mnist_repeats,
                                           folder, fashion("t10k")))
    rows["overhead"] = one_step_overhead()
    out = subprocess.run([sys.executable, __file__, "--rss-only"], check=True,
                         capture_output=True, text=True).stdout
    print(out.splitlines()[0], flush=True)
    rows["rss"] = json.loads(out.splitlines()[-1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
