"""Model.fit / evaluate / predict: Keras's words, the same weights as the command line for the
same seed and data, the arrays trained on where they are, errors that name the array and sample."""
import os
import subprocess
import tracemalloc
import warnings

import numpy as np
import pytest

from conftest import disc

crossover = pytest.importorskip("crossover")

SPEC = """
[model]
name = "small"
input = [2]
layers = [ { type = "linear", out = 16 }, { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.5, momentum = 0.9 }
batch = 64
epochs = 4
shuffle = true
seed = 11
"""


def model():
    return crossover.Model.from_toml(SPEC, "small.toml")


def test_fit_returns_kerass_history_and_the_model_keeps_what_it_learned(disc_data):
    x, y = disc_data
    m = model()
    before = m.state_dict()["0.weight"].copy()
    h = m.fit(x, y, validation_split=0.25, verbose=0)
    assert h.epoch == [0, 1, 2, 3]
    assert set(h.history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(v) == 4 for v in h.history.values())
    assert 0.0 <= h.history["val_accuracy"][-1] <= 1.0
    assert h.result["model"] == "small" and h.result["samples"] == 450
    assert not np.array_equal(before, m.state_dict()["0.weight"])
    figures = m.evaluate(x, y)
    assert set(figures) == {"loss", "accuracy"} and figures["loss"] > 0
    p = m.predict(x[:7])
    assert p.shape == (7, 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-9)
    np.testing.assert_array_equal(m.predict_classes(x[:7]), np.argmax(p, axis=1))
    # A second fit goes on from where the first left off, as Keras's does.
    h2 = m.fit(x, y, epochs=1, verbose=0)
    assert h2.history["loss"][0] < h.history["loss"][0]


def test_the_same_weights_as_the_command_line_bit_for_bit(tmp_path, crossover_bin, disc_data):
    x, y = disc_data
    spec = tmp_path / "small.toml"
    spec.write_text(SPEC)
    data = tmp_path / "disc.csv"
    np.savetxt(data, np.column_stack([x, y]), fmt=["%.10g", "%.10g", "%d"], delimiter=",")
    weights = tmp_path / "cli.safetensors"
    out = subprocess.run([crossover_bin, "train", str(spec), "--data", str(data), "--save",
                          str(weights), "--checkpoint-every", "off", "--threads", "2"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    cli = model()
    cli.load(weights)
    m = model()
    m.fit(x, y, threads=2, verbose=0)
    for name, value in cli.state_dict().items():
        assert value.tobytes() == m.state_dict()[name].tobytes(), name


def test_settings_reach_the_engine_with_its_checks(disc_data):
    x, y = disc_data
    h = model().fit(x, y, epochs=6, batch_size=100, optimizer="adam", lr=0.01,
                    schedule={"type": "cosine"}, verbose=0)
    assert len(h.epoch) == 6
    assert h.history["lr"][0] > h.history["lr"][-1]
    h = model().fit(x, y, epochs=30, validation_split=0.3, verbose=0,
                    optimizer={"type": "sgd", "lr": 1e-4},
                    early_stopping={"monitor": "val_loss", "patience": 1, "min_delta": 10.0})
    assert len(h.epoch) < 30
    with pytest.raises(ValueError, match=r"fit\(\).*patience"):
        model().fit(x, y, early_stopping={"monitor": "val_loss", "patience": -1}, verbose=0)
    with pytest.raises(ValueError, match="validation"):
        model().fit(x, y, early_stopping={"monitor": "val_loss"}, verbose=0)
    with pytest.raises(ValueError, match="unknown optimizer"):
        model().fit(x, y, optimizer="adamax", verbose=0)
    with pytest.raises(ValueError, match="fraction"):
        model().fit(x, y, validation_split=1.5, verbose=0)


def test_validation_data_is_evaluated_each_epoch(disc_data):
    x, y = disc_data
    vx, vy = disc(100, seed=5)
    h = model().fit(x, y, validation_data=(vx, vy), epochs=2, verbose=0)
    assert len(h.history["val_loss"]) == 2
    assert h.result["validation_samples"] == 100


def test_a_float32_c_contiguous_array_is_trained_on_where_it_is(disc_data):
    x, y = disc_data
    x = np.ascontiguousarray(np.tile(x, (40, 1)))  # 24,000 samples, 192 KB
    y = np.ascontiguousarray(np.tile(y, 40))
    m = model()
    tracemalloc.start()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no conversion
        m.fit(x, y, epochs=1, verbose=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < x.nbytes / 10, peak


def test_other_dtypes_and_layouts_are_converted_once_and_said(disc_data):
    x, y = disc_data
    with pytest.warns(crossover.ConversionWarning, match="float64 to float32"):
        model().fit(x.astype(np.float64), y, epochs=1, verbose=0)
    with pytest.warns(crossover.ConversionWarning, match="C order"):
        model().fit(np.asfortranarray(x), y, epochs=1, verbose=0)
    with pytest.warns(crossover.ConversionWarning, match="int64 to int32"):
        model().fit(x, y.astype(np.int64), epochs=1, verbose=0)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(x, columns=["a", "b"])
    model().fit(frame, pd.Series(y), epochs=1, verbose=0)


def test_bad_arrays_name_the_array_and_the_sample(disc_data):
    x, y = disc_data
    bad = x.copy()
    bad[17, 1] = np.nan
    with pytest.raises(ValueError, match=r"fit\(\) x: sample 17, feature 1 is nan"):
        model().fit(bad, y, verbose=0)
    labels = y.copy()
    labels[3] = 2
    with pytest.raises(ValueError, match=r"sample 3 has label 2"):
        model().fit(x, labels, verbose=0)
    with pytest.raises(ValueError, match=r"shape \(600, 3\)"):
        model().fit(np.zeros((600, 3), np.float32), y, verbose=0)
    with pytest.raises(ValueError, match="599"):
        model().fit(x, y[:-1], verbose=0)
    with pytest.raises(ValueError, match="one dimension"):
        model().fit(x[:, 0], y, verbose=0)
    with pytest.raises(TypeError):
        model().fit(np.array([["a", "b"]]), y[:1], verbose=0)
    with pytest.raises(ValueError, match="at least one"):
        model().fit(np.zeros((0, 2), np.float32), np.zeros(0, np.int32), verbose=0)


def test_progress_is_the_command_lines(disc_data, capsys):
    x, y = disc_data
    seen = []
    model().fit(x, y, epochs=2, verbose=1, callbacks=[lambda e, logs: seen.append((e, logs))])
    out = capsys.readouterr().out
    assert "epoch 1/2" in out and "epoch 2/2" in out and "ms/step" in out
    assert [e for e, _ in seen] == [0, 1] and "loss" in seen[0][1]


def test_a_regression_takes_float_targets_and_predicts_values():
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, size=(400, 3)).astype(np.float32)
    y = (x @ np.array([0.5, -1.0, 2.0], np.float32) + 0.25).astype(np.float32)
    m = crossover.Model.from_toml(SPEC.replace('out = 2 }', 'out = 1 }').replace(
        'input = [2]', 'input = [3]').replace('"cross_entropy"', '"mse"').replace(
        'lr = 0.5, momentum = 0.9', 'lr = 0.05'), "reg.toml")
    assert m.classes == 0
    h = m.fit(x, y, epochs=20, verbose=0)
    assert "accuracy" not in h.history
    assert h.history["loss"][-1] < 0.1 * h.history["loss"][0]
    assert m.predict(x[:5]).shape == (5, 1)
    assert "accuracy" not in m.evaluate(x, y)
    bad = y.copy()
    bad[9] = np.inf
    with pytest.raises(ValueError, match="sample 9 has target inf"):
        m.fit(x, bad, verbose=0)


def test_a_gpu_fit_of_borrowed_arrays_matches_the_cpus(disc_data):
    if not any(d.startswith("cuda") for d in crossover.devices()["available"]):
        pytest.skip("no GPU here: the arrays' copy to the GPU is checked where there is one")
    x, y = disc_data
    cpu, gpu = model(), model()
    h_cpu = cpu.fit(x, y, epochs=2, verbose=0)
    h_gpu = gpu.fit(x, y, epochs=2, device="cuda", verbose=0)
    np.testing.assert_allclose(h_gpu.history["loss"], h_cpu.history["loss"], rtol=1e-4)
    for name, value in cpu.state_dict().items():
        np.testing.assert_allclose(gpu.state_dict()[name], value, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(gpu.predict(x[:9], device="cuda"), cpu.predict(x[:9]), atol=1e-5)
