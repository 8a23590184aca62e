"""Ctrl-C during Model.fit, in a script: the fit stops at its next step, the checkpoint is kept,
the model holds the weights it reached, and KeyboardInterrupt is raised; a later fit is told of
the checkpoint in its own arguments' words."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import PYTHON_DIR

crossover = pytest.importorskip("crossover")

SCRIPT = r"""
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
import crossover
m = crossover.Model("disc-10")
x = np.random.RandomState(0).uniform(size=(20000, 2)).astype(np.float32)
y = (x[:, 0] ** 2 + x[:, 1] ** 2 < 0.16).astype(np.int32)
start = m.state_dict()["0.weight"].copy()
print("fitting", flush=True)
try:
    m.fit(x, y, epochs=100000, batch_size=100, checkpoint_dir=sys.argv[2],
          checkpoint_every="50steps", verbose=0, threads=1)
except KeyboardInterrupt:
    moved = not np.array_equal(start, m.state_dict()["0.weight"])
    print("interrupted, weights moved:", moved, flush=True)
    raise
"""


def test_ctrl_c_stops_the_fit_keeps_its_checkpoint_and_raises(tmp_path):
    script = tmp_path / "fit.py"
    script.write_text(SCRIPT)
    checkpoints = tmp_path / "checkpoints"
    p = subprocess.Popen([sys.executable, str(script), os.path.abspath(PYTHON_DIR),
                          str(checkpoints)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "fitting"
    deadline = time.time() + 60
    while time.time() < deadline and not any(checkpoints.glob("**/*.json")):
        time.sleep(0.1)
    assert any(checkpoints.glob("**/*.json")), "no checkpoint written within a minute"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert "interrupted, weights moved: True" in out, out + err
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    # An uncaught KeyboardInterrupt ends Python by SIGINT itself (the shell's status 130).
    assert p.returncode == -signal.SIGINT
    assert any(checkpoints.glob("**/*.json")), "the checkpoint was not kept"

    # The kept checkpoint is refused to a fit that says neither resume= nor restart=, in fit's
    # words (its arguments), not the command line's flags.
    x = np.random.RandomState(0).uniform(size=(20000, 2)).astype(np.float32)
    y = (x[:, 0] ** 2 + x[:, 1] ** 2 < 0.16).astype(np.int32)
    with pytest.raises(ValueError) as refused:
        crossover.Model("disc-10").fit(x, y, epochs=100000, batch_size=100,
                                       checkpoint_dir=str(checkpoints),
                                       checkpoint_every="50steps", verbose=0, threads=1)
    message = str(refused.value)
    assert "resume=True continues it" in message and "restart=True discards it" in message, message
    assert "--" not in message, message
    with pytest.raises(ValueError, match="resume=True and restart=True: choose one"):
        crossover.Model("disc-10").fit(x, y, epochs=1, checkpoint_dir=str(checkpoints),
                                       resume=True, restart=True, verbose=0)
