"""The README's Python example, run as a user runs it (in a fresh folder): it must stay true."""
import os
import re

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
