"""crossover.sklearn's estimators inside scikit-learn: parameters, Pipeline, GridSearchCV."""
import numpy as np
import pytest

pytest.importorskip("crossover")
sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from crossover.sklearn import MLPClassifier, MLPRegressor  # noqa: E402


def blobs(samples=300, seed=0):
    rng = np.random.RandomState(seed)
    centers = np.array([[0, 0, 0, 0], [3, 3, 0, 0], [0, 3, 3, 3]], dtype=np.float64)
    labels = rng.randint(0, 3, size=samples)
    x = centers[labels] + rng.normal(scale=0.7, size=(samples, 4))
    return x, np.array(["a", "b", "c"])[labels]


def test_parameters_are_scikit_learns():
    c = MLPClassifier(hidden_layer_sizes=(8,), max_iter=5, random_state=0)
    params = c.get_params()
    for name in ("hidden_layer_sizes", "activation", "solver", "alpha", "batch_size",
                 "learning_rate_init", "max_iter", "random_state", "early_stopping", "device",
                 "precision"):
        assert name in params
    c.set_params(alpha=0.01)
    assert clone(c).get_params()["alpha"] == 0.01


def test_a_classifier_in_a_pipeline_learns_string_labels():
    x, y = blobs()
    pipe = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(16,), max_iter=100,
                                                         learning_rate_init=0.01, random_state=0))
    pipe.fit(x, y)
    assert pipe.score(x, y) > 0.9
    clf = pipe[-1]
    assert list(clf.classes_) == ["a", "b", "c"]
    proba = pipe.predict_proba(x[:5])
    assert proba.shape == (5, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(pipe.predict(x[:20])) <= {"a", "b", "c"}
    assert clf.n_iter_ == 100 and len(clf.loss_curve_) == 100


def test_grid_search_fits_each_candidate():
    x, y = blobs(200, seed=1)
    search = GridSearchCV(MLPClassifier(max_iter=40, learning_rate_init=0.01, random_state=0),
                          {"hidden_layer_sizes": [(4,), (16,)], "solver": ["adam", "sgd"]}, cv=2)
    search.fit(x, y)
    assert len(search.cv_results_["params"]) == 4
    assert search.best_score_ > 0.8


def test_early_stopping_and_a_regressor():
    x, y = blobs()
    clf = MLPClassifier(max_iter=500, early_stopping=True, n_iter_no_change=3,
                        random_state=0).fit(x, y)
    assert clf.n_iter_ < 500
    rng = np.random.RandomState(0)
    xr = rng.uniform(-1, 1, size=(400, 2))
    yr = 2 * xr[:, 0] - xr[:, 1]
    reg = MLPRegressor(hidden_layer_sizes=(32,), max_iter=100, learning_rate_init=0.01,
                       random_state=0).fit(xr, yr)
    assert reg.score(xr, yr) > 0.9
    assert reg.predict(xr[:3]).shape == (3,)


def test_bad_parameters_raise_value_errors():
    x, y = blobs(50)
    with pytest.raises(ValueError, match="lbfgs"):
        MLPClassifier(solver="lbfgs").fit(x, y)
    with pytest.raises(ValueError, match="activation"):
        MLPClassifier(activation="swish").fit(x, y)
    with pytest.raises(ValueError, match="one class"):
        MLPClassifier().fit(x, np.zeros(50))
