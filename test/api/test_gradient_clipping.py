"""Gradient clipping (`max_grad_norm`, spec 11.6): training with a PopTorch optimizer
that clips gives what `torch.nn.utils.clip_grad_norm_` over every trained parameter,
then the torch optimizer's step, give on the CPU (issue 22, item 2).

PopTorch passes `max_grad_norm` to PopART as one `ClipNormSettings::clipAllWeights`:
one norm over all weight gradients, after they are accumulated, reduced over replicas
and un-scaled (loss scaling), just before the optimizer's update. The constructors of
SGD, Adam and AdamW take it; LAMB clips too when the attribute is set on the optimizer
(PopTorch reads `optimizer.max_grad_norm` of every optimizer and LAMB runs as PopART's
Adam). NaN is refused, as PopTorch refuses it."""

import copy
import math
import re

import pytest
import torch
from numerics import TOLERANCES

import poptorch

RTOL, ATOL = 1e-4, 1e-6  # several steps: the float32 tolerance of one op times ten
assert TOLERANCES[torch.float32] <= (RTOL, ATOL)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 8)
        self.b = torch.nn.Linear(8, 3)

    def forward(self, x, y):
        out = self.b(torch.tanh(self.a(x)))
        return out, torch.nn.functional.cross_entropy(out, y)


# name -> (poptorch optimizer with clipping, the torch optimizer the CPU steps with)
OPTIMIZERS = {
    "sgd": (lambda p, clip, ls: poptorch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                   weight_decay=0.01, max_grad_norm=clip,
                                                   loss_scaling=ls),
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                      weight_decay=0.01)),
    "adam": (lambda p, clip, ls: poptorch.optim.Adam(p, lr=0.01, weight_decay=0.01,
                                                     max_grad_norm=clip, loss_scaling=ls),
             lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01)),
    "adamw": (lambda p, clip, ls: poptorch.optim.AdamW(p, lr=0.01, weight_decay=0.05,
                                                       max_grad_norm=clip, loss_scaling=ls),
              lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05)),
    "lamb": (lambda p, clip, ls: _with_clip(poptorch.optim.LAMB(p, lr=0.01, loss_scaling=ls),
                                            clip),
             lambda p: poptorch.optim.LAMB(p, lr=0.01)),
}


def _with_clip(optimizer, clip):
    optimizer.max_grad_norm = clip
    return optimizer


def _groups(model):
    """Two param groups, the second with its own learning rate."""
    return [{"params": model.a.parameters()}, {"params": model.b.parameters(), "lr": 0.003}]


@pytest.mark.parametrize("config", ["plain", "accumulation_replicas", "loss_scaling",
                                    "param_groups", "changed"])
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_matches_clip_grad_norm(optimizer, config):
    """The trained weights equal clip_grad_norm_ + the torch step's after every step."""
    make_ipu, make_cpu = OPTIMIZERS[optimizer]
    accumulation, replicas = (2, 2) if config == "accumulation_replicas" else (1, 1)
    loss_scaling = 64.0 if config == "loss_scaling" else None
    clip = 0.05
    torch.manual_seed(0)
    model = Net()
    reference = copy.deepcopy(model)
    params = _groups if config == "param_groups" else (lambda m: m.parameters())
    opts = poptorch.Options().replicationFactor(replicas)
    opts.Training.gradientAccumulation(accumulation)
    ipu_optimizer = make_ipu(params(model), clip, loss_scaling)
    ipu = poptorch.trainingModel(model, opts, ipu_optimizer)
    cpu_optimizer = make_cpu(params(reference))
    torch.manual_seed(1)
    micro = accumulation * replicas
    for step in range(4):
        if config == "changed" and step == 2:  # a variable hyper-parameter (spec 4.5.1)
            ipu_optimizer.max_grad_norm = 0.02
            if optimizer == "lamb":  # not a constructor argument: a constant, as PopTorch's
                with pytest.raises(poptorch.Error, match="max_grad_norm changed from 0.05"):
                    ipu.setOptimizer(ipu_optimizer)
                ipu_optimizer.max_grad_norm = clip
            else:
                clip = 0.02
                ipu.setOptimizer(ipu_optimizer)
        x, y = torch.randn(4 * micro, 6), torch.randint(0, 3, (4 * micro,))
        ipu(x, y)
        cpu_optimizer.zero_grad()
        for xs, ys in zip(x.reshape(micro, 4, 6), y.reshape(micro, 4), strict=True):
            (reference(xs, ys)[1] / micro).backward()
        norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), clip)
        assert norm > clip  # the test clips
        cpu_optimizer.step()
        for (name, actual), expected in zip(model.named_parameters(), reference.parameters(),
                                            strict=True):
            torch.testing.assert_close(actual, expected, rtol=RTOL, atol=ATOL,
                                       msg=lambda m, n=name, s=step: f"step {s}, {n}: {m}")


class ModelWithWeights(torch.nn.Module):
    """PopTorch's `helpers.ModelWithWeights(torch.nn.LogSoftmax(), X.shape)`."""

    def __init__(self, numel):
        super().__init__()
        self.lin = torch.nn.Linear(numel, numel)

    def forward(self, x):
        out = torch.nn.functional.log_softmax(self.lin(x), dim=0)
        return out, poptorch.identity_loss(out**2, reduction="sum")


@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "AdamW"])
def test_poptorch_gradient_clipping(optimizer):
    """PopTorch's own test_gradient_clipping: max_norm 0.001, lr 0.01, 10 steps, the
    weights read through the wrapped model as PopTorch's test reads them."""
    torch.manual_seed(42)
    x = torch.randn(10)
    model = ModelWithWeights(10)
    reference = copy.deepcopy(model)
    cpu = getattr(torch.optim, optimizer)(reference.parameters(), lr=0.01)
    ipu = poptorch.trainingModel(model, optimizer=getattr(poptorch.optim, optimizer)(
        model.parameters(), lr=0.01, max_grad_norm=0.001))
    for _ in range(10):
        cpu.zero_grad()
        reference(x)[1].backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.001)
        cpu.step()
        ipu(x)
        for (_, actual), expected in zip(ipu.named_parameters(), reference.parameters(),
                                         strict=True):
            torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


NAN_MESSAGE = ("max_grad_norm is NaN: Maximum norm of gradients cannot be NaN; use a "
               "positive number, or inf (the default) for no clipping")


@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "AdamW"])
def test_nan_is_refused_by_the_constructor(optimizer):
    with pytest.raises(poptorch.Error, match=re.escape(f"{optimizer}: {NAN_MESSAGE}")):
        getattr(poptorch.optim, optimizer)(Net().parameters(), lr=0.1,
                                           max_grad_norm=math.nan)


def test_nan_set_later_is_refused():
    """Set on the optimizer before compiling, or given to setOptimizer afterwards."""
    model = Net()
    optimizer = poptorch.optim.Adam(model.parameters(), lr=0.01, max_grad_norm=1.0)
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    ipu = poptorch.trainingModel(model, optimizer=optimizer)
    ipu(x, y)
    optimizer.max_grad_norm = math.nan
    with pytest.raises(poptorch.Error, match=re.escape(f"Adam: {NAN_MESSAGE}")):
        ipu.setOptimizer(optimizer)
    ipu.destroy()
    fresh = Net()
    optimizer = poptorch.optim.SGD(fresh.parameters(), lr=0.01)
    optimizer.max_grad_norm = math.nan
    with pytest.raises(poptorch.Error, match=re.escape(f"SGD: {NAN_MESSAGE}")):
        poptorch.trainingModel(fresh, optimizer=optimizer)(x, y)


def test_not_a_number_is_refused():
    with pytest.raises(poptorch.Error, match=re.escape(
            "SGD: max_grad_norm must be a number (inf, the default, for no clipping), "
            "got '1.0'")):
        poptorch.optim.SGD(Net().parameters(), lr=0.1, max_grad_norm="1.0")
