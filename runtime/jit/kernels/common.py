"""What the kernel families share: static arguments from an op's attributes and ranks,
operands' leading (replica) axes, and the check that a dead operand can take a result.

Kernels take and return whole arrays. Every operand may carry extra *leading* axes
beyond the op's declared rank (replicas, stacked micro-batches): a kernel treats the
op's declared dimensions as the trailing ones and keeps the leading axes, broadcasting
them between operands. That is how R replicas run as one vectorised call.

A kernel's `static(op)` turns the op's attributes (and, where the kernel needs them, its
operand ranks) into the keyword arguments the JIT passes as literals in the generated
code; `attributes` is the default.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects.types import numpy_dtype


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


def no_static(op: ir.OpView) -> dict[str, Any]:
    """No static arguments."""
    return {}


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
