"""NumPy kernel of `ipu.serialized_matmul`: the product computed slice by slice, as
the IPU runs it (dialects/matmul_serialization.py), so that half-precision partial sums
over the reducing dimension round as they would there."""

from __future__ import annotations

from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects.matmul_serialization import SerializedMatMulOp
from poptorch.runtime.jit.kernels.common import align, attributes, broadcast_ranks
from poptorch.runtime.jit.kernels.linear import matmul
from poptorch.runtime.jit.kernels.registry import kernel


def _static(op: ir.OpView) -> dict[str, Any]:
    return {**attributes(op), **broadcast_ranks(op)}


@kernel(SerializedMatMulOp, static=_static, fresh=True)
def serialized_matmul(lhs, rhs, mode, factor, keep_precision, ranks=None, out_rank=None):
    lhs, rhs = align((lhs, rhs), ranks, out_rank)
    out_dtype = lhs.dtype
    if mode == "input_channels":
        return np.concatenate([matmul(a, rhs) for a in np.split(lhs, factor, axis=-2)], -2)
    if mode == "output_channels":
        return np.concatenate([matmul(lhs, b) for b in np.split(rhs, factor, axis=-1)], -1)
    if keep_precision:  # the slices' fp32 partials, summed in fp32
        lhs, rhs = lhs.astype(np.float32, copy=False), rhs.astype(np.float32, copy=False)
    total = None
    for a, b in zip(np.split(lhs, factor, axis=-1), np.split(rhs, factor, axis=-2),
                    strict=True):
        product = matmul(a, b)  # a slice's result, in the operands' type
        total = product if total is None else total + product
    return total.astype(out_dtype)
