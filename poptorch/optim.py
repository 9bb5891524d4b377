"""PopTorch's optimizers (spec 4.5, 11.6): SGD, Adam, AdamW, RMSprop, LAMB.

Each subclasses its torch.optim class (LAMB, which torch lacks, subclasses
`torch.optim.Optimizer`), so it also steps on the CPU, and adds PopTorch's arguments.
Attributes that must be equal in every param group (`loss_scaling`, `max_grad_norm`,
`bias_correction`, the accumulator types, ...) live on the optimizer object;
`velocity_scaling` lives in each param group. `variable_attrs` records which numeric
attributes are variable (changeable by `setOptimizer` without recompiling): those passed
to the constructor, unless marked otherwise. On the IPU the optimizer runs as the ipu ops
`poptorch._compiler.optimizer_program` emits; the CPU `step()` ignores loss scaling and gradient
clipping, which only act on the device.

State dicts (spec 4.5.5) are PopTorch's: torch's "state" and "param_groups" (which LR
schedulers use) with "ipu_state", the device's state tensors, and "ipu_param", the
hyper-parameters in force on the device; both None until a training model holds the
state. A training executor holding it sets `_ipu_link` to an object with
`state_dict() -> dict` and `load_state_dict(dict) -> None`; `state_dict()` and
`load_state_dict()` then read and write the device state. Unlinked, the optimizer keeps
the "ipu_state" / "ipu_param" it loaded (or had when its training model let go of it),
which the next training model compiled with it, or given it by setOptimizer, loads.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from poptorch.errors import Error

ACCUM_TYPES = (torch.float16, torch.float32)
_FLOAT32 = torch.float32
IPU_KEYS = ("ipu_state", "ipu_param")  # what a state dict of a poptorch.optim optimizer adds


class VariableAttributes:
    """Track which attributes are variable or constant (`optimizer.variable_attrs`)."""

    def __init__(self, variable_attributes: list[str], allowed_attributes: list[str]) -> None:
        self._variable = set(variable_attributes)
        self._allowed = list(allowed_attributes)

    def _check(self, attr: str) -> None:
        if attr not in self._allowed:
            raise Error(f"'{attr}' is not an attribute that can be constant or variable; "
                        f"use one of {', '.join(self._allowed)}")

    def isConstant(self, attr: str) -> bool:  # noqa: N802 - PopTorch's API
        """Return True if the attribute is marked as constant."""
        self._check(attr)
        return attr not in self._variable

    def markAsConstant(self, attr: str) -> None:  # noqa: N802
        """Explicitly mark an attribute as constant."""
        self._check(attr)
        self._variable.discard(attr)

    def markAsVariable(self, attr: str) -> None:  # noqa: N802
        """Explicitly mark an attribute as variable."""
        self._check(attr)
        self._variable.add(attr)


def check_max_grad_norm(value: Any, where: str) -> None:
    """PopTorch refuses a NaN `max_grad_norm` ("Maximum norm of gradients cannot be NaN");
    torch's `clip_grad_norm_` would silently turn every weight into NaN."""
    try:
        number = None if isinstance(value, bool | str) else float(value)
    except (TypeError, ValueError):
        number = None
    if number is None:
        raise Error(f"{where}: max_grad_norm must be a number (inf, the default, for no "
                    f"clipping), got {value!r}", type="optimizer")
    if math.isnan(number):
        raise Error(f"{where}: max_grad_norm is NaN: Maximum norm of gradients cannot be NaN; "
                    "use a positive number, or inf (the default) for no clipping",
                    type="optimizer")


def check_ipu_state_dict(state_dict: Any) -> None:
    """Refuse what a poptorch.optim optimizer cannot load: PopTorch loads only its own
    state dicts, which hold "ipu_state" and "ipu_param" (spec 4.5.5)."""
    if not state_dict:
        raise Error("Cannot load optimizer state dictionary because it is empty.",
                    type="optimizer")
    missing = [key for key in IPU_KEYS if key not in state_dict]
    if missing:
        raise Error("Only IPU optimizer states can be loaded onto the IPU. This state "
                    f"dictionary has no {' or '.join(repr(k) for k in missing)}: it was not "
                    "saved by a poptorch.optim optimizer (a CPU torch.optim optimizer's "
                    "state_dict(), for one, has a different structure); load the "
                    "state_dict() of a poptorch.optim optimizer, or load this one into "
                    "the torch.optim optimizer it came from", type="optimizer")


def load_torch_state(optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]) -> None:
    """Load torch's part of `state_dict` ("state", "param_groups") as torch does; a state
    of other param groups is a poptorch.Error."""
    torch_part = {k: v for k, v in state_dict.items() if k not in IPU_KEYS}
    try:
        torch.optim.Optimizer.load_state_dict(optimizer, torch_part)
    except (KeyError, ValueError) as err:
        what = f"it has no {err}" if isinstance(err, KeyError) else str(err)
        raise Error(f"load_state_dict: the state does not fit this optimizer ({what}); "
                    "load a state saved from an optimizer with the same param groups",
                    type="optimizer") from None


class _IpuOptimizer:
    """What the PopTorch optimizers add to torch's: extras, variable attributes, state link."""

    # attribute -> default when None: on the optimizer (one value for all param groups)
    OPTIMIZER_EXTRAS: dict[str, Any] = {}
    # attribute -> default when None: in every param group
    GROUP_EXTRAS: dict[str, Any] = {}
    # the numeric attributes that can be variable
    VARIABLES: tuple[str, ...] = ()

    def _construct(self, parent: type, args: dict[str, Any]) -> None:
        """Initialise the torch class `parent` with the arguments given, then the extras."""
        if args.get("amsgrad"):
            raise Error(f"{type(self).__name__}: amsgrad is not supported on the IPU; "
                        "use amsgrad=False")
        accepted = inspect.signature(parent.__init__).parameters
        parent.__init__(self, **{k: v for k, v in args.items()
                                 if k in accepted and k != "self" and v is not None})
        self._extras(args)

    def _extras(self, args: dict[str, Any]) -> None:
        for name, default in self.OPTIMIZER_EXTRAS.items():
            value = default if args.get(name) is None else args[name]
            if name.endswith("accum_type") and value not in ACCUM_TYPES:
                raise Error(f"{type(self).__name__}: {name} must be torch.float16 or "
                            f"torch.float32, got {value}")
            if name == "max_grad_norm":
                check_max_grad_norm(value, type(self).__name__)
            setattr(self, name, value)
        for name, default in self.GROUP_EXTRAS.items():
            value = default if args.get(name) is None else args[name]
            self.defaults[name] = value
            for group in self.param_groups:
                group.setdefault(name, value)
        self.variable_attrs = VariableAttributes(
            [k for k in self.VARIABLES if args.get(k) is not None], list(self.VARIABLES))
        self._ipu_link = None
        self._ipu_saved = dict.fromkeys(IPU_KEYS)

    def state_dict(self) -> dict[str, Any]:
        """PopTorch's state dict: "ipu_state" and "ipu_param" (the device's, once a training
        model holds the state; None before) with torch's "state" and "param_groups"."""
        if self._ipu_link is not None:
            return self._ipu_link.state_dict()
        return {**self._ipu_saved, **super().state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict a poptorch.optim optimizer's state_dict() returned (onto the
        device once a training model holds the state, else on the next one to)."""
        check_ipu_state_dict(state_dict)
        if self._ipu_link is not None:
            self._ipu_link.load_state_dict(state_dict)
        else:
            load_torch_state(self, state_dict)
            self._ipu_saved = {key: state_dict[key] for key in IPU_KEYS}

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in [*self.OPTIMIZER_EXTRAS, "variable_attrs", "_ipu_saved"]:
            state[name] = getattr(self, name)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # torch's load_state_dict() goes through __setstate__: a device link stays
        super().__setstate__(state)
        self.__dict__.setdefault("_ipu_link", None)
        self.__dict__.setdefault("_ipu_saved", dict.fromkeys(IPU_KEYS))


_COMMON = {"loss_scaling": 1.0, "accum_type": _FLOAT32,
           "first_order_momentum_accum_type": _FLOAT32,
           "second_order_momentum_accum_type": _FLOAT32}


class SGD(_IpuOptimizer, torch.optim.SGD):
    """Stochastic gradient descent with optional momentum, loss and velocity scaling."""

    OPTIMIZER_EXTRAS = {"loss_scaling": 1.0, "use_combined_accum": False,
                        "accum_type": _FLOAT32, "velocity_accum_type": _FLOAT32,
                        "max_grad_norm": math.inf}
    GROUP_EXTRAS = {"velocity_scaling": 1.0}
    VARIABLES = ("lr", "momentum", "dampening", "weight_decay", "loss_scaling",
                 "velocity_scaling", "max_grad_norm")

    def __init__(self, params: Iterable, lr: float, momentum: float | None = None,
                 dampening: float | None = None, weight_decay: float | None = None,
                 nesterov: bool | None = None, maximize: bool | None = None,
                 foreach: bool | None = None, differentiable: bool | None = None,
                 loss_scaling: float | None = None, velocity_scaling: float | None = None,
                 use_combined_accum: bool | None = None, accum_type: torch.dtype | None = None,
                 velocity_accum_type: torch.dtype | None = None,
                 max_grad_norm: float | None = None) -> None:
        self._construct(torch.optim.SGD, dict(locals()))


class Adam(_IpuOptimizer, torch.optim.Adam):
    """Adam (torch.optim.Adam) with optional loss scaling; AMSGrad is not supported."""

    OPTIMIZER_EXTRAS = {**_COMMON, "max_grad_norm": math.inf}
    VARIABLES = ("lr", "betas", "eps", "weight_decay", "loss_scaling", "max_grad_norm")

    def __init__(self, params: Iterable, lr: float | None = None,
                 betas: tuple[float, float] | None = None, eps: float | None = None,
                 weight_decay: float | None = None, amsgrad: bool | None = None,
                 foreach: bool | None = None, maximize: bool | None = None,
                 capturable: bool | None = None, differentiable: bool | None = None,
                 fused: bool | None = None, loss_scaling: float | None = None,
                 accum_type: torch.dtype | None = None,
                 first_order_momentum_accum_type: torch.dtype | None = None,
                 second_order_momentum_accum_type: torch.dtype | None = None,
                 max_grad_norm: float | None = None) -> None:
        self._construct(torch.optim.Adam, dict(locals()))


class AdamW(_IpuOptimizer, torch.optim.AdamW):
    """Adam with true (decoupled) weight decay (torch.optim.AdamW), optional bias correction."""

    OPTIMIZER_EXTRAS = {**_COMMON, "bias_correction": True, "max_grad_norm": math.inf}
    VARIABLES = Adam.VARIABLES

    def __init__(self, params: Iterable, lr: float | None = None,
                 betas: tuple[float, float] | None = None, eps: float | None = None,
                 weight_decay: float | None = None, amsgrad: bool | None = None,
                 maximize: bool | None = None, foreach: bool | None = None,
                 capturable: bool | None = None, loss_scaling: float | None = None,
                 bias_correction: bool | None = None, accum_type: torch.dtype | None = None,
                 first_order_momentum_accum_type: torch.dtype | None = None,
                 second_order_momentum_accum_type: torch.dtype | None = None,
                 max_grad_norm: float | None = None) -> None:
        self._construct(torch.optim.AdamW, dict(locals()))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """torch.optim.AdamW's step; without bias correction, the uncorrected update."""
        if self.bias_correction:
            return super().step(closure)
        return _manual_step(self, closure, _adamw_uncorrected)


class RMSprop(_IpuOptimizer, torch.optim.RMSprop):
    """RMSprop (torch.optim.RMSprop), or TensorFlow's variant with `use_tf_variant`."""

    OPTIMIZER_EXTRAS = {**_COMMON, "use_tf_variant": False}
    VARIABLES = ("lr", "alpha", "eps", "weight_decay", "momentum", "loss_scaling")

    def __init__(self, params: Iterable, lr: float | None = None, alpha: float | None = None,
                 eps: float | None = None, weight_decay: float | None = None,
                 momentum: float | None = None, centered: bool | None = None,
                 foreach: bool | None = None, maximize: bool | None = None,
                 differentiable: bool | None = None, loss_scaling: float | None = None,
                 accum_type: torch.dtype | None = None,
                 first_order_momentum_accum_type: torch.dtype | None = None,
                 second_order_momentum_accum_type: torch.dtype | None = None,
                 use_tf_variant: bool | None = None) -> None:
        self._construct(torch.optim.RMSprop, dict(locals()))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """torch.optim.RMSprop's step, or TensorFlow's: square average starting at one, eps
        inside the square root, the learning rate accumulated in the momentum buffer."""
        if not self.use_tf_variant:
            return super().step(closure)
        return _manual_step(self, closure, _tf_rmsprop)


class LAMB(_IpuOptimizer, torch.optim.Optimizer):
    """Layer-wise Adaptive Moments (LAMB); phi(z) = min(z, max_weight_norm).

    max_weight_norm can be set per param group, as PopTorch's LAMB allows (its
    `_group_vars`): Graphcore's BERT gives the biases' group 0 (trust ratio 1, no
    layer-wise scaling). A group without one takes the optimizer's (None: no clamp)."""

    OPTIMIZER_EXTRAS = {**_COMMON, "bias_correction": True, "max_weight_norm": None}
    VARIABLES = ("lr", "betas", "eps", "weight_decay", "loss_scaling", "max_weight_norm")

    def __init__(self, params: Iterable, lr: float | None = None,
                 betas: tuple[float, float] | None = None, eps: float | None = None,
                 weight_decay: float | None = None, bias_correction: bool | None = None,
                 loss_scaling: float | None = None, max_weight_norm: float | None = None,
                 accum_type: torch.dtype | None = None,
                 first_order_momentum_accum_type: torch.dtype | None = None,
                 second_order_momentum_accum_type: torch.dtype | None = None) -> None:
        args = dict(locals())
        given = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2}
        defaults.update({k: v for k, v in given.items() if v is not None})
        torch.optim.Optimizer.__init__(self, params, defaults)
        self._extras(args)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """Performs a single optimization step (parameter update)."""
        return _manual_step(self, closure, _lamb)


def _manual_step(opt: torch.optim.Optimizer, closure: Callable[[], float] | None,
                 update: Callable[..., None]) -> float | None:
    """Run `update(opt, group, param, state, grad)` on every parameter with a gradient."""
    loss = None
    if closure is not None:
        with torch.enable_grad():
            loss = closure()
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                state = opt.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                state["step"] += 1
                update(opt, group, p, state, p.grad)
    return loss


def _moments(state: dict, p: torch.Tensor, grad: torch.Tensor, beta1: float, beta2: float):
    m = state.setdefault("exp_avg", torch.zeros_like(p))
    v = state.setdefault("exp_avg_sq", torch.zeros_like(p))
    m.lerp_(grad, 1 - beta1)
    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    return m, v


def _adamw_uncorrected(opt, group, p, state, grad) -> None:
    beta1, beta2 = group["betas"]
    p.mul_(1 - group["lr"] * group["weight_decay"])
    m, v = _moments(state, p, grad, beta1, beta2)
    p.addcdiv_(m, v.sqrt().add_(group["eps"]), value=-group["lr"])


def _tf_rmsprop(opt, group, p, state, grad) -> None:
    alpha = group["alpha"]
    grad = grad.add(p, alpha=group["weight_decay"])
    square_avg = state.setdefault("square_avg", torch.ones_like(p))
    square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    mean_sq = square_avg
    if group["centered"]:
        grad_avg = state.setdefault("grad_avg", torch.zeros_like(p))
        grad_avg.lerp_(grad, 1 - alpha)
        mean_sq = square_avg.addcmul(grad_avg, grad_avg, value=-1)
    avg = mean_sq.add(group["eps"]).sqrt_()
    if group["momentum"] > 0:
        buf = state.setdefault("momentum_buffer", torch.zeros_like(p))
        buf.mul_(group["momentum"]).addcdiv_(grad, avg, value=group["lr"])
        p.sub_(buf)
    else:
        p.addcdiv_(grad, avg, value=-group["lr"])


def _lamb(opt, group, p, state, grad) -> None:
    beta1, beta2 = group["betas"]
    m, v = _moments(state, p, grad, beta1, beta2)
    step = state["step"].item()
    bc1, bc2 = (1 - beta1**step, 1 - beta2**step) if opt.bias_correction else (1.0, 1.0)
    update = (m / bc1) / ((v / bc2).sqrt() + group["eps"]) + group["weight_decay"] * p
    w_norm = p.norm()
    max_weight_norm = group.get("max_weight_norm", opt.max_weight_norm)
    if max_weight_norm is not None:
        w_norm = w_norm.clamp(max=max_weight_norm)
    u_norm = update.norm()
    ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    p.sub_(group["lr"] * ratio * update)
