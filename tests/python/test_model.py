"""crossover.Model: made from a name, a spec's text, a file; its summary, its weights under
PyTorch's names, safetensors in and out; errors as Python's exceptions."""
import os
import subprocess

import numpy as np
import pytest

crossover = pytest.importorskip("crossover")

SPEC = """
[model]
name = "tiny"
input = [2]
layers = [ { type = "linear", out = 8 }, { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.1 }
batch = 50
epochs = 2
seed = 3
"""


def test_a_builtin_model_has_its_specs_layers_and_pytorch_names():
    m = crossover.Model("disc-4")
    assert m.name == "disc-4"
    assert m.input_shape == (2,)
    assert m.classes == 2 and m.loss == "cross_entropy"
    state = m.state_dict()
    assert list(state)[:2] == ["0.weight", "0.bias"]
    assert state["0.weight"].shape == (4, 2) and state["0.weight"].dtype == np.float32
    assert sum(v.size for v in state.values()) == m.count_params()
    text = m.summary(print_fn=None)
    assert "linear" in text and f"{m.count_params():,}" in text
    assert "disc-4" in repr(m)


def test_a_spec_given_as_text_and_as_a_file_are_the_same_model(tmp_path):
    from_text = crossover.Model.from_toml(SPEC, "tiny.toml")
    path = tmp_path / "tiny.toml"
    path.write_text(SPEC)
    from_file = crossover.Model(path)
    for name, value in from_text.state_dict().items():
        np.testing.assert_array_equal(value, from_file.state_dict()[name])
    assert "[model]" in from_file.to_toml()


def test_bad_names_and_specs_raise_pythons_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.toml"):
        crossover.Model(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match="neither a built-in model"):
        crossover.Model("no-such-model")
    with pytest.raises(ValueError, match=r"bad.toml:\d+"):
        crossover.Model.from_toml(SPEC.replace('"relu"', '"relux"'), "bad.toml")


def test_weights_load_only_with_every_tensor_at_its_shape(tmp_path):
    m = crossover.Model.from_toml(SPEC, "tiny.toml")
    state = m.state_dict()
    state["0.weight"] = np.full((8, 2), 0.5, dtype=np.float64)  # converted to float32
    m.load_state_dict(state)
    np.testing.assert_array_equal(m.state_dict()["0.weight"], np.full((8, 2), 0.5, np.float32))
    wrong = dict(state, **{"0.weight": np.zeros((2, 8), np.float32)})
    with pytest.raises(ValueError, match="0.weight"):
        m.load_state_dict(wrong)
    missing = {k: v for k, v in state.items() if k != "2.bias"}
    with pytest.raises(ValueError, match="2.bias"):
        m.load_state_dict(missing)
    with pytest.raises(TypeError):
        m.load_state_dict({"0.weight": "not numbers"})


def test_saved_weights_are_safetensors_the_command_line_reads(tmp_path, crossover_bin):
    m = crossover.Model.from_toml(SPEC, "tiny.toml")
    m.load_state_dict({k: v + 1 for k, v in m.state_dict().items()})
    weights = tmp_path / "w.safetensors"
    m.save(weights)
    again = crossover.Model.from_toml(SPEC, "tiny.toml")
    again.load(weights)
    for name, value in m.state_dict().items():
        np.testing.assert_array_equal(value, again.state_dict()[name])
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    data = tmp_path / "d.csv"
    data.write_text("0.5,0.25,1\n0.125,0.75,0\n")
    out = subprocess.run([crossover_bin, "evaluate", str(spec), "--init", str(weights),
                          "--data", str(data)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    with pytest.raises(FileNotFoundError):
        again.load(tmp_path / "none.safetensors")


def test_an_onnx_file_is_a_model(tmp_path):
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4))
    path = tmp_path / "net.onnx"
    torch.onnx.export(net, torch.zeros(2, 3), str(path), input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "b"}, "output": {0: "b"}})
    m = crossover.Model(path)
    assert m.input_shape == (3,) and m.classes == 4
    np.testing.assert_array_equal(m.state_dict()["2.weight"], net[2].weight.detach().numpy())


def test_devices_and_builtin_models_are_listed():
    found = crossover.devices()
    assert "cpu" in found["available"]
    assert found["info"]["cpu"]["kind"] == "cpu" and found["info"]["cpu"]["peaks"] is None
    peaks = crossover.devices(probe=True)["info"]["cpu"]["peaks"]
    assert peaks["matmul_gflops"] > 0 and peaks["bandwidth_gbs"] > 0
    assert "disc-8" in crossover.builtin_models()
    assert crossover.__version__
