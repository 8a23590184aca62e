#!/usr/bin/python3
"""One epoch of a 784-512-512-10 MLP (RMSprop, no dropout, unshuffled) on Fashion-MNIST, from the same
initial weights in PyTorch (f32 and autocast bf16) and crossover (f32 and --precision bf16), seeds 0-2:
the test accuracies, a line per seed (docs/benchmarks.md, "The CPU at bf16").

    /usr/bin/python3 bench/bf16_accuracy.py   # needs build/crossover, a CPU with AMX or AVX-512 BF16
"""
import json, os, subprocess, sys, tempfile

import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer
XO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/crossover")
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
TMP = tempfile.mkdtemp(prefix="bf16-accuracy-")
open(os.path.join(TMP, "spec.toml"), "w").write(spec)
for seed in (0, 1, 2):
    torch.manual_seed(seed)
    nn = torch.nn
    base = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    init = os.path.join(TMP, f"init{seed}.safetensors")
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
        out = os.path.join(TMP, f"r{seed}-{prec}.json")
        subprocess.run([XO, "train", os.path.join(TMP, "spec.toml"), "--init", init, "--precision", prec,
                        "--json", out, "-q"], check=True, capture_output=True, cwd=TMP)
        row["xo " + prec] = json.load(open(out))["final_test_accuracy_percent"]
    print(f"seed {seed}: " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
