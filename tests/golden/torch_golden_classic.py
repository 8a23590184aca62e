#!/usr/bin/python3
"""Golden test for the layers of the classic networks: PyTorch and crossover train the same small
CNNs (conv2d, max/avg pooling, BatchNorm2d, flatten, linear), an MLP with BatchNorm1d (running
statistics and batch count compared too) and the same small LSTM (embedding, a 2-layer LSTM,
global max pooling over steps, linear, binary cross-entropy) from the same safetensors weights on
the same CSV data, with RMSprop, Adadelta and Adam. Per-epoch losses and final weights must agree to
float32 rounding; crossover's weights must load strictly into the PyTorch modules. Dropout is left
out: the engines draw different masks by design (crossover's are a function of seed, step, element).

    /usr/bin/python3 tests/golden/torch_golden_classic.py --crossover build/crossover

Exit codes: 0 all agree, 1 a mismatch, 77 PyTorch is not installed (ctest reports a skip).
"""
import os
import sys

# The helpers shared with the benchmarks (bench/peer.py), found relative to this file.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import peer  # noqa: E402

np, torch = peer.import_torch_or_skip("golden")

# Measured on 2026-11-22: per-epoch losses within 7.2e-8 relative, final weights within 1.7e-6
# (the LSTM with Adam); with BatchNorm (Adam on an MLP) losses within 2.9e-7 and weights and
# running statistics within 7.6e-6 (batch statistics sum in oneDNN's order). The tolerances leave
# 3-10x (convolutions and LSTMs sum in other orders
# than PyTorch's, and normalised optimizer steps amplify rounding in small gradients).
LOSS_RTOL = 1e-6
WEIGHT_RTOL = 2e-5


def cnn():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 6, 3, stride=1), nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(6, 3))


CNN_LAYERS = """
  { type = "conv2d", out = 4, kernel = 3, padding = 1 }, { type = "relu" },
  { type = "maxpool2d", kernel = 2 }, { type = "conv2d", out = 6, kernel = 3 }, { type = "tanh" },
  { type = "avgpool2d", kernel = 2 }, { type = "flatten" }, { type = "linear", out = 3 },
"""


def cnn_bn():
    nn = torch.nn
    # No bias before a batch norm (as usual): its gradient is zero up to rounding, which Adam and
    # RMSprop would blow up into full steps that differ between any two engines.
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 3))


CNN_BN_LAYERS = """
  { type = "conv2d", out = 4, kernel = 3, padding = 1, bias = false }, { type = "batchnorm2d" },
  { type = "relu" },
  { type = "maxpool2d", kernel = 2 }, { type = "flatten" }, { type = "linear", out = 3 },
"""


def mlp_bn():
    nn = torch.nn
    return nn.Sequential(nn.Linear(6, 8, bias=False), nn.BatchNorm1d(8, momentum=0.2, eps=1e-3),
                         nn.Tanh(),
                         nn.Linear(8, 3))


MLP_BN_LAYERS = """
  { type = "linear", out = 8, bias = false }, { type = "batchnorm1d", momentum = 0.2, eps = 0.001 },
  { type = "tanh" }, { type = "linear", out = 3 },
"""


def lstm():
    return peer.lstm_max_pool(30, 5, 6)


LSTM_LAYERS = """
  { type = "embedding", vocab = 30, out = 5 }, { type = "lstm", out = 6, layers = 2, sequence = true },
  { type = "global_maxpool" }, { type = "linear", out = 1 },
"""

CONFIGS = [
    # name, model builder, spec layers, input shape, loss, classes, samples, batch, epochs, optimizer
    ("CNN, RMSprop", cnn, CNN_LAYERS, [1, 8, 8], "cross_entropy", 3, 96, 32, 3,
     {"type": "rmsprop", "lr": 0.003, "alpha": 0.9, "eps": 1e-7}),
    ("CNN, Adadelta, partial batch", cnn, CNN_LAYERS, [1, 8, 8], "cross_entropy", 3, 90, 32, 3,
     {"type": "adadelta", "lr": 1.0, "rho": 0.95, "eps": 1e-7}),
    ("LSTM, Adam, bce", lstm, LSTM_LAYERS, [7], "bce", 2, 64, 16, 3,
     {"type": "adam", "lr": 0.01}),
    ("CNN + BatchNorm2d, RMSprop, partial batch", cnn_bn, CNN_BN_LAYERS, [1, 8, 8],
     "cross_entropy", 3, 90, 32, 3, {"type": "rmsprop", "lr": 0.003, "alpha": 0.9, "eps": 1e-7}),
    ("MLP + BatchNorm1d, Adam", mlp_bn, MLP_BN_LAYERS, [6], "cross_entropy", 3, 80, 16, 3,
     {"type": "adam", "lr": 0.01}),
]


def run_config(index, config, crossover, tmp):
    name, build, layers, shape, loss, classes, samples, batch, epochs, optimizer = config
    x, y, spec, model, init, xt = peer.golden_start(tmp, index, 200 + index, build, shape, layers, loss,
                                                    classes, samples, batch, epochs, optimizer)
    expected = [total for total, _ in peer.train_torch(model, xt, torch.from_numpy(y), loss,
                                                         optimizer, batch, epochs)]

    saved, result = os.path.join(tmp, f"out{index}.safetensors"), os.path.join(tmp, f"r{index}.json")
    try:
        doc = peer.crossover_train(crossover, spec, result, "--init", init, "--save", saved)
    except peer.CrossoverFailed as e:
        print(f"  {e}")
        return False
    got = [e["loss"] for e in doc["epochs"]]
    ok = len(got) == len(expected)
    for epoch, (t_loss, c_loss) in enumerate(zip(expected, got), 1):
        rel = abs(t_loss - c_loss) / abs(t_loss)
        ok &= rel <= LOSS_RTOL
        print(f"  epoch {epoch}: torch {t_loss:.8f} crossover {c_loss:.8f} rel diff {rel:.2e}"
              f"{'  <-- MISMATCH' if rel > LOSS_RTOL else ''}")
    fresh = build()
    weights_ok = peer.compare_weights(saved, model.state_dict(), fresh, WEIGHT_RTOL)
    # `crossover predict` with those weights against PyTorch's eval-mode forward pass (dropout off,
    # BatchNorm on its running statistics).
    predict_ok = peer.predict_check(crossover, spec, saved, fresh, x, xt, loss, tmp, f"c{index}")
    return ok and weights_ok and predict_ok


def main():
    return peer.golden_main(__doc__, "golden classic", [("", CONFIGS, run_config)])

if __name__ == "__main__":
    sys.exit(main())
