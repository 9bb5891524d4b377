"""poptorch.custom_op (spec 4.9) and the registration of its implementation.

PopTorch runs a custom op from a PopART C++ library the user loads with ctypes (listing
4.23). Here the user registers the op's implementation from Python under the same
(name, domain, version): `register_custom_op(name, domain, version, forward=...,
backward=..., cost=...)` with NumPy functions (`runtime.user_code.CustomOpImpl` says
what each takes). `custom_op(inputs, name, domain, domain_version, example_outputs,
attributes)` then calls it as PopTorch does: one torch.library op per number of
outputs (`poptorch::custom_operation_<n>`, results of different types), which
torch.export keeps whole and `ipu-convert-poptorch-ops` lowers to `ipu.custom`. On the
CPU (the model called outside poptorch) the op runs the registered NumPy forward.

In training the op's gradient is `poptorch::custom_operation_grad_<n>` (n inputs),
taking the inputs, outputs and output gradients, lowered to `ipu.custom` with
`gradient = true`; an op registered without `backward` cannot be trained (an Error at
capture). The attributes (spec Table 4.1) travel in a JSON string of the op, which keeps
floats and ints apart, and become the `attrs` dictionary of `ipu.custom`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

from poptorch._frontend import model_code
from poptorch.dialects.custom import MAX_INPUTS, MAX_OUTPUTS
from poptorch.errors import Error
from poptorch.runtime.user_code import (
    CUSTOM_OPS,
    CustomOpCost,
    CustomOpImpl,
    custom_op_impl,
    describe,
)

__all__ = ["CustomOpCost", "custom_op", "register_custom_op"]


def register_custom_op(name: str, domain: str, domain_version: int, *,
                       forward: Callable[..., Any],
                       backward: Callable[..., Any] | None = None,
                       cost: Callable[..., CustomOpCost] | None = None) -> None:
    """Register the implementation of custom op `name` of `domain`, version
    `domain_version` (what PopTorch loads from a PopART library, spec listing 4.23).

    `forward(*inputs, **attributes)`: NumPy arrays in, an array or a list of arrays out
    (of the `example_outputs`' shapes and dtypes). `backward(grad_outputs, inputs,
    outputs, **attributes)`: one gradient per input (None for none); without it the
    op cannot be trained. `cost(input_shapes, output_shapes, **attributes)`: a
    `poptorch.CustomOpCost(cycles, temporary_bytes)` for the machine model; without it
    the op is charged one pass over its data. Registering a key again replaces it.
    """
    where = model_code.running_user_line()
    _check_key(name, domain, domain_version, "register_custom_op", where)
    for label, fn, required in (("forward", forward, True), ("backward", backward, False),
                                ("cost", cost, False)):
        if (fn is not None or required) and not callable(fn):
            raise Error(f"register_custom_op: {label} must be a function, got {fn!r}",
                        type="api", location=where)
    CUSTOM_OPS[(name, domain, domain_version)] = CustomOpImpl(forward, backward, cost)


def _check_key(name: Any, domain: Any, version: Any, what: str, where: str) -> None:
    for label, value in (("name", name), ("domain", domain)):
        if not isinstance(value, str) or not value:
            raise Error(f"{what}: {label} must be a non-empty string, got {value!r}",
                        type="api", location=where)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise Error(f"{what}: domain_version must be an int >= 0, got {version!r}",
                    type="api", location=where)


def _attribute(key: str, value: Any, where: str) -> Any:
    """An attribute value as Table 4.1 takes it (a bool is an int, as in PopTorch), or an
    Error saying what is wrong."""
    if not isinstance(key, str):
        raise Error(f"custom_op: all attribute keys must be strings, got {key!r}",
                    type="api", location=where)
    if isinstance(value, torch.nn.Module | torch.fx.Graph) or callable(value):
        raise Error(f"custom_op: attribute '{key}' is a graph; PopTorch supports all "
                    "PopART attribute types except Graph (spec 4.9.3): pass floats, ints, "
                    "strings or lists of one of those", type="api", location=where)
    if isinstance(value, list | tuple):
        if not value:
            raise Error(f"custom_op: attribute '{key}' is an empty list, whose PopART type "
                        "(floats, ints or strings) cannot be told; leave it out or give "
                        "values", type="api", location=where)
        kinds = {_kind(v) for v in value}
        if len(kinds) != 1 or None in kinds:
            raise Error(f"custom_op: attribute '{key}' must be a list or tuple of only "
                        f"floats, only ints or only strings (not a mix), got {value!r}",
                        type="api", location=where)
        items = [_scalar(v) for v in value]
    elif _kind(value) is None:
        raise Error(f"custom_op: attribute '{key}' must be a float, an int, a str or a "
                    f"list or tuple of one of those (spec Table 4.1), got "
                    f"{type(value).__name__} {value!r}", type="api", location=where)
    else:
        items = [_scalar(value)]
    for text in [key, *items]:
        if isinstance(text, str) and not text.isascii():
            raise Error(f"custom_op: attribute '{key}': {text!r} contains non-ASCII "
                        "characters (PopART attributes are ASCII strings)", type="api",
                        location=where)
    return items if isinstance(value, list | tuple) else items[0]


def _kind(value: Any) -> type | None:
    if isinstance(value, bool | int):
        return int
    if isinstance(value, float | str):
        return type(value)
    return None


def _scalar(value: Any) -> Any:
    """As PopART holds it: a bool as an int, a float rounded to float32 (Table 4.1), so
    that the implementation sees the same value on the CPU and in the program."""
    if isinstance(value, bool):
        return int(value)
    return float(np.float32(value)) if isinstance(value, float) else value


def _tensors(values: Any, label: str, limit: int, where: str) -> list[torch.Tensor]:
    if isinstance(values, torch.Tensor) or not isinstance(values, Iterable):
        raise Error(f"custom_op: {label} must be a list or tuple of tensors, got "
                    f"{type(values).__name__}", type="api", location=where)
    values = list(values)
    if not 1 <= len(values) <= limit or not all(isinstance(v, torch.Tensor) for v in values):
        raise Error(f"custom_op: {label} must be 1 to {limit} tensors, got "
                    f"{[type(v).__name__ for v in values]}", type="api", location=where)
    return values


def custom_op(inputs: Iterable[torch.Tensor], name: str, domain: str, domain_version: int,
              example_outputs: Iterable[torch.Tensor],
              attributes: dict[str, Any] | None = None) -> list[torch.Tensor]:
    """Apply the custom op `name` of `domain`, version `domain_version` (registered with
    `poptorch.register_custom_op`) to `inputs` (spec 4.9). `example_outputs`: tensors of
    the outputs' shapes and dtypes (their values do not matter). `attributes`: a dict of
    str keys and float, int, str values or lists of one of those (Table 4.1). Returns
    the list of the op's outputs."""
    where = model_code.running_user_line()
    _check_key(name, domain, domain_version, "custom_op", where)
    inputs = _tensors(inputs, "inputs", MAX_INPUTS, where)
    outputs = _tensors(example_outputs, "example_outputs", MAX_OUTPUTS, where)
    if attributes is not None and not isinstance(attributes, dict):
        raise Error(f"custom_op: attributes must be a dict, got {type(attributes).__name__}",
                    type="api", location=where)
    attrs = {k: _attribute(k, v, where) for k, v in (attributes or {}).items()}
    impl = CUSTOM_OPS.get((name, domain, domain_version))
    if impl is None:
        error = _unregistered(name, domain, domain_version)
        raise Error(error.message, type=error.type, location=where)
    spec = json.dumps({"outputs": [[list(t.shape), _dtype_name(t.dtype)] for t in outputs],
                       "attributes": attrs, "inputs": len(inputs)})
    results = _FORWARD[len(outputs)](inputs, name, domain, domain_version, spec)
    return [results] if isinstance(results, torch.Tensor) else list(results)


def _unregistered(name: str, domain: str, version: int) -> Error:
    try:
        custom_op_impl(name, domain, version)
    except Error as err:
        return err
    raise AssertionError("registered")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _empty(shapes: list) -> list[torch.Tensor]:
    return [torch.empty(shape, dtype=getattr(torch, dtype)) for shape, dtype in shapes]


def _as_torch(values: Any, shapes: list, what: str) -> list[torch.Tensor]:
    """The NumPy results of an implementation run on the CPU, checked against `shapes`."""
    values = list(values) if isinstance(values, list | tuple) else [values]
    if len(values) != len(shapes):
        raise Error(f"{what} returned {len(values)} outputs, expected {len(shapes)}",
                    type="custom_op")
    results = []
    for index, (value, (shape, dtype)) in enumerate(zip(values, shapes, strict=True)):
        tensor = torch.as_tensor(np.asarray(value))
        if list(tensor.shape) != shape or _dtype_name(tensor.dtype) != dtype:
            raise Error(f"{what} returned output {index} of shape {list(tensor.shape)} and "
                        f"dtype {_dtype_name(tensor.dtype)}; expected shape {shape} and "
                        f"dtype {dtype}", type="custom_op")
        results.append(tensor.clone())
    return results


def _run_forward(inputs, name, domain, version, spec):
    """The registered forward on the CPU."""
    data = json.loads(spec)
    impl = custom_op_impl(name, domain, version)
    arrays = [t.detach().cpu().numpy() for t in inputs]
    return _as_torch(impl.forward(*arrays, **data["attributes"]), data["outputs"],
                     describe(name, domain, version))


def _run_backward(values, name, domain, version, spec):
    """The registered backward on the CPU: `values` are inputs, outputs, gradients."""
    data = json.loads(spec)
    impl = custom_op_impl(name, domain, version)
    n_in, n_out = data["inputs"], len(data["outputs"])
    arrays = [t.detach().cpu().numpy() for t in values]
    grads = impl.backward(arrays[n_in + n_out:], arrays[:n_in], arrays[n_in:n_in + n_out],
                          **data["attributes"])
    grads = list(grads) if isinstance(grads, list | tuple) else [grads]
    shapes = data["input_shapes"]
    grads = [np.zeros(shape, getattr(np, dtype)) if g is None else g
             for g, (shape, dtype) in zip(grads, shapes, strict=False)] + grads[len(shapes):]
    return _as_torch(grads, shapes, f"the gradient of {describe(name, domain, version)}")


def _setup(ctx, inputs, output):
    tensors, name, domain, version, spec = inputs
    ctx.key, ctx.spec, ctx.n_in = (name, domain, version), spec, len(tensors)
    outs = [output] if isinstance(output, torch.Tensor) else list(output)
    ctx.save_for_backward(*tensors, *outs)


def _backward(ctx, *grads):
    """The gradient op, or an Error when the op has no registered gradient."""
    name, domain, version = ctx.key
    impl = custom_op_impl(name, domain, version)
    if impl.backward is None:
        raise Error(f"{describe(name, domain, version)} has no gradient, so a training model "
                    "cannot use it: register one with poptorch.register_custom_op("
                    f"{name!r}, {domain!r}, {version}, forward=..., backward=<a NumPy "
                    "function of (grad_outputs, inputs, outputs, **attributes)>)",
                    type="custom_op", location=model_code.running_user_line())
    saved = list(ctx.saved_tensors)
    inputs, outs = saved[:ctx.n_in], saved[ctx.n_in:]
    grads = [torch.zeros_like(o) if g is None else g for g, o in zip(grads, outs, strict=True)]
    data = json.loads(ctx.spec)
    data["input_shapes"] = [[list(t.shape), _dtype_name(t.dtype)] for t in inputs]
    result = _BACKWARD[ctx.n_in]([*inputs, *outs, *grads], name, domain, version,
                                 json.dumps(data))
    result = [result] if isinstance(result, torch.Tensor) else list(result)
    return result, None, None, None, None


def _define(name: str, count: int, run) -> Any:
    """The torch.library op `poptorch::<name>` returning `count` tensors."""
    returns = "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
    qualified = f"poptorch::{name}"
    torch.library.define(qualified, "(Tensor[] inputs, str name, str domain, "
                         f"int domain_version, str spec) -> {returns}")

    def implementation(inputs, op_name, domain, version, spec):
        results = run(inputs, op_name, domain, version, spec)
        return results[0] if count == 1 else tuple(results)

    def fake(inputs, op_name, domain, version, spec):
        data = json.loads(spec)
        results = _empty(data["outputs"] if "input_shapes" not in data
                         else data["input_shapes"])
        return results[0] if count == 1 else tuple(results)

    torch.library.impl(qualified, "CompositeExplicitAutograd", func=implementation)
    torch.library.register_fake(qualified, fake)
    return getattr(torch.ops.poptorch, name).default


_FORWARD = {n: _define(f"custom_operation_{n}", n, _run_forward)
            for n in range(1, MAX_OUTPUTS + 1)}
_BACKWARD = {n: _define(f"custom_operation_grad_{n}", n, _run_backward)
             for n in range(1, MAX_INPUTS + 1)}
for _n in _FORWARD:
    torch.library.register_autograd(f"poptorch::custom_operation_{_n}", _backward,
                                    setup_context=_setup)
