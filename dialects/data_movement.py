"""ipu ops that move data without arithmetic: reshape, permute, broadcast, slice, concat.

Shapes are static at this level (the IPU compiles for fixed shapes), so each op checks
that its result type is exactly what its attributes imply.
"""

import math

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .elementwise import broadcast_shape
from .ipu import (
    DenseI64Array,
    Ipu,
    VerifyError,
    i64_array,
    int_attr,
    shape_str,
    tensor_type,
    verified,
)


def _same_element_type(t_in: ir.RankedTensorType, out: ir.RankedTensorType) -> None:
    if t_in.element_type != out.element_type:
        raise VerifyError(f"element type changes from {t_in.element_type} to {out.element_type}")


def _check_reshape(op: "ReshapeOp") -> None:
    """Same element type and element count."""
    t_in, out = tensor_type(op.input, "operand"), tensor_type(op.output, "result")
    _same_element_type(t_in, out)
    if not (t_in.has_static_shape and out.has_static_shape):
        raise VerifyError("reshape needs static shapes")
    if math.prod(t_in.shape) != math.prod(out.shape):
        raise VerifyError(f"cannot reshape {shape_str(t_in.shape)} "
                          f"({math.prod(t_in.shape)} elements) to {shape_str(out.shape)}")


class ReshapeOp(Ipu.Operation, name="reshape", traits=[Pure]):
    """Same elements in row-major order, new shape (view, flatten, squeeze, unsqueeze).

    `%r = "ipu.reshape"(%x) : (tensor<2x3xf32>) -> tensor<6xf32>`
    """

    input: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_reshape)


def _check_permute(op: "PermuteOp") -> None:
    """`dims` is a permutation and the result shape follows it."""
    t_in, out = tensor_type(op.input, "operand"), tensor_type(op.output, "result")
    _same_element_type(t_in, out)
    dims = i64_array(op, "dims")
    if sorted(dims) != list(range(t_in.rank)):
        raise VerifyError(f"dims {dims} are not a permutation of 0..{t_in.rank - 1}")
    expected = [t_in.shape[d] for d in dims]
    if list(out.shape) != expected:
        raise VerifyError(f"result shape {shape_str(out.shape)} should be {shape_str(expected)}")


class PermuteOp(Ipu.Operation, name="permute", traits=[Pure]):
    """Reorder dimensions: result dim i is operand dim `dims[i]` (transpose, permute).

    `%t = "ipu.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>`
    """

    input: Operand[ir.RankedTensorType]
    dims: DenseI64Array
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_permute)


def _check_broadcast(op: "BroadcastOp") -> None:
    """The operand broadcasts NumPy-style to the result shape."""
    t_in, out = tensor_type(op.input, "operand"), tensor_type(op.output, "result")
    _same_element_type(t_in, out)
    if t_in.rank > out.rank or broadcast_shape(t_in.shape, out.shape) != list(out.shape):
        raise VerifyError(f"cannot broadcast {shape_str(t_in.shape)} to {shape_str(out.shape)}")


class BroadcastOp(Ipu.Operation, name="broadcast", traits=[Pure]):
    """Repeat size-1 (and missing leading) dimensions up to the result shape (expand).

    `%b = "ipu.broadcast"(%x) : (tensor<1x3xf32>) -> tensor<4x3xf32>`
    """

    input: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_broadcast)


def _check_slice(op: "SliceOp") -> None:
    """start/end/step per dim, 0 <= start <= end <= size, step >= 1, result shape matches."""
    t_in, out = tensor_type(op.input, "operand"), tensor_type(op.output, "result")
    _same_element_type(t_in, out)
    starts, ends, steps = (i64_array(op, n) for n in ("starts", "ends", "steps"))
    if not len(starts) == len(ends) == len(steps) == t_in.rank:
        raise VerifyError(f"starts, ends and steps need {t_in.rank} entries each")
    expected = []
    for dim, (start, end, step, size) in enumerate(zip(starts, ends, steps, t_in.shape,
                                                       strict=True)):
        if step < 1 or not 0 <= start <= end <= size:
            raise VerifyError(f"dim {dim}: slice {start}:{end}:{step} is not within 0:{size} "
                              "with a positive step")
        expected.append(max(0, -(-(end - start) // step)))
    if list(out.shape) != expected:
        raise VerifyError(f"result shape {shape_str(out.shape)} should be {shape_str(expected)}")


class SliceOp(Ipu.Operation, name="slice", traits=[Pure]):
    """A strided box of the operand: `input[starts[i]:ends[i]:steps[i]]` in every dim.

    `%s = "ipu.slice"(%x) {starts = array<i64: 0, 1>, ends = array<i64: 2, 3>,
        steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x2xf32>`
    """

    input: Operand[ir.RankedTensorType]
    starts: DenseI64Array
    ends: DenseI64Array
    steps: DenseI64Array
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_slice)


def _check_concat(op: "ConcatOp") -> None:
    """Operands agree except along `dim`, where the result is their sum."""
    lhs, rhs = tensor_type(op.lhs, "lhs"), tensor_type(op.rhs, "rhs")
    out = tensor_type(op.output, "result")
    if not lhs.element_type == rhs.element_type == out.element_type:
        raise VerifyError("operands and result must share the element type")
    dim = int_attr(op, "dim")
    if not (lhs.rank == rhs.rank == out.rank) or dim >= lhs.rank:
        raise VerifyError(f"operands and result must have one rank above dim {dim}")
    expected = list(lhs.shape)
    expected[dim] += rhs.shape[dim]
    others_equal = all(a == b for i, (a, b) in enumerate(zip(lhs.shape, rhs.shape, strict=True))
                       if i != dim)
    if not others_equal or list(out.shape) != expected:
        raise VerifyError(f"cannot concatenate {shape_str(lhs.shape)} and {shape_str(rhs.shape)} "
                          f"along dim {dim} into {shape_str(out.shape)}")


class ConcatOp(Ipu.Operation, name="concat", traits=[Pure]):
    """Join two tensors along `dim` (torch.cat of n tensors is a chain of n-1 concats:
    IRDL cannot type a list of tensors of different shapes, see dialects/ipu.py).

    `%c = "ipu.concat"(%a, %b) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<1x3xf32>)
        -> tensor<3x3xf32>`
    """

    lhs: Operand[ir.RankedTensorType]
    rhs: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_concat)
