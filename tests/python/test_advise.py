"""crossover.advise in Python: the verdict's fields, the report written where asked and shown
inline in a notebook, the runs as a DataFrame."""
import json
import os
import subprocess

import pytest

from conftest import disc

crossover = pytest.importorskip("crossover")


def test_advise_answers_with_the_verdict_and_the_report(tmp_path, crossover_bin):
    x, y = disc(1000)
    out = tmp_path / "advice"
    a = crossover.advise(crossover.Model("disc-4"), x, y, epochs=3, out=out, verbose=0)
    assert isinstance(a.worth_it, bool)
    assert a.sentence and "GPU" in a.sentence
    assert a.here and a.here_seconds > 0
    assert os.path.samefile(a.out, out)
    with open(out / "results.json") as f:
        written = json.load(f)
    assert written["verdict"]["sentence"] == a.sentence
    page = a._repr_html_()
    assert page.startswith("<p><b>") and "<iframe" in page
    pd = pytest.importorskip("pandas")
    runs = a.to_pandas()
    assert isinstance(runs, pd.DataFrame) and len(runs) >= 1
    with pytest.raises(ValueError, match="finished|overwrite"):
        crossover.advise(crossover.Model("disc-4"), x, y, epochs=3, out=out, verbose=0)
    # Its data is not in the file: `crossover replay` refuses it rather than train on other data.
    replay = subprocess.run([crossover_bin, "replay", str(out / "results.json")],
                            capture_output=True, text=True)
    assert replay.returncode == 2, replay.stderr
    assert "arrays in memory" in replay.stderr and "cannot replay" in replay.stderr


def test_advise_refuses_what_is_not_a_model():
    x, y = disc(10)
    with pytest.raises(TypeError, match="crossover.Model"):
        crossover.advise("disc-4", x, y)


def test_a_sweep_grows_the_model_on_the_arrays(tmp_path):
    x, y = disc(500)
    s = crossover.sweep(crossover.Model("disc-4"), x, y, "width=8,32", epochs=2,
                        out=tmp_path / "sweep", verbose=0)
    runs = s.to_pandas()
    assert len(runs) == 2 * len(crossover.devices()["available"])
    assert (tmp_path / "sweep" / "report.html").exists()
    with pytest.raises(ValueError, match="AXIS=V1"):
        crossover.sweep(crossover.Model("disc-4"), x, y, "width")
    with pytest.raises(ValueError, match="vary|axis|nope"):
        crossover.sweep(crossover.Model("disc-4"), x, y, "nope=1,2", out=tmp_path / "s2",
                        verbose=0)
