#!/usr/bin/python3
"""crossover from Python, top to bottom: is a GPU worth it for a PyTorch model, train it, search
its learning rate with crossover.tune, then its width and penalty with scikit-learn's GridSearchCV
over crossover's MLPClassifier.

    PYTHONPATH=build/python /usr/bin/python3 examples/python_quickstart.py

(after scripts/setup; about a minute on two cores). The advice's report is written to
crossover-results/ and the search's to crossover-tune/ in the working folder.
"""
import numpy as np
import torch
from sklearn.model_selection import GridSearchCV

import crossover
from crossover.sklearn import MLPClassifier

# The classic CPU-vs-GPU experiment's data: points in the unit square, label 1 inside a quarter
# disc of area 1/8.
rng = np.random.RandomState(0)
x = rng.uniform(size=(4000, 2)).astype(np.float32)
y = (x[:, 0] ** 2 + x[:, 1] ** 2 < 1 / (2 * np.pi)).astype(np.int32)

# 1. A PyTorch model, as it is.
net = torch.nn.Sequential(torch.nn.Linear(2, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                          torch.nn.ReLU(), torch.nn.Linear(128, 2))
model = crossover.Model.from_torch(net, torch.zeros(1, 2))
model.summary()

# 2. Is a GPU worth it for 50 epochs of it? Measured here, predicted and priced elsewhere.
advice = crossover.advise(model, x, y, epochs=50, verbose=0)
print(advice.sentence)

# 3. Train it here, holding out a fifth to validate each epoch.
history = model.fit(x, y, epochs=50, batch_size=100, optimizer="adam", lr=1e-3,
                    validation_split=0.2, verbose=0)
print(f"validation accuracy after {len(history.epoch)} epochs: "
      f"{history.history['val_accuracy'][-1]:.3f}")
model.save("quickstart.safetensors")  # PyTorch's names: net.load_state_dict reads them

# 4. Which learning rate trains it on from here? Three trials at once, fused into one model.
tuned = crossover.tune(model, x, y, {"lr": [3e-4, 1e-3, 3e-3]}, epochs=10,
                       validation_split=0.2, verbose=0)
print(f"best learning rate: {tuned.best_values}, validation accuracy {tuned.best_objective:.1f}%")

# 5. A small search of its width and penalty, each candidate trained by crossover.
search = GridSearchCV(MLPClassifier(max_iter=30, random_state=0),
                      {"hidden_layer_sizes": [(16,), (128, 128)], "alpha": [1e-4, 1e-2]}, cv=2)
search.fit(x, y)
print(f"best: {search.best_params_}, cross-validated accuracy {search.best_score_:.3f}")
