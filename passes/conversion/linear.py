"""torch -> ipu: matrix products (mm, bmm, matmul, addmm, baddbmm, linear)."""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.data_movement import PermuteOp
from poptorch.dialects.elementwise import BINARY_OPS
from poptorch.dialects.linear import MatMulOp
from poptorch.dialects.types import Unsupported

from .common import Builder, Patterns
from .elementwise import operand


def matmul(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.mm / bmm / matmul of operands of rank >= 2."""
    out = b.result_type()
    lhs = operand(b, op.operands[0], out.element_type)
    rhs = operand(b, op.operands[1], out.element_type)
    if lhs.type.rank < 2 or rhs.type.rank < 2:
        raise Unsupported("matmul of a vector (rank 1 operand)")
    return MatMulOp(lhs, rhs, out).result


def scaled_sum(b: Builder, product: ir.Value, bias: ir.Value, beta: ir.Value | None,
               alpha: ir.Value | None) -> ir.Value:
    """beta * bias + alpha * product (factors of 1 skipped)."""
    out = product.type
    for factor, which in ((alpha, "product"), (beta, "bias")):
        value = 1 if factor is None else b.scalar(factor)
        if value != 1:
            scaled = BINARY_OPS["mul"](product if which == "product" else bias,
                                       b.constant(value, out.element_type),
                                       out if which == "product" else bias.type).result
            product, bias = (scaled, bias) if which == "product" else (product, scaled)
    return BINARY_OPS["add"](product, bias, out).result


def addmm(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.addmm / baddbmm(bias, a, b, beta, alpha)."""
    out = b.result_type()
    bias = operand(b, op.operands[0], out.element_type)
    lhs = operand(b, op.operands[1], out.element_type)
    rhs = operand(b, op.operands[2], out.element_type)
    product = MatMulOp(lhs, rhs, out).result
    return scaled_sum(b, product, bias, op.operands[3], op.operands[4])


def linear(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.linear(x, weight, bias?): x @ weight.T + bias."""
    out = b.result_type()
    x = operand(b, op.operands[0], out.element_type)
    weight = operand(b, op.operands[1], out.element_type)
    if weight.type.rank != 2 or x.type.rank < 2:
        raise Unsupported("linear needs a 2-d weight and an input of rank >= 2")
    rows, cols = weight.type.shape
    transposed = PermuteOp(weight, ir.DenseI64ArrayAttr.get([1, 0]),
                           ir.RankedTensorType.get([cols, rows], out.element_type)).result
    product = MatMulOp(x, transposed, out).result
    if b.is_none(op.operands[2]):
        return product
    return scaled_sum(b, product, operand(b, op.operands[2], out.element_type), None, None)


def populate_linear(patterns: Patterns) -> None:
    for name in ("mm", "bmm", "matmul"):
        patterns.lower(f"torch.aten.{name}", matmul)
    patterns.lower("torch.aten.addmm", addmm)
    patterns.lower("torch.aten.baddbmm", addmm)
    patterns.lower("torch.aten.linear", linear)
