"""The emitter of window groups: one op whose kernel reads windows of its input (a max
pooling, its gradient, a convolution's windows), chosen from `WINDOWS` by op class.

Each entry says how its op becomes a one-op group (`group`: None leaves it to its
NumPy kernel), writes the group's function (`function`), which inputs and outputs that
function has when they are not the op's own (`io`: a convolution's function gathers the
windows of its input alone), and what the program calls on top of the compiled function
(`call`: for a convolution, the BLAS products around it). The functions share the kernel
module, `FusedKernel`'s calling convention and the cache with the elementwise groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.convolution import ConvOp, ConvTransposeOp, MaxPoolOp, MaxPoolWithIndicesOp
from poptorch.dialects.convolution_backward import ConvWeightGradOp, MaxPoolGradOp
from poptorch.runtime.jit.codegen.fusion import convolution, pooling
from poptorch.runtime.jit.codegen.fusion.group import Group


@dataclass(frozen=True)
class Window:
    """How ops of one class run as window kernels (see the module's docstring)."""

    group: Callable[[ir.Operation], Group | None]
    function: Callable[[str, ir.Operation], str]
    io: Callable[[ir.Operation], tuple[list, list]] | None = None
    call: Callable[[Any, ir.Operation], Any] | None = None


_POOL = Window(pooling.pool_group, pooling.pool)
_CONVOLUTION = Window(convolution.convolution_group, convolution.im2col,
                      convolution.im2col_io, convolution.Convolution)

# op class -> how it runs as a window kernel
WINDOWS: dict[type, Window] = {
    MaxPoolOp: _POOL,
    MaxPoolWithIndicesOp: _POOL,
    MaxPoolGradOp: Window(pooling.pool_group, pooling.gradient),
    ConvOp: _CONVOLUTION,
    ConvWeightGradOp: _CONVOLUTION,
    ConvTransposeOp: Window(convolution.transposed_group, convolution.col2im,
                            convolution.col2im_io, convolution.TransposedConvolution),
}


def window_group(op: ir.Operation) -> Group | None:
    """The one-op group of a pooling op or convolution the kernel module computes, or
    None."""
    window = WINDOWS.get(op_class(op))
    return None if window is None else window.group(op)


def function(name: str, group: Group) -> str:
    """The kernel of a window group as a func.func (`FusedKernel`'s arguments)."""
    op = group.ops[0]
    return WINDOWS[op_class(op)].function(name, op)


def io(group: Group) -> tuple[list, list] | None:
    """The compiled function's (inputs, outputs) as `FusedKernel` takes them, when they
    are not the group's own."""
    op = group.ops[0]
    window = WINDOWS[op_class(op)]
    return None if window.io is None else window.io(op)


def call(kernel, group: Group):
    """What the program calls for the group: the compiled kernel, or what its entry
    builds on it."""
    op = group.ops[0]
    window = WINDOWS[op_class(op)]
    return kernel if window.call is None else window.call(kernel, op)
