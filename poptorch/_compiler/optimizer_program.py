"""The bridge from a torch optimizer to the device's `optimizer_step` program (spec 4.5).

`describe(optimizer)` validates the optimizer and records, per param group, which
hyper-parameters are variable (0-d f32 arguments of the program, fed by `hyper_values`
after every `setOptimizer`) and which are constant (embedded as `ipu.constant`, checked
by `check_constants`). `OptimizerSpec.emit` appends `func.func @optimizer_step` to a
module: it un-scales the gradients (divides them by `loss_scaling`), clips them to
`max_grad_norm` (one norm over every gradient, as PopART's `clipAllWeights`) and runs
one `ipu.*_step` op per weight. Optimizer-wide hyper-parameters have the group index
`GLOBAL`.

State tensors use torch's keys (`exp_avg`, `momentum_buffer`, `step`, ...); SGD's
`momentum_buffer` is stored times `velocity_scaling` with `use_combined_accum`, and its
`step` only says whether the buffer has started (torch's state has no SGD step). In a
state dict's "ipu_state" (spec 4.5.5) they are named `<parameter>.<state key>`
(`fc.weight.exp_avg`); in "ipu_param" the hyper-parameters are named as the optimizer's
attributes (`loss_scaling`) or `param_groups.<group>.<name>` (`param_groups.0.lr`).
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from torch_mlir import ir
from torch_mlir.dialects import func

from poptorch import optim
from poptorch.dialects import creation, elementwise, reduction
from poptorch.dialects import optimizer as ops
from poptorch.dialects.ipu import make_bool
from poptorch.errors import Error

GLOBAL = -1
Param = tuple[str, int, ir.RankedTensorType]  # (parameter name, param group index, type)

_BUILTINS: dict[type, str] = {
    optim.SGD: "sgd", torch.optim.SGD: "sgd", optim.Adam: "adam", torch.optim.Adam: "adam",
    optim.AdamW: "adam", torch.optim.AdamW: "adam", optim.RMSprop: "rmsprop",
    torch.optim.RMSprop: "rmsprop", optim.LAMB: "lamb",
}
# family -> per-group hyper-parameters, optimizer-wide ones, per-group structural flags
_GROUP_HYPERS = {
    "sgd": ("lr", "momentum", "dampening", "weight_decay", "velocity_scaling"),
    "adam": ("lr", "beta1", "beta2", "eps", "weight_decay"),
    "rmsprop": ("lr", "alpha", "eps", "weight_decay", "momentum"),
    "lamb": ("lr", "beta1", "beta2", "eps", "weight_decay", "max_weight_norm"),
}
_GLOBAL_HYPERS = {"loss_scaling": 1.0, "max_grad_norm": math.inf}
_GROUP_FLAGS = {"sgd": ("nesterov", "maximize"), "adam": ("decoupled_weight_decay", "maximize"),
                "rmsprop": ("centered", "maximize"), "lamb": ()}
# optimizer-wide structural attributes, with their value for optimizers without them
_GLOBAL_FLAGS = {"bias_correction": True, "use_tf_variant": False, "use_combined_accum": False,
                 "accum_type": torch.float32, "velocity_accum_type": torch.float32,
                 "first_order_momentum_accum_type": torch.float32,
                 "second_order_momentum_accum_type": torch.float32}
_UNSUPPORTED = ("amsgrad",)


def _builtin(optimizer: Any) -> type | None:
    """The optimizer class the device implements that `optimizer` is (or subclasses)."""
    return next((c for c in type(optimizer).__mro__ if c in _BUILTINS), None)


def _public_name(cls: type) -> str:
    """`poptorch.optim.SGD`, `torch.optim.SGD` (not torch.optim.sgd.SGD), or a user's class."""
    module = "torch.optim" if cls.__module__.startswith("torch.optim.") else cls.__module__
    return f"{module}.{cls.__qualname__}"


def describe(optimizer: torch.optim.Optimizer,
             automatic_loss_scaling: bool = False) -> OptimizerSpec:
    """Validate `optimizer` and record what its `optimizer_step` program needs. With
    `automatic_loss_scaling` the program takes loss_scaling as an argument, whatever the
    optimizer says: the executor passes the automatic scale the gradients carry."""
    builtin = _builtin(optimizer)
    if builtin is None:
        names = ", ".join(sorted({f"{c.__module__}.{c.__name__}" for c in _BUILTINS}))
        raise Error(f"optimizer {type(optimizer).__name__} is not supported on the IPU; "
                    f"use one of {names}")
    if builtin is not type(optimizer):
        warnings.warn(f"{type(optimizer).__name__} subclasses {builtin.__module__}."
                      f"{builtin.__name__}: PopTorch runs its own implementation of the "
                      "optimizer, so custom behaviour will not run on the device",
                      stacklevel=2)
    for i, group in enumerate(optimizer.param_groups):
        for name in _UNSUPPORTED:
            if group.get(name):
                raise Error(f"{builtin.__name__}: {name}=True (param group {i}) is not "
                            f"supported on the IPU; use {name}=False")
    return OptimizerSpec(optimizer, builtin, automatic_loss_scaling)


def _is_variable(optimizer: torch.optim.Optimizer, builtin: type, attr: str) -> bool:
    """PopTorch optimizers say so in `variable_attrs`; torch's have lr and non-defaults."""
    if isinstance(optimizer, optim._IpuOptimizer):
        return attr in optimizer.VARIABLES and not optimizer.variable_attrs.isConstant(attr)
    parameter = inspect.signature(builtin.__init__).parameters.get(attr)
    if attr == "lr" or parameter is None:
        return attr == "lr"
    return optimizer.defaults.get(attr, parameter.default) != parameter.default


def _attr(name: str) -> str:
    """The optimizer attribute behind a hyper-parameter name."""
    return "betas" if name in ("beta1", "beta2") else name


class OptimizerSpec:
    """What `describe` found; `emit` builds the program and fixes the parameter order.

    `constants` maps (group, name) to each constant hyper-parameter's value, `momentum`
    says which groups keep a momentum buffer, `accum_type` is the NumPy dtype PopTorch's
    `accum_type` asks the executor to accumulate gradients in. `kind` is the optimizer the
    program implements (SGD, Adam, AdamW, RMSprop or LAMB, from poptorch.optim or
    torch.optim alike), `compiled_with` the class it was described from.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, builtin: type,
                 automatic_loss_scaling: bool = False) -> None:
        self.family = _BUILTINS[builtin]
        self.kind = builtin.__name__
        self.compiled_with = _public_name(type(optimizer))
        self.groups = len(optimizer.param_groups)
        self.combined = bool(getattr(optimizer, "use_combined_accum", False))
        hypers = [h for h in _GROUP_HYPERS[self.family]
                  if h != "velocity_scaling" or self.combined]  # the separate variant: 1
        keys = [(GLOBAL, n) for n in _GLOBAL_HYPERS]
        keys += [(g, n) for g in range(self.groups) for n in hypers]
        variable = {k for k in keys if _is_variable(optimizer, builtin, _attr(k[1]))
                    or (automatic_loss_scaling and k == (GLOBAL, "loss_scaling"))}
        self.constants = {k: self.current(optimizer, *k) for k in keys if k not in variable}
        self.flags = self._flags(optimizer)
        self.momentum = {g: (g, "momentum") in variable or self.constants.get(
            (g, "momentum"), 0.0) != 0.0 for g in range(self.groups)}
        used = [(g, n) for g, n in keys if n not in ("momentum", "dampening")
                or self.momentum[g]]
        self._layout = [k for k in used if k in variable]
        self._in_force = [k for k in used if k in variable or k in self.constants]
        self.accum_type = self._dtype("accum_type")
        self.params: list[Param] | None = None

    def current(self, optimizer: torch.optim.Optimizer, group: int, name: str) -> float:
        """The current value of hyper-parameter `name` of `group` (or GLOBAL)."""
        if group == GLOBAL:
            value = getattr(optimizer, name, None)
            for i, g in enumerate(optimizer.param_groups):
                if name in g and g[name] != value:
                    raise Error(f"{name} is {g[name]} in param group {i} but {value} on the "
                                f"optimizer: it must be set on the optimizer "
                                f"(optimizer.{name} = ...), the same for every group")
            if name == "max_grad_norm" and value is not None:
                optim.check_max_grad_norm(value, type(optimizer).__name__)
            return float(_GLOBAL_HYPERS[name] if value is None else value)
        g = optimizer.param_groups[group]
        if name in ("beta1", "beta2"):
            return float(g["betas"][0 if name == "beta1" else 1])
        if name == "max_weight_norm":  # per group as PopTorch's; None: the optimizer's
            value = g.get(name, getattr(optimizer, name, None))
            return math.inf if value is None else float(value)
        return float(g.get(name, 1.0 if name == "velocity_scaling" else 0.0))

    def hyper_layout(self) -> list[tuple[int, str]]:
        """The variable hyper-parameters, (group index or GLOBAL, name), in argument order."""
        return list(self._layout)

    def hyper_values(self, optimizer: torch.optim.Optimizer) -> list[np.ndarray]:
        """Their current values as 0-d float32 arrays, in `hyper_layout` order."""
        return [np.asarray(self.current(optimizer, g, n), np.float32) for g, n in self._layout]

    def loss_scaling(self, optimizer: torch.optim.Optimizer) -> float:
        """The factor the executor scales the loss by."""
        return self.current(optimizer, GLOBAL, "loss_scaling")

    def in_force(self, hyper: Iterable[np.ndarray]) -> dict[tuple[int, str], float]:
        """Every hyper-parameter the program uses, given the variable ones' values `hyper`
        (in `hyper_layout` order): the device's, which setOptimizer sets."""
        values = {**self.constants, **dict(zip(self._layout, map(float, hyper), strict=True))}
        return {k: values[k] for k in self._in_force}

    def device_loss_scaling(self, hyper: Iterable[np.ndarray]) -> float:
        """The loss scaling the program un-scales the gradients by, given `hyper`."""
        return self.in_force(hyper)[(GLOBAL, "loss_scaling")]

    def check_constants(self, optimizer: torch.optim.Optimizer, where: str = "") -> None:
        """Raise poptorch.Error if the optimizer is not of the kind described, or a constant
        or structural attribute changed since describe; `where` prefixes the messages."""
        builtin = _builtin(optimizer)
        if builtin is None or builtin.__name__ != self.kind:
            raise Error(f"{where}the model was compiled with {self.compiled_with}; cannot "
                        f"change to {_public_name(type(optimizer))} after compilation; wrap "
                        "the model again (poptorch.trainingModel) with the new optimizer",
                        type="optimizer")
        if len(optimizer.param_groups) != self.groups:
            raise Error(f"{where}the optimizer has {len(optimizer.param_groups)} param groups, "
                        f"but the model was compiled for {self.groups}", type="optimizer")
        for (g, name), value in self.constants.items():
            if (now := self.current(optimizer, g, name)) != value:
                raise Error(f"{where}{_where(g)}{name} changed from {value} to {now}, but it "
                            f"is a constant of the compiled model; "
                            f"{_constant_hint(optimizer, name)}", type="optimizer")
        for (g, name), now in self._flags(optimizer).items():
            if now != (value := self.flags.get((g, name))):
                raise Error(f"{where}{_where(g)}{name} changed from {value} to {now}; it "
                            "decides the structure of the compiled optimizer, so it cannot "
                            "change after compilation", type="optimizer")

    def _flags(self, optimizer: torch.optim.Optimizer) -> dict[tuple[int, str], Any]:
        flags = {(GLOBAL, n): getattr(optimizer, n, default)
                 for n, default in _GLOBAL_FLAGS.items()}
        for g, group in enumerate(optimizer.param_groups):
            names = (*_GROUP_FLAGS[self.family], *_UNSUPPORTED)
            flags.update({(g, n): bool(group.get(n, False)) for n in names})
        return flags

    def _flag(self, name: str, group: int = GLOBAL, default: bool = False) -> bool:
        return bool(self.flags.get((group, name), default))

    def _dtype(self, name: str) -> np.dtype:
        dtype = self.flags.get((GLOBAL, name), torch.float32)
        return np.dtype(np.float16 if dtype == torch.float16 else np.float32)

    def _state_keys(self, group: int) -> list[tuple[str, np.dtype | None]]:
        """(state key, dtype) of a parameter of `group`; None: the weight's dtype."""
        first = self._dtype("first_order_momentum_accum_type")
        second = self._dtype("second_order_momentum_accum_type")
        step = ("step", np.dtype(np.float32))
        if self.family == "sgd":
            if not self.momentum[group]:
                return []
            velocity = None if self.combined else self._dtype("velocity_accum_type")
            return [("momentum_buffer", velocity), step]
        if self.family == "rmsprop":
            keys = [("square_avg", second)]
            keys += [("grad_avg", first)] if self._flag("centered", group) else []
            keys += [("momentum_buffer", first)] if self.momentum[group] else []
            return [*keys, step]
        return [("exp_avg", first), ("exp_avg_sq", second), step]

    def state_slots(self, group: int, weight_itemsize: int = 4) -> float:
        """The state of a parameter of `group` (the step aside) in units of the weight's
        own bytes: one per state tensor kept in the weight's dtype; a state tensor of
        another dtype counts its share (LAMB's or Adam's fp32 moments of an fp16
        weight: 2 each; PopART keeps them in the types given, graphcore/popart
        `Adam(..., accumType, accl1Type, accl2Type)`). `weight_itemsize`: the weight's
        bytes per element."""
        size = weight_itemsize
        return sum((size if dtype is None else dtype.itemsize) / size
                   for key, dtype in self._state_keys(group) if key != "step")

    def _params(self) -> list[Param]:
        if self.params is None:
            raise Error("OptimizerSpec.emit must run before the state layout is known")
        return self.params

    def state_layout(self) -> list[tuple[str, str]]:
        """(parameter name, state key) of every state tensor, in argument order."""
        return [(name, key) for name, g, _ in self._params() for key, _ in self._state_keys(g)]

    def initial_state(self, weights: Mapping[str, np.ndarray],
                      optimizer: torch.optim.Optimizer | None = None,
                      parameters: Mapping[str, torch.Tensor] | None = None,
                      ) -> dict[tuple[str, str], np.ndarray]:
        """The state before the first step: zeros (ones for the TF RMSprop square average),
        or, given `optimizer` and `parameters` (name -> the tensor in its param groups),
        what `optimizer.state` holds (after `load_state_dict` or CPU steps)."""
        tf, state = self._flag("use_tf_variant"), {}
        for name, g, _ in self._params():
            w = np.asarray(weights[name])
            for key, dtype in self._state_keys(g):
                shape = () if key == "step" else w.shape
                dtype = w.dtype if dtype is None else dtype
                # zeros from calloc: pages the first step writes, not the compile (BERT-
                # Large's LAMB moments, 2.7 GB, took a fifth of its compile to fill)
                state[(name, key)] = np.ones(shape, dtype) if tf and key == "square_avg" \
                    else np.zeros(shape, dtype)
        if optimizer is not None and parameters is not None:
            state.update(self._read_torch_state(optimizer, parameters, state))
        return state

    def _read_torch_state(self, optimizer: torch.optim.Optimizer,
                          parameters: Mapping[str, torch.Tensor],
                          fresh: dict[tuple[str, str], np.ndarray]) -> dict:
        state = {}
        for name, g, _ in self._params():
            held = optimizer.state.get(parameters[name], {})
            keys = [k for k, _ in self._state_keys(g)]
            if self.family != "sgd":
                state.update({(name, k): np.asarray(held[k]) for k in keys if k in held})
            elif keys and held.get("momentum_buffer") is not None:
                scale = self.current(optimizer, g, "velocity_scaling") if self.combined else 1.0
                state[(name, "momentum_buffer")] = np.asarray(held["momentum_buffer"]) * scale
                state[(name, "step")] = 1.0
        for (name, key), value in state.items():
            if np.size(value) != fresh[(name, key)].size:
                raise Error(f"the optimizer's state of parameter {name} ({key}) has shape "
                            f"{list(np.shape(value))}, but the parameter's has "
                            f"{list(fresh[(name, key)].shape)}; load an optimizer state "
                            "saved from the same model", type="optimizer")
        return {k: np.asarray(v).astype(fresh[k].dtype).reshape(fresh[k].shape)
                for k, v in state.items()}

    def state_dict(self, optimizer: torch.optim.Optimizer,
                   device_state: Mapping[tuple[str, str], np.ndarray],
                   parameters: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        """torch's state dict of `optimizer` holding `device_state`, which it also copies
        into `optimizer.state`; `parameters` maps names to the tensors in its groups."""
        for name, g, _ in self._params():
            keys = [k for k, _ in self._state_keys(g)]
            if not keys:
                continue
            held = {k: torch.from_numpy(np.array(device_state[(name, k)])) for k in keys}
            if self.family == "sgd":
                scale = self.current(optimizer, g, "velocity_scaling") if self.combined else 1.0
                held = ({"momentum_buffer": held["momentum_buffer"] / scale}
                        if float(device_state[(name, "step")]) > 0 else {})
            optimizer.state[parameters[name]] = held
        return torch.optim.Optimizer.state_dict(optimizer)

    def load_state_dict(self, optimizer: torch.optim.Optimizer, state_dict: dict[str, Any],
                        weights: Mapping[str, np.ndarray], parameters: Mapping[str, torch.Tensor],
                        ) -> dict[tuple[str, str], np.ndarray]:
        """Load a torch-format state dict into `optimizer` (param groups and state) and
        return the device state it describes (call `check_constants` afterwards)."""
        optim.load_torch_state(optimizer, state_dict)
        return self.initial_state(weights, optimizer, parameters)

    def ipu_state(self, device_state: Mapping[tuple[str, str], np.ndarray],
                  extra: Mapping[str, np.ndarray] | None = None) -> dict[str, torch.Tensor]:
        """A state dict's "ipu_state": the device's state tensors by `<parameter>.<key>`,
        then the executor's own `extra` state (copies)."""
        named = {f"{name}.{key}": device_state[(name, key)] for name, key in self.state_layout()}
        return {k: torch.from_numpy(np.array(v)) for k, v in {**named, **(extra or {})}.items()}

    def ipu_param(self, hyper: Iterable[np.ndarray]) -> dict[str, torch.Tensor]:
        """A state dict's "ipu_param": the hyper-parameters in force on the device (`hyper`,
        the variable ones' values, and the constants) as 0-d float32 tensors."""
        return {_param_key(*k): torch.tensor(v, dtype=torch.float32)
                for k, v in self.in_force(hyper).items()}

    def restore(self, optimizer: torch.optim.Optimizer,
                device_state: Mapping[tuple[str, str], np.ndarray], hyper: list[np.ndarray],
                ipu_state: Any, ipu_param: Any, extra: Mapping[str, np.ndarray] | None = None,
                ) -> tuple[dict[tuple[str, str], np.ndarray], list[np.ndarray],
                           dict[str, np.ndarray]]:
        """The device state, variable hyper-parameters and `extra` state with a loaded state
        dict's "ipu_state" and "ipu_param" (None: nothing) in place of theirs; what these
        lack keeps its value (as in PopTorch). poptorch.Error, naming the entry, for one
        the compiled optimizer does not have, of another shape, or changing a constant."""
        state, hyper, extra = dict(device_state), list(hyper), dict(extra or {})
        names = {f"{name}.{key}": (name, key) for name, key in self.state_layout()}
        for key, value in _entries("ipu_state", ipu_state):
            if key not in names and key not in extra:
                raise self._unknown_state(key)
            fresh = state[names[key]] if key in names else extra[key]
            array = _array("ipu_state", key, value)
            if array.shape != fresh.shape:
                owner = f"{names[key][0]}'s {names[key][1]}" if key in names else key
                raise Error(f"ipu_state: '{key}' has shape {list(array.shape)} in the loaded "
                            f"state, but {owner} has shape {list(fresh.shape)} in this model; "
                            "load an optimizer state saved from the same model",
                            type="optimizer")
            if key in names:
                state[names[key]] = array.astype(fresh.dtype)
            else:
                extra[key] = array.astype(fresh.dtype)
        variable = {_param_key(*k): i for i, k in enumerate(self._layout)}
        constant = {_param_key(*k): k for k in self._in_force if k in self.constants}
        for key, value in _entries("ipu_param", ipu_param):
            array = _array("ipu_param", key, value)
            if array.shape != ():
                raise Error(f"ipu_param: '{key}' must be a number (a 0-d tensor), but it has "
                            f"shape {list(array.shape)}", type="optimizer")
            if key in variable:
                hyper[variable[key]] = array.astype(np.float32)
            elif key in constant:
                g, name = constant[key]
                if np.float32(array) != np.float32(value := self.constants[(g, name)]):
                    raise Error(f"ipu_param: '{key}' is {float(array):g} in the loaded state, "
                                f"but {name} is a constant of the compiled model, "
                                f"{value:g}; {_constant_hint(optimizer, name)}",
                                type="optimizer")
            else:
                raise Error(f"ipu_param: the loaded state has '{key}', which is not a "
                            f"hyper-parameter of the compiled {self.compiled_with} (it has "
                            f"{', '.join(_param_key(*k) for k in self._in_force)}); load a "
                            "state saved with the same optimizer and param groups",
                            type="optimizer")
        return state, hyper, extra

    def _unknown_state(self, key: str) -> Error:
        trained = [name for name, _, _ in self._params()]
        owner = max((n for n in trained if key.startswith(n + ".")), key=len, default=None)
        if owner is None:
            return Error(f"ipu_state: the loaded state has '{key}', but parameter "
                         f"{key.rpartition('.')[0] or key} is not a parameter this model "
                         "trains; load an optimizer state saved from the same model (and "
                         "options)", type="optimizer")
        keys = [k for name, k in self.state_layout() if name == owner]
        return Error(f"ipu_state: the loaded state has '{key}', but the compiled "
                     f"{self.compiled_with} keeps {', '.join(keys) or 'no state'} for "
                     f"parameter {owner}; load a state saved with the same optimizer settings",
                     type="optimizer")

    def emit(self, module: ir.Module, params: list[Param]) -> None:
        """Append `func.func @optimizer_step` (weights, gradients, states, hyper-parameters
        -> new weights, new states) to `module`."""
        self.params = list(params)
        with module.context, ir.Location.unknown():
            _Emitter(self).build(module)


def _where(group: int) -> str:
    return "" if group == GLOBAL else f"param group {group}: "


def _param_key(group: int, name: str) -> str:
    """A hyper-parameter's name in "ipu_param"."""
    return name if group == GLOBAL else f"param_groups.{group}.{name}"


def _constant_hint(optimizer: torch.optim.Optimizer, name: str) -> str:
    """How to make hyper-parameter `name` a variable (changeable after compilation)."""
    if isinstance(optimizer, optim._IpuOptimizer):
        return (f"mark it variable before compiling: optimizer.variable_attrs."
                f"markAsVariable('{_attr(name)}')")
    return (f"torch.optim optimizers treat attributes left at their default as constant: "
            f"pass {_attr(name)} to the constructor, or use poptorch.optim")


def _entries(what: str, entries: Any) -> list[tuple[str, Any]]:
    """The (name, value) pairs of a state dict's "ipu_state" or "ipu_param" (None: none)."""
    if entries is None:
        return []
    if not isinstance(entries, Mapping):
        raise Error(f"{what} must be a dict of tensors by name, as state_dict() returns it, "
                    f"got {type(entries).__name__}", type="optimizer")
    return list(entries.items())


def _array(what: str, key: Any, value: Any) -> np.ndarray:
    array = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value)
    if array.dtype.kind not in "fiub":
        raise Error(f"{what}: '{key}' must be a tensor, got {type(value).__name__}",
                    type="optimizer")
    return array


_STEP_OPS = {"sgd": ops.SgdMomentumStepOp, "adam": ops.AdamStepOp,
             "rmsprop": ops.RmspropStepOp, "lamb": ops.LambStepOp}
_STATE_KEYS = {"velocity": "momentum_buffer"}  # op operand -> state key, where they differ


class _Emitter:
    """Builds `optimizer_step` from an OptimizerSpec (inside a context and location)."""

    def __init__(self, spec: OptimizerSpec) -> None:
        self.spec = spec
        self.f32 = ir.F32Type.get()
        self.scalar = ir.RankedTensorType.get([], self.f32)
        self.args: dict[tuple[int, str], ir.Value] = {}
        self.constants: dict[float, ir.Value] = {}

    def build(self, module: ir.Module) -> None:
        spec, params = self.spec, self.spec.params
        weight_types = [t for _, _, t in params]
        layout = spec.state_layout()
        types = {(name, key): self.state_type(t, key, g) for name, g, t in params
                 for key, _ in spec._state_keys(g)}
        state_types = [types[k] for k in layout]
        inputs = [*weight_types, *weight_types, *state_types,
                  *[self.scalar] * len(spec.hyper_layout())]
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("optimizer_step",
                             ir.FunctionType.get(inputs, [*weight_types, *state_types]))
        args = list(fn.add_entry_block().arguments)
        n = len(params)
        weights, grads = args[:n], args[n:2 * n]
        states = dict(zip(layout, args[2 * n:2 * n + len(layout)], strict=True))
        self.args = dict(zip(spec.hyper_layout(), args[2 * n + len(layout):], strict=True))
        with ir.InsertionPoint(fn.entry_block):
            scale = self.grad_scale(grads)
            new_weights = []
            for (name, g, _), w, grad in zip(params, weights, grads, strict=True):
                mine = {key: states[(name, key)] for key, _ in spec._state_keys(g)}
                new_weights.append(self.step(g, w, grad, mine, scale))
                states.update({(name, key): value for key, value in mine.items()})
            func.ReturnOp([*new_weights, *[states[k] for k in layout]])

    def state_type(self, weight: ir.RankedTensorType, key: str, group: int) -> ir.Type:
        if key == "step":
            return self.scalar
        dtype = dict(self.spec._state_keys(group))[key]
        element = (weight.element_type if dtype is None
                   else ir.F16Type.get() if dtype == np.float16 else self.f32)
        return ir.RankedTensorType.get(weight.shape, element)

    def const(self, value: float) -> ir.Value:
        if value not in self.constants:
            attr = ir.DenseElementsAttr.get_splat(self.scalar, ir.FloatAttr.get(self.f32, value))
            self.constants[value] = creation.ConstantOp(attr, self.scalar).result
        return self.constants[value]

    def hyper(self, group: int, name: str) -> ir.Value:
        key = (GLOBAL if name in _GLOBAL_HYPERS else group, name)
        if key in self.args:
            return self.args[key]
        if name == "velocity_scaling" and not self.spec.combined:
            return self.const(1.0)
        return self.const(self.spec.constants[key])

    def binary(self, kind: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
        return elementwise.BINARY_OPS[kind](lhs, rhs, lhs.type).result

    def grad_scale(self, grads: list[ir.Value]) -> ir.Value:
        """1 / loss_scaling, times torch's clip_grad_norm_ factor when max_grad_norm is set:
        max_grad_norm / (norm + 1e-6), at most 1, the norm taken over every weight's
        accumulated, replica-reduced and un-scaled gradient. When every weight is
        replica-grouped (alike), the gradients arrive with a group axis, which the
        reductions keep: the factor is then one per group, each group's own norm."""
        spec = self.spec
        clips = bool(grads) and spec.constants.get((GLOBAL, "max_grad_norm")) != math.inf
        if (GLOBAL, "loss_scaling") in self.args or spec.constants[(GLOBAL, "loss_scaling")] != 1:
            inverse = self.binary("div", self.const(1.0), self.hyper(GLOBAL, "loss_scaling"))
        else:
            inverse = self.const(1.0)
        if not clips:
            return inverse
        total = None
        for grad in grads:
            t = grad.type
            if t.element_type != self.f32:
                grad = elementwise.CastOp(grad, ir.RankedTensorType.get(t.shape, self.f32)).result
            if t.rank == 0:  # (the builder drops an empty `dims`, so no ipu.reduce here)
                square_sum = self.binary("mul", grad, grad)
            else:
                square_sum = reduction.ReduceOp(
                    grad, ir.StringAttr.get("square_sum"),
                    ir.DenseI64ArrayAttr.get(list(range(t.rank))), make_bool(False),
                    self.scalar).result
            total = square_sum if total is None else self.binary("add", total, square_sum)
        norm = self.binary("mul", elementwise.UNARY_OPS["sqrt"](total, self.scalar).result,
                           inverse)
        coef = self.binary("div", self.hyper(GLOBAL, "max_grad_norm"),
                           self.binary("add", norm, self.const(1e-6)))
        return self.binary("mul", self.binary("min", coef, self.const(1.0)), inverse)

    def flag(self, group: int, name: str) -> bool:
        spec = self.spec
        if name == "use_momentum":
            return spec.momentum[group]
        if name == "decoupled":
            return spec._flag("decoupled_weight_decay", group)
        if name == "bias_correction":
            return spec._flag(name, default=True)
        return spec._flag(name, GLOBAL if name == "use_tf_variant" else group)

    def step(self, group: int, w: ir.Value, grad: ir.Value, states: dict[str, ir.Value],
             scale: ir.Value) -> ir.Value:
        """One `ipu.*_step` op; replaces `states` by the new states, returns the weight.
        With torch's `maximize=True` (gradient ascent), the group's gradient scale is
        negated: torch negates the gradient before anything else uses it."""
        if self.flag(group, "maximize"):
            scale = elementwise.UNARY_OPS["neg"](scale, scale.type).result
        if self.spec.family == "sgd" and not states:
            return ops.SgdStepOp(w, grad, scale, self.hyper(group, "lr"),
                                 self.hyper(group, "weight_decay"), w.type).result
        cls = _STEP_OPS[self.spec.family]
        keys = [_STATE_KEYS.get(s, s) for s in cls.STATES]
        inputs = [states[k] if k in states else self.const(0.0) for k in keys]
        hypers = [self.hyper(group, name) for name in cls.HYPERS[1:]]
        flags = [make_bool(self.flag(group, f)) for f in cls.FLAGS]
        op = cls(w, grad, *inputs, scale, *hypers, *flags, w.type, *[v.type for v in inputs])
        states.update({k: v for k, v in zip(keys, op.results[1:], strict=True) if k in states})
        return op.results[0]
