"""Element types of the ipu dialect: torch's dtype spellings, builtin types, NumPy dtypes.

The conversion reads `!torch.vtensor` types with `builtin_type`; the JIT's kernels and the
API's executables map builtin element types to NumPy dtypes and back. `Unsupported` is
what a dtype without an IPU equivalent raises (a conversion reports it as the reason a
lowering declined the op).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from torch_mlir import ir


class Unsupported(Exception):
    """Raised for a type the IPU does not support, or by a lowering that cannot convert
    this instance of its op."""


# torch dtype spelling in !torch.vtensor -> builtin element type, numpy dtype
_DTYPES = {
    "f32": ("f32", np.float32),
    "f16": ("f16", np.float16),
    "bf16": ("bf16", None),
    "f64": ("f64", np.float64),
    "si64": ("i64", np.int64),
    "si32": ("i32", np.int32),
    "si16": ("i16", np.int16),
    "si8": ("i8", np.int8),
    "ui8": ("ui8", np.uint8),
    "i1": ("i1", np.bool_),
}
_VTENSOR = re.compile(r"!torch\.vtensor<\[([^\]]*)\],(\w+)>")


def builtin_type(torch_type: ir.Type) -> ir.RankedTensorType:
    """`!torch.vtensor<[2,?],f32>` as `tensor<2x?xf32>`."""
    match = _VTENSOR.fullmatch(str(torch_type))
    if not match:
        raise Unsupported(f"expected a tensor with known rank and dtype, got {torch_type}")
    dims, dtype = match.groups()
    if dtype not in _DTYPES:
        raise Unsupported(f"element type {dtype} is not supported on the IPU")
    shape = [ir.ShapedType.get_dynamic_size() if d == "?" else int(d)
             for d in dims.split(",") if d]
    return ir.RankedTensorType.get(shape, ir.Type.parse(_DTYPES[dtype][0]))


def numpy_dtype(element_type: ir.Type) -> np.dtype:
    """The NumPy dtype of a builtin element type."""
    name = str(element_type)
    for builtin, np_type in _DTYPES.values():
        if builtin == name and np_type is not None:
            return np.dtype(np_type)
    raise Unsupported(f"element type {name} has no NumPy equivalent")


def element_type_of(dtype: Any) -> ir.Type:
    """The builtin element type of a NumPy dtype."""
    dtype = np.dtype(dtype)
    for builtin, np_type in _DTYPES.values():
        if np_type is not None and np.dtype(np_type) == dtype:
            return ir.Type.parse(builtin)
    raise Unsupported(f"dtype {dtype} is not supported on the IPU")
