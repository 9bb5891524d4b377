"""NumPy kernels of the convolution family's gradients (dialects/convolution_backward.py).

`ipu.conv_weight_grad` is the forward's im2col followed by one gemm per group with the
gradient, (C_out / G, N * pixels) @ (N * pixels, C / G * taps), over the whole batch.
The pooling gradients route or spread each output gradient back over its window: a
`bincount` scatter-add to the recorded argmax positions for max pooling, an add per
tap of the window for average pooling, and one small matrix per pooled dim for adaptive
average pooling (its bins are boxes, so the gradient separates by dim). float16
computes in float32 and rounds back.

Operands keep their leading (replica) axes: a weight gradient is per replica, never
summed over replicas here (the optimizer's all-reduce does that).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects.convolution_backward import (
    AdaptiveAvgPoolGradOp,
    AdaptiveMaxPoolWithIndicesOp,
    AvgPoolGradOp,
    ConvWeightGradOp,
    MaxPoolGradOp,
)
from poptorch.runtime.jit.kernels.common import attributes, leading
from poptorch.runtime.jit.kernels.convolution import (
    adaptive_bins,
    avg_divisors,
    flat_index,
    gemms,
    im2col,
    lowest,
    padded,
    pool_geometry,
    taps,
)
from poptorch.runtime.jit.kernels.registry import kernel


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _with_leading(arrays: tuple[np.ndarray, ...], rank: int) -> tuple[tuple[int, ...], list]:
    """The broadcast leading axes of `arrays` beyond `rank`, and the arrays broadcast to
    them and flattened to one leading axis."""
    lead = np.broadcast_shapes(*(leading(a, rank) for a in arrays))
    return lead, [np.broadcast_to(a, lead + a.shape[a.ndim - rank:]).reshape(
        (-1,) + a.shape[a.ndim - rank:]) for a in arrays]


def _weight_static(op: ir.OpView) -> dict[str, Any]:
    return {**attributes(op), "kernel_size": tuple(op.output.type.shape[2:])}


@kernel(ConvWeightGradOp, static=_weight_static)
def conv_weight_grad(x, grad, strides, padding_low, padding_high, dilations, groups,
                     kernel_size):
    """x (..., N, C, *S), grad (..., N, C_out, *O) -> (..., C_out, C / groups, *K)."""
    dtype = x.dtype
    lead, (x, grad) = _with_leading((_wide(x), _wide(grad)), len(strides) + 2)
    lx, n, c = x.shape[:3]
    c_out, outputs = grad.shape[2], grad.shape[3:]
    cols = im2col(padded(x, padding_low, padding_high), groups, kernel_size, strides,
                  dilations, outputs)
    g = np.moveaxis(grad.reshape((lx, n, groups, c_out // groups, -1)), 1, 3)
    g = g.reshape(lx, groups, c_out // groups, -1)
    w = gemms(g, np.swapaxes(cols, -1, -2))
    return w.reshape(lead + (c_out, c // groups) + tuple(kernel_size)).astype(dtype, copy=False)


def _pooled_size(op: ir.OpView) -> dict[str, Any]:
    """`size`: the pooled dims of the result (the forward's input)."""
    attrs = op.attributes
    count = len(attrs["kernel"] if "kernel" in attrs else attrs["output_size"])
    return {"size": tuple(op.output.type.shape[-count:])}


def _input_size(op: ir.OpView) -> dict[str, Any]:
    return {**attributes(op), **_pooled_size(op)}


@kernel(MaxPoolGradOp, static=_pooled_size)
def max_pool_grad(grad, indices, size):
    """Add each gradient at the flat position its index names (the window attributes
    only shaped the indices, so the scatter does not need them), in float32 for float16
    gradients. np.add.at rather than a float64 np.bincount: 3 against 9 ms for a 2x2 pool's
    1 M gradients (NumPy 2)."""
    lead, (grad, indices) = _with_leading((grad, indices), len(size))
    rows, area = grad.shape[0], math.prod(size)
    flat = indices.reshape(rows, -1) + np.arange(rows)[:, None] * area
    wide = _wide(grad)
    out = np.zeros(rows * area, dtype=wide.dtype)
    np.add.at(out, flat.ravel(), wide.reshape(-1))
    return out.astype(grad.dtype, copy=False).reshape(lead + tuple(size))


@kernel(AvgPoolGradOp, static=_input_size)
def avg_pool_grad(grad, kernel, strides, padding, ceil_mode, count_include_pad, divisor,
                  size):
    d = len(kernel)
    outputs = grad.shape[-d:]
    _, high = pool_geometry(size, kernel, strides, padding, (1,) * d, ceil_mode)
    acc = _wide(grad)
    scaled = (acc / avg_divisors(size, kernel, strides, padding, outputs, count_include_pad,
                                 divisor)).astype(acc.dtype, copy=False)
    full = tuple(p + n + h for p, n, h in zip(padding, size, high, strict=True))
    out = np.zeros(grad.shape[:-d] + full, dtype=acc.dtype)
    for _, window in taps(kernel, (1,) * d, strides, outputs):
        out[(Ellipsis, *window)] += scaled
    crop = tuple(slice(p, p + n) for p, n in zip(padding, size, strict=True))
    return out[(Ellipsis, *crop)].astype(grad.dtype)


def _bin_means(size: int, output: int, dtype: np.dtype) -> np.ndarray:
    """(output, size): row i averages bin i of an adaptive pooling."""
    index, inside = adaptive_bins(size, output)
    rows = np.broadcast_to(np.arange(output)[:, None], index.shape)
    weights = np.zeros((output, size), dtype=dtype)
    weights[rows[inside], index[inside]] = 1
    return weights / weights.sum(axis=1, keepdims=True)


@kernel(AdaptiveAvgPoolGradOp, static=_input_size)
def adaptive_avg_pool_grad(grad, output_size, size):
    acc = _wide(grad)
    for axis, output, n in zip(range(-len(size), 0), output_size, size, strict=True):
        if output != n:
            means = _bin_means(n, output, acc.dtype)
            acc = np.moveaxis(np.tensordot(acc, means, axes=([axis], [0])), -1, axis)
    return acc.astype(grad.dtype, copy=False)


@kernel(AdaptiveMaxPoolWithIndicesOp)
def adaptive_max_pool_with_indices(x, output_size):
    """PyTorch's order: start at the bin's first element, then take every later element
    of the bin (row-major) that is greater, or NaN. Bins narrower than the widest repeat
    their last element, which never changes the result."""
    d = len(output_size)
    spatial = x.shape[-d:]
    bins = [adaptive_bins(n, o)[0] for n, o in zip(spatial, output_size, strict=True)]
    gathered = x
    for i, index in enumerate(bins):  # (..., o1, w1, o2, w2, ...)
        gathered = np.take(gathered, index, axis=gathered.ndim - (d - i))
    outputs = x.shape[:-d] + tuple(output_size)
    y = np.full(outputs, lowest(x.dtype), dtype=x.dtype)
    indices = np.broadcast_to(flat_index(spatial, [b[:, 0] for b in bins]), outputs).copy()
    for tap in itertools.product(*(range(b.shape[1]) for b in bins)):
        value = gathered[(Ellipsis, *itertools.chain.from_iterable(
            (slice(None), t) for t in tap))]
        better = value > y
        if np.issubdtype(x.dtype, np.floating):
            better |= np.isnan(value)
        np.copyto(y, value, where=better)
        tap_index = flat_index(spatial, [b[:, t] for b, t in zip(bins, tap, strict=True)])
        np.copyto(indices, np.broadcast_to(tap_index, outputs), where=better)
    return y, indices
