"""The PyTorch side of crossover's comparisons, shared by the benchmarks (bench/*_vs_torch.py) and
the golden tests (tests/golden/*.py): the built-in networks as torch modules with their optimizers,
the exchange files (safetensors, CSV), running `crossover train`, and timing statistics.

It lives in bench/ beside bench/setup-peers, which prepares the peers it runs; the golden tests
import it by a path relative to their own file, so neither needs an installed package or
PYTHONPATH. Only the standard library is imported at load time: numpy and torch are imported where
they are used, so that a golden test can still say "skipped" (exit 77) on a machine without them.
"""
import argparse
import collections
import contextlib
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import time

# ctest's SKIP_RETURN_CODE for the golden tests: PyTorch (or numpy) is not importable here.
SKIP = 77

# -- crossover's built-in networks (specs/*.toml), as PyTorch builds them --------------------------

DISC_DEPTHS = range(2, 13)
DISC_BATCH = 100
DISC_SAMPLES = 1000
# specs/disc-L.toml's [train] optimizer, key for key.
DISC_OPTIMIZER = {"type": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
                  "weight_decay": 0.0}

Classic = collections.namedtuple("Classic", "batch shape vocab classes loss optimizer")
# The classic Keras networks: batch, input shape, vocabulary (0: not token ids), classes, loss and
# [train] optimizer of specs/<name>.toml.
CLASSIC = {
    "mnist-mlp": Classic(128, (784,), 0, 10, "cross_entropy",
                         {"type": "rmsprop", "lr": 0.001, "alpha": 0.9, "eps": 1e-07,
                          "weight_decay": 0.0}),
    "mnist-cnn": Classic(128, (1, 28, 28), 0, 10, "cross_entropy",
                         {"type": "adadelta", "lr": 1.0, "rho": 0.95, "eps": 1e-07,
                          "weight_decay": 0.0}),
    "imdb-lstm": Classic(32, (80,), 20000, 2, "bce",
                         {"type": "adam", "lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-07,
                          "weight_decay": 0.0}),
}
BUILTIN_MODELS = [f"disc-{layers}" for layers in DISC_DEPTHS] + list(CLASSIC)


def disc_depth(name):
    """L for "disc-L", None for a name of another family; ValueError for a depth without a spec."""
    if not name.startswith("disc-"):
        return None
    layers = int(name[5:])
    if layers not in DISC_DEPTHS:
        raise ValueError(f"{name}: disc-L exists for L = 2 ... 12")
    return layers


def disc_layers(layers):
    """specs/disc-L.toml's layers: L Linear layers doubling the width from 2, ReLU between them."""
    spec, width = [], 2
    for _ in range(layers - 1):
        spec += [("linear", width * 2, True), ("relu",)]
        width *= 2
    spec.append(("linear", 2, True))
    return spec


def sequential(layers, features):
    """A torch.nn.Sequential of `layers`: ("linear", out, bias), ("relu"|"tanh"|"sigmoid",) or
    ("leaky_relu"[, negative_slope]), created in order (PyTorch's default initialisation draws as it
    would for the same modules)."""
    import torch
    activations = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid}
    modules, width = [], features
    for layer in layers:
        if layer[0] == "linear":
            modules.append(torch.nn.Linear(width, layer[1], bias=layer[2]))
            width = layer[1]
        elif layer[0] == "leaky_relu":
            modules.append(torch.nn.LeakyReLU(*layer[1:]))
        else:
            modules.append(activations[layer[0]]())
    return torch.nn.Sequential(*modules)


def builtin_model(name):
    """The torch.nn modules of crossover's built-in spec `name` (PyTorch's default init)."""
    import torch
    nn = torch.nn
    layers = disc_depth(name)
    if layers is not None:
        return sequential(disc_layers(layers), 2)
    if name == "mnist-mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 512),
                             nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
    if name == "mnist-cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                             nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))
    if name == "imdb-lstm":
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
    raise ValueError(f"unknown model '{name}' (expected one of: {', '.join(BUILTIN_MODELS)})")


def builtin_optimizer(name):
    """The [train] optimizer of built-in spec `name`, as a crossover spec writes it."""
    return DISC_OPTIMIZER if disc_depth(name) is not None else CLASSIC[name].optimizer


# -- optimizers: a spec's [train] optimizer to torch.optim -----------------------------------------

TORCH_OPTIMIZERS = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop",
                    "adadelta": "Adadelta"}


def torch_optimizer_args(cfg):
    """(torch.optim class name, keyword arguments) of a spec's optimizer table, e.g.
    {"type": "adam", "lr": 0.01, "beta1": 0.9}. The keys are PyTorch's but for beta1/beta2, which
    become `betas` in beta1's place (PyTorch's default for the one not given)."""
    kwargs = {}
    for key, value in cfg.items():
        if key == "type":
            continue
        if key in ("beta1", "beta2"):
            if "betas" not in kwargs:
                kwargs["betas"] = (cfg.get("beta1", 0.9), cfg.get("beta2", 0.999))
            continue
        kwargs[key] = value
    return TORCH_OPTIMIZERS[cfg["type"]], kwargs


def torch_optimizer(params, cfg):
    import torch
    cls_name, kwargs = torch_optimizer_args(cfg)
    return getattr(torch.optim, cls_name)(params, **kwargs)


def train_torch(model, x, y, loss_name, optimizer_cfg, batch, epochs, precision="f32"):
    """PyTorch's side of a golden test: mini-batches in order (the last one partial where the sizes
    say so). Per epoch: (mean loss per sample, as Keras reports it and as crossover does: each
    batch's mean loss weighted by its size; training error in %, or None for binary
    cross-entropy and for mse, whose targets `y` are float32 values). `precision` "bf16" runs the
    forward pass and the loss under torch.autocast("cpu", dtype=torch.bfloat16) and the backward
    outside it (precision_context); "f32", the default, runs everything in f32."""
    import torch
    opt = torch_optimizer(model.parameters(), optimizer_cfg)
    bce, mse = loss_name == "bce", loss_name == "mse"
    loss_fn = torch.nn.BCEWithLogitsLoss() if bce else torch.nn.MSELoss() if mse else \
        torch.nn.CrossEntropyLoss()
    history = []
    for _ in range(epochs):
        total, wrong = 0.0, 0
        for start in range(0, len(x), batch):
            xb, yb = x[start:start + batch], y[start:start + batch]
            opt.zero_grad()
            with precision_context(torch, precision):
                logits = model(xb)
                loss = loss_fn(logits, yb.float() if bce else yb.unsqueeze(1) if mse else yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
            if not bce and not mse:
                wrong += (logits.argmax(dim=1) != yb).sum().item()
        history.append((total / len(x), None if bce or mse else 100.0 * wrong / len(x)))
    return history


# -- exchange files ------------------------------------------------------------------------------

def write_safetensors(path, tensors):
    """tensors: {name: numpy array or torch tensor}, written as F32, or I64 for int64 (BatchNorm's
    num_batches_tracked). The format: a u64 header length, the JSON header padded to 8 bytes, then
    the data."""
    import numpy as np
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        if hasattr(array, "detach"):  # a torch tensor
            array = array.detach().contiguous().numpy()
        integer = array.dtype == np.int64
        data = np.ascontiguousarray(array, dtype="<i8" if integer else "<f4").tobytes()
        header[name] = {"dtype": "I64" if integer else "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_idx(path):
    """The numpy array of a gzip'd IDX file (the MNIST and Fashion-MNIST format)."""
    import gzip
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def read_safetensors(path):
    """{name: numpy array} of an F32/I64 safetensors file."""
    import numpy as np
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        assert info["dtype"] in ("F32", "I64"), f"{name}: dtype {info['dtype']}"
        begin, end = info["data_offsets"]
        dtype = "<i8" if info["dtype"] == "I64" else "<f4"
        array = np.frombuffer(blob[8 + length + begin:8 + length + end], dtype=dtype)
        out[name] = array.reshape(info["shape"]).copy()
    return out


def write_csv(path, x, y, header=None):
    """Rows of features then the label, as crossover's CSV loader reads them. Each value is written
    as the shortest text of its value widened to a double, which parses back to the same float32."""
    with open(path, "w") as f:
        if header:
            f.write(",".join(header) + "\n")
        for row, label in zip(x, y):
            # A class label as an integer; a regression target (a Python or numpy float) as the
            # shortest text of its value, which parses back to the same float32.
            floating = isinstance(label, float) or type(label).__name__.startswith("float")
            target = repr(float(label)) if floating else f"{label}"
            f.write(",".join(repr(float(v)) for v in row) + f",{target}\n")


# -- the golden tests' side ------------------------------------------------------------------------

def named_modules(modules, forward):
    """A torch module whose children are `modules` named "0", "1", ... as in nn.Sequential (so its
    state_dict names are a spec's), run by forward(self, x) (an LSTM's, say)."""
    import torch

    class Named(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

        def forward(self, x):
            return forward(self, x)

    return Named()


def lstm_max_pool(vocab, dim, hidden):
    """The golden tests' LSTM: Embedding(vocab, dim), a 2-layer LSTM of `hidden`, the maximum over
    the steps, Linear(hidden, 1), named as the spec's layers 0 ... 3."""
    import torch
    nn = torch.nn

    def forward(self, ids):
        out, _ = getattr(self, "1")(getattr(self, "0")(ids))
        return getattr(self, "3")(out.max(dim=1).values).squeeze(1)

    return named_modules([nn.Embedding(vocab, dim), nn.LSTM(dim, hidden, num_layers=2,
                                                             batch_first=True),
                          nn.Identity(), nn.Linear(hidden, 1)], forward)


def golden_data(seed, shape, loss, classes, samples):
    """A golden test's rows: `samples` of `shape` (token ids below 30 for "bce", standard normal
    otherwise) and labels below `classes`, drawn from `seed`. Returns (x float32, y int64)."""
    import numpy as np
    rng = np.random.RandomState(seed)
    features = int(np.prod(shape))
    if loss == "bce":
        x = rng.randint(0, 30, size=(samples, features)).astype(np.float32)
    else:
        x = rng.standard_normal((samples, features)).astype(np.float32)
    y = rng.randint(0, classes, size=samples).astype(np.int64)
    return x, y


GoldenStart = collections.namedtuple("GoldenStart", "x y spec model init x_torch")


def golden_start(tmp, index, seed, build, shape, layers, loss, classes, samples, batch, epochs,
                 optimizer):
    """A golden configuration's start: its data and spec (golden_case), the PyTorch model
    build() makes from torch seed `index`, its weights as init{index}.safetensors, and x as
    PyTorch takes it (token ids as int64 for "bce", else reshaped to `shape`)."""
    import numpy as np
    import torch
    x, y, spec = golden_case(tmp, index, seed, shape, layers, loss, classes, samples, batch,
                             epochs, optimizer)
    torch.manual_seed(index)
    model = build()
    init = os.path.join(tmp, f"init{index}.safetensors")
    write_safetensors(init, model.state_dict())
    x_torch = torch.from_numpy(x.astype(np.int64)) if loss == "bce" else \
        torch.from_numpy(x).reshape(-1, *shape)
    return GoldenStart(x, y, spec, model, init, x_torch)


def golden_case(tmp, index, seed, shape, layers, loss, classes, samples, batch, epochs, optimizer):
    """A golden test's data (golden_data) as data{index}.csv in `tmp`, and the spec of `layers`
    training on it as spec{index}.toml. Returns (x, y, spec path)."""
    x, y = golden_data(seed, shape, loss, classes, samples)
    csv = os.path.join(tmp, f"data{index}.csv")
    write_csv(csv, x, y)
    opt = ", ".join(f"{k} = {json.dumps(v)}" for k, v in optimizer.items())
    spec = os.path.join(tmp, f"spec{index}.toml")
    with open(spec, "w") as f:
        f.write(f"[model]\ninput = {shape}\nlayers = [{layers}]\nloss = \"{loss}\"\n"
                f"[train]\noptimizer = {{ {opt} }}\nbatch = {batch}\nepochs = {epochs}\n"
                f"[data]\nsource = \"csv:{csv}\"\n")
    return x, y, spec


def golden_main(doc, title, groups):
    """The golden scripts' main: parses --crossover, then runs every config of each group, a
    (label, configs, run) triple, as run(index, config, crossover, tmp) in one temporary folder,
    printing "[label i/n] name" before each and FAILED after each that returns False. Returns the
    exit code: 0 when all passed, 1 otherwise."""
    import argparse
    import tempfile
    import torch
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--crossover", required=True, help="the crossover binary")
    args = parser.parse_args()
    torch.set_num_threads(1)
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, configs, run in groups:
            for index, config in enumerate(configs):
                print(f"[{label}{index + 1}/{len(configs)}] {config[0]}")
                if run(index, config, args.crossover, tmp):
                    passed += 1
                else:
                    failed += 1
                    print("  FAILED")
    print(f"{title}: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def import_torch_or_skip(what):
    """(numpy, torch), or exit with SKIP saying why they are not importable."""
    try:
        import numpy
        import torch
    except ImportError as e:  # pragma: no cover - depends on the machine
        print(f"{what}: skipped, PyTorch is not importable here ({e})")
        sys.exit(SKIP)
    return numpy, torch


def compare_weights(saved, reference, fresh, tolerance):
    """Whether crossover's trained weights (the safetensors file `saved`) match PyTorch's state_dict
    `reference`: the same names and shapes, counts (int64) exactly, every float tensor within
    `tolerance` of its largest weight; and they load strictly into the fresh module `fresh`.
    Prints what differs, and the largest difference."""
    import torch
    trained = {k: torch.from_numpy(v) for k, v in read_safetensors(saved).items()}
    if set(trained) != set(reference):
        print(f"  names differ: crossover {sorted(trained)} vs torch {sorted(reference)}")
        return False
    worst = 0.0
    for key, tensor in reference.items():
        if tuple(trained[key].shape) != tuple(tensor.shape):
            print(f"  {key}: shape {tuple(trained[key].shape)} vs {tuple(tensor.shape)}")
            return False
        if tensor.dtype == torch.int64:  # a count: exactly equal
            if not torch.equal(trained[key], tensor):
                print(f"  {key}: crossover {trained[key].tolist()} vs torch {tensor.tolist()}")
                return False
            continue
        scale = max(float(tensor.abs().max()), 1e-6)
        diff = float((trained[key] - tensor).abs().max()) / scale
        if diff > tolerance:
            print(f"  {key}: max |diff| / max |w| = {diff:.2e}")
        worst = max(worst, diff)
    fresh.load_state_dict(trained)  # strict: every name and shape must match
    print(f"  final weights: max |diff| / max |w| = {worst:.2e} (tolerance {tolerance:.0e})")
    return worst <= tolerance


def predict_check(binary, spec, saved, fresh, x, x_torch, loss, tmp, stem, tolerance=1e-5):
    """Whether `crossover predict SPEC --init SAVED` on the rows `x` (a CSV of their features alone,
    no label) predicts what PyTorch's `fresh` module, holding those weights (compare_weights loads
    them), does in eval mode on `x_torch`: each class's probability (softmax; the sigmoid of one
    binary output) or the regression's value within `tolerance` (of the largest value, for a
    regression), and the same class wherever PyTorch's top two probabilities are further apart."""
    import numpy as np
    import torch
    rows = os.path.join(tmp, f"{stem}-rows.csv")
    with open(rows, "w") as f:
        for row in x:
            f.write(",".join(repr(float(v)) for v in row) + "\n")
    out = os.path.join(tmp, f"{stem}-predicted.csv")
    proc = subprocess.run([os.path.abspath(binary), "predict", spec, "--init", saved, "--data",
                           rows, "--out", out], capture_output=True, text=True, cwd=tmp)
    if proc.returncode != 0:
        print(f"  predict failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
        return False
    with open(out) as f:
        header = f.readline().strip().split(",")
        got = np.array([[float(v) for v in line.split(",")] for line in f if line.strip()])
    fresh.eval()
    with torch.no_grad():
        y = fresh(x_torch).double()
    if loss == "mse":
        want, scale = y[:, 0].numpy(), max(float(y.abs().max()), 1e-6)
        diff = float(np.abs(got[:, 0] - want).max()) / scale
        ok = header == ["prediction"] and len(got) == len(x) and diff <= tolerance
        print(f"  predict: {len(got)} rows, max |diff| / max |y| = {diff:.2e} "
              f"(tolerance {tolerance:.0e})")
        return ok
    if y.ndim == 1:  # one binary output, squeezed
        y = y[:, None]
    p = torch.sigmoid(y) if loss == "bce" else torch.softmax(y, dim=1)
    p = p.numpy()
    probabilities = got[:, 1:]
    if loss == "bce":  # p1 only
        p = p[:, :1]
    diff = float(np.abs(probabilities - p).max()) if len(got) == len(x) else float("inf")
    if loss == "bce":
        classes, gap = (p[:, 0] >= 0.5).astype(int), np.abs(p[:, 0] - 0.5)
    else:
        top2 = np.sort(p, axis=1)[:, -2:]
        classes, gap = p.argmax(axis=1), top2[:, 1] - top2[:, 0]
    clear = gap > tolerance
    same = bool((got[clear, 0].astype(int) == classes[clear]).all())
    print(f"  predict: {len(got)} rows, max |p diff| = {diff:.2e} (tolerance {tolerance:.0e}), "
          f"classes {'the same' if same else 'DIFFER'}")
    return header[0] == "class" and diff <= tolerance and same


# -- running crossover ----------------------------------------------------------------------------

class CrossoverFailed(RuntimeError):
    """`crossover` exited non-zero; the message carries its status and output."""


def crossover_train(binary, target, json_out, *args):
    """Runs `crossover train TARGET ARGS --json JSON_OUT --quiet` in JSON_OUT's folder, so that its
    default checkpoint folder (crossover-checkpoints/MODEL) is that run's own, never another
    script's running at the same time; returns the result document."""
    json_out = os.path.abspath(json_out)
    proc = subprocess.run([os.path.abspath(binary), "train", target, *args, "--json", json_out,
                           "--quiet"], capture_output=True, text=True,
                          cwd=os.path.dirname(json_out))
    if proc.returncode != 0:
        raise CrossoverFailed(f"crossover failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    with open(json_out) as f:
        return json.load(f)


def matmul_peak(build, echo=False, precision="f32"):
    """The matmul peak in GFLOP/s at `precision` (f32 or bf16) that bench/crossover_matmul_peak
    measures (its last word)."""
    out = subprocess.run([os.path.join(build, "bench", "crossover_matmul_peak"), "--precision",
                          precision], check=True, capture_output=True, text=True).stdout
    if echo:
        print(out.strip())
    return float(out.strip().splitlines()[-1].split()[-1])


# -- the PyTorch peers of the CPU benchmarks -------------------------------------------------------

def thread_counts():
    """1, 2, 4 ... up to the cores this process may run on: the thread settings searched."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    counts, n = [], 1
    while n <= cores:
        counts.append(n)
        n *= 2
    if counts[-1] != cores:
        counts.append(cores)
    return counts


# OpenBLAS's generic x86 kernels: what a build that does not know a newer CPU falls back to (0.3.21,
# Debian 12's, reports a Sapphire Rapids Xeon as "Prescott", SSE3 only, 2-8x slower).
GENERIC_CORES = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai",
                 "Coppermine", "Northwood", "Banias"}


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def openblas_core(openblas):
    """(the core OpenBLAS picks here, the OPENBLAS_CORETYPE the peer runs with or None): where it
    falls back to a generic core on a CPU with AVX-512 or AVX2, the core for those
    (SkylakeX, Haswell), so that the peer runs OpenBLAS's kernels for this CPU."""
    env = {**os.environ, "OPENBLAS_VERBOSE": "2", "LD_LIBRARY_PATH": openblas}
    env.pop("OPENBLAS_CORETYPE", None)
    out = subprocess.run([sys.executable, "-c",
                          "import torch; a = torch.ones(64, 64); (a @ a).sum()"],
                         capture_output=True, text=True, env=env)
    core = next((line.split(":", 1)[1].strip() for line in (out.stdout + out.stderr).splitlines()
                 if line.startswith("Core:")), "?")
    if os.environ.get("OPENBLAS_CORETYPE"):
        return core, os.environ["OPENBLAS_CORETYPE"]
    if core in GENERIC_CORES:
        flags = cpu_flags()
        if "avx512f" in flags:
            return core, "SkylakeX"
        if "avx2" in flags:
            return core, "Haswell"
    return core, None


def peers():
    """(name, extra environment) for each PyTorch configuration measured: Debian's torch over
    Debian's OpenBLAS (libopenblas0-pthread, installed by scripts/setup; bench/setup-peers unpacks
    a copy where it is not installed), at every pair of intra-op threads (torch.set_num_threads,
    read by the worker from XO_PEER_INTRA_OP) and OpenBLAS threads (OPENBLAS_NUM_THREADS) up to the
    cores, each in f32 and under torch.autocast("cpu", dtype=torch.bfloat16) (XO_PEER_PRECISION;
    "torch 1x2 bf16"). The comparison is against the best of them (best_peer); each is
    reported."""
    here = os.path.dirname(os.path.abspath(__file__))
    openblas = subprocess.run([os.path.join(here, "setup-peers")], check=True,
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]
    openblas = os.path.join(os.path.dirname(here), openblas)
    detected, coretype = openblas_core(openblas)
    print(f"peer: torch over OpenBLAS ({openblas}); OpenBLAS picks core {detected}"
          + (f", run as OPENBLAS_CORETYPE={coretype}" if coretype else ""), flush=True)
    out = []
    for precision in PEER_PRECISIONS:
        for intra in thread_counts():
            for blas in thread_counts():
                env = {"LD_LIBRARY_PATH": openblas, "XO_PEER_INTRA_OP": str(intra),
                       "OPENBLAS_NUM_THREADS": str(blas), "XO_PEER_PRECISION": precision}
                if coretype:
                    env["OPENBLAS_CORETYPE"] = coretype
                suffix = "" if precision == "f32" else f" {precision}"
                out.append((f"torch {intra}x{blas}{suffix}", env))
    return out


# The arithmetic the peer is timed in: f32, and the recipe of PyTorch's CPU mixed precision
# (torch.autocast("cpu", dtype=torch.bfloat16): matmuls and convolutions in bf16, the weights,
# their gradients and the optimizer in f32), which runs on AMX or AVX-512 BF16 where the CPU has
# them and is converted in software where it has not.
PEER_PRECISIONS = ("f32", "bf16")


def apply_thread_settings(torch):
    """In a worker: the intra-op threads its configuration names (peers())."""
    if os.environ.get("XO_PEER_INTRA_OP"):
        torch.set_num_threads(int(os.environ["XO_PEER_INTRA_OP"]))


def peer_precision(torch):
    """In a worker: a context for the forward pass and the loss in the precision its configuration
    names (peers()): torch.autocast for bf16, nothing for f32. The backward runs outside it, as
    PyTorch's autocast recipe says."""
    precision = os.environ.get("XO_PEER_PRECISION", "f32")
    if precision not in PEER_PRECISIONS:
        raise ValueError(f"XO_PEER_PRECISION={precision}: expected one of "
                         f"{', '.join(PEER_PRECISIONS)}")
    return precision_context(torch, precision)


def precision_context(torch, precision):
    """A context for the forward pass and the loss in `precision` (PEER_PRECISIONS):
    torch.autocast("cpu", dtype=torch.bfloat16) for bf16, nothing for f32."""
    if precision == "f32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    raise ValueError(f"precision {precision}: expected one of {', '.join(PEER_PRECISIONS)}")


def torch_matmul_rate(torch, dtype, n=2048, repeats=5):
    """GFLOP/s of an n x n x n torch matmul in `dtype`, the median of `repeats` after one warm-up:
    the peer's own peak for the precision it runs (bf16 on a CPU without AMX or AVX-512 BF16 is
    converted in software, and this says how fast that is)."""
    a = torch.rand(n, n).to(dtype)
    b = torch.rand(n, n).to(dtype)
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        (a @ b).sum().item()
        times.append(time.perf_counter() - t0)
        if times[0] > 1.0 and len(times) == 2:
            break  # converted in software (seconds a product): one timed product says enough
    return 2.0 * n ** 3 / statistics.median(times[1:]) / 1e9


def peer_matmul_rates(peer_list):
    """{peer name: its f32 or bf16 matmul GFLOP/s}, each measured in a worker with its settings
    (peer_rate_worker); the best per precision is what the peer's peak fraction is against."""
    rates = {}
    for name, env in peer_list:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--matmul-rate"],
                             check=True, capture_output=True, text=True, env={**os.environ, **env})
        rates[name] = float(out.stdout.strip().splitlines()[-1])
    return rates


def peer_rate_worker():
    import torch
    apply_thread_settings(torch)
    dtype = torch.bfloat16 if os.environ.get("XO_PEER_PRECISION") == "bf16" else torch.float32
    print(f"{torch_matmul_rate(torch, dtype):.1f}")


def best_peer(timings, precision=None):
    """(name, timing) of the fastest configuration of time_peers' result (of those in `precision`,
    f32 or bf16, where given)."""
    if precision is not None:
        timings = {k: v for k, v in timings.items() if (k.split()[2:] or ["f32"])[0] == precision}
    return min(timings.items(), key=lambda kv: kv[1]["median_step_ms"])


def run_worker(script, worker_args, env_extra):
    """Runs `script --worker ARGS` in a fresh interpreter (one process per peer configuration, so
    each loads its own BLAS) and returns the JSON line it prints last."""
    cmd = [sys.executable, os.path.abspath(script), "--worker", *worker_args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env={**os.environ, **env_extra})
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_peers(peer_list, crossover_ms, run):
    """{peer name: its timing with "ratio" (peer ms / crossover ms)}; run(env) times one peer."""
    timings = {}
    for name, env in peer_list:
        t = run(env)
        t["ratio"] = t["median_step_ms"] / crossover_ms
        timings[name] = t
    return timings


def peer_header(peer_list):
    return ("".join(f"{name + ' ms':>18}" for name, _ in peer_list)
            + f" {'best peer':>10} {'ratio':>7}")


def peer_cells(timings, decimals):
    name, best = best_peer(timings)
    return ("".join(f"{t['median_step_ms']:>18.{decimals}f}" for t in timings.values())
            + f" {name[6:]:>10} {best['ratio']:>6.1f}x")


# -- timing and results ----------------------------------------------------------------------------

def median_cv(values):
    """(median, coefficient of variation: population standard deviation / mean; 0 for one value)."""
    cv = statistics.pstdev(values) / statistics.mean(values) if len(values) > 1 else 0.0
    return statistics.median(values), cv


def step_stats(step_seconds):
    """The median step in ms and the spread of the timed steps (the first step, the warm-up, is
    left out, as crossover leaves it out)."""
    median, cv = median_cv(step_seconds[1:])
    return {"median_step_ms": median * 1e3, "cv": cv}


def machine_line(torch):
    return (f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
            f"torch {torch.__version__} (default threads {torch.get_num_threads()}); "
            f"{time.strftime('%Y-%m-%d')}")


def write_json(path, doc):
    """Writes `doc` (indented) through a temporary file, so a reader never sees half of it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(path + ".tmp", path)


def comparison_parser(doc, result_file, models_default, models_help):
    """The command line of a CPU comparison (bench/disc_vs_torch.py, bench/classic_vs_torch.py):
    --build, --models, --out, and the hidden --worker that runs one PyTorch timing in its own
    process."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build", help="crossover build folder")
    p.add_argument("--models", default=models_default, help=models_help)
    p.add_argument("--out", default="bench/out", help=f"folder for {result_file}")
    p.add_argument("--precisions", default=",".join(crossover_precisions()),
                   help="crossover's precisions to time, comma-separated (default: f32, and bf16 "
                        "where the CPU has AMX or AVX-512 BF16)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p


def crossover_precisions():
    """The precisions crossover runs on this CPU: f32, and bf16 with AMX or AVX-512 BF16."""
    return ["f32", "bf16"] if bf16_units() else ["f32"]


def crossover_peaks(build, precisions):
    """{precision: crossover's matmul peak in GFLOP/s}, each probed in this run."""
    return {p: matmul_peak(build, echo=True, precision=p) for p in precisions}


def time_crossover(binary, name, json_path, precisions, *args):
    """{precision: crossover's result document} for `crossover train NAME ARGS` at each
    precision."""
    out = {}
    for p in precisions:
        root, ext = os.path.splitext(json_path)
        out[p] = crossover_train(binary, name, f"{root}-{p}{ext}", *args, "--precision", p)
    return out


def crossover_header(precisions):
    return " ".join(f"{'xo ' + p + ' ms':>12} {'peak%':>6}" for p in precisions)


def crossover_cells(docs, peaks, decimals):
    return " ".join(f"{docs[p]['median_step_ms']:>12.{decimals}f} "
                    f"{100 * docs[p]['gflops'] / peaks[p]:>5.1f}%" for p in docs)


def crossover_fields(docs, peaks):
    """A row's crossover figures per precision: ms per step, its spread, GFLOP/s and the peak of
    that precision."""
    return {p: {"ms": d["median_step_ms"], "cv": d["step_ms"]["cv"], "gflops": d["gflops"],
                "peak_gflops": peaks[p], "final_loss": d.get("final_loss")}
            for p, d in docs.items()}


def write_comparison(out_dir, result_file, schema, torch, peak, rows, peer_rates):
    """The comparison's JSON document in OUT_DIR/RESULT_FILE; returns its path. `peer_rates`:
    peer_matmul_rates' result."""
    path = os.path.join(out_dir, result_file)
    write_json(path, {"schema": schema, "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
                      "torch": torch.__version__, "cpu_flags": bf16_units(),
                      "peak_gflops": peak, "peer_matmul_gflops": peer_rates, "rows": rows})
    return path


def bf16_units():
    """The CPU's bf16 matrix units as /proc/cpuinfo names them (amx_bf16, avx512_bf16), or []."""
    return sorted(cpu_flags() & {"amx_bf16", "avx512_bf16"})


def print_peaks(peaks, peer_rates):
    """The peaks the run's fractions are against: crossover's probe in each precision it runs
    ({precision: GFLOP/s}) and each peer setting's matmul rate in its precision."""
    units = bf16_units()
    print(f"bf16 units: {', '.join(units) if units else 'none (bf16 converted in software)'}")
    print("crossover matmul peak GFLOP/s: " + ", ".join(f"{p} {v:.1f}" for p, v in peaks.items())
          + "; torch matmul (2048^3) GFLOP/s: "
          + ", ".join(f"{name[6:]} {rate:.1f}" for name, rate in peer_rates.items()), flush=True)


if __name__ == "__main__" and sys.argv[1:] == ["--matmul-rate"]:
    peer_rate_worker()
