#!/usr/bin/python3
"""The classic Keras networks (mnist-mlp, mnist-cnn, imdb-lstm) in crossover and in PyTorch, in one
run: time per training step on the same batch size, optimizer and data shapes.

This measures speed only: both engines train on the same random data (images in [0,1), token ids
below the vocabulary) written to a CSV that crossover reads with --data, for a fixed number of
steps; the first step is the warm-up and is excluded from both medians. The accuracy targets are
measured on the real data with `crossover train` (see docs/benchmarks.md).

The PyTorch peer: Debian's python3-torch over Debian's OpenBLAS, at every pair of intra-op threads
(torch.set_num_threads) and OpenBLAS threads (OPENBLAS_NUM_THREADS) up to the cores, in f32 and
under torch.autocast("cpu", dtype=torch.bfloat16), each timed; the ratio is against the fastest of
them (bench/peer.py peers(), as bench/disc_vs_torch.py).

    /usr/bin/python3 bench/classic_vs_torch.py [--build build] [--models mnist-mlp,...]
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

import peer  # bench/peer.py: what the benchmarks and the golden tests share

# Steps timed per model (the first is the warm-up); the batch, shapes and optimizer are the spec's
# (peer.CLASSIC).
STEPS = {"mnist-mlp": 40, "mnist-cnn": 12, "imdb-lstm": 40}


def data(name):
    m = peer.CLASSIC[name]
    rng = np.random.RandomState(0)
    n = m.batch * STEPS[name]
    features = int(np.prod(m.shape))
    if m.vocab:
        x = rng.randint(0, m.vocab, size=(n, features)).astype(np.float32)
        y = rng.randint(0, 2, size=n)
    else:
        x = rng.uniform(0.0, 1.0, size=(n, features)).astype(np.float32)
        y = rng.randint(0, 10, size=n)
    return x, y


def write_csv(path, x, y, integer):
    """Six significant digits (peer.write_csv writes every value exactly, but at ~4 million values
    for mnist-mlp that takes seconds): this data only has to be of the right shape, not exact."""
    fmt = "%d" if integer else "%.6g"
    np.savetxt(path, np.hstack([x, y[:, None].astype(np.float32)]), fmt=fmt, delimiter=",")


def torch_worker(args):
    """Times one model in PyTorch; prints a JSON line. One process per configuration."""
    import torch
    peer.apply_thread_settings(torch)
    torch.manual_seed(0)
    name = args.model
    m = peer.CLASSIC[name]
    model = peer.builtin_model(name)
    model.train()
    opt = peer.torch_optimizer(model.parameters(), m.optimizer)
    x, y = data(name)
    if m.vocab:
        xs = torch.from_numpy(x.astype(np.int64))
        ys = torch.from_numpy(y.astype(np.float32))
        loss_fn = torch.nn.BCEWithLogitsLoss()
    else:
        xs = torch.from_numpy(x).reshape(-1, *m.shape)
        ys = torch.from_numpy(y.astype(np.int64))
        loss_fn = torch.nn.CrossEntropyLoss()
    batch = m.batch
    step_seconds = []
    for s in range(STEPS[name]):
        t0 = time.perf_counter()
        opt.zero_grad()
        with peer.peer_precision(torch):
            loss = loss_fn(model(xs[s * batch:(s + 1) * batch]), ys[s * batch:(s + 1) * batch])
        loss.backward()
        opt.step()
        loss.item()
        step_seconds.append(time.perf_counter() - t0)
    print(json.dumps({**peer.step_stats(step_seconds), "threads": torch.get_num_threads(),
                      "version": torch.__version__}))


def main():
    p = peer.comparison_parser(__doc__, "classic_vs_torch.json", ",".join(peer.CLASSIC),
                               "comma-separated model names")
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return torch_worker(args)

    import torch
    binary = os.path.join(args.build, "crossover")
    print(peer.machine_line(torch))
    precisions = args.precisions.split(",")
    peaks = peer.crossover_peaks(args.build, precisions)
    peak = peaks["f32"] if "f32" in peaks else next(iter(peaks.values()))
    print("crossover matmul peaks: " + ", ".join(f"{p} {v:.1f} GFLOP/s" for p, v in peaks.items()))
    peer_list = peer.peers()
    peer_rates = peer.peer_matmul_rates(peer_list)
    peer.print_peaks(peaks, peer_rates)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'model':10} {'params':>8} {'batch':>5} {'steps':>5} " + peer.peer_header(peer_list)
              + " " + peer.crossover_header(precisions))
        for name in args.models.split(","):
            if name not in peer.CLASSIC:
                sys.exit(f"unknown model '{name}' (expected one of: {', '.join(peer.CLASSIC)})")
            batch, steps, vocab = peer.CLASSIC[name].batch, STEPS[name], peer.CLASSIC[name].vocab
            x, y = data(name)
            csv = os.path.join(tmp, f"{name}.csv")
            write_csv(csv, x, y, integer=bool(vocab))
            docs = peer.time_crossover(binary, name, os.path.join(tmp, f"{name}.json"), precisions,
                                       "--data", csv, "--epochs", "1")
            # The ratio is against crossover at the last precision asked (bf16 where it runs).
            xo = docs[precisions[-1]]
            row = {"model": name, "params": xo["params"], "batch": batch, "steps": steps,
                   "crossover_precision": precisions[-1],
                   "crossover_ms": xo["median_step_ms"], "crossover_cv": xo["step_ms"]["cv"],
                   "crossover_gflops": xo["gflops"], "peak_gflops": peaks[precisions[-1]],
                   "crossover": peer.crossover_fields(docs, peaks)}
            worker_args = ["--model", name]
            row["peers"] = peer.time_peers(peer_list, row["crossover_ms"],
                                           lambda env: peer.run_worker(__file__, worker_args, env))
            rows.append(row)
            print(f"{name:10} {row['params']:>8} {batch:>5} {steps:>5} "
                  + peer.peer_cells(row["peers"], 3) + " " + peer.crossover_cells(docs, peaks, 3),
                  flush=True)
    path = peer.write_comparison(args.out, "classic_vs_torch.json",
                                 "crossover.bench.classic_vs_torch/1", torch, peak, rows, peer_rates)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
