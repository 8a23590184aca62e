#!/usr/bin/python3
"""Exports three PyTorch models to ONNX for `crossover train MODEL.onnx` (see docs/guide/specs.md): an MLP and
a CNN written as nn.Sequential, and an embedding + LSTM classifier. Training mode keeps Dropout and
BatchNorm as nodes; without constant folding the weights keep PyTorch's names."""
import torch
from torch import nn

mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.2),
                    nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
cnn = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Flatten(), nn.Linear(64 * 7 * 7, 10))

class Sentiment(nn.Module):                      # embedding + LSTM, the last step classified
    def __init__(self):
        super().__init__()
        self.embedding, self.lstm = nn.Embedding(20000, 64), nn.LSTM(64, 64, batch_first=True)
        self.linear = nn.Linear(64, 1)
    def forward(self, ids):
        out, _ = self.lstm(self.embedding(ids))
        return self.linear(out[:, -1])

for name, model, x in [("mlp", mlp, torch.zeros(1, 1, 28, 28)), ("cnn", cnn, torch.zeros(1, 1, 28, 28)),
                       ("sentiment", Sentiment(), torch.zeros(1, 80, dtype=torch.int64))]:
    torch.onnx.export(model, x, f"{name}.onnx", training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes={"input": {0: "batch"}},
                      input_names=["input"])
