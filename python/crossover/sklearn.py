"""scikit-learn estimators trained by crossover: MLPClassifier and MLPRegressor, with
scikit-learn's own MLP parameter names where they mean the same, plus `device`, `precision` and
`threads`. They work inside Pipeline and GridSearchCV (get_params / set_params come from
BaseEstimator).

What differs from sklearn.neural_network: solver "lbfgs" is not offered (refused); `alpha`, the L2
penalty, is applied as scikit-learn applies it per step (weight decay alpha / batch_size);
early_stopping watches the validation accuracy (a classifier) or loss (a regressor) and keeps the
best epoch's weights; the classifier always has one output per class (softmax, also for two).
"""
import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted

from . import Model, _toml

_ACTIVATIONS = {"relu": "relu", "tanh": "tanh", "logistic": "sigmoid", "identity": None}


class _MLP(BaseEstimator):
    def __init__(self, hidden_layer_sizes=(100,), activation="relu", *, solver="adam",
                 alpha=0.0001, batch_size="auto", learning_rate_init=0.001, max_iter=200,
                 shuffle=True, random_state=None, momentum=0.9, nesterovs_momentum=True,
                 early_stopping=False, validation_fraction=0.1, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-8, n_iter_no_change=10, tol=1e-4, verbose=False, device="cpu",
                 precision="f32", threads=0):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.solver = solver
        self.alpha = alpha
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.momentum = momentum
        self.nesterovs_momentum = nesterovs_momentum
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.verbose = verbose
        self.device = device
        self.precision = precision
        self.threads = threads

    def _check_parameters(self):
        if self.activation not in _ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r}: expected one of "
                             f"{sorted(_ACTIVATIONS)}")
        if self.solver not in ("adam", "sgd"):
            raise ValueError(f"solver={self.solver!r}: expected 'adam' or 'sgd' (crossover has "
                             "no 'lbfgs')")
        sizes = self.hidden_layer_sizes
        sizes = [sizes] if isinstance(sizes, numbers.Integral) else list(sizes)
        if any(not isinstance(s, numbers.Integral) or s < 1 for s in sizes):
            raise ValueError(f"hidden_layer_sizes={self.hidden_layer_sizes!r}: expected positive "
                             "integers")
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"max_iter={self.max_iter!r}: expected a positive integer")
        if self.alpha < 0:
            raise ValueError(f"alpha={self.alpha!r}: expected a penalty >= 0")
        return sizes

    def _batch(self, samples):
        if self.batch_size == "auto":
            return min(200, samples)
        if not isinstance(self.batch_size, numbers.Integral) or self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size!r}: expected 'auto' or a positive "
                             "integer")
        return min(int(self.batch_size), samples)

    def _seed(self):
        if self.random_state is None:
            return int(np.random.randint(0, 2**31 - 1))
        if isinstance(self.random_state, numbers.Integral):
            return int(self.random_state)
        return int(self.random_state.randint(0, 2**31 - 1))  # a RandomState

    def _spec(self, features, outputs, loss, batch):
        sizes = self._check_parameters()
        act = _ACTIVATIONS[self.activation]
        layers = []
        for width in sizes:
            layers.append({"type": "linear", "out": int(width)})
            if act:
                layers.append({"type": act})
        layers.append({"type": "linear", "out": int(outputs)})
        if self.solver == "adam":
            optimizer = {"type": "adam", "lr": float(self.learning_rate_init),
                         "betas": [float(self.beta_1), float(self.beta_2)],
                         "eps": float(self.epsilon), "weight_decay": float(self.alpha) / batch}
        else:
            optimizer = {"type": "sgd", "lr": float(self.learning_rate_init),
                         "momentum": float(self.momentum),
                         "nesterov": bool(self.nesterovs_momentum) and self.momentum > 0,
                         "weight_decay": float(self.alpha) / batch}
        model = {"name": type(self).__name__, "input": [int(features)], "loss": loss}
        lines = ["[model]"] + [f"{k} = {_toml.value(v, k)}" for k, v in model.items()]
        lines.append("layers = [" + ", ".join(_toml.inline_table(l, "layers") for l in layers)
                     + "]")
        train = {"optimizer": optimizer, "batch": batch, "epochs": int(self.max_iter),
                 "shuffle": bool(self.shuffle), "seed": self._seed()}
        if self.early_stopping:
            train["early_stopping"] = {"monitor": self._monitor(),
                                       "patience": int(self.n_iter_no_change),
                                       "min_delta": self._min_delta(), "restore_best": True}
        return "\n".join(lines) + "\n" + _toml.train_table(train)

    def _train(self, X, targets, outputs, loss):
        X = _samples(X)
        if len(targets) != X.shape[0]:
            raise ValueError(f"y: {len(targets)} labels for {X.shape[0]} samples of X")
        batch = self._batch(X.shape[0])
        text = self._spec(X.shape[1], outputs, loss, batch)
        self.model_ = Model.from_toml(text, f"{type(self).__name__}()")
        split = float(self.validation_fraction) if self.early_stopping else 0.0
        if self.early_stopping and self.shuffle:
            # Keras's (and crossover's) validation split is the last samples: shuffle first, as
            # scikit-learn's train_test_split does, with the estimator's seed.
            order = np.random.RandomState(self._seed()).permutation(X.shape[0])
            X, targets = X[order], targets[order]
        self.history_ = self.model_.fit(X, targets, validation_split=split, device=self.device,
                                        precision=self.precision, threads=self.threads,
                                        verbose=1 if self.verbose else 0)
        self.loss_curve_ = list(self.history_.history["loss"])
        self.n_iter_ = len(self.loss_curve_)
        self.loss_ = self.loss_curve_[-1] if self.loss_curve_ else float("nan")
        self.n_features_in_ = X.shape[1]
        self.n_outputs_ = outputs
        return self


def _samples(X):
    """X as the engine reads it (float32, C order), checked as scikit-learn checks it: a 2-D
    array of finite numbers. The conversion is the estimator's own, so it is not warned of."""
    return check_array(X, dtype=np.float32, order="C")


class MLPClassifier(ClassifierMixin, _MLP):
    """A multi-layer perceptron classifier (sklearn.neural_network.MLPClassifier's parameters)
    trained by crossover on `device` ("cpu", "cuda", "auto") in `precision`."""

    def fit(self, X, y):
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y: shape {y.shape}: one label per sample expected (multi-output "
                             "is not supported)")
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"y: one class only ({self.classes_[0]!r}); expected at least two")
        return self._train(X, encoded.astype(np.int32), len(self.classes_), "cross_entropy")

    def _monitor(self):
        return "val_accuracy"

    def _min_delta(self):
        return float(self.tol) * 100.0  # the accuracy is in percent

    def predict_proba(self, X):
        """Each class's probability, columns in classes_' order."""
        check_is_fitted(self, "model_")
        return self.model_.predict(_samples(X), device=self.device, threads=self.threads)

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


class MLPRegressor(RegressorMixin, _MLP):
    """A multi-layer perceptron regressor (sklearn.neural_network.MLPRegressor's parameters,
    squared error) trained by crossover on `device` in `precision`; one target."""

    def fit(self, X, y):
        y = np.asarray(y, dtype=np.float64)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y: shape {y.shape}: one target per sample expected (multi-output "
                             "is not supported)")
        return self._train(X, y.astype(np.float32), 1, "mse")

    def _monitor(self):
        return "val_loss"

    def _min_delta(self):
        return float(self.tol)

    def predict(self, X):
        check_is_fitted(self, "model_")
        return self.model_.predict(_samples(X), device=self.device, threads=self.threads)[:, 0]
