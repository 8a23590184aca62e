#!/usr/bin/env python3
"""Dask's own cost in a crossover search: crossover.tune on a LocalCluster of two workers of one
thread each (processes of their own) against the same search by local tune on the same two cores
(two slots of one thread: the same groups, the same bits), interleaved, the median of each; and
whether they found the same objectives. The cluster's searches run twice: with jobs in place (the
workers see the search's folder) and with workers told to share nothing
(CROSSOVER_DASK_SHARE_NOTHING=1: every job's files travel with its task, as between hosts).

  PYTHONPATH=build/python /usr/bin/python3 bench/dask_tune.py [--repeats 5] \
                                                              [--only disc|mnist|width]

Searches: disc-4, 16 trials (4 learning rates x 4 weight decays), 20 epochs of 600 points (450 trained,
150 validation); mnist-mlp, 16 trials (the same grid), 1 epoch of Fashion-MNIST's 60,000 images
(48,000 trained, 12,000 validation); width: disc-4, 16 trials of 4 to 19 units a hidden layer
(`linear.out`), 20 epochs: no two fuse, so each trial is a job of its own. The cluster is started
once, before the timings (a user's cluster is up before the search); each search starts in a
fresh folder. Prints one line per
search and a JSON line per search with every timing.
"""
import argparse
import gzip
import json
import logging
import os
import statistics
import struct
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))

import crossover  # noqa: E402
import distributed  # noqa: E402

GRID = {"train.optimizer.lr": [0.01, 0.03, 0.1, 0.3],
        "train.optimizer.weight_decay": [0.0, 1e-4, 1e-3, 1e-2]}
FASHION = "/usr/share/datasets/fashion-mnist"


def disc(samples, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randint(0, 1024, size=(samples, 2)).astype(np.float32) / np.float32(1024)
    y = (x[:, 0] ** 2 + x[:, 1] ** 2 < 1 / (2 * np.pi)).astype(np.int32)
    return x, y


def fashion():
    with gzip.open(os.path.join(FASHION, "train-images-idx3-ubyte.gz")) as f:
        _, n, rows, cols = struct.unpack(">IIII", f.read(16))
        x = np.frombuffer(f.read(), np.uint8).reshape(n, rows * cols).astype(np.float32) / 255
    with gzip.open(os.path.join(FASHION, "train-labels-idx1-ubyte.gz")) as f:
        f.read(8)
        y = np.frombuffer(f.read(), np.uint8).astype(np.int32)
    return x, y


WIDTHS = {"linear.out": list(range(4, 20))}


def one(name, x, y, epochs, folder, client, space=None):
    start = time.perf_counter()
    kwargs = {"client": client} if client else {"threads": 1, "parallel": 2}
    s = crossover.tune(crossover.Model(name), x, y, space or GRID, epochs=epochs,
                       validation_split=0.25 if name == "disc-4" else 0.2, out=folder, verbose=0,
                       **kwargs)
    wall = time.perf_counter() - start
    return wall, [t["objective"] for t in s.result["trials"]], s.best


def share_nothing(on):
    """On a worker (client.run): whether its jobs act as if it shared no files with the client."""
    if on:
        os.environ["CROSSOVER_DASK_SHARE_NOTHING"] = "1"
    else:
        os.environ.pop("CROSSOVER_DASK_SHARE_NOTHING", None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--only", choices=["disc", "mnist", "width"])
    a = p.parse_args()
    cases = []
    if a.only in (None, "disc"):
        cases.append(("disc-4", *disc(600), 20, None))
    if a.only in (None, "mnist"):
        cases.append(("mnist-mlp", *fashion(), 1, None))
    if a.only in (None, "width"):
        cases.append(("disc-4", *disc(600), 20, WIDTHS))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client, tempfile.TemporaryDirectory() as tmp:
        for name, x, y, epochs, space in cases:
            hows = ["local", "dask", "dask, share nothing"]
            times = {how: [] for how in hows}
            found = {}
            for r in range(a.repeats):
                for how in hows[r % 3:] + hows[:r % 3]:
                    client.run(share_nothing, how == "dask, share nothing")
                    wall, objectives, best = one(name, x, y, epochs,
                                                 os.path.join(tmp, f"{name}-{hows.index(how)}-{r}"),
                                                 client if how != "local" else None, space)
                    times[how].append(wall)
                    found[how] = (objectives, best)
            local = statistics.median(times["local"])
            same = all(found[how] == found["local"] for how in hows)
            if space:
                name = f"{name} widths"
            for how in hows[1:]:
                dask = statistics.median(times[how])
                print(f"{name}: 16 trials, {epochs} epoch(s): local tune {local:.2f} s, on the "
                      f"cluster ({how}) {dask:.2f} s ({dask / local:.2f}x; target <= 1.15x + "
                      f"0.1 s: {'met' if dask <= 1.15 * local + 0.1 else 'NOT met'})")
            print(f"{name}: same objectives and best: {same}")
            print(json.dumps({"search": name, "seconds": times, "same": same,
                              "best": found["dask"][1]}))


if __name__ == "__main__":
    main()
