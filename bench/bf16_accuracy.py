#!/usr/bin/python3
"""One epoch of a 784-512-512-10 MLP (RMSprop, no dropout, unshuffled) on Fashion-MNIST, from the same
initial weights in PyTorch (f32 and autocast bf16) and crossover (f32 and --precision bf16), seeds 0-2:
the test accuracies, a line per seed (docs/benchmarks.md, "The CPU at bf16").

--keras: Keras's mnist-mlp as it is (dropout 0.2, shuffled every epoch), crossover's built-in
`mnist-mlp --seed S` against PyTorch's same network (its own initialisation, shuffling and dropout
from torch.manual_seed(S)), each engine at f32 and at bf16 from the same seed, seeds 0 to
--seeds - 1: how far one epoch's accuracy moves with bf16 in each (issue 61's 0.5-point target).

    /usr/bin/python3 bench/bf16_accuracy.py [--crossover build/crossover] [--keras [--seeds 8]]
    # needs a CPU with AMX or AVX-512 BF16
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--crossover", default="build/crossover")
ap.add_argument("--keras", action="store_true")
ap.add_argument("--seeds", type=int, default=8, help="--keras: seeds 0 to N-1")
ARGS = ap.parse_args()
if ARGS.seeds < 1:
    ap.error(f"--seeds: expected at least 1 seed, got {ARGS.seeds}")
XO = os.path.abspath(ARGS.crossover)
d = "/usr/share/datasets/fashion-mnist/"
xtr = torch.from_numpy(peer.read_idx(d + "train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255)
ytr = torch.from_numpy(peer.read_idx(d + "train-labels-idx1-ubyte.gz").astype(np.int64))
xte = torch.from_numpy(peer.read_idx(d + "t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255)
yte = torch.from_numpy(peer.read_idx(d + "t10k-labels-idx1-ubyte.gz").astype(np.int64))
torch.set_num_threads(2)
spec = """[model]
input = [784]
layers = [ { type = "linear", out = 512 }, { type = "relu" }, { type = "linear", out = 512 },
           { type = "relu" }, { type = "linear", out = 10 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "rmsprop", lr = 0.001, alpha = 0.9, eps = 1e-07 }
batch = 128
epochs = 1
shuffle = false
[data]
source = "fashion-mnist"
"""


def same_weights():
    """The MLP without dropout, unshuffled, from the same weights in both engines."""
    tmp = tempfile.mkdtemp(prefix="bf16-accuracy-")
    open(os.path.join(tmp, "spec.toml"), "w").write(spec)
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        nn = torch.nn
        base = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        init = os.path.join(tmp, f"init{seed}.safetensors")
        peer.write_safetensors(init, base.state_dict())
        row = {}
        for prec in ("f32", "bf16"):
            m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
            m.load_state_dict(base.state_dict())
            opt = torch.optim.RMSprop(m.parameters(), lr=0.001, alpha=0.9, eps=1e-7)
            for s in range(0, 60000, 128):
                opt.zero_grad()
                with peer.precision_context(torch, prec):
                    loss = torch.nn.functional.cross_entropy(m(xtr[s:s + 128]), ytr[s:s + 128])
                loss.backward(); opt.step()
            with torch.no_grad():
                row["torch " + prec] = (m(xte).argmax(1) == yte).float().mean().item() * 100
            out = os.path.join(tmp, f"r{seed}-{prec}.json")
            subprocess.run([XO, "train", os.path.join(tmp, "spec.toml"), "--init", init, "--precision", prec,
                            "--json", out, "-q"], check=True, capture_output=True, cwd=tmp)
            row["xo " + prec] = json.load(open(out))["final_test_accuracy_percent"]
        print(f"seed {seed}: " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)


def keras_mlp():
    """Keras's mnist-mlp in each engine, f32 and bf16 from the same seed."""
    nn = torch.nn
    cfg = peer.builtin_optimizer("mnist-mlp")
    tmp = tempfile.mkdtemp(prefix="bf16-accuracy-keras-")
    moved = {"torch": [], "xo": []}
    for seed in range(ARGS.seeds):
        row = {}
        for prec in ("f32", "bf16"):
            torch.manual_seed(seed)
            m = peer.builtin_model("mnist-mlp")
            opt = peer.torch_optimizer(m.parameters(), cfg)
            m.train()
            for batch in torch.randperm(len(xtr)).split(128):
                opt.zero_grad()
                with peer.precision_context(torch, prec):
                    loss = nn.functional.cross_entropy(m(xtr[batch]), ytr[batch])
                loss.backward()
                opt.step()
            m.eval()
            with torch.no_grad():
                row["torch " + prec] = (m(xte).argmax(1) == yte).float().mean().item() * 100
            out = os.path.join(tmp, f"r{seed}-{prec}.json")
            subprocess.run([XO, "train", "mnist-mlp", "--epochs", "1", "--seed", str(seed),
                            "--precision", prec, "--checkpoint-every", "off", "--json", out, "-q"],
                           check=True, capture_output=True, cwd=tmp)
            row["xo " + prec] = json.load(open(out))["final_test_accuracy_percent"]
        for engine in moved:
            moved[engine].append(row[engine + " bf16"] - row[engine + " f32"])
        print(f"seed {seed}: " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()) +
              "  bf16 - f32: " + "  ".join(f"{e} {moved[e][-1]:+.2f}" for e in moved), flush=True)
    for engine, d in moved.items():
        print(f"{engine}: bf16 - f32 median {statistics.median(d):+.2f}, mean {statistics.mean(d):+.2f}, "
              f"within 0.5 points for {sum(abs(x) <= 0.5 for x in d)} of {len(d)} seeds")


if ARGS.keras:
    keras_mlp()
else:
    same_weights()
