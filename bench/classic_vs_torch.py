#!/usr/bin/python3
"""The classic Keras networks (mnist-mlp, mnist-cnn, imdb-lstm) in crossover and in PyTorch, in one
run: time per training step on the same batch size, optimizer and data shapes.

This measures speed only: both engines train on the same random data (images in [0,1), token ids
below the vocabulary) written to a CSV that crossover reads with --data, for a fixed number of
steps; the first step is the warm-up and is excluded from both medians. The accuracy targets are
measured on the real data with `crossover train` (see docs/benchmarks.md).

PyTorch peers, Debian's python3-torch 1.13 with its default settings (as bench/disc_vs_torch.py):
  torch           as installed (reference BLAS for matmuls; convolutions through its own oneDNN);
  torch+openblas  the same torch over Debian's OpenBLAS (bench/setup-peers).

    /usr/bin/python3 bench/classic_vs_torch.py [--build build] [--models mnist-mlp,...]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# name: (batch, steps timed, input shape, vocab or 0)
MODELS = {
    "mnist-mlp": (128, 40, (784,), 0),
    "mnist-cnn": (128, 12, (1, 28, 28), 0),
    "imdb-lstm": (32, 40, (80,), 20000),
}


def data(name):
    batch, steps, shape, vocab = MODELS[name]
    rng = np.random.RandomState(0)
    n = batch * steps
    features = int(np.prod(shape))
    if vocab:
        x = rng.randint(0, vocab, size=(n, features)).astype(np.float32)
        y = rng.randint(0, 2, size=n)
    else:
        x = rng.uniform(0.0, 1.0, size=(n, features)).astype(np.float32)
        y = rng.randint(0, 10, size=n)
    return x, y


def write_csv(path, x, y, integer):
    fmt = "%d" if integer else "%.6g"
    np.savetxt(path, np.hstack([x, y[:, None].astype(np.float32)]), fmt=fmt, delimiter=",")


def torch_model(name):
    import torch
    nn = torch.nn
    if name == "mnist-mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 512),
                             nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
    if name == "mnist-cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                             nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))

    class ImdbLstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(20000, 128)
            self.lstm = nn.LSTM(128, 128, batch_first=True)
            self.linear = nn.Linear(128, 1)

        def forward(self, ids):
            out, _ = self.lstm(self.embedding(ids))
            return self.linear(out[:, -1]).squeeze(1)

    return ImdbLstm()


def torch_optimizer(name, params):
    import torch
    if name == "mnist-mlp":  # Keras RMSprop defaults
        return torch.optim.RMSprop(params, lr=0.001, alpha=0.9, eps=1e-7)
    if name == "mnist-cnn":
        return torch.optim.Adadelta(params, lr=1.0, rho=0.95, eps=1e-7)
    return torch.optim.Adam(params, lr=0.001, eps=1e-7)


def torch_worker(args):
    """Times one model in PyTorch; prints a JSON line. One process per configuration."""
    import torch
    torch.manual_seed(0)
    name = args.model
    batch, steps, shape, vocab = MODELS[name]
    model = torch_model(name)
    model.train()
    opt = torch_optimizer(name, model.parameters())
    x, y = data(name)
    if vocab:
        xs = torch.from_numpy(x.astype(np.int64))
        ys = torch.from_numpy(y.astype(np.float32))
        loss_fn = torch.nn.BCEWithLogitsLoss()
    else:
        xs = torch.from_numpy(x).reshape(-1, *shape)
        ys = torch.from_numpy(y.astype(np.int64))
        loss_fn = torch.nn.CrossEntropyLoss()
    step_seconds = []
    for s in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(xs[s * batch:(s + 1) * batch]), ys[s * batch:(s + 1) * batch])
        loss.backward()
        opt.step()
        loss.item()
        step_seconds.append(time.perf_counter() - t0)
    timed = step_seconds[1:]
    print(json.dumps({"median_step_ms": statistics.median(timed) * 1e3,
                      "cv": statistics.pstdev(timed) / statistics.mean(timed),
                      "threads": torch.get_num_threads(), "version": torch.__version__}))


def peers():
    here = os.path.dirname(os.path.abspath(__file__))
    openblas = subprocess.run([os.path.join(here, "setup-peers")], check=True,
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]
    openblas = os.path.join(os.path.dirname(here), openblas)
    return [("torch", {}), ("torch+openblas", {"LD_LIBRARY_PATH": openblas})]


def run_torch(name, env_extra):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--model", name]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env={**os.environ, **env_extra})
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_crossover(binary, name, csv, tmp):
    out_json = os.path.join(tmp, f"{name}.json")
    subprocess.run([binary, "train", name, "--data", csv, "--epochs", "1", "--json", out_json,
                    "--quiet"], check=True, capture_output=True, text=True)
    with open(out_json) as f:
        return json.load(f)


def matmul_peak(build):
    out = subprocess.run([os.path.join(build, "bench", "crossover_matmul_peak")], check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1].split()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build", help="crossover build folder")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    p.add_argument("--out", default="bench/out", help="folder for classic_vs_torch.json")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return torch_worker(args)

    import torch
    binary = os.path.join(args.build, "crossover")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"torch {torch.__version__} (default threads {torch.get_num_threads()}); "
          f"{time.strftime('%Y-%m-%d')}")
    peak = matmul_peak(args.build)
    print(f"matmul peak: {peak:.1f} GFLOP/s")
    peer_list = peers()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'model':10} {'params':>8} {'batch':>5} {'steps':>5} "
              + "".join(f"{name + ' ms':>18} {'ratio':>7}" for name, _ in peer_list)
              + f" {'crossover ms':>12} {'cv':>6} {'GFLOP/s':>8} {'peak%':>6}")
        for name in args.models.split(","):
            if name not in MODELS:
                sys.exit(f"unknown model '{name}' (expected one of: {', '.join(MODELS)})")
            batch, steps, _, vocab = MODELS[name]
            x, y = data(name)
            csv = os.path.join(tmp, f"{name}.csv")
            write_csv(csv, x, y, integer=bool(vocab))
            xo = run_crossover(binary, name, csv, tmp)
            row = {"model": name, "params": xo["params"], "batch": batch, "steps": steps,
                   "crossover_ms": xo["median_step_ms"], "crossover_cv": xo["step_ms"]["cv"],
                   "crossover_gflops": xo["gflops"], "peak_gflops": peak, "peers": {}}
            for peer, env in peer_list:
                t = run_torch(name, env)
                t["ratio"] = t["median_step_ms"] / row["crossover_ms"]
                row["peers"][peer] = t
            rows.append(row)
            print(f"{name:10} {row['params']:>8} {batch:>5} {steps:>5} "
                  + "".join(f"{t['median_step_ms']:>18.3f} {t['ratio']:>6.1f}x"
                            for t in row["peers"].values())
                  + f" {row['crossover_ms']:>12.3f} {100 * row['crossover_cv']:>5.1f}% "
                  f"{row['crossover_gflops']:>8.1f} {100 * row['crossover_gflops'] / peak:>5.1f}%",
                  flush=True)
    os.makedirs(args.out, exist_ok=True)
    result = {"schema": "crossover.bench.classic_vs_torch/1", "date": time.strftime("%Y-%m-%d"),
              "cores": os.cpu_count(), "torch": torch.__version__, "peak_gflops": peak,
              "rows": rows}
    path = os.path.join(args.out, "classic_vs_torch.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
