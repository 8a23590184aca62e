#!/usr/bin/python3
"""Golden test against the real peer: PyTorch and crossover train the same nn.Sequential.

For each configuration: random data is written as CSV, a torch.nn.Sequential is built with
PyTorch's default initialisation and its state_dict written as safetensors; PyTorch trains it for a
few epochs (mini-batches in order, the last one partial where the sizes say so); crossover trains
the same spec from the same file on the same CSV. The per-epoch summed losses, the training errors
and the final weights must agree to float32 rounding, and crossover's saved weights must load back
into PyTorch with the same names and shapes.

    /usr/bin/python3 tests/golden/torch_golden.py --crossover build/src/crossover

Exit codes: 0 all agree, 1 a mismatch, 77 PyTorch is not installed (ctest reports a skip).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77
try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"golden: skipped, PyTorch is not importable here ({e})")
    sys.exit(SKIP)

# Relative tolerance on each epoch's summed loss. Both engines compute in float32 but sum in
# different orders (oneDNN's blocked GEMM vs PyTorch's BLAS), so values differ in the last bits and
# the differences grow slowly with each step. Measured on 2026-11-22: at most 2.4e-7 (Adam);
# the tolerance leaves a margin of about 10x.
LOSS_RTOL = 2e-6
# Final weights: the largest difference relative to the tensor's largest weight. Measured: at most
# 5.5e-6 (Adam, whose normalised steps amplify rounding in small gradients); about 10x margin.
WEIGHT_RTOL = 5e-5


def write_safetensors(path, state):
    header, blobs, offset = {}, [], 0
    for name, tensor in state.items():
        # Counts (BatchNorm's num_batches_tracked) are int64 in PyTorch and I64 in the file.
        integer = tensor.dtype == torch.int64
        data = tensor.detach().contiguous().numpy().astype("<i8" if integer else "<f4").tobytes()
        header[name] = {"dtype": "I64" if integer else "F32", "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
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
        out[name] = torch.from_numpy(array.reshape(info["shape"]).copy())
    return out


def build(layers, features):
    """layers: list of ("linear", out, bias) or ("relu"|"tanh"|"sigmoid",)."""
    modules, width = [], features
    for layer in layers:
        if layer[0] == "linear":
            modules.append(torch.nn.Linear(width, layer[1], bias=layer[2]))
            width = layer[1]
        else:
            modules.append({"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh,
                            "sigmoid": torch.nn.Sigmoid}[layer[0]]())
    return torch.nn.Sequential(*modules)


def spec_text(layers, features, optimizer, batch, epochs, csv):
    toml_layers = ",\n".join(
        f'  {{ type = "linear", out = {l[1]}, bias = {str(l[2]).lower()} }}' if l[0] == "linear"
        else f'  {{ type = "{l[0]}" }}' for l in layers)
    opt = ", ".join(f"{k} = {json.dumps(v)}" for k, v in optimizer.items())
    return (f"[model]\ninput = [{features}]\nlayers = [\n{toml_layers}\n]\n"
            f'loss = "cross_entropy"\n[train]\noptimizer = {{ {opt} }}\nbatch = {batch}\n'
            f'epochs = {epochs}\nshuffle = false\nseed = 0\n[data]\nsource = "csv:{csv}"\n')


def torch_optimizer(params, cfg):
    cfg = dict(cfg)
    kind = cfg.pop("type")
    if kind == "sgd":
        return torch.optim.SGD(params, **cfg)
    betas = (cfg.pop("beta1", 0.9), cfg.pop("beta2", 0.999))
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    return cls(params, betas=betas, **cfg)


def train_torch(model, x, y, optimizer_cfg, batch, epochs):
    opt = torch_optimizer(model.parameters(), optimizer_cfg)
    loss_fn = torch.nn.CrossEntropyLoss()
    history = []
    for _ in range(epochs):
        total, wrong = 0.0, 0
        for start in range(0, len(x), batch):
            xb, yb = x[start:start + batch], y[start:start + batch]
            opt.zero_grad()
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()
            opt.step()
            total += loss.item()
            wrong += (logits.argmax(dim=1) != yb).sum().item()
        history.append((total, 100.0 * wrong / len(x)))
    return history


CONFIGS = [
    # name, layers, features, classes, samples, batch, epochs, optimizer[, extra crossover flags]
    ("disc-like relu, plain SGD",
     [("linear", 4, True), ("relu",), ("linear", 8, True), ("relu",), ("linear", 16, True),
      ("relu",), ("linear", 2, True)], 2, 2, 1000, 100, 5, {"type": "sgd", "lr": 0.1}),
    ("tanh/relu/sigmoid, momentum + weight decay, partial batch",
     [("linear", 16, True), ("tanh",), ("linear", 8, True), ("relu",), ("linear", 4, True),
      ("sigmoid",), ("linear", 3, True)], 3, 3, 200, 32, 4,
     {"type": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.001}),
    ("Nesterov SGD",
     [("linear", 12, True), ("relu",), ("linear", 4, True)], 5, 4, 240, 40, 4,
     {"type": "sgd", "lr": 0.05, "momentum": 0.8, "nesterov": True}),
    ("Adam",
     [("linear", 32, True), ("relu",), ("linear", 32, True), ("tanh",), ("linear", 2, True)],
     2, 2, 300, 50, 4, {"type": "adam", "lr": 0.01}),
    ("AdamW with weight decay",
     [("linear", 24, True), ("sigmoid",), ("linear", 3, True)], 4, 3, 150, 64, 4,
     {"type": "adamw", "lr": 0.01, "weight_decay": 0.01}),
    ("linear without bias, stacked activations",
     [("linear", 10, False), ("relu",), ("tanh",), ("linear", 2, True)], 3, 2, 120, 30, 3,
     {"type": "sgd", "lr": 0.2}),
    ("batch split into 2 concurrent shards (--shards 2), momentum",
     [("linear", 64, True), ("relu",), ("linear", 64, True), ("relu",), ("linear", 5, True)],
     6, 5, 400, 100, 3, {"type": "sgd", "lr": 0.05, "momentum": 0.9}, ["--shards", "2"]),
]


def run_config(index, config, crossover, tmp):
    name, layers, features, classes, samples, batch, epochs, optimizer = config[:8]
    extra_args = config[8] if len(config) > 8 else []
    rng = np.random.RandomState(100 + index)
    x = rng.standard_normal((samples, features)).astype(np.float32)
    y = rng.randint(0, classes, size=samples).astype(np.int64)
    csv = os.path.join(tmp, f"data{index}.csv")
    with open(csv, "w") as f:
        f.write(",".join(f"f{i}" for i in range(features)) + ",label\n")
        for row, label in zip(x, y):
            f.write(",".join(repr(float(v)) for v in row) + f",{label}\n")
    spec = os.path.join(tmp, f"spec{index}.toml")
    with open(spec, "w") as f:
        f.write(spec_text(layers, features, optimizer, batch, epochs, csv))

    torch.manual_seed(index)
    model = build(layers, features)
    init = os.path.join(tmp, f"init{index}.safetensors")
    write_safetensors(init, model.state_dict())
    expected = train_torch(model, torch.from_numpy(x), torch.from_numpy(y), optimizer, batch, epochs)

    saved, result = os.path.join(tmp, f"out{index}.safetensors"), os.path.join(tmp, f"r{index}.json")
    proc = subprocess.run([crossover, "train", spec, "--init", init, "--save", saved, "--json",
                           result, "--quiet", *extra_args], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  crossover failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
        return False
    with open(result) as f:
        got = [(e["loss"], e["train_error"]) for e in json.load(f)["epochs"]]

    ok = True
    print(f"{'epoch':>5} {'torch loss':>14} {'crossover loss':>14} {'rel diff':>9}  "
          f"{'torch err%':>10} {'xo err%':>8}")
    one_sample = 100.0 / samples
    for epoch, ((t_loss, t_err), (c_loss, c_err)) in enumerate(zip(expected, got), 1):
        rel = abs(t_loss - c_loss) / abs(t_loss)
        bad = rel > LOSS_RTOL or abs(t_err - c_err) > one_sample + 1e-9
        ok &= not bad
        print(f"{epoch:>5} {t_loss:>14.8f} {c_loss:>14.8f} {rel:>9.2e}  {t_err:>10.2f} "
              f"{c_err:>8.2f}{'  <-- MISMATCH' if bad else ''}")
    ok &= len(got) == len(expected)

    # The other direction: crossover's weights, read into PyTorch by name and shape.
    trained = read_safetensors(saved)
    reference = model.state_dict()
    if set(trained) != set(reference):
        print(f"  names differ: crossover {sorted(trained)} vs torch {sorted(reference)}")
        return False
    worst = 0.0
    for key, tensor in reference.items():
        if tuple(trained[key].shape) != tuple(tensor.shape):
            print(f"  {key}: shape {tuple(trained[key].shape)} vs {tuple(tensor.shape)}")
            return False
        scale = max(float(tensor.abs().max()), 1e-6)
        worst = max(worst, float((trained[key] - tensor).abs().max()) / scale)
    fresh = build(layers, features)
    fresh.load_state_dict(trained)  # strict: every name and shape must match
    print(f"  final weights: max |diff| / max |w| = {worst:.2e} (tolerance {WEIGHT_RTOL:.0e})")
    return ok and worst <= WEIGHT_RTOL


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--crossover", required=True, help="the crossover binary")
    args = parser.parse_args()
    torch.set_num_threads(1)
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for index, config in enumerate(CONFIGS):
            print(f"[{index + 1}/{len(CONFIGS)}] {config[0]}")
            if run_config(index, config, args.crossover, tmp):
                passed += 1
            else:
                failed += 1
                print("  FAILED")
    print(f"golden: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
