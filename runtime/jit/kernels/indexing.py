"""NumPy kernels of the indexing family: gathers, scatters, sort, flip, diagonal, bags.

Every operand may carry leading (replica) axes of its own: `batched` folds them into
one batch axis (of the common size, or 1 where an operand has none, so a weight is not
copied per replica), the kernel works on that axis with np.take_along_axis and
unbuffered ufunc.at, and the result gets the common leading axes back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects.indexing import (
    DiagonalOp,
    EmbeddingBagOp,
    FlipOp,
    GatherOp,
    IndexOp,
    IndexPutOp,
    IndexSelectOp,
    ScatterOp,
    SliceUpdateOp,
    SortOp,
)
from poptorch.dialects.types import numpy_dtype
from poptorch.runtime.jit.kernels.common import attributes, leading
from poptorch.runtime.jit.kernels.registry import kernel


def _static(op: ir.OpView) -> dict[str, Any]:
    """The op's attributes plus the declared rank of each operand."""
    return {**attributes(op), "ranks": tuple(v.type.rank for v in op.operands)}


def batched(*arrays_and_ranks: tuple[np.ndarray, int]) -> tuple[tuple[int, ...], list]:
    """The common leading shape, and each array with its leading axes as one batch axis
    (of size 1 when it has none, to broadcast)."""
    leads = [leading(a, r) for a, r in arrays_and_ranks]
    common = np.broadcast_shapes(*leads)
    out = []
    for (a, _), lead in zip(arrays_and_ranks, leads, strict=True):
        if math.prod(lead) == 1:
            out.append(a.reshape((1,) + a.shape[len(lead):]))
            continue
        if lead != common:
            a = np.broadcast_to(a.reshape((1,) * (len(common) - len(lead)) + a.shape),
                                common + a.shape[len(lead):])
        out.append(a.reshape((-1,) + a.shape[len(common):]))
    return common, out


def _positions(index: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    """Index arrays addressing out[n, ..., index[n, p], ...] for every batch n, position p."""
    grid = np.ogrid[tuple(slice(s) for s in index.shape)]
    return tuple(index if d == dim + 1 else g for d, g in enumerate(grid))


@kernel(GatherOp, static=_static)
def gather(input, index, dim, ranks):
    common, (x, idx) = batched((input, ranks[0]), (index, ranks[1]))
    shape = idx.shape[1:]
    if x.ndim == 1:  # 0-d operands (torch gathers them along dim 0 as one element)
        x, idx = x.reshape(-1, 1), idx.reshape(-1, 1)
    box = tuple(slice(None) if d == dim else slice(s) for d, s in enumerate(idx.shape[1:]))
    out = np.take_along_axis(x[(slice(None), *box)], idx, axis=dim + 1)
    return out.reshape(common + shape)


@kernel(IndexSelectOp, static=_static)
def index_select(input, index, dim, ranks):
    if input.ndim == ranks[0] and (dim == 0 or index.ndim == ranks[1]):
        # one table (an embedding's, shared by the replicas): np.take puts the index's
        # leading axes first when it indexes dim 0 (10 tokens of a 50 x 16 table: 4 us
        # against take_along_axis's 25 us)
        return np.take(input, index, axis=dim)
    common, (x, idx) = batched((input, ranks[0]), (index, ranks[1]))
    shape = x.shape[1:]
    x = x.reshape(x.shape[0], math.prod(shape[:dim]), shape[dim], -1)
    out = np.take_along_axis(x, idx.reshape(idx.shape[0], 1, -1, 1), axis=2)
    return out.reshape(common + shape[:dim] + idx.shape[1:] + shape[dim + 1:])


def _linear(x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x as (batch, indexed positions, rest) and the stacked indices as (batch, count)
    positions into it, negative indices wrapped."""
    k = indices.shape[-1]
    sizes = np.array(x.shape[1:k + 1])
    wrapped = np.where(indices < 0, indices + sizes, indices)
    strides = np.cumprod(np.concatenate([[1], sizes[:0:-1]]))[::-1]
    flat = (wrapped * strides).sum(-1).reshape(indices.shape[0], -1)
    return x.reshape(x.shape[0], math.prod(x.shape[1:k + 1]), -1), flat


@kernel(IndexOp, static=_static)
def index(input, indices, ranks):
    common, (x, idx) = batched((input, ranks[0]), (indices, ranks[1]))
    table, flat = _linear(x, idx)
    out = np.take_along_axis(table, flat[:, :, None], axis=1)
    return out.reshape(common + idx.shape[1:-1] + x.shape[1 + idx.shape[-1]:])


@kernel(IndexPutOp, static=_static)
def index_put(input, indices, values, accumulate, ranks):
    common, (x, idx, v) = batched((input, ranks[0]), (indices, ranks[1]),
                                  (values, ranks[2]))
    table, flat = _linear(x, idx)
    n = math.prod(common)
    out = np.array(np.broadcast_to(table, (n,) + table.shape[1:]))
    indexed = idx.shape[1:-1] + x.shape[1 + idx.shape[-1]:]
    v = np.broadcast_to(v.reshape((v.shape[0],) + (1,) * (len(indexed) - v.ndim + 1)
                                  + v.shape[1:]), (n,) + indexed)
    position = (np.arange(n)[:, None], np.broadcast_to(flat, (n, flat.shape[1])))
    v = v.reshape(n, flat.shape[1], -1)
    if accumulate:
        np.add.at(out, position, v)
    else:
        out[position] = v
    return out.reshape(common + x.shape[1:])


def _identity(reduction: str, dtype: np.dtype) -> Any:
    """The value a reduction starts from when the input's own values are left out."""
    if reduction in ("sum", "mean"):
        return 0
    if reduction == "prod":
        return 1
    if np.issubdtype(dtype, np.floating):
        return -np.inf if reduction == "amax" else np.inf
    if dtype == np.bool_:
        return reduction == "amin"
    info = np.iinfo(dtype)
    return info.min if reduction == "amax" else info.max


_SCATTER_UFUNCS = {"sum": np.add, "mean": np.add, "prod": np.multiply,
                   "amax": np.maximum, "amin": np.minimum}


@kernel(ScatterOp, static=_static)
def scatter(input, index, src, dim, reduction, include_self, ranks):
    common, (x, idx, s) = batched((input, ranks[0]), (index, ranks[1]), (src, ranks[2]))
    n = math.prod(common)
    out = np.array(np.broadcast_to(x, (n,) + x.shape[1:]))
    idx = np.broadcast_to(idx, (n,) + idx.shape[1:])
    s = np.broadcast_to(s, idx.shape)
    position = _positions(idx, dim)
    if reduction == "none":
        out[position] = s
        return out.reshape(common + x.shape[1:])
    if not include_self:
        out[position] = _identity(reduction, out.dtype)
    _SCATTER_UFUNCS[reduction].at(out, position, s)
    if reduction == "mean":
        count = np.ones(out.shape, dtype=np.int64)
        if not include_self:
            count[position] = 0
        np.add.at(count, position, 1)
        if np.issubdtype(out.dtype, np.floating):
            out = (out / count).astype(out.dtype)
        else:
            out = out // count.astype(out.dtype)
    return out.reshape(common + x.shape[1:])


def _sort_static(op: ir.OpView) -> dict[str, Any]:
    return {**_static(op), "dtype": numpy_dtype(op.indices.type.element_type)}


@kernel(SortOp, static=_sort_static)
def sort(input, dim, descending, ranks, dtype):
    axis = dim - ranks[0]
    if descending:  # stable descending: sort the reversed input, reverse the order back
        order = np.flip(np.argsort(np.flip(input, axis), axis=axis, kind="stable"), axis)
        order = input.shape[axis] - 1 - order
    else:
        order = np.argsort(input, axis=axis, kind="stable")
    return np.take_along_axis(input, order, axis=axis), order.astype(dtype)


@kernel(FlipOp, static=_static)
def flip(input, dims, ranks):
    return np.flip(input, tuple(d - ranks[0] for d in dims)) if dims else input


@kernel(DiagonalOp, static=_static)
def diagonal(input, offset, dim1, dim2, ranks):
    return np.diagonal(input, offset, dim1 - ranks[0], dim2 - ranks[0])


@kernel(SliceUpdateOp, static=_static)
def slice_update(input, update, starts, ends, steps, ranks):
    common = np.broadcast_shapes(leading(input, ranks[0]), leading(update, ranks[1]))
    out = np.array(np.broadcast_to(input, common + input.shape[input.ndim - ranks[0]:]))
    out[(Ellipsis, *map(slice, starts, ends, steps))] = update
    return out


@kernel(EmbeddingBagOp, static=_static)
def embedding_bag(weight, indices, offsets, mode, include_last_offset, padding_idx, ranks):
    common, (w, idx, off) = batched((weight, 2), (indices, 1), (offsets, 1))
    n, count, width = math.prod(common), idx.shape[1], w.shape[2]
    bags = off.shape[1] - 1 if include_last_offset else off.shape[1]
    rows = np.broadcast_to(np.take_along_axis(w, idx[:, :, None], axis=1), (n, count, width))
    bag = (off[:, None, :] <= np.arange(count)[None, :, None]).sum(-1) - 1
    keep = (bag >= 0) & (bag < bags)
    if padding_idx >= 0:
        keep = keep & (idx != padding_idx)
    target = np.where(keep, np.arange(n)[:, None] * bags + bag, n * bags)
    target = np.broadcast_to(target, (n, count)).ravel()
    sizes = np.zeros(n * bags + 1, dtype=np.int64)
    np.add.at(sizes, target, 1)
    if mode == "max":
        out = np.full((n * bags + 1, width), _identity("amax", w.dtype), dtype=w.dtype)
        np.maximum.at(out, target, rows.reshape(-1, width))
        out[sizes == 0] = 0
    else:
        out = np.zeros((n * bags + 1, width), dtype=w.dtype)
        np.add.at(out, target, rows.reshape(-1, width))
        if mode == "mean":
            out = (out / np.maximum(sizes, 1)[:, None]).astype(w.dtype)
    return out[:-1].reshape(common + (bags, width))
