"""Model.from_torch: a PyTorch module through ONNX in memory, starting from the module's own
weights: its first loss is PyTorch's to float32 rounding; what cannot be mapped is refused."""
import numpy as np
import pytest

crossover = pytest.importorskip("crossover")
torch = pytest.importorskip("torch")


def test_a_torch_mlps_first_loss_is_pytorchs():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                              torch.nn.Tanh(), torch.nn.Linear(16, 3))
    rng = np.random.RandomState(1)
    x = rng.normal(size=(256, 4)).astype(np.float32)
    y = rng.randint(0, 3, size=256).astype(np.int32)
    m = crossover.Model.from_torch(net, torch.zeros(8, 4))
    assert m.input_shape == (4,) and m.classes == 3
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(m.state_dict()[name], value.numpy())
    expected = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)),
                                                 torch.from_numpy(y).long()).item()
    assert m.evaluate(x, y)["loss"] == pytest.approx(expected, rel=2e-6)
    h = m.fit(x, y, epochs=1, batch_size=256, optimizer="sgd", lr=0.1, verbose=0)
    assert h.history["loss"][0] == pytest.approx(expected, rel=2e-6)
    # One SGD step, the same in both engines.
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y).long())
    loss.backward()
    opt.step()
    for name, value in net.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[name], value.numpy(), rtol=1e-4, atol=1e-6)


def test_a_cnn_with_batchnorm_keeps_the_modules_statistics():
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 3 * 3, 2))
    net[1].running_mean.fill_(0.25)
    m = crossover.Model.from_torch(net, torch.zeros(2, 1, 8, 8))
    assert m.input_shape == (1, 8, 8)
    np.testing.assert_array_equal(m.state_dict()["1.running_mean"], np.full(4, 0.25, np.float32))
    np.testing.assert_array_equal(net[1].running_mean.numpy(), np.full(4, 0.25, np.float32))


def test_what_the_importer_cannot_map_is_refused_with_its_message():
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.GELU(), torch.nn.Linear(4, 2))
    with pytest.raises(ValueError, match="Erf|Gelu|GELU|Div|Mul"):
        crossover.Model.from_torch(net, torch.zeros(1, 2))
    with pytest.raises(TypeError, match="torch.nn.Module"):
        crossover.Model.from_torch("not a module", torch.zeros(1, 2))
