"""crossover.tune: `crossover tune` from Python. Its trials are processes of the crossover command
(installed beside the package), so the samples and the model's weights go to files first:
safetensors files in the search's folder, named by their contents, written once and never
overwritten (a search that goes on finds its own)."""
import hashlib
import json
import os
import struct

import numpy as np

from . import _arrays
from ._page import report_html
from ._progress import Progress

_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}


def _digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()[:16]


def _write_safetensors(path, tensors):
    """Writes {name: C-contiguous array} as a safetensors file: to a temporary name, then
    renamed, so that a file of that name is always whole."""
    header, offset = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": _DTYPES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    partial = f"{path}.partial-{os.getpid()}"
    with open(partial, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in tensors.values():
            f.write(memoryview(a).cast("B"))
    os.replace(partial, path)


def _owned_folder(path, what):
    if os.path.islink(path):
        raise ValueError(f"tune(): {path} is a link; {what} is never written through one")
    os.makedirs(path, exist_ok=True)


def _samples_file(folder, name, x, y):
    """x and y as folder/NAME-DIGEST.safetensors (labels as int64, targets as float32; a column
    of them, [samples, 1], as the vector the engine's file reader takes)."""
    y = y.reshape(len(y)) if y.ndim == 2 and y.shape[1] == 1 else y
    y = y.astype(np.int64) if y.dtype == np.int32 else y
    path = os.path.join(folder, f"{name}-{_digest([x, y])}.safetensors")
    if not os.path.isfile(path) or os.path.islink(path):
        _write_safetensors(path, {"x": x, "y": y})
    return os.path.abspath(path)


def _rows(samples):
    """Samples as the search plans with them: a [samples, features] view (a file of samples takes
    any shape of the model's size, as this does)."""
    return None if samples is None else samples.reshape(len(samples), -1)


def _vary_list(vary):
    """{"lr": [0.01, 0.1], "width": "32..256:log"} or ["lr=0.01,0.1", ...] (a search's space) as
    --vary values."""
    if isinstance(vary, str):
        vary = [vary]
    if isinstance(vary, dict):
        out = []
        for key, values in vary.items():
            if isinstance(values, str):
                out.append(f"{key}={values}")
            elif isinstance(values, (list, tuple)) and values:
                out.append(f"{key}=" + ",".join(str(v) for v in values))
            else:
                raise ValueError(f"tune(space={{{key!r}: {values!r}}}): expected a list of values "
                                 "or a range such as \"0.001..0.1:log\"")
        return out
    if isinstance(vary, (list, tuple)) and vary and all(isinstance(v, str) for v in vary):
        return list(vary)
    raise TypeError(f"tune(space={vary!r}): expected a dict such as {{\"lr\": [0.01, 0.1]}} or "
                    "strings KEY=V1,V2,...")


def _fuse_count(fuse):
    if fuse == "auto":
        return -1
    if fuse == "off":
        return 0
    if isinstance(fuse, int) and not isinstance(fuse, bool) and 1 <= fuse <= 1024:
        return fuse
    raise ValueError(f"tune(fuse={fuse!r}): expected \"auto\", \"off\" or a number of trials a "
                     "group (1 to 1024)")


def _number(text):
    """A varied value as results.json writes it (text) as the number it names, where it is one."""
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            pass
    return text


def _values(trial):
    return {v["key"]: _number(v["value"]) for v in trial.get("values") or []}


class Search:
    """tune()'s answer: the search's record as results.json holds it (`result`), the best trial
    (`best`, its `best_values`, `best_objective` as results.json has it: accuracies in
    percent), the folder (`out`) with results.csv,
    report.html (shown inline in a notebook), best.toml and best.safetensors; to_pandas() for the
    trials' table and best_model() for the best trial's trained model."""

    def __init__(self, out, result):
        self.out = out
        self.result = result
        self.objective = result.get("objective", "")
        self.best = result.get("best", "")
        self.interrupted = bool(result.get("interrupted", False))
        trials = {t.get("id"): t for t in result.get("trials", [])}
        best = trials.get(self.best, {})
        self.best_values = _values(best)
        self.best_objective = best.get("objective")

    def to_pandas(self):
        """One row per trial: its id, status, the values it varied, its objective, epochs and
        time."""
        import pandas as pd
        rows = []
        for t in self.result.get("trials", []):
            row = {k: v for k, v in t.items() if not isinstance(v, (dict, list))}
            row.update(_values(t))
            rows.append(row)
        return pd.DataFrame(rows)

    def best_model(self):
        """The best trial's model with the weights it ended with (best.toml, best.safetensors)."""
        from . import Model
        spec = os.path.join(self.out, "best.toml")
        if not self.best or not os.path.isfile(spec):
            raise ValueError(f"{self.out}: no best trial yet (no trial has finished)")
        model = Model(spec)
        weights = os.path.join(self.out, "best.safetensors")
        if os.path.isfile(weights):
            model.load(weights)
        return model

    def _repr_html_(self):
        return report_html(self.out, repr(self))

    def __repr__(self):
        return (f"Search(best={self.best!r}, {self.objective}={self.best_objective}, "
                f"values={self.best_values})")


def tune(model, x, y, space, *, out="crossover-tune", validation_split=0.0, validation_data=None,
         samples=None, seed=0, objective=None, halving=False, min_epochs=1, factor=3,
         epochs=None, parallel=None, fuse="auto", threads=0, devices=None, precision="f32",
         restart=False, checkpoint_every="60s", client=None, verbose=1):
    """A hyper-parameter search over `model` trained on x, y, as `crossover tune` runs it: the
    grid of `space` ({"lr": [0.01, 0.1], "width": [32, 64]}; the keys are `crossover tune
    --vary`'s, such as "train.optimizer.lr"; or a range "0.001..0.1:log" with `samples` random
    trials), its trials several at once (fused into one model where they share an architecture),
    halving if asked, each from the model's current weights; ranked by `objective` (by default
    val_accuracy with a validation_split, test_accuracy with validation_data, which the trials
    report as their test set, else the training loss). With `client` (a distributed.Client), each
    job (a fused group, or a trial alone) runs as a Dask task on the cluster's workers, one a
    worker at a time, `threads` each (default: the worker's); see crossover.dask. `precision`:
    every trial's arithmetic, as fit's ("f32", "tf32" on GPUs, "bf16" on GPUs and on CPUs with
    AMX or AVX-512 BF16; a CPU without either refuses it before any trial). The search's
    folder `out` keeps its results; the same call goes on from it after a stop (Ctrl-C keeps the
    finished trials), `restart=True` starts afresh. Returns a Search."""
    from . import Model
    from ._crossover import TuneCall
    from ._crossover import tune as _tune
    if not isinstance(model, Model):
        raise TypeError(f"tune(model): a crossover.Model expected (got {type(model).__name__})")
    x = _arrays.samples(x, "tune(x)")
    y = _arrays.labels(y, model.classes, "tune(y)")
    if len(x) != len(y):
        raise ValueError(f"tune(): x holds {len(x)} samples and y {len(y)} (expected one label "
                         "for each sample)")
    if not 0.0 <= float(validation_split) < 1.0:
        raise ValueError(f"tune(validation_split={validation_split}): expected a fraction in "
                         "[0, 1)")
    if validation_data is not None and validation_split:
        raise ValueError("tune(): validation_split and validation_data: choose one")
    if precision not in ("f32", "tf32", "bf16"):
        raise ValueError(f"tune(precision={precision!r}): expected \"f32\", \"tf32\" or \"bf16\"")
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "crossover")
    if not os.access(program, os.X_OK):
        raise FileNotFoundError(f"{program}: the crossover command is not beside the package "
                                "(its trials run it; the build puts it there)")
    out = os.fspath(out)
    _owned_folder(out, "a search's folder")
    inputs = os.path.join(out, "inputs")
    _owned_folder(inputs, "the search's inputs")
    call = TuneCall()
    call.data = _samples_file(inputs, "train", x, y)
    vx = vy = None
    if validation_data is not None:
        if not isinstance(validation_data, tuple) or len(validation_data) != 2:
            raise TypeError("tune(validation_data=): expected a tuple (x_val, y_val)")
        vx = _arrays.samples(validation_data[0], "tune(validation_data[0])")
        vy = _arrays.labels(validation_data[1], model.classes, "tune(validation_data[1])")
        call.test_data = _samples_file(inputs, "validation", vx, vy)
    state = [np.ascontiguousarray(v) for v in model.state_dict().values()]
    weights = os.path.join(inputs, f"init-{_digest(state)}.safetensors")
    if not os.path.isfile(weights):
        model.save(weights + ".partial")
        os.replace(weights + ".partial", weights)
    call.init = os.path.abspath(weights)
    call.program = program
    call.validation_split = float(validation_split)
    call.vary = _vary_list(space)
    call.samples = int(samples or 0)
    call.seed = int(seed)
    call.objective = objective or ""
    call.halving = bool(halving)
    call.min_epochs = int(min_epochs)
    call.factor = int(factor)
    call.epochs = int(epochs or 0)
    call.parallel = int(parallel or 0)
    call.fuse = _fuse_count(fuse)
    call.threads = int(threads)
    call.devices = list(devices or [])
    call.out = out
    call.restart = bool(restart)
    call.checkpoint_every = str(checkpoint_every)
    call.precision = precision
    call.quiet = not verbose
    call.call = f"crossover.tune({model.name!r}, x{x.shape}, y, space={call.vary})"
    runner = None
    if client is not None:
        from .dask import DaskRunner
        runner = DaskRunner(client, threads=int(threads))
    progress = Progress(verbose)
    try:
        # The arrays too: the search plans with them, not reading back the files it wrote.
        result = _tune(model._engine, call, progress, runner, _rows(x), y, _rows(vx), vy)
    finally:
        progress.close()
        if runner is not None:
            runner.remove_marks()
    return Search(out, json.loads(result))
