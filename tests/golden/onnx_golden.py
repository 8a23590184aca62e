#!/usr/bin/python3
"""Golden test of ONNX import against PyTorch: models exported here by torch.onnx.export
(Debian's python3-torch) and trained by crossover from the .onnx file itself.

1. Each built-in model's PyTorch twin (bench/peer.py) is exported and read back by `crossover
   import`: the same parameter count, the same names and shapes as crossover's own spec of the model
   (which are PyTorch's state_dict names), and the same values as the twin's weights (the LSTM's
   gates reordered from ONNX's i, o, f, c to PyTorch's i, f, g, o).
2. The same exports (dropout at p = 0: the engines draw different masks by design) take one SGD
   step with lr 1 on one batch in both engines: the same first-step loss, and the same gradients
   (crossover's are read back as the change of its weights).
3. The classic golden configurations (tests/golden/torch_golden_classic.py: CNNs with BatchNorm, an
   MLP with BatchNorm1d, an embedding + 2-layer LSTM with global max pooling) are exported and
   trained for 3 epochs from the .onnx file, with the training file beside it: per-epoch losses and
   final weights within that test's tolerances.

    /usr/bin/python3 tests/golden/onnx_golden.py --crossover build/crossover

Exit codes: 0 all agree, 1 a mismatch, 77 PyTorch is not installed (ctest reports a skip).
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
sys.path.insert(0, HERE)
import peer  # noqa: E402

np, torch = peer.import_torch_or_skip("golden onnx")
try:
    import onnx
    from onnx import numpy_helper
except ImportError as e:  # pragma: no cover - scripts/setup installs python3-onnx
    print(f"golden onnx: skipped, the onnx package is not importable here ({e})")
    sys.exit(peer.SKIP)
import torch_golden_classic as classic  # noqa: E402  (its CONFIGS and tolerances)

OPSET = 14  # torch.onnx.export's default in PyTorch 1.13
# Measured on 2026-11-23: first-step losses within 2.4e-7 relative, gradients within 2.0e-6 of the
# largest gradient of each tensor (mnist-cnn's bias "2.bias", summed over 128 x 24 x 24 positions in
# oneDNN's order). The tolerances leave 10x or more.
FIRST_LOSS_RTOL = 1e-5
GRAD_RTOL = 2e-5


def example_input(name):
    """A batch of 2 of the built-in model's input, for tracing."""
    if name in peer.CLASSIC and peer.CLASSIC[name].vocab:
        return torch.zeros((2, *peer.CLASSIC[name].shape), dtype=torch.int64)
    shape = peer.CLASSIC[name].shape if name in peer.CLASSIC else (2,)
    return torch.zeros((2, *shape))


def export(model, x, path, opset=OPSET):
    """torch.onnx.export in training mode (Dropout and BatchNorm kept as nodes, nothing folded) with
    a dynamic batch. Tracing in training mode runs the model, which updates BatchNorm's running
    statistics in the file: the model is given the file's values back (read with the onnx package,
    independently of crossover), so that both engines start from what the file holds."""
    torch.onnx.export(copy.deepcopy(model), x, path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                      opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    state = model.state_dict()
    for tensor in onnx.load(path).graph.initializer:
        if tensor.name in state:
            state[tensor.name].copy_(torch.from_numpy(numpy_helper.to_array(tensor).copy()))


def crossover(binary, *args):
    proc = subprocess.run([binary, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise peer.CrossoverFailed(f"crossover {' '.join(args)} failed ({proc.returncode}): "
                                   f"{proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def twin_names(name, state):
    """The twin's state_dict under crossover's names: nn.Sequential twins already have them; the
    IMDB LSTM twin names its modules (embedding, lstm, linear), crossover numbers them 0, 1, 2."""
    renames = {"embedding.": "0.", "lstm.": "1.", "linear.": "2."}
    out = {}
    for key, value in state.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(old):]
        out[key] = value.detach().numpy()
    return out


def spec_layers(binary, target, tmp):
    """The layers of a spec as crossover writes it (`crossover import --spec` or a built-in's)."""
    out = os.path.join(tmp, "layers.toml")
    if target.endswith(".onnx"):
        crossover(binary, "import", target, "--spec", out)
    else:
        with open(os.path.join(HERE, "..", "..", "specs", f"{target}.toml")) as f:
            text = f.read()
        with open(out, "w") as f:
            f.write(text)
    with open(out) as f:
        text = f.read()
    start = text.index("layers = [")
    return text[start:text.index("]\n", start)]


def check_import(binary, name, tmp, opset=OPSET):
    """Part 1: names, shapes, values and parameter count of an imported built-in twin."""
    torch.manual_seed(1)
    model = peer.builtin_model(name)
    onnx_path = os.path.join(tmp, f"{name}-{opset}.onnx")
    export(model, example_input(name), onnx_path, opset)
    weights = os.path.join(tmp, f"{name}.safetensors")
    crossover(binary, "import", onnx_path, "--weights", weights)
    got = peer.read_safetensors(weights)
    want = twin_names(name, model.state_dict())
    ok = True
    if set(got) != set(want):
        print(f"  names differ: crossover {sorted(got)} vs torch {sorted(want)}")
        return False
    for key, value in want.items():
        if got[key].shape != value.shape or not np.array_equal(got[key], value):
            print(f"  {key}: shape {got[key].shape} vs {value.shape}, or values differ")
            ok = False
    params = sum(v.size for v in got.values())
    twin_params = sum(p.numel() for p in model.parameters())
    if params != twin_params:
        print(f"  parameters: crossover {params} vs torch {twin_params}")
        ok = False
    imported = spec_layers(binary, onnx_path, tmp)
    builtin = spec_layers(binary, name, tmp)
    if imported != builtin:
        print(f"  layers differ from specs/{name}.toml:\n{imported}\nvs\n{builtin}")
        ok = False
    print(f"  {len(got)} tensors, {params} parameters, layers as specs/{name}.toml: "
          f"{'same' if ok else 'DIFFERENT'}")
    return ok


def without_dropout(model):
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def first_step(binary, name, tmp):
    """Part 2: one SGD step (lr 1) on one batch: the loss and the gradients of both engines."""
    torch.manual_seed(2)
    model = without_dropout(peer.builtin_model(name))
    classic_cfg = peer.CLASSIC.get(name)
    batch = classic_cfg.batch if classic_cfg else peer.DISC_BATCH
    shape = classic_cfg.shape if classic_cfg else (2,)
    bce = classic_cfg is not None and classic_cfg.loss == "bce"
    classes = classic_cfg.classes if classic_cfg else 2
    rng = np.random.RandomState(3)
    if classic_cfg is not None and classic_cfg.vocab:
        x = rng.randint(0, classic_cfg.vocab, size=(batch, *shape)).astype(np.int64)
    else:
        x = rng.standard_normal((batch, int(np.prod(shape)))).astype(np.float32)
    y = rng.randint(0, classes, size=batch).astype(np.int64)
    stem = os.path.join(tmp, f"{name}-step")
    peer.write_csv(stem + ".csv", x, y)
    export(model, example_input(name), stem + ".onnx")
    with open(stem + ".toml", "w") as f:  # the training file beside the model
        f.write(f"[model]\nloss = \"{'bce' if bce else 'cross_entropy'}\"\n"
                f"[train]\noptimizer = {{ type = \"sgd\", lr = 1.0 }}\nbatch = {batch}\n"
                f"epochs = 1\n[data]\nsource = \"csv:{os.path.basename(stem)}.csv\"\n")
    saved = stem + "-trained.safetensors"
    doc = peer.crossover_train(binary, stem + ".onnx", stem + ".json", "--save", saved)

    before = twin_names(name, model.state_dict())
    xt = torch.from_numpy(x) if bce else torch.from_numpy(x).reshape(-1, *shape)
    model.zero_grad()
    logits = model(xt)
    loss_fn = torch.nn.BCEWithLogitsLoss() if bce else torch.nn.CrossEntropyLoss()
    loss = loss_fn(logits, torch.from_numpy(y).float() if bce else torch.from_numpy(y))
    loss.backward()
    grads = twin_names(name, {k: p.grad for k, p in model.named_parameters()})

    t_loss, c_loss = float(loss), doc["epochs"][0]["loss"]
    rel = abs(t_loss - c_loss) / abs(t_loss)
    ok = rel <= FIRST_LOSS_RTOL
    after = peer.read_safetensors(saved)
    worst, worst_key = 0.0, ""
    for key, g in grads.items():
        # w1 = w0 - g: the change of crossover's weights is its gradient, up to the rounding of w1
        # (half an ulp of the weight), which the tolerance allows for.
        got = before[key].astype(np.float64) - after[key].astype(np.float64)
        rounding = np.abs(after[key]).max() * 2.0 ** -23
        scale = max(float(np.abs(g).max()), 1e-12)
        diff = max(float(np.abs(got - g).max()) - rounding, 0.0) / scale
        if diff > worst:
            worst, worst_key = diff, key
    ok &= worst <= GRAD_RTOL
    print(f"  first-step loss: torch {t_loss:.8f} crossover {c_loss:.8f} rel diff {rel:.2e}; "
          f"gradients: max |diff| / max |g| = {worst:.2e} ({worst_key or '-'})"
          f"{'' if ok else '  <-- MISMATCH'}")
    return ok


def trained_through_onnx(binary, index, config, tmp):
    """Part 3: a classic golden configuration trained from its ONNX export."""
    name, build, _layers, shape, loss, classes, samples, batch, epochs, optimizer = config
    x, y = peer.golden_data(200 + index, shape, loss, classes, samples)
    stem = os.path.join(tmp, f"classic{index}")
    peer.write_csv(stem + ".csv", x, y)
    torch.manual_seed(index)
    model = build()
    example = torch.zeros((2, *shape), dtype=torch.int64) if loss == "bce" else \
        torch.zeros((2, *shape))
    export(model, example, stem + ".onnx")
    opt = ", ".join(f"{k} = {json.dumps(v)}" for k, v in optimizer.items())
    with open(stem + ".toml", "w") as f:
        f.write(f"[model]\nloss = \"{loss}\"\n[train]\noptimizer = {{ {opt} }}\nbatch = {batch}\n"
                f"epochs = {epochs}\n[data]\nsource = \"csv:{os.path.basename(stem)}.csv\"\n")
    xt = torch.from_numpy(x.astype(np.int64)) if loss == "bce" else \
        torch.from_numpy(x).reshape(-1, *shape)
    expected = [total for total, _ in peer.train_torch(model, xt, torch.from_numpy(y), loss,
                                                         optimizer, batch, epochs)]
    saved = stem + "-trained.safetensors"
    doc = peer.crossover_train(binary, stem + ".onnx", stem + ".json", "--save", saved)
    got = [e["loss"] for e in doc["epochs"]]
    ok = len(got) == len(expected)
    for epoch, (t_loss, c_loss) in enumerate(zip(expected, got), 1):
        rel = abs(t_loss - c_loss) / abs(t_loss)
        ok &= rel <= classic.LOSS_RTOL
        print(f"  epoch {epoch}: torch {t_loss:.8f} crossover {c_loss:.8f} rel diff {rel:.2e}"
              f"{'  <-- MISMATCH' if rel > classic.LOSS_RTOL else ''}")
    return peer.compare_weights(saved, model.state_dict(), build(), classic.WEIGHT_RTOL) and ok


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--crossover", required=True, help="the crossover binary")
    args = parser.parse_args()
    torch.set_num_threads(1)
    checks = []
    for name in peer.BUILTIN_MODELS:
        checks.append((f"{name}: import", lambda tmp, n=name: check_import(args.crossover, n, tmp)))
        checks.append((f"{name}: first step",
                       lambda tmp, n=name: first_step(args.crossover, n, tmp)))
    # The operator sets torch.onnx.export writes differently (Squeeze's axes, Dropout's ratio and
    # Slice's bounds move from attributes to inputs, Pad's pads too): the two classic networks with
    # the most varied operators at the other opsets crossover reads.
    for opset in (9, 11, 13, 17):
        for name in ("mnist-cnn", "imdb-lstm"):
            checks.append((f"{name}: import at opset {opset}",
                           lambda tmp, n=name, o=opset: check_import(args.crossover, n, tmp, o)))
    for index, config in enumerate(classic.CONFIGS):
        checks.append((f"{config[0]}, trained from ONNX",
                       lambda tmp, i=index, c=config: trained_through_onnx(args.crossover, i, c,
                                                                            tmp)))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for index, (title, check) in enumerate(checks):
            print(f"[{index + 1}/{len(checks)}] {title}")
            try:
                ok = check(tmp)
            except peer.CrossoverFailed as e:
                print(f"  {e}")
                ok = False
            if not ok:
                failed += 1
                print("  FAILED")
    print(f"golden onnx: {len(checks) - failed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
