"""NumPy kernels of the data-movement family. Leading (replica) axes are kept."""

from __future__ import annotations

import itertools
import operator

import numpy as np
from torch_mlir.dialects import tensor

from poptorch.dialects.data_movement import BroadcastOp, ConcatOp, PermuteOp, ReshapeOp, SliceOp
from poptorch.runtime.jit.kernels.common import leading
from poptorch.runtime.jit.kernels.registry import helper, kernel


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


def _refinement(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape both `a` and `b` reach by splitting dims only (of (s, b, h*d) and
    (s, b*h, d): (s, b, h, d)), or None when there is none: the running products of
    both shapes, merged, must each divide the next."""
    if 0 in a or 0 in b:
        return None
    ends = sorted(set(itertools.accumulate(a, operator.mul))
                  | set(itertools.accumulate(b, operator.mul)))
    out, done = [], 1
    for end in ends:
        if end % done:
            return None
        out.append(end // done)
        done = end
    return tuple(out)


@helper("reshape_permute")
def reshape_permute(x, rank, shape, dims):
    """`permute(reshape(x, shape), dims)`, for a reshape that only this permute reads.
    When the reshape is a view, so is the result. When it must copy (merging dims that
    are not adjacent in memory), the copy is written in the permute's order, so that the
    result is C-contiguous: an attention's heads split from a sequence-first projection
    (`(s, b, h*d) -> (s, b*h, d) -> (b*h, s, d)`) then give each batched product a dense
    (s, d) matrix, where a C-order copy left rows 16 KB apart, which BLAS multiplied 3.7x
    slower (measured at batch 32: 334 against 90 us). A permute that moves the last dim
    is left to read a C-order copy: copying in its order would transpose the elements
    one by one (a weight gradient's (1024, 384) -> (384, 1024): 650 against 130 us), and a
    product takes the copy's transpose as it is."""
    lead = leading(x, rank)
    target = lead + shape
    try:
        return permute(x.reshape(target, copy=False), dims)
    except ValueError:  # the reshape copies
        pass
    fine = _refinement(x.shape, target)
    if fine is None or dims[-1] != len(dims) - 1:  # a copy moving the last dim transposes
        return permute(x.reshape(target), dims)  # (a product takes it transposed anyway)
    order = tuple(range(len(lead))) + tuple(len(lead) + d for d in dims)
    out = np.empty(tuple(target[d] for d in order), x.dtype)
    # out seen in the reshape's order, then split to the shape x splits to as well
    np.copyto(out.transpose(np.argsort(order)).reshape(fine), x.reshape(fine))
    return out


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
