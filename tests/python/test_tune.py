"""crossover.tune in Python: a search over arrays in memory whose trials are processes of the
crossover command beside the package; its record, table, page and best model; the same call going
on from its folder; bad input named."""
import os

import numpy as np
import pytest

from conftest import disc

crossover = pytest.importorskip("crossover")


def test_a_grid_on_arrays_ranks_its_trials_and_gives_the_best_model(tmp_path, capsys):
    x, y = disc(600)
    model = crossover.Model("disc-4")
    out = tmp_path / "search"
    s = crossover.tune(model, x, y, {"lr": [0.05, 0.2]}, epochs=3, validation_split=0.25,
                       out=out, threads=1)
    printed = capsys.readouterr().out
    assert "disc-4: 2 trials (grid), best by val_accuracy" in printed, printed
    assert "t01 lr=0.05: finished after 3 epochs" in printed, printed
    assert s.objective == "val_accuracy"
    trials = s.result["trials"]
    assert [t["status"] for t in trials] == ["finished", "finished"]
    assert s.best in {t["id"] for t in trials}
    assert list(s.best_values) == ["lr"]
    assert 0 <= s.best_objective <= 100  # percent, as results.json has it
    # Each trial trained on the arrays, from the model's weights, through files in the folder.
    spec = (out / "trials" / "t01" / "spec.toml").read_text()
    assert 'source = "safetensors:' + str(out / "inputs" / "train-") in spec, spec
    assert "init = " in spec and "validation_split = 0.25" in spec, spec
    best = s.best_model()
    assert best.count_params() == model.count_params()
    assert best.predict(x[:5]).shape == (5, 2)
    pd = pytest.importorskip("pandas")
    table = s.to_pandas()
    assert isinstance(table, pd.DataFrame) and list(table["id"]) == ["t01", "t02"]
    assert "<iframe" in s._repr_html_() and (out / "report.html").exists()
    # The same call goes on from the folder: every trial kept, the inputs written once.
    inputs = sorted(os.listdir(out / "inputs"))
    again = crossover.tune(model, x, y, {"lr": [0.05, 0.2]}, epochs=3, validation_split=0.25,
                           out=out, threads=1, verbose=0)
    assert "2 of 2 trials" in capsys.readouterr().err
    assert [t["objective"] for t in again.result["trials"]] == [t["objective"] for t in trials]
    assert sorted(os.listdir(out / "inputs")) == inputs


def test_validation_data_is_the_trials_held_out_set(tmp_path):
    x, y = disc(500)
    vx, vy = disc(200, seed=1)
    s = crossover.tune(crossover.Model("disc-2"), x, y, ["lr=0.1,0.3"], epochs=2,
                       validation_data=(vx, vy), fuse="off", out=tmp_path / "s", verbose=0,
                       threads=1)
    assert s.objective == "test_accuracy"
    assert all(t["status"] == "finished" for t in s.result["trials"])
    spec = (tmp_path / "s" / "trials" / "t02" / "spec.toml").read_text()
    assert 'test = "safetensors:' in spec, spec


def test_labels_and_targets_given_as_a_column_train_as_a_vector(tmp_path):
    # fit takes y of shape (n, 1); so does tune, whose trials read y from the file it writes.
    x, y = disc(200)
    s = crossover.tune(crossover.Model("disc-2"), x, y.reshape(-1, 1), {"lr": [0.1, 0.3]},
                       epochs=2, validation_data=(x[:50], y[:50].reshape(-1, 1)), fuse="off",
                       out=tmp_path / "labels", verbose=0, threads=1)
    assert all(t["status"] == "finished" for t in s.result["trials"]), s.result["trials"]
    spec = tmp_path / "targets.toml"
    spec.write_text('[model]\ninput = [2]\nlayers = [ { type = "linear", out = 1 } ]\n'
                    'loss = "mse"\n[train]\nbatch = 20\nepochs = 2\n')
    targets = (x[:, 0] + x[:, 1]).astype(np.float32).reshape(-1, 1)
    r = crossover.tune(crossover.Model(str(spec)), x, targets, {"lr": [0.01, 0.1]}, epochs=2,
                       validation_split=0.2, out=tmp_path / "targets", verbose=0, threads=1)
    assert all(t["status"] == "finished" for t in r.result["trials"]), r.result["trials"]


def test_samples_of_any_shape_of_the_models_size_train(tmp_path):
    # As the trials' file reader takes them: x of shape (n, 2, 1) for a model of input [2].
    x, y = disc(200)
    s = crossover.tune(crossover.Model("disc-2"), x.reshape(-1, 2, 1), y, {"lr": [0.1]},
                       epochs=1, out=tmp_path / "s", verbose=0, threads=1)
    assert all(t["status"] == "finished" for t in s.result["trials"]), s.result["trials"]


def test_bad_input_is_named(tmp_path):
    x, y = disc(100)
    m = crossover.Model("disc-2")
    with pytest.raises(TypeError, match="crossover.Model"):
        crossover.tune("disc-2", x, y, {"lr": [0.1]})
    with pytest.raises(TypeError, match="tune\\(space=3\\)"):
        crossover.tune(m, x, y, 3, out=tmp_path / "a")
    with pytest.raises(ValueError, match="expected a list of values"):
        crossover.tune(m, x, y, {"lr": []}, out=tmp_path / "b")
    with pytest.raises(ValueError, match="x holds 100 samples and y 99"):
        crossover.tune(m, x, y[:99], {"lr": [0.1]}, out=tmp_path / "c")
    with pytest.raises(ValueError, match="fuse='sometimes'"):
        crossover.tune(m, x, y, {"lr": [0.1]}, fuse="sometimes", out=tmp_path / "d")
    with pytest.raises(ValueError, match="nope"):
        crossover.tune(m, x, y, {"nope": [1, 2]}, out=tmp_path / "e", verbose=0)
    os.symlink(tmp_path, tmp_path / "link")
    with pytest.raises(ValueError, match="is a link"):
        crossover.tune(m, x, y, {"lr": [0.1]}, out=tmp_path / "link")


def test_precision_reaches_every_trial_and_a_cpu_without_the_units_refuses_it(tmp_path):
    import json
    import subprocess
    import sys
    x, y = disc(300)
    m = crossover.Model("disc-4")
    with pytest.raises(ValueError, match="precision='fp8'"):
        crossover.tune(m, x, y, {"lr": [0.1]}, precision="fp8", out=tmp_path / "a")
    # oneDNN held below the bf16 units: refused before any trial, saying what is missing.
    code = ("import numpy as np, crossover\n"
            "x = np.random.default_rng(0).random((100, 2), dtype=np.float32)\n"
            "y = (x[:, 0] > x[:, 1]).astype(np.int32)\n"
            f"crossover.tune(crossover.Model('disc-4'), x, y, {{'lr': [0.1]}}, epochs=1,\n"
            f"               out={str(tmp_path / 'b')!r}, verbose=0, precision='bf16')\n")
    package = os.path.dirname(os.path.dirname(os.path.abspath(crossover.__file__)))
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2",
               PYTHONPATH=os.pathsep.join([package, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "needs AMX (amx_bf16) or AVX-512 BF16" in done.stderr, done.stderr
    assert not (tmp_path / "b" / "trials" / "t01" / "result.json").exists()
    try:
        s = crossover.tune(m, x, y, {"lr": [0.1, 0.2]}, epochs=1, out=tmp_path / "c", verbose=0,
                           threads=1, precision="bf16")
    except Exception as e:  # noqa: BLE001: the refusal's type is the engine's
        if "needs AMX" in str(e):
            pytest.skip("this CPU has neither AMX nor AVX-512 BF16: no trial at bf16 here")
        raise
    for t in s.result["trials"]:
        result = json.loads((tmp_path / "c" / "trials" / t["id"] / "result.json").read_text())
        assert result["precision"] == "bf16" and result["device"] == "cpu:bf16", result["device"]


class _EndsApart:
    """A search's runner (src/python/runner.h's protocol) of two slots whose jobs run at once (the
    crossover command beside the package), the second job's end told `apart` seconds after the
    first's; at each look it notes the trials results.json has as finished, and when."""

    def __init__(self, out, apart=3.0):
        import crossover.dask
        self.program = crossover.dask._program()
        self.slots = [("cpu", 1, "one"), ("cpu", 1, "two")]
        self.apart = apart
        self.codes = {}
        self.told = {}  # slot -> when its end was told
        self.seen = []  # (when, finished trials) at each look, results.json as it was then
        self.out = out

    def changes(self):
        return [], []

    def start(self, slot, args, log):
        import subprocess
        with open(log, "a") as f:
            self.codes[slot] = subprocess.run([self.program] + args, stdout=f,
                                              stderr=subprocess.STDOUT).returncode

    def _look(self):
        import json
        import time
        with open(os.path.join(self.out, "results.json")) as f:
            trials = json.load(f)["trials"]
        self.seen.append((time.monotonic(), sum(t["status"] == "finished" for t in trials)))

    def collect(self):
        import time
        self._look()
        now = time.monotonic()
        ended = []
        for slot in sorted(self.codes):
            first = self.told.get(0)
            if slot == 0 or (first is not None and now - first >= self.apart):
                self.told[slot] = now
                ended.append((slot, self.codes.pop(slot), 0.1))
        return ended

    def wait(self, seconds):
        import time
        time.sleep(min(seconds, 0.02))

    def interrupt(self):
        pass

    def close(self):
        pass

    def remove_marks(self):
        pass


def test_ends_alone_reach_the_record_within_a_second_not_at_each_end(tmp_path, monkeypatch):
    # A job's end is written to results.json with the next start, or at most a second after the
    # record was last written where no job starts (ends alone are a progress view: each trial's
    # result is on disk already): the first group's end shows while the second still runs.
    import crossover.dask
    made = []

    def runner(client, threads=0):
        made.append(_EndsApart(tmp_path / "s"))
        return made[-1]

    monkeypatch.setattr(crossover.dask, "DaskRunner", runner)
    x, y = disc(200)
    s = crossover.tune(crossover.Model("disc-4"), x, y, {"lr": [0.05, 0.1, 0.2, 0.4]}, epochs=1,
                       fuse=2, out=tmp_path / "s", client=object(), verbose=0)
    assert [t["status"] for t in s.result["trials"]] == ["finished"] * 4
    r = made[0]
    first, second = r.told[0], r.told[1]
    between = [(when, n) for when, n in r.seen if first < when < second]
    # Written once the first group's end was a second past the record's start...
    assert any(n == 2 for _, n in between), r.seen
    # ...not at once: the record written as the jobs started is under a second old then.
    assert all(n == 0 for when, n in between if when - first < 0.5), r.seen
