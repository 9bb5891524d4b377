"""The one kernel registry: ipu op name -> NumPy kernel, filled by `@kernel` next to each.

Kernels take and return whole arrays. Every operand may carry extra *leading* axes
beyond the op's declared rank (replicas, stacked micro-batches): a kernel treats the
op's declared dimensions as the trailing ones and keeps the leading axes, broadcasting
them between operands. That is how R replicas run as one vectorised call.

`static(op)` turns the op's attributes (and, where a kernel needs them, its operand
ranks) into the keyword arguments the JIT passes as literals in the generated code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects.types import numpy_dtype


@dataclass(frozen=True)
class Kernel:
    """A NumPy implementation of one ipu op.

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


KERNELS: dict[str, Kernel] = {}


def attributes(op: ir.OpView) -> dict[str, Any]:
    """The op's inherent attributes as Python values (`ipu.*` annotations left out)."""
    attrs = op.attributes
    return {name: python_value(attrs[name]) for name in attrs if not name.startswith("ipu.")}


def python_value(attr: ir.Attribute) -> Any:
    """An MLIR attribute as the Python value a kernel takes."""
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr | ir.FloatAttr | ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return tuple(attr)
    if isinstance(attr, ir.DenseElementsAttr):
        return dense_array(attr)
    if isinstance(attr, ir.TypeAttr):
        return attr.value
    raise TypeError(f"attribute {attr} has no Python form for kernels")


def dense_array(attr: ir.DenseElementsAttr) -> np.ndarray:
    """The NumPy array of a dense elements attribute (splats expanded)."""
    t = attr.type
    dtype = numpy_dtype(t.element_type)
    if attr.is_splat:
        value = attr.get_splat_value()
        scalar = value.value if hasattr(value, "value") else value
        return np.full(t.shape, scalar, dtype=dtype)
    return np.array(attr).astype(dtype).reshape(t.shape)


def ranks(op: ir.OpView) -> dict[str, Any]:
    """`rank`: the declared rank of the first operand (for kernels that index dims)."""
    return {"rank": op.operands[0].type.rank}


def with_ranks(op: ir.OpView) -> dict[str, Any]:
    return {**attributes(op), **ranks(op)}


def broadcast_ranks(op: ir.OpView) -> dict[str, Any]:
    """For ops that broadcast operands of different ranks: their ranks and the result's.

    Empty when every operand already has the result's rank (nothing to align).
    """
    ranks = tuple(v.type.rank for v in op.operands)
    out_rank = op.results[0].type.rank
    if all(r == out_rank for r in ranks):
        return {}
    return {"ranks": ranks, "out_rank": out_rank}


def align(arrays: tuple[np.ndarray, ...], ranks: tuple[int, ...] | None,
          out_rank: int | None) -> tuple[np.ndarray, ...]:
    """Give every operand the result's declared rank, inserting size-1 dims *after* its
    leading (replica) axes, so that NumPy broadcasting lines up declared dimensions
    and never a replica axis with a declared one."""
    if ranks is None or all(a.ndim == r or r == out_rank
                            for a, r in zip(arrays, ranks, strict=True)):
        return arrays  # no leading axes to keep apart: NumPy's broadcasting lines them up
    return tuple(
        a.reshape(a.shape[: a.ndim - r] + (1,) * (out_rank - r) + a.shape[a.ndim - r:])
        if r < out_rank else a
        for a, r in zip(arrays, ranks, strict=True))


def kernel(*names: str, static: Callable[[ir.OpView], dict[str, Any]] = attributes,
           fresh: bool = False, takes_out: bool = False, view: bool = False,
           chains: bool = False):
    """Register the decorated function as the kernel of the ipu ops `names`."""

    def register(fn):
        for name in names:
            if name in KERNELS:
                raise ValueError(f"a kernel for {name} is registered twice")
            KERNELS[name] = Kernel(name, fn, static, fresh, takes_out, view, chains)
        return fn

    return register


# Arrays smaller than this are not reused: allocating them costs less than checking.
REUSE_BYTES = 1 << 16


def reusable(out: np.ndarray | None, dtype: np.dtype, *operands: np.ndarray) -> bool:
    """True when `out` can hold the result of an elementwise op on `operands`: big enough
    to matter, of the result's dtype and of the operands' broadcast shape."""
    if out is None or out.nbytes < REUSE_BYTES or out.dtype != dtype:
        return False
    shapes = [a.shape for a in operands]
    return all(shape == out.shape for shape in shapes) or \
        np.broadcast_shapes(*shapes) == out.shape


def leading(x: np.ndarray, rank: int) -> tuple[int, ...]:
    """The extra leading axes of `x` beyond its declared `rank`."""
    return x.shape[: x.ndim - rank]


def load_all() -> dict[str, Kernel]:
    """Import every kernel family and return the registry."""
    from poptorch.runtime.jit.kernels import (  # noqa: F401
        convolution,
        convolution_backward,
        creation,
        data_movement,
        elementwise,
        indexing,
        linear,
        optimizer,
        reduction,
        structure,
    )

    return KERNELS
