#!/usr/bin/python3
"""Writes the ONNX fuzzer's seed corpus (fuzz/corpus/onnx/): small models exported by Debian's
python3-torch in the shapes crossover maps (MLP, CNN with BatchNorm and padded average pooling,
embedding + stacked LSTM), in training and eval mode, at opsets 9 and 14.

    /usr/bin/python3 fuzz/make_onnx_corpus.py
"""
import os
import warnings

import torch
from torch import nn

warnings.filterwarnings("ignore")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "onnx")


class Lstm(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.embedding = nn.Embedding(11, 3)
        self.lstm = nn.LSTM(3, 4, num_layers=layers, batch_first=True)
        self.linear = nn.Linear(4, 1)

    def forward(self, ids):
        out, _ = self.lstm(self.embedding(ids))
        return self.linear(out[:, -1]).squeeze(1)


def models():
    torch.manual_seed(0)
    yield "mlp", nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Dropout(0.25), nn.Linear(4, 3),
                               nn.Softmax(dim=1)), torch.zeros(2, 3)
    yield "cnn", nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, bias=False), nn.BatchNorm2d(2),
                               nn.Tanh(), nn.AvgPool2d(2, padding=1), nn.MaxPool2d(2),
                               nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                               nn.Linear(2, 2)), torch.zeros(2, 1, 6, 6)
    yield "lstm", Lstm(2), torch.zeros(2, 5, dtype=torch.int64)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, model, x in models():
        for opset in (9, 14):
            for mode in (torch.onnx.TrainingMode.TRAINING, torch.onnx.TrainingMode.EVAL):
                tag = "train" if mode == torch.onnx.TrainingMode.TRAINING else "eval"
                torch.onnx.export(model, x, os.path.join(OUT, f"{name}-{tag}-{opset}.onnx"),
                                  input_names=["input"], dynamic_axes={"input": {0: "batch"}},
                                  opset_version=opset, training=mode,
                                  do_constant_folding=mode == torch.onnx.TrainingMode.EVAL)


if __name__ == "__main__":
    main()
