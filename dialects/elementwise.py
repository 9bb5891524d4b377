"""Elementwise ipu compute ops: unary maths and activations, binary arithmetic.

Unary ops keep their operand's type. Binary ops broadcast their operands NumPy-style
to the result shape and keep the element type. Each op is one class, generated from
the tables below so that a family shares one verifier (as PopLibs' popops does).
"""


from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .ipu import Ipu, VerifyError, binary_types, dims_compatible, shape_str, tensor_type, verified

# op name -> what it computes (the docstring of the generated class)
UNARY = {
    "neg": "-x",
    "abs": "|x|",
    "exp": "e ** x",
    "log": "natural logarithm",
    "sqrt": "square root",
    "rsqrt": "1 / sqrt(x)",
    "tanh": "hyperbolic tangent",
    "sigmoid": "1 / (1 + e ** -x)",
    "relu": "max(x, 0)",
    "gelu": "x * Phi(x), Phi the standard normal CDF",
}
BINARY = {
    "add": "lhs + rhs",
    "sub": "lhs - rhs",
    "mul": "lhs * rhs",
    "div": "lhs / rhs",
    "pow": "lhs ** rhs",
    "max": "elementwise maximum",
    "min": "elementwise minimum",
}


def _check_unary(op: "UnaryOp") -> None:
    """The result has the operand's type."""
    t = tensor_type(op.input, "operand")
    if op.output.type != t:
        raise VerifyError(f"result type {op.output.type} differs from operand type {t}")


def broadcast_shape(lhs: list[int], rhs: list[int]) -> list[int] | None:
    """NumPy broadcasting of two shapes (dynamic sizes allowed); None if incompatible."""
    dynamic = ir.ShapedType.is_dynamic_size
    out = []
    for i in range(1, max(len(lhs), len(rhs)) + 1):
        a = lhs[-i] if i <= len(lhs) else 1
        b = rhs[-i] if i <= len(rhs) else 1
        if a == 1 or dynamic(a) and b != 1:
            out.append(b)  # a static size other than 1 decides a dynamic one
        elif b == 1 or dynamic(b) or a == b:
            out.append(a)
        else:
            return None
    return out[::-1]


def _check_binary(op: "BinaryOp") -> None:
    """Operands share the element type and broadcast to the result shape."""
    lhs, rhs, out = binary_types(op)
    shape = broadcast_shape(lhs.shape, rhs.shape)
    if shape is None:
        raise VerifyError(
            f"operand shapes {shape_str(lhs.shape)} and {shape_str(rhs.shape)} "
            "do not broadcast"
        )
    if len(shape) != out.rank or not all(map(dims_compatible, shape, out.shape)):
        raise VerifyError(
            f"result shape {shape_str(out.shape)} is not the broadcast shape "
            f"{shape_str(shape)} of its operands"
        )


class UnaryOp(Ipu.Operation, traits=[Pure]):
    """Base of the unary elementwise ops: `%y = "ipu.exp"(%x) : (T) -> T`."""

    input: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_unary)


class BinaryOp(Ipu.Operation, traits=[Pure]):
    """Base of the binary elementwise ops: `%z = "ipu.add"(%x, %y) : (A, B) -> C`."""

    lhs: Operand[ir.RankedTensorType]
    rhs: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_binary)


def _define(base: type, name: str, doc: str) -> type:
    cls_name = "".join(p.capitalize() for p in name.split("_")) + "Op"
    return type(cls_name, (base,), {"__doc__": f"ipu.{name}: {doc}."}, name=name)


UNARY_OPS = {name: _define(UnaryOp, name, doc) for name, doc in UNARY.items()}
BINARY_OPS = {name: _define(BinaryOp, name, doc) for name, doc in BINARY.items()}
