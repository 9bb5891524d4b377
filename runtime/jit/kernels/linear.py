"""NumPy kernels of the linear-algebra family."""

from __future__ import annotations

import math

import numpy as np
from torch_mlir import ir

from poptorch.dialects.linear import MatMulOp
from poptorch.runtime.jit.kernels.common import align, broadcast_ranks
from poptorch.runtime.jit.kernels.registry import helper, kernel
from poptorch.runtime.jit.kernels.structure import replica_sum


def _shared_matrix(rhs: np.ndarray) -> np.ndarray | None:
    """The one matrix a batched right operand repeats (a weight broadcast over a batch or
    over replicas: stride 0 or size 1 on every batch axis), or None."""
    if rhs.ndim == 2:
        return rhs
    if rhs.ndim > 2 and all(stride == 0 or size == 1 for stride, size in
                            zip(rhs.strides[:-2], rhs.shape[:-2], strict=True)):
        return rhs[(0,) * (rhs.ndim - 2)]
    return None


def _rows_times(lhs: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Every row of `lhs` (all its dims but the last) times `matrix`, as one gemm, the
    result C-contiguous. Rows out of C order (a sequence-first view of a batch-first
    input) are copied first: multiplying them where they lie and permuting the result
    back saved the copy of the (narrower) operand but left the result out of C order,
    and every compiled kernel reading it copied it again (the bench LSTM at batch 256:
    each of its 16 steps copied the projection of all steps, 9 -> 26 ms a call)."""
    n, k = math.prod(lhs.shape[:-1]), lhs.shape[-1]  # (not -1: K may be 0)
    return (lhs.reshape(n, k) @ matrix).reshape(lhs.shape[:-1] + (matrix.shape[-1],))


def _product(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """np.matmul, as one gemm of all the left operand's rows when every batch entry
    multiplies the same matrix: one BLAS call instead of one per batch entry (replicas
    of a small micro-batch made NumPy loop over small gemms)."""
    matrix = _shared_matrix(rhs) if lhs.ndim > 2 else None
    if matrix is None or np.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2]) != lhs.shape[:-2]:
        return np.matmul(_blas_matrices(lhs), _blas_matrices(rhs))
    return _rows_times(lhs, matrix)


def _blas_matrices(x: np.ndarray) -> np.ndarray:
    """`x`, or a C-contiguous copy when its matrices (last two dims) have no unit stride:
    NumPy's matmul multiplies such matrices without BLAS, element by element (a batched
    operand whose head dims were permuted in memory, unmerged by `layouts`)."""
    if x.ndim < 2 or x.itemsize in (abs(x.strides[-1]), abs(x.strides[-2])) \
            or x.shape[-1] == 1 or x.shape[-2] == 1:
        return x
    return np.ascontiguousarray(x)


# Half partials (Precision.setPartialsType(torch.half)): the running sum over K is an
# f16 value, rounded after each AMP pass over HALF_PARTIALS_DEPTH products (summed in
# f32 within the pass). 16: the AMP's depth of half inputs per pass, an assumption (no
# public figure); 1 would be a plain f16 dot product.
HALF_PARTIALS_DEPTH = 16


def partials_static(op) -> dict:
    """{"half_partials": True} for an AMP op tagged `ipu.partials_type = f16`."""
    partials = op.attributes["ipu.partials_type"] if "ipu.partials_type" in op.attributes \
        else None
    if partials is not None and isinstance(ir.TypeAttr(partials).value, ir.F16Type):
        return {"half_partials": True}
    return {}


def _matmul_static(op) -> dict:
    """The ranks to align, and whether f16 partials accumulate the product."""
    return {**broadcast_ranks(op), **partials_static(op)}


def half_product(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """lhs @ rhs (f16) with the running sum over K kept in f16."""
    lhs, rhs = lhs.astype(np.float32), rhs.astype(np.float32)
    depth = HALF_PARTIALS_DEPTH
    total = _product(lhs[..., :depth], rhs[..., :depth, :]).astype(np.float16)
    for k in range(depth, lhs.shape[-1], depth):
        chunk = _product(lhs[..., k:k + depth], rhs[..., k:k + depth, :])
        total = (total.astype(np.float32) + chunk).astype(np.float16)
    return total


@kernel(MatMulOp, static=_matmul_static, fresh=True)
def matmul(lhs, rhs, ranks=None, out_rank=None, half_partials=False):
    lhs, rhs = align((lhs, rhs), ranks, out_rank)
    if lhs.dtype == np.float16 and half_partials:
        return half_product(lhs, rhs)
    if lhs.dtype == np.float16:  # accumulate in float32, as the IPU's AMP does
        return _product(lhs.astype(np.float32), rhs.astype(np.float32)).astype(np.float16)
    return _product(lhs, rhs)


@helper("matmul_replica_sum")
def matmul_replica_sum(lhs, rhs, reduction, rank, replicas, ranks=None, out_rank=None,
                       half_partials=False):
    """`replica_sum` of `matmul`: when both operands are matrices with a replica axis,
    sum_r lhs_r @ rhs_r is one gemm over all replicas' rows of the contracted dim
    (R small products written out and summed, as a weight gradient's matmul and its
    all-reduce were, cost several times more). Other operands: the matmul, then the sum."""
    lhs, rhs = align((lhs, rhs), ranks, out_rank)
    if rank == 2 and lhs.ndim == rhs.ndim == 3 and lhs.dtype == rhs.dtype == np.float32:
        if lhs.shape[0] != replicas or rhs.shape[0] != replicas:
            raise ValueError(f"operands of {lhs.shape[0]} and {rhs.shape[0]} replicas "
                             f"where {replicas} were compiled")
        total = np.tensordot(lhs, rhs, axes=([0, 2], [0, 1]))
        if reduction == "mean":
            total /= np.float32(replicas)
        return total
    return replica_sum(matmul(lhs, rhs, half_partials=half_partials), reduction, rank, replicas)
