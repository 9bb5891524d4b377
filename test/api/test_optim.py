"""poptorch.optim and the `optimizer_step` program: the device trajectory is torch's.

Each test runs the same random gradients through torch's (or poptorch's) CPU `step()`
and through the program `_optimizer_program` emits, compiled by the JIT, and compares
the weights after every step.
"""

import copy
import math

import numpy as np
import pytest
import torch
from torch_mlir import ir

import poptorch
import poptorch.dialects.optimizer  # noqa: F401 - registers the ops before make_context
import poptorch.runtime.jit.kernels.optimizer  # noqa: F401 - registers the kernels
from poptorch import optim
from poptorch._compiler.optimizer_program import GLOBAL, describe
from poptorch.dialects import make_context
from poptorch.runtime.jit.program import compile_module

SHAPES = ((3, 4), (5,), ())


class Device:
    """The optimizer as the executor runs it: the compiled program and NumPy state."""

    def __init__(self, opt: torch.optim.Optimizer, params: list[torch.Tensor]) -> None:
        self.opt, self.spec = opt, describe(opt)
        self.named = {f"p{i}": p for i, p in enumerate(params)}
        name = {id(p): n for n, p in self.named.items()}
        f32 = ir.F32Type.get
        with make_context(), ir.Location.unknown():
            self.params = [(name[id(p)], g, ir.RankedTensorType.get(list(p.shape), f32()))
                           for g, group in enumerate(opt.param_groups) for p in group["params"]]
            module = ir.Module.create()
            self.spec.emit(module, self.params)
            assert module.operation.verify()
            self.ir = str(module)
            self.program = compile_module(module, "optimizer_step")
        self.weights = {n: p.detach().numpy().copy() for n, p in self.named.items()}
        self.state = self.spec.initial_state(self.weights, opt, self.named)

    def step(self, grads: dict[str, np.ndarray]) -> None:
        self.spec.check_constants(self.opt)
        names, layout = [n for n, _, _ in self.params], self.spec.state_layout()
        out = self.program.run(*[self.weights[n] for n in names], *[grads[n] for n in names],
                               *[self.state[k] for k in layout],
                               *self.spec.hyper_values(self.opt))
        self.weights.update(zip(names, out[:len(names)], strict=True))
        self.state.update(zip(layout, out[len(names):], strict=True))


def compare(make, steps=10, scale=1.0, clip=None, reference=None, between=None, rtol=1e-5,
            atol=1e-6, shapes=SHAPES):
    """Run `make(params)` on the CPU (or `reference(params, grads)`) and on the device."""
    torch.manual_seed(0)
    init = [torch.randn(s) for s in shapes]
    cpu = [torch.nn.Parameter(w.clone()) for w in init]
    dev = [torch.nn.Parameter(w.clone()) for w in init]
    cpu_opt, device = make(cpu), Device(make(dev), dev)
    for step in range(steps):
        grads = [torch.randn(s) for s in shapes]
        for p, g in zip(cpu, grads, strict=True):
            p.grad = g.clone()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(cpu, clip)
        with torch.no_grad():
            reference(cpu, [p.grad for p in cpu]) if reference else cpu_opt.step()
        device.step({f"p{i}": g.numpy() * np.float32(scale) for i, g in enumerate(grads)})
        for i, p in enumerate(cpu):
            np.testing.assert_allclose(device.weights[f"p{i}"], p.detach().numpy(), rtol=rtol,
                                       atol=atol, err_msg=f"p{i} after step {step + 1}")
        if between is not None:
            between(step, cpu_opt, device.opt)
    return cpu_opt, device


SGD = torch.optim.SGD
CASES = {
    "sgd": lambda ps: SGD(ps, lr=0.1),
    "sgd_momentum_nesterov_wd": lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                               weight_decay=0.01),
    "sgd_dampening": lambda ps: SGD(ps, lr=0.1, momentum=0.9, dampening=0.3),
    "poptorch_sgd": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.8, weight_decay=0.02),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.1),
    "adam_decoupled": lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.1,
                                                  decoupled_weight_decay=True),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.99)),
    "poptorch_adam": lambda ps: optim.Adam(ps, lr=0.02, eps=1e-6),
    "poptorch_adamw": lambda ps: optim.AdamW(ps, lr=0.02, weight_decay=0.05),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01),
    "rmsprop_centered": lambda ps: torch.optim.RMSprop(ps, lr=0.01, centered=True),
    "rmsprop_momentum": lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.9,
                                                       weight_decay=0.1, centered=True),
    "poptorch_rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01, alpha=0.9, momentum=0.5),
    "tf_rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True,
                                           eps=1e-3, use_tf_variant=True),
    "adamw_uncorrected": lambda ps: optim.AdamW(ps, lr=0.01, bias_correction=False),
    "groups": lambda ps: SGD([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5,
                                                   "momentum": 0.5}], lr=0.1, momentum=0.9),
    "adam_groups": lambda ps: optim.Adam([{"params": ps[:1], "betas": (0.5, 0.9)},
                                          {"params": ps[1:], "weight_decay": 0.1}], lr=0.01),
}


@pytest.mark.parametrize("case", CASES)
def test_matches_cpu_step(case: str) -> None:
    compare(CASES[case])


def test_plain_sgd_has_no_state() -> None:
    _, device = compare(CASES["sgd"], steps=2)
    assert "ipu.sgd_step" in device.ir and device.spec.state_layout() == []


def lamb_reference(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                   bias_correction=True, max_weight_norm=None):
    """LAMB as the spec describes it, in float64: Adam's direction plus weight decay,
    times phi(||w||) / ||update|| with phi(z) = min(z, max_weight_norm)."""
    moments, t = {}, [0]

    def step(params, grads):
        t[0] += 1
        b1, b2 = betas
        for p, g in zip(params, grads, strict=True):
            w, g = p.detach().double().numpy(), g.double().numpy()
            m, v = moments.get(id(p), (0.0, 0.0))
            m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
            moments[id(p)] = (m, v)
            c1, c2 = (1 - b1 ** t[0], 1 - b2 ** t[0]) if bias_correction else (1, 1)
            update = (m / c1) / (np.sqrt(v / c2) + eps) + weight_decay * w
            w_norm = np.linalg.norm(w)
            if max_weight_norm is not None:
                w_norm = min(w_norm, max_weight_norm)
            u_norm = np.linalg.norm(update)
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            p.copy_(torch.from_numpy(np.asarray(w - lr * ratio * update)))
    return step


@pytest.mark.parametrize("kwargs", [{}, {"lr": 0.01, "weight_decay": 0.1},
                                    {"bias_correction": False, "max_weight_norm": 0.5}])
def test_lamb(kwargs: dict) -> None:
    compare(lambda ps: optim.LAMB(ps, **kwargs), reference=lamb_reference(**kwargs))


def test_lamb_cpu_step() -> None:
    _, device = compare(lambda ps: optim.LAMB(ps, lr=0.01, max_weight_norm=1.0), steps=3)
    assert "ipu.lamb_step" in device.ir


def test_lamb_max_weight_norm_per_group() -> None:
    """PopTorch's LAMB takes max_weight_norm per param group (Graphcore's BERT: 0 for the
    biases, i.e. trust ratio 1, the optimizer's for the rest); marked constant, each
    group's value is its own constant of the program."""
    def make(ps):
        opt = optim.LAMB([{"params": ps[:1], "max_weight_norm": 0},
                          {"params": ps[1:]}], lr=0.01, max_weight_norm=0.5)
        opt.variable_attrs.markAsConstant("max_weight_norm")
        return opt

    ref0, ref1 = lamb_reference(lr=0.01, max_weight_norm=0.0), lamb_reference(
        lr=0.01, max_weight_norm=0.5)

    def reference(params, grads):
        ref0(params[:1], grads[:1])
        ref1(params[1:], grads[1:])
    _, device = compare(make, reference=reference)
    assert device.spec.constants[(0, "max_weight_norm")] == 0.0
    assert device.spec.constants[(1, "max_weight_norm")] == 0.5
    compare(make)  # poptorch.optim.LAMB's own CPU step agrees


def test_loss_scaling_unscales_gradients() -> None:
    compare(lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.1, loss_scaling=100.0),
            scale=100.0)
    _, device = compare(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, loss_scaling=1000.0,
                                             velocity_scaling=8.0, use_combined_accum=True),
                        scale=1000.0)
    assert (GLOBAL, "loss_scaling") in device.spec.hyper_layout()
    assert (0, "velocity_scaling") in device.spec.hyper_layout()


def test_max_grad_norm() -> None:
    compare(lambda ps: optim.SGD(ps, lr=0.1, max_grad_norm=0.5), clip=0.5)
    compare(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, max_grad_norm=2.0,
                                 loss_scaling=16.0), clip=2.0, scale=16.0)


def test_float16_state() -> None:
    fp16 = torch.float16
    _, device = compare(lambda ps: optim.Adam(ps, lr=0.01, first_order_momentum_accum_type=fp16,
                                              second_order_momentum_accum_type=fp16),
                        rtol=1e-2, atol=1e-3)
    assert device.state[("p0", "exp_avg")].dtype == np.float16
    assert device.state[("p0", "exp_avg_sq")].dtype == np.float16
    assert device.state[("p0", "step")].dtype == np.float32
    _, device = compare(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, velocity_accum_type=fp16),
                        rtol=1e-2, atol=1e-3)
    assert device.state[("p0", "momentum_buffer")].dtype == np.float16
    with pytest.raises(poptorch.Error, match="accum_type must be torch.float16 or"):
        optim.Adam([torch.nn.Parameter(torch.ones(1))], accum_type=torch.float64)


def test_variable_attributes() -> None:
    p = [torch.nn.Parameter(torch.ones(2))]
    opt = optim.SGD(p, lr=0.01, momentum=0.0)  # spec listing 4.16
    assert not opt.variable_attrs.isConstant("lr")
    assert not opt.variable_attrs.isConstant("momentum")
    assert opt.variable_attrs.isConstant("loss_scaling")
    opt.variable_attrs.markAsConstant("momentum")
    opt.variable_attrs.markAsVariable("loss_scaling")
    assert describe(opt).hyper_layout() == [(GLOBAL, "loss_scaling"), (0, "lr")]
    with pytest.raises(poptorch.Error, match="'betas' is not an attribute"):
        opt.variable_attrs.markAsVariable("betas")
    # torch.optim (listing 4.17): lr always variable, non-default attributes variable
    assert describe(SGD(p, lr=0.01, momentum=0.0)).hyper_layout() == [(0, "lr")]
    layout = describe(SGD(p, lr=0.01, momentum=1.0)).hyper_layout()
    assert layout == [(0, "lr"), (0, "momentum")]


def test_variable_change_applies_without_recompiling() -> None:
    def between(step, cpu_opt, dev_opt):
        for opt in (cpu_opt, dev_opt):
            opt.param_groups[0]["lr"] *= 0.5
            opt.param_groups[0]["betas"] = (0.8, 0.99)

    compare(lambda ps: optim.Adam(ps, lr=0.01, betas=(0.9, 0.999)), between=between)


def test_constant_change_is_an_error() -> None:
    p = [torch.nn.Parameter(torch.ones(2))]
    opt = SGD(p, lr=0.1, momentum=0.9)
    spec = describe(opt)
    opt.param_groups[0]["weight_decay"] = 0.1
    with pytest.raises(poptorch.Error, match="param group 0: weight_decay changed from 0.0 "
                       "to 0.1.*pass weight_decay to the constructor"):
        spec.check_constants(opt)
    opt = optim.Adam(p, lr=0.1)
    spec = describe(opt)
    opt.loss_scaling = 4.0
    with pytest.raises(poptorch.Error, match=r"loss_scaling changed .*markAsVariable\('loss_"):
        spec.check_constants(opt)
    opt.loss_scaling = 1.0
    opt.param_groups[0]["amsgrad"] = True
    with pytest.raises(poptorch.Error, match="amsgrad changed from False to True"):
        spec.check_constants(opt)
    opt = optim.SGD(p, lr=0.1, loss_scaling=2.0)
    opt.param_groups[0]["loss_scaling"] = 1.0  # spec listing 4.15 sets both
    with pytest.raises(poptorch.Error, match="must be set on the optimizer"):
        describe(opt).hyper_values(opt)


def test_unsupported_options_and_classes() -> None:
    p = [torch.nn.Parameter(torch.ones(2))]
    with pytest.raises(poptorch.Error, match="amsgrad is not supported"):
        optim.Adam(p, amsgrad=True)
    with pytest.raises(poptorch.Error, match="amsgrad=True .* is not supported"):
        describe(torch.optim.Adam(p, amsgrad=True))
    assert describe(SGD(p, lr=0.1, maximize=True)).flags[(0, "maximize")]  # ascends
    with pytest.raises(poptorch.Error, match="optimizer Adagrad is not supported"):
        describe(torch.optim.Adagrad(p))


def test_subclass_warns() -> None:
    class MySGD(optim.SGD):
        pass

    p = [torch.nn.Parameter(torch.ones(2))]
    with pytest.warns(UserWarning, match="MySGD subclasses poptorch.optim.SGD.*custom"):
        describe(MySGD(p, lr=0.1))


def test_state_dict_round_trip() -> None:
    make = CASES["rmsprop_momentum"]
    cpu_opt, device = compare(make, steps=4)
    saved = device.spec.state_dict(device.opt, device.state, device.named)
    expected = cpu_opt.state_dict()
    assert saved["param_groups"] == expected["param_groups"]
    for index, state in expected["state"].items():
        assert saved["state"][index].keys() == state.keys()
        for key, value in state.items():
            torch.testing.assert_close(saved["state"][index][key], value)
    params = [torch.nn.Parameter(torch.from_numpy(device.weights[n])) for n in device.named]
    fresh = Device(make(params), params)
    loaded = fresh.spec.load_state_dict(fresh.opt, copy.deepcopy(saved), fresh.weights,
                                        fresh.named)
    for key, value in device.state.items():
        np.testing.assert_array_equal(loaded[key], value)


def test_sgd_state_dict_and_link() -> None:
    cpu_opt, device = compare(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, loss_scaling=4.0,
                                                   velocity_scaling=4.0, use_combined_accum=True),
                              steps=3, scale=4.0)
    saved = device.spec.state_dict(device.opt, device.state, device.named)
    torch.testing.assert_close(saved["state"][0]["momentum_buffer"],
                               cpu_opt.state_dict()["state"][0]["momentum_buffer"])

    class Link:
        def state_dict(self):
            return saved

        def load_state_dict(self, state_dict):
            self.loaded = state_dict

    link = device.opt._ipu_link = Link()
    assert device.opt.state_dict() is saved
    loaded = {"ipu_state": None, "ipu_param": None, "x": 1}  # only PopTorch's state dicts
    device.opt.load_state_dict(loaded)
    assert link.loaded == loaded
    clone = copy.deepcopy(device.opt)
    assert clone.loss_scaling == 4.0 and clone._ipu_link is None
    assert not clone.variable_attrs.isConstant("velocity_scaling")


def test_defaults() -> None:
    p = [torch.nn.Parameter(torch.ones(2))]
    lamb = optim.LAMB(p)
    assert (lamb.defaults["lr"], lamb.defaults["weight_decay"], lamb.bias_correction) == (
        1e-3, 1e-2, True)
    assert lamb.max_weight_norm is None and lamb.loss_scaling == 1.0
    sgd = optim.SGD(p, lr=0.1)
    assert sgd.param_groups[0]["velocity_scaling"] == 1.0 and sgd.max_grad_norm == math.inf
    assert not sgd.use_combined_accum and sgd.accum_type == torch.float32
    assert optim.RMSprop(p).use_tf_variant is False
    assert optim.AdamW(p).defaults["weight_decay"] == 1e-2
