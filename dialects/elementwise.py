"""Elementwise ipu compute ops (PopLibs popops): maths, activations, arithmetic, comparisons.

Unary ops keep their operand's type. Binary ops broadcast their operands NumPy-style to
the result shape and keep the element type; comparisons give `i1`. `ipu.select` picks
between two tensors by a boolean one, `ipu.cast` changes the element type. Each op is one
class, generated from the tables below so that a family shares one verifier.
"""

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .ipu import Ipu, VerifyError, binary_types, dims_compatible, shape_str, tensor_type, verified

# op name -> what it computes (the docstring of the generated class)
UNARY = {
    "neg": "-x",
    "abs": "|x|",
    "exp": "e ** x",
    "exp2": "2 ** x",
    "expm1": "e ** x - 1",
    "log": "natural logarithm",
    "log2": "base-2 logarithm",
    "log10": "base-10 logarithm",
    "log1p": "log(1 + x)",
    "sqrt": "square root",
    "rsqrt": "1 / sqrt(x)",
    "reciprocal": "1 / x",
    "square": "x * x",
    "sin": "sine",
    "cos": "cosine",
    "tan": "tangent",
    "asin": "arc sine",
    "acos": "arc cosine",
    "atan": "arc tangent",
    "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine",
    "tanh": "hyperbolic tangent",
    "asinh": "inverse hyperbolic sine",
    "acosh": "inverse hyperbolic cosine",
    "atanh": "inverse hyperbolic tangent",
    "erf": "error function",
    "erfc": "complementary error function",
    "sigmoid": "1 / (1 + e ** -x)",
    "relu": "max(x, 0)",
    "gelu": "x * Phi(x), Phi the standard normal CDF",
    "gelu_tanh": "GELU with the tanh approximation",
    "floor": "round towards -inf",
    "ceil": "round towards +inf",
    "round": "round half to even",
    "trunc": "round towards 0",
    "sign": "-1, 0 or 1",
    "logical_not": "boolean not",
    "bitwise_not": "bitwise not",
}
BINARY = {
    "add": "lhs + rhs",
    "sub": "lhs - rhs",
    "mul": "lhs * rhs",
    "div": "lhs / rhs (true division for floats, truncating for integers)",
    "floor_div": "floor(lhs / rhs)",
    "remainder": "lhs - floor(lhs / rhs) * rhs (sign of rhs)",
    "fmod": "lhs - trunc(lhs / rhs) * rhs (sign of lhs)",
    "pow": "lhs ** rhs",
    "atan2": "arc tangent of lhs / rhs in the right quadrant",
    "gelu_grad": "lhs * gelu'(rhs): the gradient lhs through gelu at rhs (popnn's "
                 "NonLinearityGrad, GELU_ERF)",
    "gelu_tanh_grad": "lhs * gelu_tanh'(rhs): the gradient through the tanh approximation",
    "max": "elementwise maximum",
    "min": "elementwise minimum",
    "logical_and": "boolean and",
    "logical_or": "boolean or",
    "logical_xor": "boolean xor",
    "bitwise_and": "bitwise and",
    "bitwise_or": "bitwise or",
    "bitwise_xor": "bitwise xor",
    "shift_left": "lhs << rhs",
    "shift_right": "lhs >> rhs (arithmetic)",
}
COMPARE = {
    "eq": "lhs == rhs",
    "ne": "lhs != rhs",
    "lt": "lhs < rhs",
    "le": "lhs <= rhs",
    "gt": "lhs > rhs",
    "ge": "lhs >= rhs",
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


def check_broadcast_result(out: ir.RankedTensorType, *shapes: list[int]) -> None:
    """The result shape is the broadcast of `shapes`."""
    shape = shapes[0]
    for other in shapes[1:]:
        joined = broadcast_shape(shape, other)
        if joined is None:
            raise VerifyError(
                f"operand shapes {' and '.join(shape_str(s) for s in shapes)} do not broadcast"
            )
        shape = joined
    if len(shape) != out.rank or not all(map(dims_compatible, shape, out.shape)):
        raise VerifyError(
            f"result shape {shape_str(out.shape)} is not the broadcast shape "
            f"{shape_str(shape)} of its operands"
        )


def _check_binary(op: "BinaryOp") -> None:
    """Operands share the element type and broadcast to the result shape."""
    lhs, rhs, out = binary_types(op)
    check_broadcast_result(out, lhs.shape, rhs.shape)


def _check_compare(op: "CompareOp") -> None:
    """Operands share an element type, broadcast to the result shape, and the result is i1."""
    lhs, rhs = tensor_type(op.lhs, "lhs"), tensor_type(op.rhs, "rhs")
    out = tensor_type(op.output, "result")
    if lhs.element_type != rhs.element_type:
        raise VerifyError(f"element types differ: lhs {lhs.element_type}, rhs {rhs.element_type}")
    if str(out.element_type) != "i1":
        raise VerifyError(f"result element type must be i1, got {out.element_type}")
    check_broadcast_result(out, lhs.shape, rhs.shape)


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


class CompareOp(Ipu.Operation, traits=[Pure]):
    """Base of the comparisons: `%b = "ipu.lt"(%x, %y) : (A, B) -> tensor<...xi1>`."""

    lhs: Operand[ir.RankedTensorType]
    rhs: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_compare)


def _define(base: type, name: str, doc: str) -> type:
    cls_name = "".join(p.capitalize() for p in name.split("_")) + "Op"
    return type(cls_name, (base,), {"__doc__": f"ipu.{name}: {doc}."}, name=name)


UNARY_OPS = {name: _define(UnaryOp, name, doc) for name, doc in UNARY.items()}
BINARY_OPS = {name: _define(BinaryOp, name, doc) for name, doc in BINARY.items()}
COMPARE_OPS = {name: _define(CompareOp, name, doc) for name, doc in COMPARE.items()}


def _check_select(op: "SelectOp") -> None:
    """An i1 condition picks between two tensors of one element type; all broadcast."""
    cond = tensor_type(op.condition, "condition")
    lhs, rhs = tensor_type(op.lhs, "lhs"), tensor_type(op.rhs, "rhs")
    out = tensor_type(op.output, "result")
    if str(cond.element_type) != "i1":
        raise VerifyError(f"condition element type must be i1, got {cond.element_type}")
    if not (lhs.element_type == rhs.element_type == out.element_type):
        raise VerifyError(
            f"element types differ: lhs {lhs.element_type}, rhs {rhs.element_type}, "
            f"result {out.element_type}"
        )
    check_broadcast_result(out, cond.shape, lhs.shape, rhs.shape)


class SelectOp(Ipu.Operation, name="select", traits=[Pure]):
    """`condition ? lhs : rhs`, elementwise with broadcasting (popops::select).

    `%r = "ipu.select"(%c, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>`
    """

    condition: Operand[ir.RankedTensorType]
    lhs: Operand[ir.RankedTensorType]
    rhs: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_select)


def _check_cast(op: "CastOp") -> None:
    """A cast keeps the shape."""
    t_in, t_out = tensor_type(op.input, "operand"), tensor_type(op.output, "result")
    if t_in.rank != t_out.rank or not all(map(dims_compatible, t_in.shape, t_out.shape)):
        raise VerifyError(f"cast changes the shape: {shape_str(t_in.shape)} to "
                          f"{shape_str(t_out.shape)}")


class CastOp(Ipu.Operation, name="cast", traits=[Pure]):
    """Convert elements to the result's element type (floats to integers truncate).

    `%i = "ipu.cast"(%x) : (tensor<4xf32>) -> tensor<4xi32>`
    """

    input: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_cast)
