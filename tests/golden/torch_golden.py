#!/usr/bin/python3
"""Golden test against the real peer: PyTorch and crossover train the same nn.Sequential.

For each configuration: random data is written as CSV, a torch.nn.Sequential is built with
PyTorch's default initialisation and its state_dict written as safetensors; PyTorch trains it for a
few epochs (mini-batches in order, the last one partial where the sizes say so); crossover trains
the same spec from the same file on the same CSV. The per-epoch mean losses per sample, the training errors
and the final weights must agree to float32 rounding, and crossover's saved weights must load back
into PyTorch with the same names and shapes.

    /usr/bin/python3 tests/golden/torch_golden.py --crossover build/src/crossover

Exit codes: 0 all agree, 1 a mismatch, 77 PyTorch is not installed (ctest reports a skip).
"""
import json
import os
import sys

# The helpers shared with the benchmarks (bench/peer.py), found relative to this file.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import peer  # noqa: E402

np, torch = peer.import_torch_or_skip("golden")

# Relative tolerance on each epoch's mean loss. Both engines compute in float32 but sum in
# different orders (oneDNN's blocked GEMM vs PyTorch's BLAS), so values differ in the last bits and
# the differences grow slowly with each step. Measured on 2026-11-22: at most 2.4e-7 (Adam);
# the tolerance leaves a margin of about 10x.
LOSS_RTOL = 2e-6
# Final weights: the largest difference relative to the tensor's largest weight. Measured: at most
# 5.5e-6 (Adam, whose normalised steps amplify rounding in small gradients); about 10x margin.
WEIGHT_RTOL = 5e-5


def layer_toml(layer):
    """One layer of the spec: ("linear", out, bias), ("leaky_relu", negative_slope) or (type,)."""
    if layer[0] == "linear":
        return f'  {{ type = "linear", out = {layer[1]}, bias = {str(layer[2]).lower()} }}'
    if layer[0] == "leaky_relu" and len(layer) > 1:
        return f'  {{ type = "leaky_relu", negative_slope = {layer[1]!r} }}'
    return f'  {{ type = "{layer[0]}" }}'


def spec_text(layers, features, optimizer, batch, epochs, csv, loss="cross_entropy"):
    toml_layers = ",\n".join(layer_toml(l) for l in layers)
    opt = ", ".join(f"{k} = {json.dumps(v)}" for k, v in optimizer.items())
    return (f"[model]\ninput = [{features}]\nlayers = [\n{toml_layers}\n]\n"
            f'loss = "{loss}"\n[train]\noptimizer = {{ {opt} }}\nbatch = {batch}\n'
            f'epochs = {epochs}\nshuffle = false\nseed = 0\n[data]\nsource = "csv:{csv}"\n')


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
    # PyTorch's default slope (0.01) and a steep one: the gradients below zero are the slope's.
    ("leaky_relu, default and 0.2 slopes, momentum",
     [("linear", 16, True), ("leaky_relu",), ("linear", 8, True), ("leaky_relu", 0.2),
      ("linear", 3, True)], 4, 3, 200, 40, 4, {"type": "sgd", "lr": 0.1, "momentum": 0.9}),
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
    peer.write_csv(csv, x, y, header=[f"f{i}" for i in range(features)] + ["label"])
    spec = os.path.join(tmp, f"spec{index}.toml")
    with open(spec, "w") as f:
        f.write(spec_text(layers, features, optimizer, batch, epochs, csv))

    torch.manual_seed(index)
    model = peer.sequential(layers, features)
    init = os.path.join(tmp, f"init{index}.safetensors")
    peer.write_safetensors(init, model.state_dict())
    expected = peer.train_torch(model, torch.from_numpy(x), torch.from_numpy(y), "cross_entropy",
                                optimizer, batch, epochs)

    saved, result = os.path.join(tmp, f"out{index}.safetensors"), os.path.join(tmp, f"r{index}.json")
    try:
        doc = peer.crossover_train(crossover, spec, result, "--init", init, "--save", saved,
                                   *extra_args)
    except peer.CrossoverFailed as e:
        print(f"  {e}")
        return False
    got = [(e["loss"], e["train_error_percent"]) for e in doc["epochs"]]

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
    fresh = peer.sequential(layers, features)
    weights_ok = peer.compare_weights(saved, model.state_dict(), fresh, WEIGHT_RTOL)
    # And `crossover predict` with those weights against PyTorch's forward pass with them.
    predict_ok = peer.predict_check(crossover, spec, saved, fresh, x, torch.from_numpy(x),
                                    "cross_entropy", tmp, f"c{index}")
    return ok and weights_ok and predict_ok


# Regression with mean squared error (torch.nn.MSELoss): a real target in the CSV's last column.
# The per-epoch loss tolerance of each: SGD's trajectories agree as closely as the classification
# cases' (measured 1.5e-7 on 2026-11-23); Adam's normalised steps turn the last-bit differences of
# the gradients' summation order into step-sized ones wherever a gradient is near zero, and a
# regression's losses keep moving where a classifier's flatten: measured 1.46e-5 over 4 epochs, the
# tolerance leaves about 3x (the final weights still meet WEIGHT_RTOL: 9.4e-6).
REGRESSION_CONFIGS = [
    # name, layers, features, samples, batch, epochs, optimizer, loss tolerance
    ("mse regression, SGD with momentum, partial batch",
     [("linear", 16, True), ("tanh",), ("linear", 8, True), ("relu",), ("linear", 1, True)],
     3, 250, 32, 4, {"type": "sgd", "lr": 0.05, "momentum": 0.9}, LOSS_RTOL),
    ("mse regression, Adam",
     [("linear", 32, True), ("relu",), ("linear", 1, True)], 5, 300, 50, 4,
     {"type": "adam", "lr": 0.01}, 5e-5),
]


def run_regression(index, config, crossover, tmp):
    name, layers, features, samples, batch, epochs, optimizer, loss_rtol = config
    rng = np.random.RandomState(300 + index)
    x = rng.standard_normal((samples, features)).astype(np.float32)
    w = rng.standard_normal(features)
    y = (x @ w + 0.1 * rng.standard_normal(samples)).astype(np.float32)
    csv = os.path.join(tmp, f"reg{index}.csv")
    peer.write_csv(csv, x, y)
    spec = os.path.join(tmp, f"reg{index}.toml")
    with open(spec, "w") as f:
        f.write(spec_text(layers, features, optimizer, batch, epochs, csv, loss="mse"))
    torch.manual_seed(100 + index)
    model = peer.sequential(layers, features)
    init = os.path.join(tmp, f"reg-init{index}.safetensors")
    peer.write_safetensors(init, model.state_dict())
    expected = [loss for loss, _ in peer.train_torch(model, torch.from_numpy(x),
                                                       torch.from_numpy(y), "mse", optimizer,
                                                       batch, epochs)]
    saved = os.path.join(tmp, f"reg-out{index}.safetensors")
    result = os.path.join(tmp, f"reg{index}.json")
    try:
        doc = peer.crossover_train(crossover, spec, result, "--init", init, "--save", saved)
    except peer.CrossoverFailed as e:
        print(f"  {e}")
        return False
    got = [e["loss"] for e in doc["epochs"]]
    ok = len(got) == len(expected) and all(e["train_error_percent"] is None for e in doc["epochs"])
    for epoch, (t_loss, c_loss) in enumerate(zip(expected, got), 1):
        rel = abs(t_loss - c_loss) / abs(t_loss)
        ok &= rel <= loss_rtol
        print(f"  epoch {epoch}: torch {t_loss:.8f} crossover {c_loss:.8f} rel diff {rel:.2e}"
              f"{'  <-- MISMATCH' if rel > loss_rtol else ''}")
    fresh = peer.sequential(layers, features)
    weights_ok = peer.compare_weights(saved, model.state_dict(), fresh, WEIGHT_RTOL)
    predict_ok = peer.predict_check(crossover, spec, saved, fresh, x, torch.from_numpy(x), "mse",
                                    tmp, f"reg{index}")
    return ok and weights_ok and predict_ok


def main():
    return peer.golden_main(__doc__, "golden", [("", CONFIGS, run_config),
                                                ("regression ", REGRESSION_CONFIGS, run_regression)])

if __name__ == "__main__":
    sys.exit(main())
