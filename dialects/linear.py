"""Linear-algebra ipu compute ops (matmul; convolutions join this family later)."""


from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .elementwise import broadcast_shape
from .ipu import Ipu, VerifyError, binary_types, dims_compatible, shape_str, verified


def matmul_shape(lhs: list[int], rhs: list[int]) -> list[int]:
    """torch.matmul's result shape for operands of rank >= 2, or a VerifyError."""
    if len(lhs) < 2 or len(rhs) < 2:
        raise VerifyError(
            f"operands must have rank >= 2, got {shape_str(lhs)} and {shape_str(rhs)}"
        )
    if not dims_compatible(lhs[-1], rhs[-2]):
        raise VerifyError(
            f"contracting dimensions differ: {shape_str(lhs)} and {shape_str(rhs)}"
        )
    batch = broadcast_shape(lhs[:-2], rhs[:-2])
    if batch is None:
        raise VerifyError(
            f"batch dimensions of {shape_str(lhs)} and {shape_str(rhs)} do not broadcast"
        )
    return [*batch, lhs[-2], rhs[-1]]


def _check_matmul(op: "MatMulOp") -> None:
    """Same element types; result shape as torch.matmul gives it."""
    lhs, rhs, out = binary_types(op)
    shape = matmul_shape(lhs.shape, rhs.shape)
    if len(shape) != out.rank or not all(map(dims_compatible, shape, out.shape)):
        raise VerifyError(
            f"result shape {shape_str(out.shape)} should be {shape_str(shape)}"
        )


class MatMulOp(Ipu.Operation, name="matmul", traits=[Pure]):
    """Batched matrix product with broadcast batch dimensions (poplin::matMulGrouped).

    `%c = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>`
    """

    lhs: Operand[ir.RankedTensorType]
    rhs: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_matmul)
