#!/usr/bin/python3
"""The disc depth sweep in crossover and in PyTorch, in one run, on the same data and weights.

For each disc-L model this script writes the disc data set as CSV and PyTorch's initial weights as
safetensors, trains the torch.nn.Sequential in PyTorch, trains crossover from the same weights on the
same CSV, and prints the median time per training step, the ratios, crossover's GFLOP/s against the
measured matmul peak, and both final losses (crossover's and the fastest f32 peer's: equal to
float32 rounding, the math is the same).

The PyTorch peer at its best: Debian's python3-torch over Debian's OpenBLAS (libopenblas0-pthread,
which scripts/setup installs), timed at every pair of intra-op threads (torch.set_num_threads) and
OpenBLAS threads (OPENBLAS_NUM_THREADS) up to the cores, each in f32 and under
torch.autocast("cpu", dtype=torch.bfloat16), each in a process of its own; the ratio is against the
fastest of them, named in the "best peer" column (intra-op x BLAS threads, and "bf16" for
autocast). Each setting's own matmul rate in its precision is measured in the same run.

    /usr/bin/python3 bench/disc_vs_torch.py [--build build] [--models 2-12] [--out bench/out]

Run it with the system interpreter: Debian's torch is installed for /usr/bin/python3.
"""
import argparse
import json
import os
import tempfile
import time

import numpy as np

import peer  # bench/peer.py: what the benchmarks and the golden tests share

BATCH = peer.DISC_BATCH
SAMPLES = peer.DISC_SAMPLES
# PyTorch with reference BLAS needs ~1.4 s per disc-12 step on the 2-core machine, so the largest
# models train for fewer epochs; both engines always train the same epochs from the same weights.
EPOCHS_BY_LAYERS = {**{layers: 100 for layers in range(2, 9)}, 9: 20, 10: 5, 11: 2, 12: 2}


def disc_data(seed=0):
    """The classic disc set: uniform [0,1]^2, label x^2+y^2 < 1/(2 pi), globally standardized."""
    rng = np.random.RandomState(seed)
    xy = rng.uniform(0.0, 1.0, size=(SAMPLES, 2))
    labels = (xy[:, 0] ** 2 + xy[:, 1] ** 2 < 1.0 / (2.0 * np.pi)).astype(np.int64)
    xy = (xy - xy.mean()) / xy.std()
    return xy.astype(np.float32), labels


def torch_worker(args):
    """Trains one model in PyTorch; prints a JSON line. One process per configuration."""
    import torch
    peer.apply_thread_settings(torch)
    torch.manual_seed(0)
    model = peer.builtin_model(f"disc-{args.layers}")
    state = torch.load(args.init_pt)
    model.load_state_dict(state)
    x, y = disc_data()
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    opt = peer.torch_optimizer(model.parameters(), peer.DISC_OPTIMIZER)
    loss_fn = torch.nn.CrossEntropyLoss()
    step_seconds, losses = [], []
    for _ in range(args.epochs):
        total = 0.0
        for start in range(0, SAMPLES, BATCH):
            t0 = time.perf_counter()
            opt.zero_grad()
            with peer.peer_precision(torch):
                loss = loss_fn(model(x[start:start + BATCH]), y[start:start + BATCH])
            loss.backward()
            opt.step()
            step_seconds.append(time.perf_counter() - t0)
            total += loss.item()
        losses.append(total / (SAMPLES // BATCH))  # the mean per batch, as crossover reports
    print(json.dumps({**peer.step_stats(step_seconds), "final_loss": losses[-1],
                      "threads": torch.get_num_threads(), "version": torch.__version__}))


def parse_models(text):
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main():
    p = peer.comparison_parser(__doc__, "disc_vs_torch.json", "2-12",
                               "disc depths, e.g. 2-12 or 10")
    p.add_argument("--layers", type=int, help=argparse.SUPPRESS)
    p.add_argument("--epochs", type=int, help=argparse.SUPPRESS)
    p.add_argument("--init-pt", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return torch_worker(args)

    import torch
    binary = os.path.join(args.build, "crossover")
    print(peer.machine_line(torch))
    precisions = args.precisions.split(",")
    peaks = peer.crossover_peaks(args.build, precisions)
    peak = peaks["f32"] if "f32" in peaks else next(iter(peaks.values()))
    peer_list = peer.peers()
    peer_rates = peer.peer_matmul_rates(peer_list)
    peer.print_peaks(peaks, peer_rates)
    x, y = disc_data()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "disc.csv")
        peer.write_csv(csv, x, y, header=["x", "y", "label"])
        print(f"{'model':8} {'params':>9} {'epochs':>6} " + peer.peer_header(peer_list)
              + " " + peer.crossover_header(precisions) + f" {'torch loss':>11} {'xo loss':>11}")
        for layers in parse_models(args.models):
            epochs = EPOCHS_BY_LAYERS[layers]
            torch.manual_seed(0)
            model = peer.builtin_model(f"disc-{layers}")
            init_pt = os.path.join(tmp, f"disc-{layers}.pt")
            torch.save(model.state_dict(), init_pt)
            init = os.path.join(tmp, f"disc-{layers}.safetensors")
            peer.write_safetensors(init, model.state_dict())
            docs = peer.time_crossover(binary, f"disc-{layers}",
                                       os.path.join(tmp, f"disc-{layers}.json"), precisions,
                                       "--data", csv, "--init", init, "--epochs", str(epochs))
            # The ratio is against crossover at the last precision asked (bf16 where it runs).
            xo = docs[precisions[-1]]
            row = {"model": f"disc-{layers}", "params": xo["params"], "epochs": epochs,
                   "crossover_precision": precisions[-1],
                   "crossover_ms": xo["median_step_ms"], "crossover_cv": xo["step_ms"]["cv"],
                   "crossover_gflops": xo["gflops"], "peak_gflops": peaks[precisions[-1]],
                   "crossover_final_loss": xo["final_loss"],
                   "crossover": peer.crossover_fields(docs, peaks)}
            worker_args = ["--layers", str(layers), "--epochs", str(epochs), "--init-pt", init_pt]
            row["peers"] = peer.time_peers(peer_list, row["crossover_ms"],
                                           lambda env: peer.run_worker(__file__, worker_args, env))
            rows.append(row)
            print(f"{row['model']:8} {row['params']:>9} {epochs:>6} "
                  + peer.peer_cells(row["peers"], 4) + " " + peer.crossover_cells(docs, peaks, 4)
                  + f" {peer.best_peer(row['peers'], 'f32')[1]['final_loss']:>11.6f} "
                  f"{row['crossover_final_loss']:>11.6f}", flush=True)
    path = peer.write_comparison(args.out, "disc_vs_torch.json", "crossover.bench.disc_vs_torch/1",
                                 torch, peak, rows, peer_rates)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
