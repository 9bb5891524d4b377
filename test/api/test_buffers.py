"""Buffers updated in forward (spec 4.8, issue 22 item 1)."""

import copy

import pytest
import torch

import poptorch


class Counter(torch.nn.Module):  # spec listing 4.22
    def __init__(self):
        super().__init__()
        self.register_buffer("i", torch.tensor([0.], dtype=torch.float))

    def forward(self):
        self.i += 1
        return self.i


def test_spec_counter_example():
    model = Counter()
    poptorch_model = poptorch.inferenceModel(model)
    assert poptorch_model().tolist() == [1.0]
    assert poptorch_model().tolist() == [2.0]
    poptorch_model.copyWeightsToHost()  # spec: inference buffers need it
    assert model.i.tolist() == [2.0]


class BufferAndParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("i", torch.tensor([0.]))
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x, t):
        self.i += 1
        y = self.lin(x) * self.i
        self.acc.mul_(0.5).add_(y.detach().sum(0))
        self.acc.add_(self.lin.bias.detach())
        out = y + self.acc
        return out, torch.nn.functional.mse_loss(out, t)


def test_training_buffers_match_cpu_and_reach_the_host():
    torch.manual_seed(0)
    model = BufferAndParam()
    ref = copy.deepcopy(model)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(2)
    pm = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.0))
    x, t = torch.randn(4, 3), torch.randn(4, 3)
    pm(x, t)
    with torch.no_grad():
        ref(x[:2], t[:2])
        ref(x[2:], t[2:])
    # read through the user model, without copyWeightsToHost: the trainer's values
    assert model.i.tolist() == [2.0]
    torch.testing.assert_close(model.acc, ref.acc)
    torch.testing.assert_close(dict(model.named_buffers())["acc"], ref.acc)


class Reassign(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.zeros(3))

    def forward(self, x):
        self.b = self.b + 1
        return x + self.b


class Delete(Reassign):
    def forward(self, x):
        del self.b
        return x


@pytest.mark.parametrize(("cls", "words"), [(Reassign, "reassigned"), (Delete, "removed")])
def test_reassigning_or_deleting_a_buffer_is_an_error(cls, words):
    pm = poptorch.inferenceModel(cls())
    with pytest.raises(poptorch.Error, match=f"Buffer b is {words}"):
        pm(torch.ones(3))


class Accumulate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.zeros(3))

    def forward(self, x):
        self.b += x.sum(0)
        return x + self.b


def test_replicated_buffer_updates_need_broadcast_buffers_false():
    pm = poptorch.inferenceModel(Accumulate(), poptorch.Options().replicationFactor(2))
    with pytest.raises(poptorch.Error, match=r"broadcastBuffers\(False\)"):
        pm(torch.ones(4, 3))
    opts = poptorch.Options().replicationFactor(2).broadcastBuffers(False)
    model = Accumulate()
    pm = poptorch.inferenceModel(model, opts)
    out = pm(torch.arange(12.).reshape(4, 3))
    # each replica keeps its own buffer: replica 0 saw rows 0-1, replica 1 rows 2-3
    torch.testing.assert_close(out[:2], torch.arange(6.).reshape(2, 3) + torch.tensor([3., 5, 7]))
    torch.testing.assert_close(out[2:], torch.arange(6., 12).reshape(2, 3)
                               + torch.tensor([15., 17, 19]))


def test_updatable_named_buffers():
    model = Accumulate()
    lin = torch.nn.Linear(3, 3)

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.lin = model, lin

        def forward(self, x):
            y = self.lin(self.inner(x))
            return y, y.sum()

    wrapped = WithLoss()
    opts = poptorch.Options().updatableNamedBuffers(["inner.b"])
    pm = poptorch.trainingModel(wrapped, opts, torch.optim.SGD(wrapped.parameters(), lr=0.0))
    with pytest.raises(poptorch.Error, match="not been compiled"):
        pm.copyNamedBuffersToDevice()
    pm(torch.ones(1, 3))
    assert wrapped.inner.b.tolist() == [1.0, 1.0, 1.0]
    with torch.no_grad():
        wrapped.inner.b.fill_(10.0)
    pm.copyNamedBuffersToDevice()
    pm(torch.ones(1, 3))
    assert wrapped.inner.b.tolist() == [11.0, 11.0, 11.0]


class Accumulate_with_loss(torch.nn.Module):  # noqa: N801
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.zeros(3))
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.b += 1
        y = x * self.w
        return y, y.sum()


def test_copy_named_buffers_needs_the_option():
    pm = poptorch.trainingModel(Accumulate_with_loss())
    pm(torch.ones(3))
    with pytest.raises(poptorch.Error, match="updatableNamedBuffers"):
        pm.copyNamedBuffersToDevice()


class CounterWithLinear(torch.nn.Module):  # spec listing 4.22, with a parameter
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.register_buffer("i", torch.tensor([0.], dtype=torch.float))

    def forward(self, x, t):
        self.i += 1
        y = self.lin(x) * self.i
        return y, torch.nn.functional.mse_loss(y, t)


class LinearBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.bn = torch.nn.BatchNorm1d(2)

    def forward(self, x, t):
        y = self.bn(self.lin(x))
        return y, torch.nn.functional.mse_loss(y, t)


@pytest.mark.parametrize("cls", [CounterWithLinear, LinearBatchNorm])
def test_inference_buffers_beside_parameters_match_the_cpu(cls):
    torch.manual_seed(0)
    model = cls()
    reference = copy.deepcopy(model).eval()
    initial = copy.deepcopy(dict(model.named_buffers()))
    ipu = poptorch.inferenceModel(model)
    for _ in range(3):
        x, t = torch.randn(4, model.lin.in_features), torch.randn(4, 2)
        with torch.no_grad():
            expected = reference(x, t)
        torch.testing.assert_close(ipu(x, t), expected)
    for name, value in model.named_buffers():  # spec 4.8: not copied implicitly
        torch.testing.assert_close(value, initial[name], msg=name)
    for name, value in reference.named_buffers():  # through the wrapper: the device's
        torch.testing.assert_close(ipu.get_buffer(name), value, msg=name)
    ipu.copyWeightsToHost()
    for name, value in reference.named_buffers():  # through the original module
        torch.testing.assert_close(_host(model, name), value, msg=name)
    if cls is CounterWithLinear:
        assert model.i.tolist() == [3.0]


@pytest.mark.parametrize("cls", [CounterWithLinear, LinearBatchNorm])
def test_training_buffers_beside_parameters_match_the_cpu_and_reach_the_host(cls):
    torch.manual_seed(0)
    model = cls()
    reference = copy.deepcopy(model)
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        x, t = torch.randn(4, model.lin.in_features), torch.randn(4, 2)
        output, loss = ipu(x, t)
        optimizer.zero_grad()
        expected, expected_loss = reference(x, t)
        expected_loss.backward()
        optimizer.step()
        torch.testing.assert_close(output, expected.detach())
        torch.testing.assert_close(loss, expected_loss.detach())
    for name, value in reference.named_buffers():  # through the wrapper
        torch.testing.assert_close(ipu.get_buffer(name), value, msg=name)
    ipu.copyWeightsToHost()
    for name, value in reference.state_dict().items():  # through the original module
        torch.testing.assert_close(_host(model, name), value, msg=name)


def _host(model, name):
    """The host tensor `name` of `model`, read as an attribute of its module."""
    owner, _, attribute = name.rpartition(".")
    return getattr(model.get_submodule(owner), attribute)
