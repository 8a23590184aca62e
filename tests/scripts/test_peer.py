#!/usr/bin/python3
"""Tests of bench/peer.py, the helpers that the PyTorch benchmarks and the golden tests share: the
built-in networks' settings against specs/*.toml, the optimizer translation, the exchange files and
the statistics. Needs numpy (as the golden tests do), not torch.

    /usr/bin/python3 tests/scripts/test_peer.py
"""
import math
import os
import statistics
import struct
import sys
import tempfile
import tomllib
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import peer  # noqa: E402

try:
    import numpy as np
except ImportError:  # pragma: no cover - depends on the machine
    print("test_peer: skipped, numpy is not importable here")
    sys.exit(peer.SKIP)


def spec(name):
    with open(os.path.join(ROOT, "specs", f"{name}.toml"), "rb") as f:
        return tomllib.load(f)


class BuiltinsMatchTheSpecs(unittest.TestCase):
    def test_disc(self):
        for layers in peer.DISC_DEPTHS:
            s = spec(f"disc-{layers}")
            with self.subTest(layers=layers):
                self.assertEqual(s["model"]["input"], [2])
                written = [("linear", l["out"], l.get("bias", True)) if l["type"] == "linear"
                           else (l["type"],) for l in s["model"]["layers"]]
                self.assertEqual(written, peer.disc_layers(layers))
                self.assertEqual(s["train"]["optimizer"], peer.DISC_OPTIMIZER)
                self.assertEqual(s["train"]["batch"], peer.DISC_BATCH)
                self.assertEqual(s["data"]["samples"], peer.DISC_SAMPLES)

    def test_classic(self):
        for name, m in peer.CLASSIC.items():
            s = spec(name)
            with self.subTest(name=name):
                self.assertEqual(tuple(s["model"]["input"]), m.shape)
                self.assertEqual(s["model"]["loss"], m.loss)
                self.assertEqual(s["train"]["batch"], m.batch)
                self.assertEqual(s["train"]["optimizer"], m.optimizer)
                vocab = [l["vocab"] for l in s["model"]["layers"] if l["type"] == "embedding"]
                self.assertEqual(vocab[0] if vocab else 0, m.vocab)

    def test_names(self):
        self.assertEqual(peer.BUILTIN_MODELS[0], "disc-2")
        self.assertEqual(peer.disc_depth("disc-12"), 12)
        self.assertIsNone(peer.disc_depth("mnist-cnn"))
        with self.assertRaisesRegex(ValueError, "disc-13: disc-L exists for L = 2 ... 12"):
            peer.disc_depth("disc-13")


class Optimizers(unittest.TestCase):
    def test_the_arguments_bench_gpu_vs_torch_records(self):
        # What bench/gpu_vs_torch.py passed (and wrote as optimizer_args) before it used peer.
        self.assertEqual(peer.torch_optimizer_args(peer.builtin_optimizer("disc-5")),
                         ("SGD", {"lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
                                  "weight_decay": 0.0}))
        self.assertEqual(peer.torch_optimizer_args(peer.builtin_optimizer("mnist-mlp")),
                         ("RMSprop", {"lr": 0.001, "alpha": 0.9, "eps": 1e-7, "weight_decay": 0.0}))
        self.assertEqual(peer.torch_optimizer_args(peer.builtin_optimizer("mnist-cnn")),
                         ("Adadelta", {"lr": 1.0, "rho": 0.95, "eps": 1e-7, "weight_decay": 0.0}))
        args = peer.torch_optimizer_args(peer.builtin_optimizer("imdb-lstm"))
        self.assertEqual(args, ("Adam", {"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-7,
                                         "weight_decay": 0.0}))
        self.assertEqual(list(args[1]), ["lr", "betas", "eps", "weight_decay"])

    def test_betas(self):
        self.assertEqual(peer.torch_optimizer_args({"type": "adamw", "lr": 0.01, "beta2": 0.98}),
                         ("AdamW", {"lr": 0.01, "betas": (0.9, 0.98)}))
        self.assertEqual(peer.torch_optimizer_args({"type": "adam", "lr": 0.01}),
                         ("Adam", {"lr": 0.01}))
        with self.assertRaises(KeyError):
            peer.torch_optimizer_args({"type": "lamb", "lr": 0.01})


class Files(unittest.TestCase):
    def test_safetensors_round_trip(self):
        tensors = {"0.weight": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
                   "0.bias": np.array([-1.5, 2.25], dtype=np.float32),
                   "1.num_batches_tracked": np.array(12, dtype=np.int64)}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "w.safetensors")
            peer.write_safetensors(path, tensors)
            with open(path, "rb") as f:
                blob = f.read()
            (length,) = struct.unpack("<Q", blob[:8])
            self.assertEqual((8 + length) % 8, 0)  # the data starts 8-byte aligned
            header = blob[8:8 + length]
            self.assertIn(b'"1.num_batches_tracked": {"dtype": "I64", "shape": []', header)
            back = peer.read_safetensors(path)
        self.assertEqual(list(back), list(tensors))
        for name, array in tensors.items():
            self.assertEqual(back[name].dtype, array.dtype)
            np.testing.assert_array_equal(back[name], array)

    def test_csv_values_parse_back_to_the_same_float32(self):
        x = (np.random.RandomState(3).standard_normal((50, 3)) * 1e3).astype(np.float32)
        y = np.arange(50) % 4
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "d.csv")
            peer.write_csv(path, x, y, header=["a", "b", "c", "label"])
            with open(path) as f:
                lines = f.read().splitlines()
        self.assertEqual(lines[0], "a,b,c,label")
        self.assertEqual(len(lines), 51)
        # crossover's loader parses a double and narrows it to float32.
        parsed = np.array([[float(v) for v in l.split(",")[:3]] for l in lines[1:]])
        parsed = parsed.astype(np.float32)
        np.testing.assert_array_equal(parsed, x)
        self.assertEqual([int(l.split(",")[3]) for l in lines[1:]], list(y))


class Statistics(unittest.TestCase):
    def test_median_cv(self):
        median, cv = peer.median_cv([3.0, 1.0, 2.0, 10.0])
        self.assertEqual(median, 2.5)
        self.assertTrue(math.isclose(cv, statistics.pstdev([1, 2, 3, 10]) / 4.0))
        self.assertEqual(peer.median_cv([4.0]), (4.0, 0.0))

    def test_step_stats_leave_out_the_warm_up_step(self):
        stats = peer.step_stats([1.0, 0.002, 0.004, 0.003])
        self.assertTrue(math.isclose(stats["median_step_ms"], 3.0))
        self.assertLess(stats["cv"], 0.3)


if __name__ == "__main__":
    unittest.main()
