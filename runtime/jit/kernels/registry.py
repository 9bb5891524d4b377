"""The one kernel table: ipu op class -> NumPy kernel, filled by `@kernel` next to each.

`KERNELS` is keyed by the dialect's op classes (`@kernel(ReluOp)`); the JIT looks an op
up with `kernel_of(op)` (through `poptorch.dialects.op_class`). Registering a class twice
is an error. `KERNEL_EXEMPT` names the ipu ops that deliberately have no kernel, each
with the reason; a test walks `Ipu.operations` and requires each op in exactly one of
the two. An op of another dialect that the program meets (`tensor.cast`) is keyed by its
own class too. `HELPERS` holds the functions the generated program calls that implement
no op (a gradient's sum over replicas), keyed by their name in the program.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.structure import HostLoadOp, HostStoreOp
from poptorch.runtime.jit.kernels.common import attributes


@dataclass(frozen=True)
class Kernel:
    """A NumPy implementation of one op (`name`: the op's name, or a helper's).

    `fresh`: the result is a new array that aliases no operand (nor a constant), so the
    program may reuse it once its last reader is done. `takes_out`: the kernel accepts
    `out=`, an operand's dead array of the result's type, and writes its result there
    when the shapes and dtypes match at run time (the JIT's buffer reuse). `view`: the
    result is the first operand's array seen differently (or a copy of it), so it owns
    that array when nothing else reads the operand. `chains`: a chain of these ops with
    the same static arguments, each link read only by the next, is one call of the
    kernel on all the links' operands in order (`ipu.concat` is binary in the IR, so
    torch.cat of n tensors would copy the growing result n - 1 times).
    """

    name: str
    fn: Callable[..., Any]
    static: Callable[[ir.OpView], dict[str, Any]]
    fresh: bool = False
    takes_out: bool = False
    view: bool = False
    chains: bool = False


KERNELS: dict[type, Kernel] = {}

# ipu ops that have no NumPy kernel on purpose: op class -> why
KERNEL_EXEMPT: dict[type, str] = {
    HostLoadOp: "a host-to-device stream: no module the JIT runs holds one; the executor "
                "passes the entry's arguments (the machine model's timeline charges them)",
    HostStoreOp: "a device-to-host stream: no module the JIT runs holds one; the executor "
                 "takes the entry's results (the machine model's timeline charges them)",
}

# functions the generated program calls that are no op's kernel: name -> kernel
HELPERS: dict[str, Kernel] = {}

# ops of other dialects with a kernel: op name -> class (`op_class` knows ipu ops only)
_OTHER_DIALECTS: dict[str, type] = {}


def kernel(*ops: type, static: Callable[[ir.OpView], dict[str, Any]] = attributes,
           fresh: bool = False, takes_out: bool = False, view: bool = False,
           chains: bool = False):
    """Register the decorated function as the kernel of the op classes `ops`."""

    def register(fn):
        for cls in ops:
            name = cls.OPERATION_NAME
            if cls in KERNELS:
                raise ValueError(f"a kernel for {name} is registered twice")
            if cls in KERNEL_EXEMPT:
                raise ValueError(f"{name} has a kernel and is exempt from having one")
            if op_class(name) is not cls:
                _OTHER_DIALECTS[name] = cls
            KERNELS[cls] = Kernel(name, fn, static, fresh, takes_out, view, chains)
        return fn

    return register


def helper(name: str):
    """Register the decorated function as the program's helper `name` (no op's kernel)."""

    def register(fn):
        if name in HELPERS:
            raise ValueError(f"a helper {name} is registered twice")
        HELPERS[name] = Kernel(name, fn, lambda op: {})
        return fn

    return register


def kernel_of(op: ir.Operation | ir.OpView | str) -> Kernel | None:
    """The kernel of an op (or op name), None when it has none."""
    cls = op_class(op)
    if cls is None:
        cls = _OTHER_DIALECTS.get(op if isinstance(op, str) else op.name)
    return KERNELS.get(cls)
