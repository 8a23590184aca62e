#!/usr/bin/env python3
"""The search a Dask user would otherwise write, against crossover.tune on the same cluster: a
LocalCluster of two worker processes of one thread each, one run of each, in one process.

  PYTHONPATH=build/python /usr/bin/python3 bench/dask_peers.py [--trials 64] [--epochs 20]
                                                                [--repeats 1]
  PYTHONPATH=build/python /usr/bin/python3 bench/dask_peers.py --model mnist-mlp --trials 16 \
                                                                --epochs 1 [--repeats 1]

With --repeats N the three run N rounds on the same cluster, one after another in each round, and
each one's median wall time is compared (the first round, where each pays its first imports on
the workers, is printed too). With --seeds K (and --model, --trials, --epochs) nothing is timed:
each engine's search runs under K training seeds, and the best point each seed finds is printed.

- crossover: crossover.tune(crossover.Model(MODEL), x, y, grid, client=client) (fused groups,
  one task a group). MODEL: disc-4 (600 disc points, a quarter held out) or mnist-mlp
  (Fashion-MNIST's 60,000 training images, a fifth held out).
- PyTorch + client.map: one task a trial, each training the same network (the trial spec's
  Linear, ReLU and Dropout layers) from the same initial weights, with the optimizer, batch size, epochs, order and split that
  crossover's trial spec holds (read from the search's t01/spec.toml), torch.set_num_threads(1),
  the data scattered once.
- Optuna + PyTorch: Debian's python3-optuna, a study in optuna.integration.DaskStorage with a
  GridSampler over the same grid, one study.optimize task per worker, each trial the PyTorch
  function above.

The grid: learning rates x weight decays, `--trials` points in all; the objective: the validation
accuracy on the held-out part (the last samples, Keras's validation_split, as crossover's).
Before the searches, each engine trains one trial (the grid's first point) as a task alone on one
worker, and two at once (one a worker, as a search runs them; the better of two rounds): the ratio of the two engines is
crossover's single-model lead on these cores, alone and side by side, the figures the search's
ratio is read against. Prints one line per peer (wall time, trials run, best point and its
objective) and one JSON line (with each point's objective by crossover and by PyTorch, and
"new_files_ms": what 400 new files cost in the searches' folder before the rounds; crossover's
search makes about six files a trial, the peers none, so a file system slow to make files, such
as ext4 without a journal where many were removed in the last minutes, slows crossover alone:
docs/benchmarks.md, "Files a search makes").
"""
import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import tomllib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))

import crossover  # noqa: E402
import distributed  # noqa: E402


def disc(samples, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randint(0, 1024, size=(samples, 2)).astype(np.float32) / np.float32(1024)
    y = (x[:, 0] ** 2 + x[:, 1] ** 2 < 1 / (2 * np.pi)).astype(np.int32)
    return x, y


def grid_of(trials, lowest=0.001, highest=1.0):
    count = max(1, trials // 4)
    rates = [lowest * (highest / lowest) ** (k / max(1, count - 1)) for k in range(count)]
    decays = [0.0, 1e-4, 1e-3, 1e-2][:max(1, trials // len(rates))]
    return {"train.optimizer.lr": rates, "train.optimizer.weight_decay": decays}


MODELS = {"disc-4": 0.25, "mnist-mlp": 0.2}  # the searches, and the fraction each holds out


def fashion():
    sys.path.insert(0, HERE)
    from dask_tune import fashion as read
    return read()


def torch_net(model):
    """The trial spec's [model] as a torch Sequential, its modules indexed as crossover's
    state_dict names them ("0.weight", ...)."""
    import torch
    layers, width = [], model["input"][0]
    for layer in model["layers"]:
        if layer["type"] == "linear":
            layers.append(torch.nn.Linear(width, layer["out"]))
            width = layer["out"]
        elif layer["type"] == "relu":
            layers.append(torch.nn.ReLU())
        elif layer["type"] == "dropout":
            layers.append(torch.nn.Dropout(layer["p"]))
        else:
            raise ValueError(f"dask_peers: no PyTorch layer here for {layer['type']}")
    return torch.nn.Sequential(*layers)


def torch_trial(lr, weight_decay, data, train, init, held_out=0.25, seed=0):
    """One trial as a PyTorch user writes it, from the same initial weights as crossover's trials
    (`init`, the model's state_dict): the validation accuracy (percent) after training. `train`
    is the trial spec's [train] with its [model] as "model"."""
    import torch
    torch.set_num_threads(1)
    x, y = data
    n = len(x) - int(round(len(x) * held_out))
    xt, yt = torch.from_numpy(x[:n]), torch.from_numpy(y[:n].astype(np.int64))
    xv, yv = torch.from_numpy(x[n:]), torch.from_numpy(y[n:].astype(np.int64))
    torch.manual_seed(seed)
    net = torch_net(train["model"])
    net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in init.items()})
    o = train["optimizer"]
    if o["type"] == "rmsprop":
        opt = torch.optim.RMSprop(net.parameters(), lr=lr, alpha=o.get("alpha", 0.99),
                                  eps=o.get("eps", 1e-8), weight_decay=weight_decay)
    elif o["type"] == "adam":
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=o.get("momentum", 0.0),
                              weight_decay=weight_decay)
    batch = int(train["batch"])
    loss = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    for _ in range(int(train["epochs"])):
        order = torch.randperm(n, generator=g) if train.get("shuffle", True) else torch.arange(n)
        net.train()
        for i in range(0, n, batch):
            idx = order[i:i + batch]
            opt.zero_grad()
            loss(net(xt[idx]), yt[idx]).backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        return float((net(xv).argmax(1) == yv).float().mean()) * 100


def points(grid):
    return [(lr, wd) for lr in grid["train.optimizer.lr"]
            for wd in grid["train.optimizer.weight_decay"]]


def run_crossover(client, name, x, y, grid, epochs, folder):
    start = time.perf_counter()
    s = crossover.tune(crossover.Model(name), x, y, grid, epochs=epochs,
                       validation_split=MODELS[name], out=folder, verbose=0, client=client)
    wall = time.perf_counter() - start
    with open(os.path.join(folder, "trials", "t01", "spec.toml"), "rb") as f:
        spec = tomllib.load(f)
    train = dict(spec["train"], model=spec["model"])
    best = s.best_values
    each = {(v["train.optimizer.lr"], v["train.optimizer.weight_decay"]): t["objective"]
            for t, v in zip(s.result["trials"], (crossover._tune._values(t)
                                                 for t in s.result["trials"]))}
    return wall, len(s.result["trials"]), (best["train.optimizer.lr"],
                                           best["train.optimizer.weight_decay"]), \
        s.best_objective, train, each


def crossover_trial(name, lr, weight_decay, data, train, held_out):
    """One trial alone in crossover, in the worker's process, on one thread: the trial spec's
    optimizer at this point, its epochs, batch and order."""
    x, y = data
    o = dict(train["optimizer"], lr=lr, weight_decay=weight_decay)
    crossover.Model(name).fit(x, y, epochs=int(train["epochs"]), batch_size=int(train["batch"]),
                              validation_split=held_out, optimizer=o,
                              shuffle=bool(train.get("shuffle", True)), threads=1, verbose=0)


def single_model_lead(client, name, x, y, grid, train, init):
    """Each engine's one trial (the grid's first point) timed as a task: alone on one worker (the
    other idle), the best of two runs, and side by side (one on each worker at once, as a search
    runs them: the two share the machine's caches and memory), the mean of the two in the better
    of two rounds.
    {"alone": (crossover's seconds, PyTorch's), "side by side": (...)}."""
    # Keys of its own: the same arrays scattered again later would share them (Dask names data by
    # its hash), and releasing these then cancels the peers' tasks.
    data = client.scatter((x, y), broadcast=True, hash=False)
    workers = sorted(client.scheduler_info()["workers"])
    lr, wd = points(grid)[0]

    def task(fn, *args):
        start = time.perf_counter()
        fn(*args)
        return time.perf_counter() - start

    ours = (crossover_trial, name, lr, wd, data, train, MODELS[name])
    theirs = (torch_trial, lr, wd, data, train, init, MODELS[name])
    found = {"alone": [], "side by side": []}
    for trial in (ours, theirs):
        found["alone"].append(min(client.submit(task, *trial, workers=workers[:1],
                                                pure=False).result() for _ in range(2)))
        rounds = []
        for _ in range(2):  # the first pays the second worker's imports
            both = [client.submit(task, *trial, workers=[w], pure=False) for w in workers[:2]]
            rounds.append(statistics.mean(f.result() for f in both))
        found["side by side"].append(min(rounds))
    return {k: tuple(v) for k, v in found.items()}


def new_file_ms(folder, count=400):
    """Milliseconds to make `count` empty files in a new folder under `folder`, kept (removed with
    it): what a new file costs this file system here now. On ext4 without a journal, a file made
    where many were removed in the last minute or more scans past each of them
    (fs/ext4/ialloc.c, recently_deleted); a search makes about six a trial."""
    probe = tempfile.mkdtemp(prefix="new-files-", dir=folder)
    start = time.perf_counter()
    for k in range(count):
        os.close(os.open(os.path.join(probe, f"f{k}"), os.O_CREAT | os.O_WRONLY, 0o644))
    return (time.perf_counter() - start) * 1e3


def run_map(client, x, y, grid, train, init, held_out):
    start = time.perf_counter()
    data = client.scatter((x, y), broadcast=True)
    ps = points(grid)
    futures = client.map(torch_trial, [p[0] for p in ps], [p[1] for p in ps], data=data,
                         train=train, init=init, held_out=held_out, pure=False)
    found = client.gather(futures)
    wall = time.perf_counter() - start
    k = int(np.argmax(found))
    return wall, len(found), ps[k], found[k], dict(zip(ps, found))


def run_optuna(client, x, y, grid, train, init, held_out):
    import optuna
    from optuna.integration import DaskStorage
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # here; the workers log each trial
    start = time.perf_counter()
    search_space = {"lr": grid["train.optimizer.lr"],
                    "wd": grid["train.optimizer.weight_decay"]}
    storage = DaskStorage(client=client)
    study = optuna.create_study(storage=storage, direction="maximize",
                                sampler=optuna.samplers.GridSampler(search_space))
    data = client.scatter((x, y), broadcast=True)

    def optimize(data, n):
        def objective(trial):
            return torch_trial(trial.suggest_float("lr", 1e-9, 10.0),
                               trial.suggest_float("wd", 0.0, 1.0), data, train, init, held_out)
        study.optimize(objective, n_trials=n)

    n = len(points(grid))
    workers = len(client.scheduler_info()["workers"])
    futures = [client.submit(optimize, data, -(-n // workers), pure=False)
               for _ in range(workers)]
    distributed.wait(futures)
    for f in futures:
        f.result()
    wall = time.perf_counter() - start
    trials = [t for t in study.trials if t.value is not None]
    return wall, len(trials), (study.best_params["lr"], study.best_params["wd"]), \
        study.best_value


def best_by_seed(client, name, x, y, grid, epochs, folder, seeds):
    """Each engine's search run with `seeds` training seeds (crossover's train.seed, PyTorch's
    torch.manual_seed and its order's generator): each point's objective under each seed, and
    the best point each seed finds. Where one engine's own best moves from seed to seed, two
    engines' bests cannot be expected to agree."""
    held_out = MODELS[name]
    space = dict(grid, **{"train.seed": list(range(seeds))})
    s = crossover.tune(crossover.Model(name), x, y, space, epochs=epochs,
                       validation_split=held_out, out=folder, verbose=0, client=client)
    ours = {}
    for t in s.result["trials"]:
        v = crossover._tune._values(t)
        ours.setdefault(int(v["train.seed"]), {})[
            (v["train.optimizer.lr"], v["train.optimizer.weight_decay"])] = t["objective"]
    with open(os.path.join(folder, "trials", "t01", "spec.toml"), "rb") as f:
        spec = tomllib.load(f)
    train = dict(spec["train"], model=spec["model"], epochs=epochs)
    init = crossover.Model(name).state_dict()
    data = client.scatter((x, y), broadcast=True)
    ps = points(grid)
    theirs = {}
    for seed in range(seeds):
        futures = client.map(torch_trial, [p[0] for p in ps], [p[1] for p in ps], data=data,
                             train=train, init=init, held_out=held_out, seed=seed, pure=False)
        theirs[seed] = dict(zip(ps, client.gather(futures)))
    out = {}
    for engine, found in (("crossover", ours), ("PyTorch", theirs)):
        bests = [max(found[seed], key=found[seed].get) for seed in range(seeds)]
        print(f"{engine}: the best point by seed: " + "; ".join(
            f"seed {k}: lr={b[0]:.4g} weight_decay={b[1]:g} ({found[k][b]:.2f}%)"
            for k, b in enumerate(bests)))
        out[engine] = {"best_by_seed": bests,
                       "points": [[lr, wd, [found[k][(lr, wd)] for k in range(seeds)]]
                                  for lr, wd in ps]}
    print(json.dumps({"model": name, "epochs": epochs, "seeds": seeds} | out))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=sorted(MODELS), default="disc-4")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seeds", type=int, default=1,
                   help="with more than one: each engine's search under that many training seeds, "
                        "the best point each seed finds (no timings)")
    a = p.parse_args()
    if a.model == "disc-4":
        x, y = disc(600)
        grid = grid_of(a.trials)
    else:  # RMSprop's rates: 1e-4 to 1e-2 (its 1e-3 default in the middle)
        x, y = fashion()
        grid = grid_of(a.trials, 1e-4, 1e-2)
    rounds = {"crossover.tune": [], "PyTorch + client.map": [],
              "Optuna + PyTorch (DaskStorage)": []}
    if a.seeds > 1:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None, silence_logs=logging.ERROR) as c, \
                distributed.Client(c) as client, tempfile.TemporaryDirectory() as tmp:
            best_by_seed(client, a.model, x, y, grid, a.epochs, os.path.join(tmp, "seeds"),
                         a.seeds)
        return
    held_out = MODELS[a.model]
    init = crossover.Model(a.model).state_dict()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client, tempfile.TemporaryDirectory() as tmp:
        lead = None
        probe_ms = new_file_ms(tmp)
        print(f"the searches' folder ({tmp}): 400 new files in {probe_ms:.1f} ms")
        for r in range(a.repeats):
            ours = run_crossover(client, a.model, x, y, grid, a.epochs,
                                 os.path.join(tmp, f"search{r}"))
            rounds["crossover.tune"].append(ours[:4])
            points_found = {"crossover": ours[5]}
            train = dict(ours[4], epochs=a.epochs)
            if lead is None:
                lead = single_model_lead(client, a.model, x, y, grid, train, init)
            theirs = run_map(client, x, y, grid, train, init, held_out)
            rounds["PyTorch + client.map"].append(theirs[:4])
            points_found["PyTorch"] = theirs[4]
            try:
                rounds["Optuna + PyTorch (DaskStorage)"].append(
                    run_optuna(client, x, y, grid, train, init, held_out))
            except ImportError as e:
                print(f"optuna: not run ({e}; Debian's python3-optuna, scripts/setup installs it)")
    rows = {}
    for name, runs in rounds.items():
        if runs:
            rows[name] = (statistics.median(run[0] for run in runs), *runs[0][1:])
            print(f"{name}: wall times {', '.join(f'{run[0]:.2f}' for run in runs)} s "
                  f"(first round {runs[0][0]:.2f} s)")
    for how, (mine, peer) in lead.items():
        print(f"one trial {how} ({a.model}, {a.epochs} epoch(s), one thread a worker): crossover "
              f"{mine:.3g} s, PyTorch {peer:.3g} s: single-model lead {peer / mine:.2f}x")
    ours = rows["crossover.tune"]
    for name, (wall, n, best, objective) in rows.items():
        ratio = wall / ours[0]
        print(f"{name}: {wall:.2f} s ({ratio:.1f}x crossover's), {n} trials, best lr={best[0]:.4g} "
              f"weight_decay={best[1]:g}, validation accuracy {objective:.2f}%")
    print(json.dumps({k: {"wall_s": v[0], "trials": v[1], "best": v[2], "objective": v[3]}
                      for k, v in rows.items()} | {
        "model": a.model, "optimizer": train["optimizer"], "batch": train["batch"],
        "single_trial_s": {how: {"crossover": mine, "PyTorch": peer}
                           for how, (mine, peer) in lead.items()},
        "rounds_s": {k: [run[0] for run in runs] for k, runs in rounds.items()},
        "new_files_ms": probe_ms,
        # Each point's objective in the last round, crossover's and PyTorch's (client.map).
        "points": {engine: [[lr, wd, v] for (lr, wd), v in sorted(found.items())]
                   for engine, found in points_found.items()}}))


if __name__ == "__main__":
    main()
