"""Samples written by hand, for the ops of `supported_ops.md` that PyTorch's OpInfo and
ModuleInfo samples do not cover: random ops (drawn large enough to compare their
distributions), PopTorch's own ops (called as its API reference calls them, with a CPU
reference where PopTorch's op has no CPU meaning), and a few modules.

`HAND[name]()` gives the samples of op `name` (the last part of its spec name);
`HAND[name + ".grad"]()` its samples for the gradient form, where it has one.
"""

from __future__ import annotations

import torch
from parity import Sample

import poptorch

N = 4096  # draws per random sample: the mean is compared to 6 standard errors (~9%)


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _rand(*shape, requires_grad: bool = False) -> torch.Tensor:
    return torch.rand(*shape, generator=_generator()).requires_grad_(requires_grad)


def _randn(*shape, requires_grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, generator=_generator()).requires_grad_(requires_grad)


def _sample(fn, *args, label: str, reference=None, **kwargs) -> Sample:
    return Sample(fn, args, kwargs, label, reference)


# ---- random samplers ---------------------------------------------------------------------
def _random() -> dict:
    d = torch.distributions
    shape = (64, N // 64)
    return {
        "bernoulli": lambda: [
            _sample(torch.bernoulli, _rand(*shape), label="probabilities in [0, 1)"),
            _sample(lambda x: torch.bernoulli(x, 0.25), _rand(*shape), label="p=0.25"),
            _sample(lambda x: x.bernoulli_(0.75), torch.zeros(shape), label="bernoulli_"),
        ],
        "Bernoulli": lambda: [
            _sample(lambda p: d.Bernoulli(probs=p).sample(), _rand(*shape), label="probs"),
            _sample(lambda x: d.Bernoulli(logits=x).sample(), _randn(*shape), label="logits"),
        ],
        "randn": lambda: [
            _sample(lambda x: torch.randn(shape) + x, torch.zeros(()), label="randn(shape)"),
            _sample(torch.randn_like, torch.zeros(shape), label="randn_like"),
            _sample(lambda x: torch.randn(shape, dtype=torch.float16), torch.zeros(()),
                    label="float16"),
        ],
        "normal": lambda: [
            _sample(torch.normal, _randn(*shape), _rand(*shape) + 0.5, label="tensor, tensor"),
            _sample(lambda m: torch.normal(m, 2.0), _randn(*shape), label="tensor, float"),
            _sample(lambda x: torch.normal(1.0, 3.0, size=shape) + x, torch.zeros(()),
                    label="float, float, size"),
            _sample(lambda x: x.normal_(2.0, 0.5), torch.zeros(shape), label="normal_"),
        ],
        "Normal": lambda: [
            _sample(lambda m, s: d.Normal(m, s).sample(), _randn(*shape),
                    _rand(*shape) + 0.5, label="sample"),
            _sample(lambda m: d.Normal(m, 1.5).rsample(), _randn(*shape), label="rsample"),
        ],
        "rand": lambda: [
            _sample(lambda x: torch.rand(shape) + x, torch.zeros(()), label="rand(shape)"),
            _sample(torch.rand_like, torch.zeros(shape), label="rand_like"),
        ],
        "uniform": lambda: [
            _sample(lambda x: x.uniform_(-2.0, 3.0), torch.zeros(shape), label="uniform_(-2, 3)"),
            _sample(lambda x: torch.empty(shape).uniform_() + x, torch.zeros(()),
                    label="empty(shape).uniform_()"),
        ],
        "Uniform": lambda: [
            _sample(lambda lo: d.Uniform(lo, lo + 2.0).sample(), _randn(*shape),
                    label="tensor bounds"),
        ],
        "exponential": lambda: [
            _sample(lambda x: x.exponential_(2.0), torch.zeros(shape), label="exponential_(2)"),
        ],
        "Exponential": lambda: [
            _sample(lambda r: d.Exponential(r).sample(), _rand(*shape) + 0.5, label="rate"),
        ],
        "randperm": lambda: [
            _sample(lambda x: torch.randperm(N) + x, torch.zeros((), dtype=torch.int64),
                    label=f"randperm({N})"),
        ],
        "dropout": lambda: [
            _sample(lambda x: torch.nn.functional.dropout(x, 0.5, training=True),
                    torch.ones(shape), label="p=0.5, training"),
            _sample(lambda x: torch.nn.functional.dropout(x, 0.1, training=True),
                    _randn(*shape), label="p=0.1, training"),
            _sample(lambda x: torch.nn.functional.dropout(x, 0.5, training=False),
                    _randn(*shape), label="training=False"),
        ],
    }


# ---- PopTorch's own ops ------------------------------------------------------------------
def _name_scope(x):
    with poptorch.NameScope("layer"):
        return x * 2 + 1


def _multi_conv(convs, x):
    with poptorch.MultiConv():
        a = convs[0](x)
        b = convs[1](x)
    return a + b


def _for_loop(x):
    return poptorch.for_loop(3, lambda t: [t * 2 + 1], [x])[0]


def _cond(flag, x):
    return poptorch.cond(flag, lambda t: [t * 2], [x], lambda t: [t - 1], [x])[0]


def _cond_reference(flag, x):
    return x * 2 if bool(flag) else x - 1


def _nearest_reference(x, y):
    return torch.cdist(x, y).argmin(dim=1)


def _poptorch(grad: bool) -> dict:
    x = _randn(3, 4, requires_grad=grad)
    convs = torch.nn.ModuleList([torch.nn.Conv2d(2, 3, 3), torch.nn.Conv2d(2, 3, 3)])
    return {
        "ipu_print_tensor": lambda: [
            _sample(lambda t: poptorch.ipu_print_tensor(t * 2, "t") + 1, x, label="title")],
        "identity_loss": lambda: [
            _sample(lambda t, r=r: poptorch.identity_loss(t * 2, reduction=r), x,
                    label=f"reduction={r}") for r in ("sum", "mean", "none")],
        "recomputationCheckpoint": lambda: [
            _sample(lambda t: poptorch.recomputationCheckpoint(t * 2) + 1, x, label="one")],
        "nop": lambda: [_sample(lambda t: poptorch.nop(t * 2) + 1, x, label="nop")],
        "NameScope": lambda: [_sample(_name_scope, x, label="with NameScope")],
        "set_available_memory": lambda: [
            _sample(lambda t, w: poptorch.set_available_memory(t @ w, 0.5), x,
                    _randn(4, 2, requires_grad=grad), label="0.5 on a matmul")],
        "MultiConv": lambda: [
            _sample(_multi_conv, convs, _randn(1, 2, 5, 5, requires_grad=grad),
                    label="two convolutions")],
        "CPU": lambda: [
            _sample(lambda t: poptorch.CPU(lambda u: u * 2, "double")(t) + 1, x,
                    label="a host callback", reference=lambda t: t * 2 + 1)],
        "dynamic_slice": lambda: [
            _sample(lambda t, s: poptorch.dynamic_slice(t, 0, s, 2, 1), x,
                    torch.tensor([1]), label="dim 0, size 2",
                    reference=lambda t, s: t[s.item():s.item() + 2])],
        "dynamic_update": lambda: [
            _sample(lambda t, u, s: poptorch.dynamic_update(t, u, 0, s, 2), x,
                    _randn(2, 4, requires_grad=grad), torch.tensor([1]), label="dim 0, size 2",
                    reference=lambda t, u, s: torch.cat([t[:1], u, t[3:]]))],
        "serializedMatMul": lambda: [
            _sample(lambda t, w, m=m: poptorch.serializedMatMul(
                t, w, getattr(poptorch.MatMulSerializationMode, m), 2), x,
                _randn(4, 6, requires_grad=grad), label=m, reference=torch.matmul)
            for m in ("InputChannels", "ReducingDim", "OutputChannels")],
        "for_loop": lambda: [
            _sample(_for_loop, x, label="3 iterations",
                    reference=lambda t: ((t * 2 + 1) * 2 + 1) * 2 + 1)],
        "cond": lambda: [
            _sample(_cond, torch.tensor([flag]), x.detach(), label=f"condition {flag}",
                    reference=_cond_reference) for flag in (True, False)],
        "set_overlap_for_input": lambda: [
            _sample(lambda t: poptorch.set_overlap_for_input(
                t, poptorch.OverlapMode.OverlapAccumulationLoop) * 2, x,
                label="OverlapAccumulationLoop", reference=lambda t: t * 2)],
        "set_overlap_for_output": lambda: [
            _sample(lambda t: poptorch.set_overlap_for_output(
                t * 2, poptorch.OverlapMode.OverlapAccumulationLoop), x,
                label="OverlapAccumulationLoop", reference=lambda t: t * 2)],
        "custom_op": lambda: [
            _sample(lambda t: poptorch.custom_op([t], "Cube", "com.example", 1,
                                                 example_outputs=[t])[0], x,
                    label="an unregistered op", reference=lambda t: t ** 3)],
        "ctc_beam_search_decoder": lambda: [
            _sample(lambda p, n: poptorch.ctc_beam_search_decoder(p, n, 0, 2, 1)[1],
                    torch.softmax(_randn(5, 1, 4), -1).log(), torch.tensor([5]),
                    label="beam 2", reference=None)],
        "nearest": lambda: [
            _sample(lambda x, y: poptorch.nearest(x, y), _randn(6, 2), _randn(3, 2),
                    label="no batches",
                    reference=_nearest_reference)],
        "fps": lambda: [
            _sample(lambda s: poptorch.fps(s, [0, 8], 0.5, False), _randn(8, 3),
                    label="ratio 0.5")],
    }


# ---- modules without a ModuleInfo ----------------------------------------------------------
def _modules(grad: bool) -> dict:
    def normed(module, **kwargs):
        module = torch.nn.utils.weight_norm(module, **kwargs)
        # the hook's last `weight` is a non-leaf, which deepcopy refuses (the harness copies
        # the model for the CPU): a leaf copy of it, which the hook recomputes each call
        module.weight = module.weight.detach()
        return module

    def weight_norm():
        torch.manual_seed(0)
        return [
            _sample(normed(torch.nn.Linear(4, 3)), _randn(2, 4), label="Linear"),
            _sample(normed(torch.nn.Conv1d(2, 3, 3), dim=None), _randn(2, 2, 6),
                    label="Conv1d, dim=None"),
        ]
    return {
        "weight_norm": weight_norm,
        "Identity": lambda: [_sample(torch.nn.Identity(), _randn(2, 3, requires_grad=grad),
                                     label="Identity")],
    }


def _hand() -> dict:
    table = {**_random(), **_poptorch(False), **_modules(False)}
    differentiable = {**_poptorch(True), **_modules(True)}
    for name in ("ipu_print_tensor", "identity_loss", "recomputationCheckpoint", "nop",
                 "NameScope", "set_available_memory", "MultiConv", "dynamic_slice",
                 "dynamic_update", "serializedMatMul", "weight_norm"):
        table[f"{name}.grad"] = differentiable[name]
    return table


HAND = _hand()
