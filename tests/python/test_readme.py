"""The README's Python example, run as a user runs it (in a fresh folder), and its table of the
shipped profiles' calibration: they must stay true."""
import os
import re
import subprocess

import pytest

from conftest import BUILD

pytest.importorskip("crossover")
pytest.importorskip("torch")

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def python_blocks():
    with open(README, encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)


def test_the_readmes_python_example_runs(tmp_path, monkeypatch, capsys):
    blocks = python_blocks()
    assert blocks, "README.md has no ```python block"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "GPU" in out
    assert (tmp_path / "crossover-results" / "results.json").exists()


def test_the_python_example_runs_top_to_bottom(tmp_path, monkeypatch, capsys):
    pytest.importorskip("sklearn")
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                           "python_quickstart.py")
    monkeypatch.chdir(tmp_path)
    with open(example, encoding="utf-8") as f:
        exec(compile(f.read(), example, "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert "validation accuracy after 50 epochs" in out and "best: " in out
    assert "best learning rate: {'lr':" in out, out
    assert (tmp_path / "quickstart.safetensors").exists()
    assert (tmp_path / "crossover-tune" / "best.toml").exists()


def test_the_readmes_dask_search_runs_on_a_cluster(tmp_path, monkeypatch):
    """The README's search on a Dask cluster, its Client pointed at a local cluster."""
    distributed = pytest.importorskip("distributed")
    import logging

    import numpy as np

    import crossover
    block = next(b for b in python_blocks() if "client=" in b)
    monkeypatch.chdir(tmp_path)
    x = np.random.rand(600, 2).astype(np.float32)
    y = (x[:, 0] ** 2 + x[:, 1] ** 2 < 0.16).astype(np.int32)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as client:
            monkeypatch.setattr(distributed, "Client", lambda address: client)
            namespace = {"crossover": crossover, "model": crossover.Model("disc-8"), "x": x,
                         "y": y}
            exec(compile(block, "README.md", "exec"), namespace)
    search = namespace["search"]
    assert len(search.result["trials"]) == 4
    assert all(t["status"] == "finished" for t in search.result["trials"])
    assert all(t["host"].startswith("dask worker ") for t in search.result["trials"])
    assert (tmp_path / "lr-search" / "results.json").exists()


def test_the_readmes_calibration_table_is_what_validate_prints(crossover_bin):
    # `crossover validate --shipped-only` computes it from the shipped profiles, measuring nothing:
    # a profile shipped or measured again changes it, and the README must follow.
    out = subprocess.run([crossover_bin, "validate", "--shipped-only"], capture_output=True,
                         text=True, check=True).stdout
    printed = {}
    for line in out[out.index("prediction of"):].splitlines()[2:]:
        m = re.match(r"(\S.*?)\s{2,}(\d+)\s+(\d+) \((\d+%)\)\s+(\S+%)\s+(\S+%)", line)
        if m:
            printed[m[1]] = (m[2], f"{m[3]} ({m[4]})", m[5], m[6])
    with open(README, encoding="utf-8") as f:
        text = f.read()
    shown = {m[1]: (m[2], m[3], m[4], m[5]) for m in re.finditer(
        r"^  \| ([a-z][^|]*?) \| (\d+) \| (\d+ \(\d+%\)) \| (\S+%) \| (\S+%) \|$", text, re.M)}
    assert printed, out
    assert shown == printed
