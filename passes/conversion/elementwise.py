"""torch -> ipu: elementwise maths, activations, arithmetic, comparisons, selects, casts.

One generic rule per arity covers most of the family (JAX's `_nary_lower_hlo` habit):
`unary(name)` and `binary(name)` are partially applied per aten op. Operands are cast
to the result's element type (torch has already computed the promoted type); scalar
operands become 0-d `ipu.constant`s.

`BEFORE_BACKEND` holds lowerings of torch ops that torch-mlir's backend pipeline
decomposes wrongly, which `ipu-convert-poptorch-ops` applies before it: RReLU's
gradient with a fixed slope (eval mode, or lower == upper) came out as
`max(grad, 0) + slope * min(x, 0)` instead of `grad * (x > 0 ? 1 : slope)`; fmod came
out as `a - b * sign(a / b) * floor(|a / b|)`, whose rounded quotient loses the
remainder (float16 fmod(-8.477, -0.061) gave 0, not -0.0579): `ipu.fmod` is exact.
"""

from __future__ import annotations

from functools import partial

from torch_mlir import ir

from poptorch.dialects.elementwise import BINARY_OPS, COMPARE_OPS, UNARY_OPS, SelectOp
from poptorch.dialects.types import Unsupported

from .common import Builder, Lowering, Patterns

UNARY_ATEN = {
    "neg": "neg", "abs": "abs", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
    "log2": "log2", "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "reciprocal": "reciprocal", "square": "square", "sin": "sin", "cos": "cos", "tan": "tan",
    "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "erf": "erf",
    "erfc": "erfc", "sigmoid": "sigmoid", "relu": "relu", "floor": "floor", "ceil": "ceil",
    "round": "round", "trunc": "trunc", "sign": "sign", "logical_not": "logical_not",
    "bitwise_not": "bitwise_not",
}
# aten op (with overload) -> ipu binary op
BINARY_ATEN = {
    "mul.Tensor": "mul", "mul.Scalar": "mul", "maximum": "max", "minimum": "min",
    "remainder.Tensor": "remainder", "remainder.Scalar": "remainder",
    "fmod.Tensor": "fmod", "fmod.Scalar": "fmod", "atan2": "atan2",
    "floor_divide": "floor_div", "floor_divide.Scalar": "floor_div",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "bitwise_and.Tensor": "bitwise_and", "bitwise_and.Scalar": "bitwise_and",
    "bitwise_or.Tensor": "bitwise_or", "bitwise_or.Scalar": "bitwise_or",
    "bitwise_xor.Tensor": "bitwise_xor", "bitwise_xor.Scalar": "bitwise_xor",
    "bitwise_left_shift.Tensor": "shift_left", "bitwise_right_shift.Tensor": "shift_right",
}
COMPARE_ATEN = ("eq", "ne", "lt", "le", "gt", "ge")


def operand(b: Builder, value: ir.Value, element_type: ir.Type) -> ir.Value:
    """A tensor operand cast to `element_type`, or a scalar as a 0-d constant of it."""
    if b.is_tensor(value):
        return b.cast(b.tensor(value), element_type)
    return b.constant(b.scalar(value), element_type)


def unary(name: str, op: ir.OpView, b: Builder) -> ir.Value:
    out = b.result_type()
    x = operand(b, op.operands[0], out.element_type)
    return UNARY_OPS[name](x, out).result


def binary(name: str, op: ir.OpView, b: Builder) -> ir.Value:
    out = b.result_type()
    lhs = operand(b, op.operands[0], out.element_type)
    rhs = operand(b, op.operands[1], out.element_type)
    return BINARY_OPS[name](lhs, rhs, out).result


def scaled(b: Builder, value: ir.Value, alpha: ir.Value, element_type: ir.Type) -> ir.Value:
    """`alpha * value` for add/sub's alpha operand (skipped when alpha is 1)."""
    x = operand(b, value, element_type)
    factor = b.scalar(alpha)
    if factor == 1:
        return x
    return BINARY_OPS["mul"](x, b.constant(factor, element_type), x.type).result


def add_sub(name: str, op: ir.OpView, b: Builder) -> ir.Value:
    """aten.add/sub (Tensor or Scalar): lhs +- alpha * rhs."""
    out = b.result_type()
    lhs = operand(b, op.operands[0], out.element_type)
    rhs = scaled(b, op.operands[1], op.operands[2], out.element_type)
    return BINARY_OPS[name](lhs, rhs, out).result


def rsub(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.rsub.Scalar: other - alpha * self."""
    out = b.result_type()
    lhs = operand(b, op.operands[1], out.element_type)
    rhs = scaled(b, op.operands[0], op.operands[2], out.element_type)
    return BINARY_OPS["sub"](lhs, rhs, out).result


def div(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.div (Tensor/Scalar, with an optional rounding mode)."""
    out = b.result_type()
    mode = b.scalar(op.operands[2]) if len(op.operands) > 2 else None
    lhs = operand(b, op.operands[0], out.element_type)
    rhs = operand(b, op.operands[1], out.element_type)
    if mode is None or isinstance(out.element_type, ir.IntegerType) and mode == "trunc":
        return BINARY_OPS["div"](lhs, rhs, out).result
    quotient = BINARY_OPS["div" if mode == "trunc" else "floor_div"](lhs, rhs, out).result
    if mode == "trunc":
        return UNARY_OPS["trunc"](quotient, out).result
    return quotient


def promote(types: list[ir.Type]) -> ir.Type:
    """The common element type of comparison operands (floats over ints over bools)."""
    def rank(t: ir.Type) -> tuple[int, int]:
        if isinstance(t, ir.FloatType):
            return 2, ir.FloatType(t).width
        if str(t) == "i1":
            return 0, 1
        return 1, ir.IntegerType(t).width

    return max(types, key=rank)


def compare(name: str, op: ir.OpView, b: Builder) -> ir.Value:
    out = b.result_type()
    lhs_v, rhs_v = op.operands[0], op.operands[1]
    types = [b.tensor(v).type.element_type for v in (lhs_v, rhs_v) if b.is_tensor(v)]
    if not b.is_tensor(rhs_v) and isinstance(b.scalar(rhs_v), float) and not any(
        isinstance(t, ir.FloatType) for t in types
    ):
        types.append(ir.F32Type.get())
    common = promote(types)
    return COMPARE_OPS[name](operand(b, lhs_v, common), operand(b, rhs_v, common), out).result


def where(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.where.self / ScalarSelf / ScalarOther / Scalar."""
    out = b.result_type()
    cond = b.cast(b.tensor(op.operands[0]), ir.IntegerType.get_signless(1))
    lhs = operand(b, op.operands[1], out.element_type)
    rhs = operand(b, op.operands[2], out.element_type)
    return SelectOp(cond, lhs, rhs, out).result


def masked_fill(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.masked_fill (Scalar or 0-d Tensor value): select(mask, value, self)."""
    out = b.result_type()
    x = operand(b, op.operands[0], out.element_type)
    mask = b.cast(b.tensor(op.operands[1]), ir.IntegerType.get_signless(1))
    value = operand(b, op.operands[2], out.element_type)
    return SelectOp(mask, value, x, out).result


def clamp(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.clamp / clamp.Tensor / clamp_min / clamp_max / hardtanh as max then min."""
    out = b.result_type()
    x = operand(b, op.operands[0], out.element_type)
    name = op.operation.name
    if name.endswith("clamp_min") or name.endswith("clamp_min.Tensor"):
        bounds = [("max", op.operands[1])]
    elif name.endswith("clamp_max") or name.endswith("clamp_max.Tensor"):
        bounds = [("min", op.operands[1])]
    else:
        bounds = [("max", op.operands[1]), ("min", op.operands[2])]
    for kind, bound in bounds:
        if not b.is_tensor(bound) and b.is_none(bound):
            continue
        x = BINARY_OPS[kind](x, operand(b, bound, out.element_type), out).result
    return x


def gelu(op: ir.OpView, b: Builder) -> ir.Value:
    out = b.result_type()
    approximate = b.scalar(op.operands[1]) if len(op.operands) > 1 else "none"
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"gelu approximation '{approximate}'")
    x = operand(b, op.operands[0], out.element_type)
    return UNARY_OPS["gelu" if approximate == "none" else "gelu_tanh"](x, out).result


def gelu_backward(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.gelu_backward(grad, x, approximate): one ipu.gelu_grad / gelu_tanh_grad, as
    popnn's NonLinearityGrad (torch's decomposition: erf, exp and products)."""
    out = b.result_type()
    approximate = b.scalar(op.operands[2]) if len(op.operands) > 2 else "none"
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"gelu approximation '{approximate}'")
    grad = operand(b, op.operands[0], out.element_type)
    x = operand(b, op.operands[1], out.element_type)
    name = "gelu_grad" if approximate == "none" else "gelu_tanh_grad"
    return BINARY_OPS[name](grad, x, out).result


# pow(x, c) for the constant exponents PyTorch's CPU kernel computes with cheaper ops
# (pow_tensor_scalar_optimized_kernel: x * x, x * x * x, sqrt, rsqrt, 1 / x, 1 / (x * x)),
# as PopART's pow pattern turns pow by 2 into a square: the same values, at the vector
# rate of the cheaper ops (popops' POWER is ~150x SQUARE's, popopsCycleEstimators.hpp).
# Exponent 1 (pow(x, 2)'s gradient has pow(x, 1)) is x itself. The cube and the inverse
# square are products of float32 or float64 only: in float16 PyTorch rounds x * x * x
# once, in float32 (measured: torch.pow(h, 3.0) != h * h * h for a float16 h), and a
# float16 square would round twice.
POW_BY_CONSTANT = {2.0: ("square",), 0.5: ("sqrt",), -0.5: ("rsqrt",),
                   -1.0: ("reciprocal",), 1.0: ()}
POW_BY_PRODUCT = {3.0: ("square", "mul"), -2.0: ("square", "reciprocal")}


def pow_(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.pow.Tensor_Tensor / Tensor_Scalar / Scalar; a float tensor to a constant
    exponent of POW_BY_CONSTANT (or, in float32 and float64, of POW_BY_PRODUCT) is those
    ops in turn, "mul" multiplying by x."""
    out = b.result_type()
    base, exponent = op.operands[0], op.operands[1]
    if b.is_tensor(base) and not b.is_tensor(exponent) \
            and isinstance(out.element_type, ir.FloatType):
        exponent = float(b.scalar(exponent))
        names = POW_BY_CONSTANT.get(exponent)
        if names is None and not isinstance(out.element_type, (ir.F16Type, ir.BF16Type)):
            names = POW_BY_PRODUCT.get(exponent)
        if names is not None:
            x = result = operand(b, base, out.element_type)
            for name in names:
                result = BINARY_OPS[name](result, x, out).result if name == "mul" \
                    else UNARY_OPS[name](result, out).result
            return result
    return binary("pow", op, b)


def leaky_relu(op: ir.OpView, b: Builder) -> ir.Value:
    """x if x > 0 else slope * x."""
    out = b.result_type()
    x = operand(b, op.operands[0], out.element_type)
    zero = b.constant(0, out.element_type)
    slope = b.constant(b.scalar(op.operands[1]), out.element_type)
    positive = COMPARE_OPS["gt"](x, zero, ir.RankedTensorType.get(
        out.shape, ir.IntegerType.get_signless(1))).result
    return SelectOp(positive, x, BINARY_OPS["mul"](x, slope, out).result, out).result


def rrelu_backward(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.rrelu_with_noise_backward(grad, x, noise, lower, upper, training,
    self_is_result): grad * noise where training drew random slopes (upper - lower >
    1e-6), else leaky_relu's gradient with the mean slope: grad where x > 0, slope *
    grad elsewhere (x may be the result: its sign is the input's)."""
    out = b.result_type()
    lower, upper, training = (b.scalar(v) for v in op.operands[3:6])
    grad = operand(b, op.operands[0], out.element_type)
    if training and upper - lower > 1e-6:
        return BINARY_OPS["mul"](grad, operand(b, op.operands[2], out.element_type),
                                 out).result
    x = operand(b, op.operands[1], out.element_type)
    positive = COMPARE_OPS["gt"](x, b.constant(0, out.element_type), ir.RankedTensorType.get(
        out.shape, ir.IntegerType.get_signless(1))).result
    scaled = BINARY_OPS["mul"](grad, b.constant((lower + upper) / 2, out.element_type),
                               out).result
    return SelectOp(positive, grad, scaled, out).result


# torch ops torch-mlir's backend pipeline decomposes wrongly: lowered before it
BEFORE_BACKEND: dict[str, Lowering] = {
    "torch.aten.rrelu_with_noise_backward": rrelu_backward,
    "torch.aten.fmod.Tensor": partial(binary, "fmod"),
    "torch.aten.fmod.Scalar": partial(binary, "fmod")}


def cast(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.to.dtype, _to_copy, type_as...: convert to the result's element type."""
    out = b.result_type()
    return b.cast(b.tensor(op.operands[0]), out.element_type)


def identity(op: ir.OpView, b: Builder) -> ir.Value:
    """clone, detach, alias, contiguous, inference-mode dropout: the operand itself."""
    return b.tensor(op.operands[0])


def dropout(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.dropout(x, p, train): the identity in inference; training needs issue 4."""
    if b.scalar(op.operands[2]):
        raise Unsupported("dropout in training mode is not supported yet")
    return b.tensor(op.operands[0])


def populate_elementwise(patterns: Patterns) -> None:
    for aten, name in UNARY_ATEN.items():
        patterns.lower(f"torch.aten.{aten}", partial(unary, name))
    for aten, name in BINARY_ATEN.items():
        patterns.lower(f"torch.aten.{aten}", partial(binary, name))
    for overload in ("Tensor", "Scalar"):
        patterns.lower(f"torch.aten.add.{overload}", partial(add_sub, "add"))
        patterns.lower(f"torch.aten.sub.{overload}", partial(add_sub, "sub"))
        patterns.lower(f"torch.aten.div.{overload}", div)
        patterns.lower(f"torch.aten.div.{overload}_mode", div)
        for name in COMPARE_ATEN:
            patterns.lower(f"torch.aten.{name}.{overload}", partial(compare, name))
    patterns.lower("torch.aten.rsub.Scalar", rsub)
    for overload in ("Tensor_Tensor", "Tensor_Scalar", "Scalar"):
        patterns.lower(f"torch.aten.pow.{overload}", pow_)
    for overload in ("self", "ScalarSelf", "ScalarOther", "Scalar"):
        patterns.lower(f"torch.aten.where.{overload}", where)
    patterns.lower("torch.aten.masked_fill.Scalar", masked_fill)
    patterns.lower("torch.aten.masked_fill.Tensor", masked_fill)
    for name in ("clamp", "clamp.Tensor", "clamp_min", "clamp_max", "clamp_min.Tensor",
                 "clamp_max.Tensor", "hardtanh"):
        patterns.lower(f"torch.aten.{name}", clamp)
    patterns.lower("torch.aten.gelu", gelu)
    patterns.lower("torch.aten.gelu_backward", gelu_backward)
    patterns.lower("torch.aten.leaky_relu", leaky_relu)
    for name in ("to.dtype", "to.dtype_layout", "_to_copy", "type_as"):
        patterns.lower(f"torch.aten.{name}", cast)
    for name in ("clone", "detach", "alias", "contiguous", "lift_fresh_copy"):
        patterns.lower(f"torch.aten.{name}", identity)
    patterns.lower("torch.aten.dropout", dropout)
