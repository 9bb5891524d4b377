"""NumPy kernels of the reduction family: ipu.reduce, ipu.arg_max/arg_min, ipu.cumsum/cumprod.

Declared dimensions become negative axes (from the op's declared rank), so extra leading
replica axes pass through untouched. float16 sums, means, products and scans accumulate
in float32 and round back once, as the IPU's reductions (and PyTorch on the CPU) do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects.reduction import ArgMaxOp, ArgMinOp, CumprodOp, CumsumOp, ReduceOp
from poptorch.dialects.types import numpy_dtype
from poptorch.runtime.jit.kernels.registry import kernel


def _accumulator(x: np.ndarray) -> np.dtype:
    return np.dtype(np.float32) if x.dtype == np.float16 else x.dtype


def _square_sum(x, axis, keepdims, dtype):
    return np.sum(np.square(x, dtype=dtype), axis=axis, keepdims=keepdims, dtype=dtype)


# kind -> (fold, whether it accumulates in a wider type for float16)
_FOLDS: dict[str, tuple[Callable[..., Any], bool]] = {
    "sum": (np.sum, True),
    "mean": (np.mean, True),
    "prod": (np.prod, True),
    "square_sum": (_square_sum, True),
    "max": (np.max, False),
    "min": (np.min, False),
    "any": (np.any, False),
    "all": (np.all, False),
}


def _reduce_static(op: ir.OpView) -> dict[str, Any]:
    rank = op.input.type.rank
    static = {"kind": op.attributes["kind"].value,
              "axes": tuple(d - rank for d in op.attributes["dims"]),
              "keepdim": op.attributes["keepdim"].value}
    if op.output.type.element_type != op.input.type.element_type:  # a widening sum
        static["dtype"] = numpy_dtype(op.output.type.element_type)
    return static


def _identity(kind: str, dtype: np.dtype) -> Any:
    """What max / min over no elements give: NumPy refuses, the decompositions of
    softmax and logsumexp over an empty dimension need a value (torch's own: -inf)."""
    if np.issubdtype(dtype, np.floating):
        return -np.inf if kind == "max" else np.inf
    if dtype == np.bool_:
        return kind != "max"
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


# every byte of a uint64 holding eight True bools (NumPy's bools are the bytes 0 and 1)
_TRUES = np.uint64(0x0101010101010101)


def _rows_all_any(x: np.ndarray, kind: str, keepdim: bool) -> np.ndarray | None:
    """`all` or `any` of bool rows of 8 to 128 elements (a multiple of 8), eight at a time:
    the rows' uint64 words combined column by column, a few passes along all rows. NumPy
    folds each short row on its own: attention's check for rows of -inf scores,
    `all(x == -inf, -1)` over (32, 4, 32, 32), took 73 us with np.all and 21 us so.
    None for other operands."""
    n = x.shape[-1] if x.ndim else 0
    if x.dtype != np.bool_ or n % 8 or not 8 <= n <= 128:
        return None
    try:
        words = x.reshape(-1, n, copy=False).view(np.uint64)
    except ValueError:  # rows not contiguous
        return None
    combine = np.bitwise_and if kind == "all" else np.bitwise_or
    folded = words[:, 0].copy()
    for column in range(1, words.shape[1]):
        combine(folded, words[:, column], out=folded)
    out = folded == _TRUES if kind == "all" else folded != 0
    return out.reshape(x.shape[:-1] + ((1,) if keepdim else ()))


@kernel(ReduceOp, static=_reduce_static)
def reduce(x: np.ndarray, kind: str, axes: tuple[int, ...], keepdim: bool,
           dtype: np.dtype | None = None) -> np.ndarray:
    """Folds `axes`; the result in the op's result type (float32 from float16 operands
    for a widening sum, mean or sum of squares)."""
    fold, accumulates = _FOLDS[kind]
    rows = _rows_all_any(x, kind, keepdim) if kind in ("all", "any") and axes == (-1,) \
        else None
    if rows is not None:
        return rows
    if accumulates:
        out = fold(x, axis=axes, keepdims=keepdim, dtype=_accumulator(x))
    elif kind in ("max", "min") and x.size == 0:
        out = fold(x, axis=axes, keepdims=keepdim, initial=_identity(kind, x.dtype))
    else:
        out = fold(x, axis=axes, keepdims=keepdim)
    return np.asarray(out).astype(dtype or x.dtype, copy=False)


def _arg_static(op: ir.OpView) -> dict[str, Any]:
    return {"axis": op.attributes["dim"].value - op.input.type.rank,
            "keepdim": op.attributes["keepdim"].value,
            "dtype": numpy_dtype(op.output.type.element_type)}


@kernel(ArgMaxOp, static=_arg_static)
def arg_max(x: np.ndarray, axis: int, keepdim: bool, dtype: np.dtype) -> np.ndarray:
    """The first index of the maximum (of the first NaN, if any), as torch.argmax."""
    return np.asarray(np.argmax(x, axis=axis, keepdims=keepdim)).astype(dtype)


@kernel(ArgMinOp, static=_arg_static)
def arg_min(x: np.ndarray, axis: int, keepdim: bool, dtype: np.dtype) -> np.ndarray:
    """The first index of the minimum (of the first NaN, if any), as torch.argmin."""
    return np.asarray(np.argmin(x, axis=axis, keepdims=keepdim)).astype(dtype)


def _scan_static(op: ir.OpView) -> dict[str, Any]:
    return {"axis": op.attributes["dim"].value - op.input.type.rank}


@kernel(CumsumOp, static=_scan_static)
def cumsum(x: np.ndarray, axis: int) -> np.ndarray:
    return np.cumsum(x, axis=axis, dtype=_accumulator(x)).astype(x.dtype, copy=False)


@kernel(CumprodOp, static=_scan_static)
def cumprod(x: np.ndarray, axis: int) -> np.ndarray:
    return np.cumprod(x, axis=axis, dtype=_accumulator(x)).astype(x.dtype, copy=False)
