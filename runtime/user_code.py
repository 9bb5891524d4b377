"""User code the compiled programs call: custom op implementations and host callbacks.

PopTorch loads a custom op's PopART C++ library (spec 4.9, listing 4.23); here a user
registers the op's implementation under its (name, domain, version) from Python
(`poptorch.register_custom_op`, which fills `CUSTOM_OPS`): a NumPy forward, an optional
NumPy gradient and an optional cost. The JIT's `ipu.custom` kernel and the machine
model's cost rule look the implementation up here when they meet the op.

`poptorch.CPU(layer, ID)` registers `layer` under its ID in `HOST_CALLBACKS`; the JIT's
`ipu.host_call` kernel calls whatever is registered under the ID when the program runs.
Neither table is saved with an executable: a program loaded in a new process finds
the ops and callbacks that process has registered (and fails with an `Error` saying how
to register one it lacks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.errors import Error


@dataclass(frozen=True)
class CustomOpCost:
    """What a registered cost callable returns: the op's cycles on one IPU and the
    temporary bytes it needs while it runs (whole IPU)."""

    cycles: int
    temporary_bytes: int = 0


@dataclass(frozen=True)
class CustomOpImpl:
    """A registered custom op.

    `forward(*inputs, **attributes)` takes NumPy arrays (one per input) and the op's
    attributes as keyword arguments, and returns an array or a list of arrays (one per
    output). `backward(grad_outputs, inputs, outputs, **attributes)` returns one
    gradient per input (None: no gradient, zeros). `cost(input_shapes, output_shapes,
    **attributes)` returns a `CustomOpCost`; None: the default of the machine model's
    rule (`runtime.machine.cost_user`).
    """

    forward: Callable[..., Any]
    backward: Callable[..., Any] | None = None
    cost: Callable[..., CustomOpCost] | None = None


CUSTOM_OPS: dict[tuple[str, str, int], CustomOpImpl] = {}


def describe(name: str, domain: str, version: int) -> str:
    return f"custom op '{name}' (domain '{domain}', version {version})"


def custom_op_impl(name: str, domain: str, version: int) -> CustomOpImpl:
    """The implementation registered under (name, domain, version); an `Error` saying how
    to register one when there is none."""
    impl = CUSTOM_OPS.get((name, domain, version))
    if impl is None:
        raise Error(
            f"{describe(name, domain, version)} is not registered in this process: "
            f"register its implementation with poptorch.register_custom_op({name!r}, "
            f"{domain!r}, {version}, forward=<a NumPy function of the inputs and "
            "attributes>, backward=<optional, for training>) before calling the model "
            "(PopTorch loads the op's PopART library with ctypes instead)", type="custom_op")
    return impl


def attribute_value(attr: ir.Attribute) -> Any:
    """An `ipu.custom` attribute (spec Table 4.1) as the Python value its implementation
    and cost take: a float (float32 precision), an int, a str or a list of one of those."""
    if isinstance(attr, ir.FloatAttr):
        return float(np.float32(attr.value))
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return [attribute_value(a) for a in attr]
    raise TypeError(f"custom op attribute {attr} has no Python form")


def attribute_values(attrs: ir.Attribute) -> dict[str, Any]:
    """The `attrs` dictionary of an `ipu.custom` as keyword arguments."""
    return {a.name: attribute_value(a.attr) for a in ir.DictAttr(attrs)}


HOST_CALLBACKS: dict[str, Callable[..., Any]] = {}


def host_callback(callback_id: str) -> Callable[..., Any]:
    """The callable registered under `callback_id`; an `Error` saying how to register one
    when there is none (a saved executable loaded in a new process)."""
    fn = HOST_CALLBACKS.get(callback_id)
    if fn is None:
        raise Error(f"the program calls the host callback '{callback_id}', which is not "
                    f"registered in this process (a loaded executable holds no Python "
                    f"code): create poptorch.CPU(<the function>, {callback_id!r}) before "
                    "running it", type="host_call")
    return fn
