"""crossover from Python: train a network on the CPU or a GPU with NumPy arrays or a PyTorch
model, and ask whether a GPU is worth it for it, with measured numbers.

    import crossover
    model = crossover.Model("disc-8")                  # a built-in model, a TOML spec, an ONNX file
    history = model.fit(x, y, epochs=10, batch_size=100, validation_split=0.1)
    history.history["loss"], history.history["val_accuracy"]
    advice = crossover.advise(model, x, y, epochs=10)  # measured here, priced elsewhere
    advice.worth_it, advice.sentence

The engine is C++ (the same jobs the `crossover` command runs); no Python runs inside a training
step. Arrays that are float32 and C-contiguous (int32 labels) are trained on where they are, not
copied. Ctrl-C (or a notebook's interrupt) stops a fit at the next step and raises
KeyboardInterrupt, the model holding the weights it reached. Bad input raises ValueError,
TypeError, FileNotFoundError or MemoryError with the engine's message.
"""
import json
import os

from . import _arrays, _toml
from ._arrays import ConversionWarning
from ._crossover import Model as _EngineModel
from ._crossover import advise as _advise
from ._crossover import builtin_models as _builtin_models
from ._crossover import devices as _devices
from ._crossover import sweep as _sweep
from ._crossover import version as __version__
from ._page import report_html
from ._progress import Progress
from ._tune import Search, tune

__all__ = ["Model", "History", "JobReport", "Advice", "Sweep", "Search", "advise", "sweep", "tune",
           "devices", "builtin_models", "ConversionWarning", "__version__"]


def builtin_models():
    """The names of the built-in models (disc-2 ... disc-12, mnist-mlp, mnist-cnn, ...)."""
    return list(_builtin_models())


def devices(probe=False, reprobe=False):
    """The devices this build can train on here and, for those it cannot, why: a dict
    {"available": ["cpu", "cuda:0", ...], "unavailable": [...], "info": {id: {kind, name,
    threads, library, precision, ..., "peaks": ...}}}. probe=True adds each device's measured
    peaks (f32 matmul GFLOP/s, memory GB/s, fixed costs per step and layer), read from the cache
    or measured where there is none (reprobe=True measures again), as `crossover devices`."""
    listed, unavailable = _devices(bool(probe or reprobe), bool(reprobe))
    info = {d["id"]: d for d in json.loads(listed)}
    return {"available": list(info), "unavailable": list(unavailable), "info": info}


# The engine's messages name the command line's flags; fit's are its arguments.
_FIT_WORDS = (("the same command with --resume", "the same fit with resume=True"),
              ("--checkpoint-dir", "checkpoint_dir="), ("--checkpoint-every", "checkpoint_every="),
              ("--resume", "resume=True"), ("--restart", "restart=True"))


def _in_fit_words(message):
    for flag, argument in _FIT_WORDS:
        message = message.replace(flag, argument)
    return message


def _existing_path(name_or_path):
    path = os.fspath(name_or_path)
    looks_like_file = path.endswith((".toml", ".onnx")) or os.sep in path
    if looks_like_file and not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file (expected a built-in model's name, a TOML "
                                "spec or an ONNX model)")
    return path


class History:
    """What fit() measured, in Keras's shape: history["loss"], ["accuracy"], ["val_loss"],
    ["val_accuracy"], ["lr"], one value per epoch (accuracies as fractions, as Keras's); `epoch`
    the epochs' numbers from 0; `result` the whole result as `crossover train --json` writes it
    (step times, GFLOP/s, the device, percentages under their JSON names)."""

    def __init__(self, result):
        self.result = result
        self.epoch = [e["epoch"] - 1 for e in result.get("epochs", [])]
        h = {"loss": [], "accuracy": [], "lr": []}
        for e in result.get("epochs", []):
            h["loss"].append(e["loss"])
            error = e.get("train_error_percent")
            h["accuracy"].append(None if error is None else 1.0 - error / 100.0)
            h["lr"].append(e.get("lr"))
            for name in ("val", "test"):
                if f"{name}_loss" in e:
                    h.setdefault(f"{name}_loss", []).append(e[f"{name}_loss"])
                    acc = e.get(f"{name}_accuracy_percent")
                    h.setdefault(f"{name}_accuracy", []).append(None if acc is None else acc / 100)
        if all(a is None for a in h["accuracy"]):
            del h["accuracy"]  # a regression
        if all(lr is None for lr in h["lr"]):
            del h["lr"]
        self.history = h

    def to_pandas(self):
        """The per-epoch figures as a pandas DataFrame indexed by epoch (needs pandas)."""
        import pandas as pd
        return pd.DataFrame(self.history, index=pd.Index(self.epoch, name="epoch"))

    def __repr__(self):
        last = {k: v[-1] for k, v in self.history.items() if v}
        return f"History({len(self.epoch)} epochs, last {last})"


class Model:
    """A network crossover trains: Model("disc-8") (a built-in model), Model("my.toml") (a
    spec), Model("net.onnx") (an exported model), or Model.from_torch(module, example_input).
    Its weights start as the spec says (its seed, or the weights it names) and are what the last
    fit left; state_dict() gives them under PyTorch's names."""

    def __init__(self, name_or_path):
        if isinstance(name_or_path, _EngineModel):
            self._engine = name_or_path
        else:
            self._engine = _EngineModel(_existing_path(name_or_path))
        for note in self._engine.notes:
            import sys
            print(f"note: {note}", file=sys.stderr)

    @classmethod
    def from_toml(cls, text, origin="<string>"):
        """A model from a spec's TOML text; `origin` names it in error messages."""
        return cls(_EngineModel.from_toml(text, origin))

    @classmethod
    def from_torch(cls, module, example_input, name=None):
        """A PyTorch module as a crossover model, through ONNX in memory: exported with
        torch.onnx.export (training mode, nothing folded), imported by the engine (ValueError
        naming the node it cannot map), then given the module's own parameters and buffers, so
        that both start from the same weights. `example_input` is one batch the module takes."""
        from ._torch import onnx_bytes, state_of
        engine = _EngineModel.from_onnx(onnx_bytes(module, example_input),
                                        name or type(module).__name__)
        model = cls(engine)
        mine = model._engine.state_dict()
        model.load_state_dict({k: v for k, v in state_of(module).items() if k in mine})
        return model

    name = property(lambda self: self._engine.name, doc="The model's name.")
    input_shape = property(lambda self: tuple(self._engine.input_shape),
                           doc="The shape of one sample.")
    classes = property(lambda self: self._engine.classes,
                       doc="The classes its labels index (0: a regression).")
    loss = property(lambda self: self._engine.loss, doc="cross_entropy, bce or mse.")

    def count_params(self):
        """The number of trainable parameters."""
        return self._engine.params

    def to_toml(self):
        """The model as a spec file's text (crossover train accepts it)."""
        return self._engine.toml()

    def summary(self, print_fn=print):
        """Prints (through print_fn) each layer, its output shape and parameters; returns the
        text."""
        rows = [("layer", "output shape", "params")]
        for i, (kind, shape, params) in enumerate(self._engine.layers()):
            shape_text = "(None, " + ", ".join(map(str, shape)) + ")"
            rows.append((f"{i} {kind}", shape_text, f"{params:,}"))
        widths = [max(len(r[c]) for r in rows) for c in range(3)]
        lines = [f"Model: {self.name} (input {self.input_shape}, loss {self.loss})"]
        for r in rows:
            lines.append(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}")
        lines.append(f"Total params: {self.count_params():,}")
        text = "\n".join(lines)
        if print_fn is not None:
            print_fn(text)
        return text

    def state_dict(self):
        """The weights (and BatchNorm's buffers) under PyTorch's names, as float32 NumPy
        copies."""
        return self._engine.state_dict()

    def load_state_dict(self, state):
        """Replaces the weights: every tensor of the model with its exact shape, nothing else
        (ValueError naming the tensor otherwise). Arrays or torch tensors."""
        converted = {}
        for name, value in dict(state).items():
            converted[name] = _arrays._to_numpy(value, f"state_dict[{name!r}]")
        self._engine.load_state_dict(converted)

    def save(self, path):
        """Writes the weights as safetensors under PyTorch's names
        (torch.load_state_dict(safetensors.torch.load_file(path)) reads them)."""
        self._engine.save(os.fspath(path))

    def load(self, path):
        """Reads weights written by save() or `crossover train --save`."""
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file (expected a safetensors file)")
        self._engine.load(path)

    def fit(self, x, y, *, epochs=None, batch_size=None, validation_split=0.0,
            validation_data=None, device="cpu", precision="f32", optimizer=None, lr=None,
            schedule=None, early_stopping=None, shuffle=None, seed=None, threads=0,
            checkpoint_dir=None, checkpoint_every="60s", resume=False, restart=False, verbose=1,
            callbacks=()):
        """Trains the model on samples x and labels y (Keras's Model.fit); returns a History.

        epochs, batch_size, shuffle, seed: the spec's unless given. validation_split: the last
        fraction of x held out (before any shuffling, as Keras); validation_data: (x_val, y_val).
        device: "cpu", "cuda", "cuda:N" or "auto"; precision: "f32", "tf32" (GPUs) or "bf16" (GPUs, CPUs with AMX or AVX-512 BF16).
        optimizer: a torch.optim name ("sgd", "adam", "adamw", "rmsprop", "adadelta") with its
        defaults, or a dict {"type": "adam", "lr": 1e-3, ...} with a spec's keys; lr sets the
        rate. schedule / early_stopping: dicts with a spec's [train.schedule] /
        [train.early_stopping] keys, e.g. {"type": "cosine"}, {"monitor": "val_loss",
        "patience": 3}. threads: CPU threads (0: every core this process may use).
        checkpoint_dir: keep checkpoints there every checkpoint_every ("60s", "500steps",
        "off"); resume=True continues the newest, restart=True discards it. verbose: 0 silent
        (notes only), 1 the command line's lines. callbacks: objects with on_epoch_end(epoch,
        logs) (Keras's) or callables taking the same.
        """
        x = _arrays.samples(x, "fit(x)")
        y = _arrays.labels(y, self.classes, "fit(y)")
        val_x = val_y = None
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
                raise TypeError("fit(validation_data=): expected a tuple (x_val, y_val)")
            val_x = _arrays.samples(validation_data[0], "fit(validation_data[0])")
            val_y = _arrays.labels(validation_data[1], self.classes, "fit(validation_data[1])")
            if validation_split:
                raise ValueError("fit(): validation_split and validation_data: choose one")
        if not 0.0 <= float(validation_split) < 1.0:
            raise ValueError(f"fit(validation_split={validation_split}): expected a fraction in "
                             "[0, 1)")
        name = ""
        settings = {"epochs": epochs, "batch": batch_size, "shuffle": shuffle, "seed": seed,
                    "schedule": schedule, "early_stopping": early_stopping}
        if isinstance(optimizer, dict):
            optimizer = dict(optimizer)
            name = optimizer.pop("type", "")
            if lr is not None:
                optimizer["lr"] = lr
            settings["optimizer"] = optimizer or None
        elif optimizer is not None:
            if not isinstance(optimizer, str):
                raise TypeError("fit(optimizer=): a torch.optim name or a dict expected")
            name = optimizer
        if lr is not None and "optimizer" not in settings or settings.get("optimizer") is None:
            settings["optimizer"] = {"lr": lr} if lr is not None else None
        progress = Progress(verbose, callbacks)
        try:
            result = self._engine.fit(
                x, y, val_x, val_y, float(validation_split), _toml.train_table(settings), name,
                device, precision, int(threads), os.fspath(checkpoint_dir or ""),
                str(checkpoint_every), bool(resume), bool(restart), bool(verbose), progress)
        except ValueError as e:
            raise ValueError(_in_fit_words(str(e))) from None
        finally:
            progress.close()
        return History(json.loads(result))

    def evaluate(self, x, y, *, device="cpu", threads=0):
        """The loss and accuracy (a fraction; absent for a regression) on x and y, no dropout,
        no gradient: a dict {"loss": ..., "accuracy": ...}."""
        x = _arrays.samples(x, "evaluate(x)")
        y = _arrays.labels(y, self.classes, "evaluate(y)")
        figures = self._engine.evaluate(x, y, device, int(threads))
        out = {"loss": figures["loss"]}
        if self.classes:
            out["accuracy"] = figures["accuracy_percent"] / 100.0
        return out

    def predict(self, x, *, device="cpu", threads=0):
        """The model's predictions for each sample: a classifier's class probabilities
        [samples, classes] (a binary one's, the probability of class 1, [samples, 1]), a
        regression's values [samples, 1]; float64."""
        x = _arrays.samples(x, "predict(x)")
        values, _ = self._engine.predict(x, device, int(threads))
        return values

    def predict_classes(self, x, *, device="cpu", threads=0):
        """The most probable class of each sample (int32)."""
        if not self.classes:
            raise ValueError(f"predict_classes(): model '{self.name}' is a regression")
        x = _arrays.samples(x, "predict_classes(x)")
        _, labels = self._engine.predict(x, device, int(threads))
        return labels

    def __repr__(self):
        return (f"crossover.Model({self.name!r}: input {self.input_shape}, "
                f"{self.count_params():,} parameters, loss {self.loss})")


class JobReport:
    """A measuring job's report, as the command line writes it: `report` the whole results.json,
    `out` the folder holding it with results.csv and report.html (which _repr_html_ shows inline
    in a notebook)."""

    def __init__(self, out, report):
        self.out = out
        self.report = report
        verdict = report.get("verdict") or {}
        self.verdict = verdict
        self.worth_it = bool(verdict.get("worth_it", False))
        self.sentence = verdict.get("sentence", "")
        self.here = verdict.get("here")
        self.here_seconds = verdict.get("here_seconds")
        self.gpu = verdict.get("gpu")
        self.crossover = verdict.get("crossover", "")
        self.caution = verdict.get("caution", "")

    def to_pandas(self):
        """The measured runs, one row per (model, device), as a pandas DataFrame: the runs' own
        figures and each result's (flattened as result.NAME)."""
        import pandas as pd
        rows = []
        for run in self.report.get("runs", []):
            row = {k: v for k, v in run.items() if not isinstance(v, (dict, list))}
            for k, v in (run.get("result") or {}).items():
                if not isinstance(v, (dict, list)):
                    row[f"result.{k}"] = v
            rows.append(row)
        return pd.DataFrame(rows)

    def _repr_html_(self):
        return report_html(self.out, self.sentence)

    def __repr__(self):
        return f"{type(self).__name__}(worth_it={self.worth_it}, {self.sentence!r})"


class Advice(JobReport):
    """advise()'s answer: whether a GPU is worth it for this run and why.

    worth_it, sentence (the verdict as the report says it), here / here_seconds (the fastest
    device measured here and the run's time on it), gpu (the GPU option weighed: its name,
    seconds, usd, whether predicted, expected error), crossover (where one device overtakes the
    other), caution; report, out, to_pandas() and _repr_html_ as every JobReport."""


class Sweep(JobReport):
    """sweep()'s answer: the model grown along one axis on every device here; `crossover` says
    where one device overtakes the other, `sentence` the verdict for the largest point."""


def _measure_call(model, x, y, name, epochs, devices, out, overwrite):
    from ._crossover import MeasureCall
    if not isinstance(model, Model):
        raise TypeError(f"{name}(model): a crossover.Model expected (got {type(model).__name__})")
    x = _arrays.samples(x, f"{name}(x)")
    y = _arrays.labels(y, model.classes, f"{name}(y)")
    call = MeasureCall()
    call.epochs = int(epochs or 0)
    call.devices = list(devices or [])
    call.out = os.fspath(out or "")
    call.overwrite = bool(overwrite)
    call.call = f"crossover.{name}({model.name!r}, x{x.shape}, y, epochs={epochs})"
    return x, y, call


def advise(model, x, y, *, epochs=None, devices=None, out=None, overwrite=False, verbose=1):
    """Is a GPU worth it for training `model` on x, y for `epochs`? The model is measured on
    every device here (or `devices`), predicted on the GPUs of the catalog, priced, and judged,
    as `crossover advise` does; the report is written to `out` (crossover-results/ by default,
    or a dated folder beside it). Returns an Advice."""
    x, y, call = _measure_call(model, x, y, "advise", epochs, devices, out, overwrite)
    progress = Progress(verbose)
    try:
        answer = _advise(model._engine, x, y, call, progress)
    finally:
        progress.close()
    if answer is None:
        raise KeyboardInterrupt("advise(): stopped before any run finished")
    return Advice(answer[0], json.loads(answer[1]))


def sweep(model, x, y, vary, *, epochs=None, devices=None, out=None, overwrite=False, verbose=1):
    """Where does a GPU overtake the CPU as the model grows? `model` grown along `vary` (an axis
    and its values, as `crossover sweep --vary`: "width=64,128,256", "depth=2,4,8",
    "batch=32,256") on every device here (or `devices`), trained on x, y, as `crossover sweep`
    does; the report is written to `out`. Returns a Sweep."""
    if not isinstance(vary, str) or "=" not in vary:
        raise ValueError(f"sweep(vary={vary!r}): expected AXIS=V1,V2,... such as "
                         "\"width=64,128,256\"")
    x, y, call = _measure_call(model, x, y, "sweep", epochs, devices, out, overwrite)
    progress = Progress(verbose)
    try:
        folder, report = _sweep(model._engine, x, y, vary, call, progress)
    finally:
        progress.close()
    return Sweep(folder, json.loads(report))
