#!/usr/bin/python3
"""Golden test of the per-epoch rules against the real peer: learning-rate schedules and early
stopping, in crossover and in a PyTorch loop that calls scheduler.step() after each epoch.

For each configuration: data is written (a CSV without a test split, or MNIST-format IDX files
with one), a torch.nn.Sequential is built with PyTorch's default initialisation and its state_dict
written as safetensors; PyTorch trains it with torch.optim.lr_scheduler's StepLR,
CosineAnnealingLR or ReduceLROnPlateau (or Keras's EarlyStopping rule, written out in the loop:
PyTorch has none); crossover trains the same spec from the same file on the same data. The learning
rate of every epoch must be the same double, the per-epoch training errors agree to a sample, an
early-stopped run must stop at the same epoch, and the final (or restored) weights agree to float32
rounding. The training losses are not compared here (torch_golden.py does that); both engines
report them as the mean per sample, which the plateau schedule on the training loss watches.

    /usr/bin/python3 tests/golden/torch_golden_schedules.py --crossover build/crossover

Exit codes: 0 all agree, 1 a mismatch, 77 PyTorch is not installed (ctest reports a skip).
"""
import copy
import json
import math
import os
import struct
import sys

# The helpers shared with the benchmarks (bench/peer.py), found relative to this file.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import peer  # noqa: E402

np, torch = peer.import_torch_or_skip("golden schedules")

# Final weights: the largest difference relative to the tensor's largest weight, torch_golden.py's
# tolerance. Measured here on 2026-11-23: SGD cases at most 1e-6; Adam, whose normalised steps
# amplify rounding over its 9-10 epochs, 1.2e-5 (cosine) and 2.5e-5 (plateau on the test loss), so
# the margin is 2x for that case.
WEIGHT_RTOL = 5e-5

IDX_CLASSES = 10  # MNIST-format labels are digits
IDX_SIDE = 3      # 3x3 "images": 9 features

MLP = [("linear", 24, True), ("relu",), ("linear", 16, True), ("tanh",)]

CONFIGS = [
    # name, data ("csv" or "idx"), samples, test samples, batch, epochs, optimizer, schedule,
    # early stopping
    ("StepLR, SGD with momentum",
     "csv", 240, 0, 40, 7, {"type": "sgd", "lr": 0.1, "momentum": 0.9},
     {"type": "step", "step_size": 2, "gamma": 0.5}, None),
    ("CosineAnnealingLR past t_max, Adam",
     "csv", 200, 0, 32, 9, {"type": "adam", "lr": 0.01},
     {"type": "cosine", "t_max": 4, "eta_min": 0.001}, None),
    ("ReduceLROnPlateau on the training loss (patience, cooldown, min_lr), SGD with momentum",
     "csv", 300, 0, 50, 12, {"type": "sgd", "lr": 0.2, "momentum": 0.9},
     {"type": "plateau", "monitor": "loss", "factor": 0.5, "patience": 1, "threshold": 0.05,
      "cooldown": 1, "min_lr": 0.03}, None),
    ("ReduceLROnPlateau on the test loss, Adam",
     "idx", 200, 100, 25, 10, {"type": "adam", "lr": 0.02},
     {"type": "plateau", "monitor": "test_loss", "factor": 0.3, "patience": 1, "threshold": 0.01},
     None),
    ("early stopping on the test loss, best weights restored, SGD with momentum",
     "idx", 200, 100, 20, 30, {"type": "sgd", "lr": 0.1, "momentum": 0.9}, None,
     {"monitor": "test_loss", "patience": 3, "min_delta": 0.01, "restore_best": True}),
]


def write_idx(folder, prefix, x, y):
    """MNIST-format files: big-endian magic and sizes, then one byte per pixel or label."""
    n = len(y)
    with open(os.path.join(folder, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, IDX_SIDE, IDX_SIDE) + x.astype(np.uint8).tobytes())
    with open(os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + y.astype(np.uint8).tobytes())


def make_data(index, kind, samples, test_samples, tmp):
    """(source, x, y, x_test, y_test) as crossover will read them (x_test None without a test
    split)."""
    rng = np.random.RandomState(300 + index)
    if kind == "csv":
        x = rng.standard_normal((samples, 4)).astype(np.float32)
        y = rng.randint(0, 3, size=samples).astype(np.int64)
        csv = os.path.join(tmp, f"data{index}.csv")
        peer.write_csv(csv, x, y, header=[f"f{i}" for i in range(4)] + ["label"])
        return f"csv:{csv}", x, y, None, None, 3
    folder = os.path.join(tmp, f"idx{index}")
    os.makedirs(folder)
    features = IDX_SIDE * IDX_SIDE
    pixels = rng.randint(0, 256, size=(samples + test_samples, features))
    # A rule to learn (the class of a random projection of the pixels) with a quarter of the labels
    # noise: the test loss falls for some epochs, then rises as the noise is memorised.
    labels = (pixels @ rng.standard_normal((features, IDX_CLASSES))).argmax(axis=1)
    noisy = rng.rand(samples + test_samples) < 0.25
    labels[noisy] = rng.randint(0, IDX_CLASSES, size=int(noisy.sum()))
    write_idx(folder, "train", pixels[:samples], labels[:samples])
    write_idx(folder, "t10k", pixels[samples:], labels[samples:])
    # As crossover's IDX reader: the byte as a float divided by 255 in float32.
    x = pixels.astype(np.float32) / np.float32(255)
    return (f"idx:{folder}", x[:samples], labels[:samples].astype(np.int64), x[samples:],
            labels[samples:].astype(np.int64), IDX_CLASSES)


def toml_value(v):
    return json.dumps(v) if not isinstance(v, bool) else str(v).lower()


def spec_text(layers, features, optimizer, batch, epochs, source, schedule, stopping):
    toml_layers = ",\n".join(
        f'  {{ type = "linear", out = {l[1]}, bias = {str(l[2]).lower()} }}' if l[0] == "linear"
        else f'  {{ type = "{l[0]}" }}' for l in layers)
    opt = ", ".join(f"{k} = {toml_value(v)}" for k, v in optimizer.items())
    text = (f"[model]\ninput = [{features}]\nlayers = [\n{toml_layers}\n]\n"
            f'loss = "cross_entropy"\n[train]\noptimizer = {{ {opt} }}\nbatch = {batch}\n'
            f"epochs = {epochs}\nshuffle = false\nseed = 0\n")
    for table, settings in (("schedule", schedule), ("early_stopping", stopping)):
        if settings:
            text += f"[train.{table}]\n" + "".join(
                f"{k} = {toml_value(v)}\n" for k, v in settings.items())
    return text + f'[data]\nsource = "{source}"\n'


def make_scheduler(opt, schedule, epochs):
    if schedule is None:
        return None
    s = torch.optim.lr_scheduler
    if schedule["type"] == "step":
        return s.StepLR(opt, step_size=schedule["step_size"], gamma=schedule.get("gamma", 0.1))
    if schedule["type"] == "cosine":
        return s.CosineAnnealingLR(opt, T_max=schedule.get("t_max", epochs),
                                   eta_min=schedule.get("eta_min", 0))
    mode = "max" if schedule.get("monitor") == "test_accuracy" else "min"
    return s.ReduceLROnPlateau(opt, mode=mode, factor=schedule.get("factor", 0.1),
                               patience=schedule.get("patience", 10),
                               threshold=schedule.get("threshold", 1e-4), threshold_mode="rel",
                               cooldown=schedule.get("cooldown", 0),
                               min_lr=schedule.get("min_lr", 0))


class KerasEarlyStopping:
    """keras.callbacks.EarlyStopping's rule (mode from the metric, baseline None)."""

    def __init__(self, cfg):
        self.monitor = cfg["monitor"]
        self.higher = self.monitor == "test_accuracy"
        self.patience = cfg.get("patience", 5)
        self.min_delta = abs(cfg.get("min_delta", 0.0)) * (1 if self.higher else -1)
        self.best = -math.inf if self.higher else math.inf
        self.wait, self.best_epoch, self.best_state = 0, 0, None
        self.restore = cfg.get("restore_best", False)

    def on_epoch_end(self, epoch, value, model):
        """epoch: 0-based, as Keras counts. Returns True to stop."""
        self.wait += 1
        improved = (value - self.min_delta > self.best) if self.higher else (
            value - self.min_delta < self.best)
        if improved:
            self.best, self.best_epoch, self.wait = value, epoch + 1, 0
            if self.restore:
                self.best_state = copy.deepcopy(model.state_dict())
            return False
        return self.wait >= self.patience and epoch > 0


def train_torch(model, data, optimizer, schedule, stopping, batch, epochs):
    """Per epoch: {lr, loss (the mean per sample), train_error %, test_loss, test_accuracy %};
    and the epoch early stopping stopped after (0: none)."""
    x, y, xt, yt = data
    opt = peer.torch_optimizer(model.parameters(), optimizer)
    scheduler = make_scheduler(opt, schedule, epochs)
    stopper = KerasEarlyStopping(stopping) if stopping else None
    loss_fn = torch.nn.CrossEntropyLoss()
    history, stopped = [], 0
    for epoch in range(epochs):
        record = {"lr": opt.param_groups[0]["lr"]}
        total, wrong = 0.0, 0
        for start in range(0, len(x), batch):
            xb, yb = x[start:start + batch], y[start:start + batch]
            opt.zero_grad()
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)  # the epoch's loss: the mean per sample, as Keras's
            wrong += (logits.argmax(dim=1) != yb).sum().item()
        record.update(loss=total / len(x), train_error=100.0 * wrong / len(x))
        if xt is not None:
            with torch.no_grad():
                logits = model(xt)
                record["test_loss"] = torch.nn.functional.cross_entropy(
                    logits, yt, reduction="sum").item() / len(xt)
                record["test_accuracy"] = 100.0 * (logits.argmax(dim=1) == yt).sum().item() / len(xt)
        history.append(record)
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            scheduler.step(record[schedule.get("monitor", "test_loss" if xt is not None else "loss")])
        elif scheduler is not None:
            scheduler.step()
        if stopper and stopper.on_epoch_end(epoch, record[stopper.monitor], model):
            stopped = epoch + 1
            break
    if stopper and stopper.restore and stopper.best_state is not None:
        model.load_state_dict(stopper.best_state)
    return history, stopped, stopper


def run_config(index, config, crossover, tmp):
    name, kind, samples, test_samples, batch, epochs, optimizer, schedule, stopping = config
    source, x, y, xt, yt, classes = make_data(index, kind, samples, test_samples, tmp)
    layers = MLP + [("linear", classes, True)]
    features = x.shape[1]
    spec = os.path.join(tmp, f"spec{index}.toml")
    with open(spec, "w") as f:
        f.write(spec_text(layers, features, optimizer, batch, epochs, source, schedule, stopping))

    torch.manual_seed(index)
    model = peer.sequential(layers, features)
    init = os.path.join(tmp, f"init{index}.safetensors")
    peer.write_safetensors(init, model.state_dict())
    to_torch = (lambda a: None if a is None else torch.from_numpy(a))
    expected, stopped, stopper = train_torch(model, (to_torch(x), to_torch(y), to_torch(xt),
                                                     to_torch(yt)),
                                             optimizer, schedule, stopping, batch, epochs)

    saved, result = os.path.join(tmp, f"out{index}.safetensors"), os.path.join(tmp, f"r{index}.json")
    try:
        doc = peer.crossover_train(crossover, spec, result, "--init", init, "--save", saved)
    except peer.CrossoverFailed as e:
        print(f"  {e}")
        return False
    got = doc["epochs"]

    ok = len(got) == len(expected)
    if not ok:
        print(f"  epochs: torch {len(expected)}, crossover {len(got)}")
    print(f"{'epoch':>5} {'torch lr':>22} {'crossover lr':>22}  {'torch err%':>10} {'xo err%':>8}")
    one_sample = 100.0 / samples
    for epoch, (t, c) in enumerate(zip(expected, got), 1):
        bad = t["lr"] != c["lr"] or \
            abs(t["train_error"] - c["train_error_percent"]) > one_sample + 1e-9
        ok &= not bad
        print(f"{epoch:>5} {t['lr']!r:>22} {c['lr']!r:>22}  {t['train_error']:>10.2f} "
              f"{c['train_error_percent']:>8.2f}{'  <-- MISMATCH' if bad else ''}")
    if stopping:
        e = doc["early_stopping"]
        print(f"  early stopping: torch stopped after epoch {stopped} (best epoch "
              f"{stopper.best_epoch}), crossover {'after epoch ' + str(len(got)) if e['stopped_early'] else 'did not stop'} "
              f"(best epoch {e['best_epoch']}, restored {e['restored_best']})")
        same = (e["stopped_early"] == (stopped > 0) and e["best_epoch"] == stopper.best_epoch
                and e["restored_best"] == (stopper.restore and stopper.best_state is not None))
        if not same:
            print("  early stopping differs  <-- MISMATCH")
        ok &= same
        if stopped == 0:
            print("  (PyTorch's loop did not stop early: the case does not test stopping)")
            ok = False

    # The final weights (the restored ones after early stopping), read into PyTorch by name.
    weights_ok = peer.compare_weights(saved, model.state_dict(), peer.sequential(layers, features),
                                      WEIGHT_RTOL)
    return ok and weights_ok


def main():
    return peer.golden_main(__doc__, "golden schedules", [("", CONFIGS, run_config)])

if __name__ == "__main__":
    sys.exit(main())
