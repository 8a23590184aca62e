"""The Python module's tests (pytest, Debian's python3-pytest), run by ctest from the build: the
module is imported from CROSSOVER_PYTHON_DIR (BUILD/python) and the command line is
CROSSOVER_BIN (BUILD/crossover), where a test compares the two."""
import os
import sys

import numpy as np
import pytest

BUILD = os.environ.get("CROSSOVER_BUILD_DIR",
                       os.path.join(os.path.dirname(__file__), "..", "..", "build"))
PYTHON_DIR = os.environ.get("CROSSOVER_PYTHON_DIR", os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.abspath(PYTHON_DIR))


@pytest.fixture
def crossover_bin():
    path = os.path.abspath(os.environ.get("CROSSOVER_BIN", os.path.join(BUILD, "crossover")))
    if not os.path.exists(path):
        pytest.skip(f"{path}: the command line is not built")
    return path


def disc(samples, seed=0):
    """The disc problem's points (x in [0,1)^2, label 1 inside the quarter disc of area 1/8) on a
    grid of 1/1024 steps, so that every value is exact in float32 and in decimal text."""
    rng = np.random.RandomState(seed)
    x = rng.randint(0, 1024, size=(samples, 2)).astype(np.float32) / np.float32(1024)
    y = (x[:, 0] ** 2 + x[:, 1] ** 2 < 1 / (2 * np.pi)).astype(np.int32)
    return x, y


@pytest.fixture
def disc_data():
    return disc(600)
