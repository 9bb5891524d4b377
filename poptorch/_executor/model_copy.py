"""Copies of a wrapped model: the executor's shallow copy of the user's module tree, the
narrowed copy it captures, its frozen tensor attributes, and the fast weight lookup.

A shallow copy shares every parameter and buffer tensor with the user's model (so the
host weights are the user's own) and has its own module objects (so `eval()` and the
attributes the executor changes stay on the wrapper).
"""

from __future__ import annotations

import functools

import torch
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm

from poptorch._frontend import capture


def shallow_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of the module tree sharing every parameter and buffer tensor."""
    clone = object.__new__(type(module))  # not copy.copy: parametrized modules refuse it
    clone.__dict__ = dict(module.__dict__)
    clone._parameters = dict(module._parameters)
    clone._buffers = dict(module._buffers)
    clone._modules = {name: None if child is None else shallow_copy(child)
                      for name, child in module._modules.items()}
    return clone


@functools.lru_cache(maxsize=4096)
def _dotted(name: str) -> tuple[str, ...]:
    return tuple(name.split("."))


def registered(model: torch.nn.Module, name: str, table: str) -> torch.Tensor | None:
    """The parameter or buffer `name` of `model` straight from the modules' tables (what
    get_parameter finds, without its checks: this runs for every weight every call), or
    None. `table` is "_parameters" or "_buffers"."""
    *path, leaf = _dotted(name)
    owner = model
    for part in path:
        owner = owner.__dict__["_modules"].get(part)
        if owner is None:
            return None
    return owner.__dict__[table].get(leaf)


def host_tensor(model: torch.nn.Module, arg: capture.Argument,
                constants: dict[str, torch.Tensor]) -> torch.Tensor:
    """The host tensor of a program argument: `model`'s parameter or buffer, or one of
    the captured `constants`."""
    if arg.kind in ("parameter", "buffer"):
        parameter = arg.kind == "parameter"
        tensor = registered(model, arg.name, "_parameters" if parameter else "_buffers")
        if tensor is not None:
            return tensor
        # torch's lookup, for its error when there is no such weight
        return model.get_parameter(arg.name) if parameter else model.get_buffer(arg.name)
    return constants[arg.name]


def narrowed(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with 64-bit parameters and buffers narrowed, for capture only.

    The IPU has no 64-bit types (see `capture.NARROWED`); weights are narrowed again
    when they are uploaded, so the copy is needed only to give the graph 32-bit types.
    """
    if not any(t.dtype in capture.NARROWED
               for t in [*model.parameters(), *model.buffers()]):
        return model
    clone = shallow_copy(model)
    narrowed: dict[int, torch.Tensor] = {}  # a tied weight stays one tensor (`_tied`)
    for module in clone.modules():
        for name, param in module._parameters.items():
            if param is not None and param.dtype in capture.NARROWED:
                if id(param) not in narrowed:
                    narrowed[id(param)] = torch.nn.Parameter(
                        capture.narrow(param.detach()), param.requires_grad)
                module._parameters[name] = narrowed[id(param)]
        for name, buffer in module._buffers.items():
            if buffer is not None and buffer.dtype in capture.NARROWED:
                module._buffers[name] = narrowed.setdefault(id(buffer),
                                                            capture.narrow(buffer))
    return clone


def freeze_tensor_attributes(model: torch.nn.Module) -> set[str]:
    """Turn plain tensor attributes (not parameters or buffers) into buffers.

    PopTorch freezes such tensors into the graph as constants (spec 4.8, the CounterModel
    "wrong way" example): in-place changes to them do not persist between calls.
    torch.export refuses to trace a mutated constant, so they become buffers of the
    (shallow-copied) model whose device updates are discarded. Returns their names.
    """
    frozen = set()
    for prefix, module in model.named_modules():
        recomputed = _recomputed_by_hooks(module)
        for name, value in list(vars(module).items()):
            if name in recomputed:
                continue
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                delattr(module, name)
                module.register_buffer(name, value.detach().clone(), persistent=False)
                frozen.add(f"{prefix}.{name}" if prefix else name)
    return frozen



# forward pre-hooks that recompute a tensor attribute from parameters at every call
_RECOMPUTING_HOOKS = (WeightNorm, SpectralNorm)


def _recomputed_by_hooks(module: torch.nn.Module) -> set[str]:
    """The tensor attributes of `module` that a forward pre-hook recomputes at every call
    (`torch.nn.utils.weight_norm`'s `weight` from `weight_g` and `weight_v`): they are
    not constants to freeze but part of the graph, and reassigning them is the hook's
    job, not a buffer reassignment."""
    return {hook.name for hook in module._forward_pre_hooks.values()
            if isinstance(hook, _RECOMPUTING_HOOKS)}
