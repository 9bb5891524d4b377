"""Losses (spec 4.6.3, 4.2.1): where the loss is, how it is reduced, losses of modules
the model does not own; every case compared with PyTorch training on the CPU."""

import copy

import pytest
import torch

import poptorch

LR = 0.05


def train_both(model, *inputs, steps=2, params=None):
    """`steps` SGD steps with poptorch and with PyTorch on the CPU, from the same
    weights; the CPU backpropagates ones through the loss poptorch finds (the last
    identity_loss, else the model's one scalar float output). Returns both models and
    both last outputs."""
    reference = copy.deepcopy(model)
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(
        params(model) if params else model.parameters(), lr=LR))
    optimizer = torch.optim.SGD(params(reference) if params else reference.parameters(),
                                lr=LR)
    for _ in range(steps):
        out = ipu(*inputs)
        optimizer.zero_grad()
        expected = reference(*inputs)
        loss = getattr(reference, "loss_of", _only_scalar)(expected)
        loss.backward(torch.ones_like(loss))
        optimizer.step()
    ipu.copyWeightsToHost()
    return model, reference, out, expected


def _only_scalar(outputs):
    outputs = outputs if isinstance(outputs, tuple | list) else (outputs,)
    return next(o for o in outputs if o.dim() == 0)


def assert_same_weights(model, reference):
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


class Net(torch.nn.Module):
    def __init__(self, n_in=6, n_out=3):
        super().__init__()
        self.a, self.b = torch.nn.Linear(n_in, 8), torch.nn.Linear(8, n_out)

    def body(self, x):
        return self.b(torch.tanh(self.a(x)))


# ---- modules held outside the model ------------------------------------------------------

OUTSIDE_LOSS = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))


class GlobalLoss(Net):
    def forward(self, x, y):
        out = self.body(x)
        return out, OUTSIDE_LOSS(out, y)


def test_loss_module_held_by_a_global():
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.tensor([0, 2, 1, 2])
    model, reference, out, expected = train_both(GlobalLoss(), x, y)
    assert_same_weights(model, reference)
    torch.testing.assert_close(out[1], expected[1], rtol=1e-5, atol=1e-6)


def test_module_in_a_closure_is_a_constant():
    """PopTorch's tracing sees a module the model does not own as constants: it is not
    trained (its weights keep their values), the model's own weights are."""
    torch.manual_seed(0)
    head = torch.nn.Linear(3, 3)
    before = copy.deepcopy(head.state_dict())

    class Closure(Net):
        def forward(self, x, y):
            out = head(self.body(x))
            return out, torch.nn.functional.mse_loss(out, y)

    x, y = torch.randn(4, 6), torch.randn(4, 3)
    model, reference, out, expected = train_both(Closure(), x, y, steps=3)
    assert_same_weights(model, reference)
    torch.testing.assert_close(out[1], expected[1], rtol=1e-5, atol=1e-6)
    for name, value in head.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)


def test_loss_module_passed_to_forward():
    torch.manual_seed(0)

    class Passed(Net):
        def forward(self, x, y, criterion):
            out = self.body(x)
            return out, criterion(out, y)

    x, y = torch.randn(4, 6), torch.tensor([0, 2, 1, 2])
    model, reference, out, expected = train_both(Passed(), x, y, OUTSIDE_LOSS)
    assert_same_weights(model, reference)
    torch.testing.assert_close(out[1], expected[1], rtol=1e-5, atol=1e-6)


def test_outside_module_updated_in_place_is_a_clear_error():
    norm = torch.nn.BatchNorm1d(3)  # training mode: updates its running statistics

    class Outside(Net):
        def forward(self, x):
            out = norm(self.body(x))
            return out, out.pow(2).mean()

    with pytest.raises(poptorch.Error, match="not its own") as err:
        poptorch.trainingModel(Outside())(torch.randn(4, 6))
    assert err.value.location.endswith(
        f"test_losses.py:{Outside.forward.__code__.co_firstlineno + 1}")


# ---- where the loss is and how it is reduced ---------------------------------------------

@pytest.mark.parametrize("inner", ["none", "sum", "mean"])
@pytest.mark.parametrize("final", ["none", "sum", "mean"])
def test_non_final_identity_loss_reductions(inner, final):
    """An identity_loss whose result feeds the final one reduces (or not) as the final
    does: its gradient is its reduction's."""
    torch.manual_seed(0)

    class Model(Net):
        def forward(self, x, y):
            out = self.body(x)
            partial = poptorch.identity_loss((out - y).abs(), inner)
            total = partial * 2.0 + (out ** 2).mean()
            return out, poptorch.identity_loss(total, final)

        def loss_of(self, outputs):
            return outputs[1]

    x, y = torch.randn(4, 6), torch.randn(4, 3)
    model, reference, out, expected = train_both(Model(), x, y)
    assert_same_weights(model, reference)
    torch.testing.assert_close(out[1], expected[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_loss_anywhere_in_the_outputs(position):
    torch.manual_seed(0)

    class Model(Net):
        def forward(self, x, y):
            out = self.body(x)
            outputs = [out, torch.sigmoid(out)]
            outputs.insert(position, torch.nn.functional.smooth_l1_loss(out, y))
            return tuple(outputs)

    x, y = torch.randn(4, 6), torch.randn(4, 3)
    model, reference, out, expected = train_both(Model(), x, y)
    assert_same_weights(model, reference)
    for actual, wanted in zip(out, expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=1e-5, atol=1e-6)


def test_loss_in_a_dict_output():
    torch.manual_seed(0)

    class Model(Net):
        def forward(self, x, y):
            out = self.body(x)
            return {"logits": out, "loss": torch.nn.functional.mse_loss(out, y)}

        def loss_of(self, outputs):
            return outputs["loss"]

    x, y = torch.randn(4, 6), torch.randn(4, 3)
    model, reference, out, expected = train_both(Model(), x, y)
    assert_same_weights(model, reference)
    torch.testing.assert_close(out["loss"], expected["loss"], rtol=1e-5, atol=1e-6)


def test_several_losses_summed():
    """Several torch.nn losses summed into the one returned, the parts returned too (the
    final identity_loss says which is the loss)."""
    torch.manual_seed(0)

    class Model(Net):
        def __init__(self):
            super().__init__()
            self.mse, self.l1 = torch.nn.MSELoss(), torch.nn.L1Loss(reduction="sum")

        def forward(self, x, y, labels):
            out = self.body(x)
            mse, l1 = self.mse(out, y), self.l1(out, y)
            ce = torch.nn.functional.cross_entropy(out, labels)
            return mse, l1, ce, poptorch.identity_loss(mse + 0.1 * l1 + ce, "none")

        def loss_of(self, outputs):
            return outputs[-1]

    x, y, labels = torch.randn(4, 6), torch.randn(4, 3), torch.tensor([2, 0, 1, 1])
    model, reference, out, expected = train_both(Model(), x, y, labels)
    assert_same_weights(model, reference)
    for actual, wanted in zip(out, expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=1e-5, atol=1e-6)


def test_several_unmarked_scalar_outputs_need_a_mark():
    class Model(Net):
        def forward(self, x, y):
            out = self.body(x)
            return torch.nn.functional.mse_loss(out, y), torch.nn.functional.l1_loss(out, y)

    with pytest.raises(poptorch.Error, match="identity_loss"):
        poptorch.trainingModel(Model())(torch.randn(4, 6), torch.randn(4, 3))


CUSTOM_LOSSES = {
    "huber": lambda out, y: torch.where((out - y).abs() < 1, 0.5 * (out - y) ** 2,
                                        (out - y).abs() - 0.5).mean(),
    "log_softmax_nll": lambda out, y: -(torch.log_softmax(out, dim=1)
                                        * torch.softmax(y, dim=1)).sum(dim=1).mean(),
    "hinge": lambda out, y: torch.clamp(1 - out * torch.sign(y), min=0).sum(),
    "cosine": lambda out, y: (1 - torch.nn.functional.cosine_similarity(out, y)).mean(),
    "logcosh_max": lambda out, y: torch.log(torch.cosh(out - y)).max(dim=1).values.mean(),
}


@pytest.mark.parametrize("name", list(CUSTOM_LOSSES))
@pytest.mark.parametrize("marked", [False, True])
def test_custom_losses(name, marked):
    """Losses written with torch ops in forward, returned as is or through
    identity_loss(loss, "none")."""
    torch.manual_seed(0)
    loss_fn = CUSTOM_LOSSES[name]

    class Model(Net):
        def forward(self, x, y):
            out = self.body(x)
            loss = loss_fn(out, y)
            return out, poptorch.identity_loss(loss, "none") if marked else loss

    x, y = torch.randn(4, 6), torch.randn(4, 3)
    model, reference, out, expected = train_both(Model(), x, y)
    assert_same_weights(model, reference)
    torch.testing.assert_close(out[1], expected[1], rtol=1e-5, atol=1e-6)


class FocalLoss(torch.nn.Module):
    """A custom loss module written with torch ops, with a learnable scale."""

    def __init__(self, gamma=2.0):
        super().__init__()
        self.gamma = gamma
        self.scale = torch.nn.Parameter(torch.tensor(1.5))

    def forward(self, logits, labels):
        logp = torch.log_softmax(logits, 1).gather(1, labels[:, None]).squeeze(1)
        return (-((1 - logp.exp()) ** self.gamma) * logp * self.scale).mean()


OUTSIDE_FOCAL = FocalLoss()


@pytest.mark.parametrize("owned", [True, False])
def test_custom_loss_module(owned):
    """A custom loss module the model owns trains its parameter; one it does not own
    (a global) is constant, as in PopTorch, whose tracing sees only the model's."""
    torch.manual_seed(0)
    before = OUTSIDE_FOCAL.scale.detach().clone()

    class Model(Net):
        def __init__(self):
            super().__init__()
            self.focal = FocalLoss() if owned else None

        def forward(self, x, labels):
            out = self.body(x)
            return out, (self.focal or OUTSIDE_FOCAL)(out, labels) + (out ** 2).mean()

    x, labels = torch.randn(4, 6), torch.tensor([0, 1, 2, 1])
    model, reference, out, expected = train_both(Model(), x, labels)
    assert_same_weights(model, reference)
    torch.testing.assert_close(out[1], expected[1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(OUTSIDE_FOCAL.scale.detach(), before, rtol=0, atol=0)
    if owned:
        assert not torch.equal(model.focal.scale.detach(), torch.tensor(1.5))
