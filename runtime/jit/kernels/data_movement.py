"""NumPy kernels of the data-movement family. Leading (replica) axes are kept."""

from __future__ import annotations

import numpy as np
from torch_mlir.dialects import tensor

from poptorch.dialects.data_movement import BroadcastOp, ConcatOp, PermuteOp, ReshapeOp, SliceOp
from poptorch.runtime.jit.kernels.common import leading
from poptorch.runtime.jit.kernels.registry import kernel


def _shape_static(op):
    return {"rank": op.input.type.rank, "shape": tuple(op.output.type.shape)}


@kernel(ReshapeOp, static=_shape_static, view=True)
def reshape(x, rank, shape):
    return x.reshape(leading(x, rank) + shape)


@kernel(BroadcastOp, static=_shape_static)
def broadcast(x, rank, shape):
    lead = leading(x, rank)
    x = x.reshape(lead + (1,) * (len(shape) - rank) + x.shape[len(lead):])
    return np.broadcast_to(x, lead + shape)


def _permute_static(op):
    return {"dims": tuple(op.attributes["dims"])}


@kernel(PermuteOp, static=_permute_static, view=True)
def permute(x, dims):
    lead = x.ndim - len(dims)
    return np.transpose(x, tuple(range(lead)) + tuple(lead + d for d in dims))


def _slice_static(op):
    return {"index": tuple(slice(s, e, st) for s, e, st in zip(
        op.attributes["starts"], op.attributes["ends"], op.attributes["steps"], strict=True))}


@kernel(SliceOp, static=_slice_static, view=True)
def slice_(x, index):
    return x[(Ellipsis, *index)]


def align_leading(*arrays_and_ranks):
    """Broadcast the leading (replica) axes of several operands to one shape."""
    arrays = [a for a, _ in arrays_and_ranks]
    leads = [leading(a, r) for a, r in arrays_and_ranks]
    if all(lead == leads[0] for lead in leads):
        return arrays  # already one shape (the usual case: 41 -> 5 us for a concat)
    common = np.broadcast_shapes(*leads)
    return [np.broadcast_to(a.reshape((1,) * (len(common) - len(lead)) + a.shape),
                            common + a.shape[len(lead):])
            for a, lead in zip(arrays, leads, strict=True)]


def _concat_static(op):
    rank = op.lhs.type.rank
    return {"axis": op.attributes["dim"].value - rank, "rank": rank}


@kernel(ConcatOp, static=_concat_static, fresh=True, chains=True)
def concat(*parts, axis, rank):
    """The operands of one concat, or of a chain of them (the JIT's `chains`), joined."""
    return np.concatenate(align_leading(*((part, rank) for part in parts)), axis=axis)


@kernel(tensor.CastOp)
def tensor_cast(x):
    """A static shape cast to the dynamic type torch declared: the same array."""
    return x
