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
