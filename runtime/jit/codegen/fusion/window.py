"""The emitter of window groups: one op whose kernel reads windows of its input (a max
pooling, its gradient, a convolution's windows or taps), chosen from `WINDOWS` by op
class.

Each entry says how its op becomes a one-op group (`group`: None leaves it to the next
entry of its class, and after the last to its NumPy kernel), writes the group's function
(`function`), which of its loops calls on several threads share (`split`), which
inputs and outputs that function has when they are not the op's own (`io`: a
convolution's function gathers the windows of its input alone), and what the
program calls on top of the compiled function (`call`: for a convolution, the BLAS
products around it). The functions share the kernel module, `FusedKernel`'s calling
convention and the cache with the elementwise groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.convolution import ConvOp, ConvTransposeOp, MaxPoolOp, MaxPoolWithIndicesOp
from poptorch.dialects.convolution_backward import ConvWeightGradOp, MaxPoolGradOp
from poptorch.runtime.jit.codegen.fusion import convolution, depthwise, pooling
from poptorch.runtime.jit.codegen.fusion.group import Group


@dataclass(frozen=True)
class Window:
    """How ops of one class run as window kernels (see the module's docstring)."""

    group: Callable[[ir.Operation], Group | None]
    function: Callable[[str, ir.Operation], str]
    split: Callable[[ir.Operation], tuple[int, int]]
    io: Callable[[ir.Operation], tuple[list, list]] | None = None
    call: Callable[[Any, ir.Operation], Any] | None = None


_POOL = Window(pooling.pool_group, pooling.pool, pooling.split)
_CONVOLUTION = Window(convolution.convolution_group, convolution.im2col,
                      convolution.im2col_split, convolution.im2col_io,
                      convolution.Convolution)
# grouped convolutions with few channels a group (depthwise ones): direct kernels
_DIRECT = Window(depthwise.direct_group, depthwise.function, depthwise.split,
                 depthwise.direct_io, depthwise.DirectConvolution)

# op class -> how its ops run as window kernels, the first entry whose `group` takes the op
WINDOWS: dict[type, tuple[Window, ...]] = {
    MaxPoolOp: (_POOL,),
    MaxPoolWithIndicesOp: (_POOL,),
    MaxPoolGradOp: (Window(pooling.pool_group, pooling.gradient, pooling.split),),
    ConvOp: (_DIRECT, _CONVOLUTION),
    ConvWeightGradOp: (_DIRECT, _CONVOLUTION),
    ConvTransposeOp: (_DIRECT, Window(convolution.transposed_group, convolution.col2im,
                                      convolution.col2im_split, convolution.col2im_io,
                                      convolution.TransposedConvolution)),
}


def _taking(op: ir.Operation) -> tuple[Window, Group] | None:
    """The first entry of the op's class that takes it, and its group (which records
    the entry)."""
    for window in WINDOWS.get(op_class(op), ()):
        group = window.group(op)
        if group is not None:
            group.window = window
            return window, group
    return None


def window_group(op: ir.Operation) -> Group | None:
    """The one-op group of a pooling op or convolution the kernel module computes, or
    None."""
    taken = _taking(op)
    return None if taken is None else taken[1]


def _window(group: Group) -> Window:
    """The group's entry: recorded when it was formed, or found once for a group the
    kernel cache's index gave."""
    if group.window is None:
        taken = _taking(group.ops[0])
        assert taken is not None, "a window group whose op no entry takes"
        group.window = taken[0]
    return group.window


def function(name: str, group: Group) -> str:
    """The kernel of a window group as a func.func (`FusedKernel`'s arguments)."""
    return _window(group).function(name, group.ops[0])


def io(group: Group) -> tuple[list, list] | None:
    """The compiled function's (inputs, outputs) as `FusedKernel` takes them, when they
    are not the group's own."""
    window = _window(group)
    return None if window.io is None else window.io(group.ops[0])


def split(group: Group) -> tuple[int, int]:
    """The function's outer parallel loop, of this many iterations a replica, and how
    many of its last outputs are scratch (`FusedKernel`'s split)."""
    return _window(group).split(group.ops[0])


def call(kernel, group: Group):
    """What the program calls for the group: the compiled kernel, or what its entry
    builds on it."""
    window = _window(group)
    return kernel if window.call is None else window.call(kernel, group.ops[0])
