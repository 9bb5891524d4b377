"""NumPy kernels of the dynamic slicing ops (`ipu.dynamic_slice`, `ipu.dynamic_update`).

The start is read as popops reads its offset (dialects/slicing.py): as an unsigned
32-bit integer, 0 when at or past the end of the dimension, and the slice wraps round
the end. Every operand may carry leading (replica, micro-batch) axes, and the start
may differ along them: each replica slices where its own start says.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects.slicing import DynamicSliceOp, DynamicUpdateOp
from poptorch.runtime.jit.kernels.common import attributes, leading
from poptorch.runtime.jit.kernels.registry import kernel


def _static(op: ir.OpView) -> dict[str, Any]:
    """The op's attributes plus the declared rank of each operand."""
    return {**attributes(op), "ranks": tuple(v.type.rank for v in op.operands)}


def positions(start: np.ndarray, start_rank: int, extent: int, size: int) -> np.ndarray:
    """The `size` positions along a dimension of `extent` each start selects: shape
    (start's leading axes..., size). Offsets are unsigned 32-bit (PopTorch casts the
    start to UINT32), 0 when >= extent, and wrap round the end (popops DynamicSlice2d)."""
    lead = leading(start, start_rank)
    offset = start.reshape(lead + (-1,))[..., 0].astype(np.int64) & 0xFFFFFFFF
    offset = np.where(offset >= extent, 0, offset)
    return (offset[..., None] + np.arange(size)) % extent


def _along(index: np.ndarray, common: tuple[int, ...], shape: tuple[int, ...],
           dim: int) -> np.ndarray:
    """Positions (lead..., size) as an index array of shape common + shape for
    take/put_along_axis on axis len(common) + dim."""
    lead = index.shape[:-1]
    pad = (1,) * (len(common) - len(lead))
    index = index.reshape(pad + lead + (1,) * dim + (index.shape[-1],)
                          + (1,) * (len(shape) - dim - 1))
    return np.broadcast_to(index, common + shape)


@kernel(DynamicSliceOp, static=_static, fresh=True)
def dynamic_slice(input, start, dim, size, ranks):
    rank = ranks[0]
    lead = leading(input, rank)
    core = input.shape[input.ndim - rank:]
    index = positions(start, ranks[1], core[dim], size)
    common = np.broadcast_shapes(lead, index.shape[:-1])
    out_core = core[:dim] + (size,) + core[dim + 1:]
    source = np.broadcast_to(input, common + core)
    return np.take_along_axis(source, _along(index, common, out_core, dim), len(common) + dim)


@kernel(DynamicUpdateOp, static=_static, fresh=True)
def dynamic_update(input, update, start, dim, ranks):
    rank = ranks[0]
    core = input.shape[input.ndim - rank:]
    up_core = update.shape[update.ndim - ranks[1]:]
    index = positions(start, ranks[2], core[dim], up_core[dim])
    common = np.broadcast_shapes(leading(input, rank), leading(update, ranks[1]),
                                 index.shape[:-1])
    out = np.array(np.broadcast_to(input, common + core))
    values = np.broadcast_to(update, common + up_core)
    np.put_along_axis(out, _along(index, common, up_core, dim), values, len(common) + dim)
    return out
