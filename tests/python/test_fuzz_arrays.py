"""The array entry points under random bad input: wrong shapes, dtypes, layouts, NaN and
infinities, empty and huge arrays. Every call either works or raises one of Python's exceptions;
none crashes the interpreter (a crash ends this test's process, which ctest reports)."""
import numpy as np
import pytest

crossover = pytest.importorskip("crossover")

SPEC = """
[model]
name = "fuzz"
input = [3]
layers = [ { type = "linear", out = 4 }, { type = "relu" }, { type = "linear", out = 3 } ]
loss = "cross_entropy"
[train]
batch = 7
epochs = 1
"""
ERRORS = (ValueError, TypeError, MemoryError, OverflowError)
pytestmark = pytest.mark.filterwarnings("ignore::crossover.ConversionWarning")


def random_array(rng):
    kind = rng.randint(9)
    rows = int(rng.choice([0, 1, 2, 5, 7, 64]))
    cols = int(rng.choice([0, 1, 2, 3, 4]))
    dtype = rng.choice([np.float32, np.float64, np.int64, np.int32, np.uint8, np.float16, bool,
                        np.complex64, object])
    if kind == 0:
        a = rng.normal(size=(rows, cols))
    elif kind == 1:
        a = rng.normal(size=(rows,))
    elif kind == 2:
        a = rng.normal(size=(rows, cols, 2))
    elif kind == 3:
        a = np.full((rows, 3), rng.choice([np.nan, np.inf, -np.inf, 1e39]))
    elif kind == 4:
        a = rng.normal(size=(rows, 6))[:, ::2]  # not contiguous
    elif kind == 5:
        a = np.broadcast_to(np.float32(1), (2**40, 3))  # a terabyte, in appearance
    elif kind == 6:
        a = rng.randint(-3, 5, size=(rows,))
    elif kind == 7:
        a = np.array([[None, "x", 1]] * max(rows, 1), dtype=object)
    else:
        a = rng.normal(size=(rows, 3))
    try:
        return a.astype(dtype) if kind not in (5, 7) else a
    except (TypeError, ValueError):
        return a


@pytest.mark.parametrize("seed", range(4))
def test_bad_arrays_raise_python_errors(seed):
    rng = np.random.RandomState(seed)
    m = crossover.Model.from_toml(SPEC, "fuzz.toml")
    for _ in range(60):
        x, y = random_array(rng), random_array(rng)
        call = rng.randint(4)
        try:
            if call == 0:
                m.fit(x, y, verbose=0)
            elif call == 1:
                m.evaluate(x, y)
            elif call == 2:
                m.predict(x)
            else:
                m.fit(x, y, validation_data=(random_array(rng), random_array(rng)), verbose=0)
        except ERRORS:
            pass
