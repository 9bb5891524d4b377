"""torch -> ipu: reductions, index reductions, scans, vector norms, var/std, logsumexp.

Plain reductions share one rule, `reduction(kind, ...)`, driven by the `REDUCTIONS`
table (where each aten op keeps its dims and keepdim operands). Dims are normalised
to sorted non-negative values; no dims (None or []) means all of them, as in torch.
Operands are cast to the result's element type first (torch has already chosen it:
int64 for integer sums, the `dtype` argument when given); `any`/`all` reduce i1.
Norms, var/std and logsumexp are composed from `ipu.reduce` and elementwise ops. The
normalisation layers and (log-)softmax reach us already decomposed by torch-mlir; the
gradient of weight normalisation (`aten._weight_norm_interface_backward`, training
wav2vec2-style convolutions with `weight_norm`), which torch-mlir has no op for, comes
through `OPERATORS` (see passes/conversion/__init__.py) and is composed the same way;
so does `aten._linalg_svd` (the nuclear norm, matrix 2-norms), refused as PopTorch
refuses it. A 0-d operand reduces over no dims (an empty `dims` array); the reductions
torch-mlir mishandles on 0-d tensors, the median, cdist and all(dims) are decomposed at
capture (poptorch/_frontend/reduction_decompositions.py).

Every lowering reads all its constant operands before it builds an op: a lowering that
declines must leave the IR untouched, or the greedy driver never converges.
"""

from __future__ import annotations

import math
from functools import partial

from torch_mlir import ir

from poptorch.dialects.data_movement import ReshapeOp
from poptorch.dialects.elementwise import BINARY_OPS, COMPARE_OPS, UNARY_OPS, SelectOp
from poptorch.dialects.ipu import dense_i64, i64, make_bool
from poptorch.dialects.reduction import (
    ArgMaxOp,
    ArgMinOp,
    CumprodOp,
    CumsumOp,
    ReduceOp,
    reduced_shape,
)
from poptorch.dialects.types import Unsupported, builtin_type

from .common import Builder, Lowering, Patterns

# aten op -> (ipu.reduce kind, operand index of its dims, of its keepdim); None: absent
# (no dims operand: all dims; no keepdim operand: false)
REDUCTIONS = {
    "sum": ("sum", None, None), "sum.dim_IntList": ("sum", 1, 2),
    "mean": ("mean", None, None), "mean.dim": ("mean", 1, 2),
    "prod": ("prod", None, None), "prod.dim_int": ("prod", 1, 2),
    "max": ("max", None, None), "amax": ("max", 1, 2),
    "min": ("min", None, None), "amin": ("min", 1, 2),
    "any": ("any", None, None), "any.dim": ("any", 1, 2), "any.dims": ("any", 1, 2),
    "all": ("all", None, None), "all.dim": ("all", 1, 2),
}
ARG_OPS = {"max": ArgMaxOp, "min": ArgMinOp}


def rank_of(value: ir.Value) -> int:
    """The rank of a torch tensor value, without building anything."""
    return builtin_type(value.type).rank


def dims_of(b: Builder, value: ir.Value | None, rank: int) -> list[int]:
    """The dims a `dim` operand (int, int list or None) names; all of them if none."""
    if value is None or b.is_none(value):
        dims = []
    elif str(value.type) == "!torch.int":
        dims = [b.scalar(value)]
    else:
        dims = b.scalar_list(value)
    if rank == 0:
        return []
    return sorted({d % rank for d in dims}) if dims else list(range(rank))


def reduce(x: ir.Value, kind: str, dims: list[int], keepdim: bool,
           element: ir.Type | None = None) -> ir.Value:
    """`ipu.reduce` of builtin `x` over `dims` (normalised), typed by the reduced shape
    and `element` (x's element type by default)."""
    t = x.type
    out = ir.RankedTensorType.get(reduced_shape(t.shape, dims, keepdim),
                                  element or t.element_type)
    return ReduceOp(x, ir.StringAttr.get(kind), dense_i64(dims),
                    make_bool(keepdim), out).result


def _reshape(x: ir.Value, shape: list[int]) -> ir.Value:
    if list(x.type.shape) == list(shape):
        return x
    return ReshapeOp(x, ir.RankedTensorType.get(shape, x.type.element_type)).result


def reduction(kind: str, dims_at: int | None, keepdim_at: int | None, op: ir.OpView,
              b: Builder) -> ir.Value:
    """sum/mean/prod/amax/amin/max/min/any/all with or without dims."""
    out = b.result_type()
    dims = dims_of(b, None if dims_at is None else op.operands[dims_at], rank_of(op.operands[0]))
    keepdim = False if keepdim_at is None else b.scalar(op.operands[keepdim_at])
    x = b.tensor(op.operands[0])
    if kind in ("any", "all"):
        i1 = ir.IntegerType.get_signless(1)
        return b.cast(reduce(b.cast(x, i1), kind, dims, keepdim), out.element_type)
    if kind in ("sum", "mean") and isinstance(out.element_type, ir.F32Type) and \
            str(x.type.element_type) in ("f16", "bf16"):
        # a float32 sum of half values (a batch norm's statistics): popops::reduce reads
        # the halves and accumulates into its float32 result, no cast of the operand
        return reduce(x, kind, dims, keepdim, out.element_type)
    return reduce(b.cast(x, out.element_type), kind, dims, keepdim)


def arg_index(kind: str, x: ir.Value, dim: int | None, keepdim: bool,
              out: ir.RankedTensorType) -> ir.Value:
    """First index of the max/min along `dim`, or in the flattened `x` if `dim` is None."""
    make = ARG_OPS[kind]
    if dim is None or x.type.rank == 0:
        flat = _reshape(x, [math.prod(x.type.shape)])
        index = make(flat, i64(0), make_bool(False),
                     ir.RankedTensorType.get([], out.element_type)).result
        return _reshape(index, list(out.shape))
    return make(x, i64(dim), make_bool(keepdim), out).result


def arg_reduction(kind: str, op: ir.OpView, b: Builder) -> ir.Value:
    """aten.argmax/argmin(x, dim?, keepdim)."""
    rank = rank_of(op.operands[0])
    dim = None if b.is_none(op.operands[1]) else b.scalar(op.operands[1]) % max(rank, 1)
    keepdim = b.scalar(op.operands[2])
    return arg_index(kind, b.tensor(op.operands[0]), dim, keepdim, b.result_type())


def value_and_index(kind: str, op: ir.OpView, b: Builder) -> tuple[ir.Value, ir.Value]:
    """aten.max.dim/min.dim(x, dim, keepdim): the extreme values and their first indices."""
    dims = dims_of(b, op.operands[1], rank_of(op.operands[0]))
    keepdim = b.scalar(op.operands[2])
    x = b.cast(b.tensor(op.operands[0]), b.result_type(0).element_type)
    values = reduce(x, kind, dims, keepdim)
    return values, arg_index(kind, x, dims[0] if dims else None, keepdim, b.result_type(1))


def scan(make: type, op: ir.OpView, b: Builder) -> ir.Value:
    """aten.cumsum/cumprod(x, dim, dtype?), in the result's element type."""
    out = b.result_type()
    dim = b.scalar(op.operands[1])
    x = b.cast(b.tensor(op.operands[0]), out.element_type)
    if out.rank == 0:
        return x
    return make(x, i64(dim % out.rank), out).result


def vector_norm(x: ir.Value, order: float, dims: list[int], keepdim: bool, b: Builder) -> ir.Value:
    """The `order`-norm of float `x` over `dims`, from ipu.reduce and elementwise ops.
    float16 powers (and squares) are taken in float32, as PyTorch accumulates them, so
    that |x|^p does not overflow where the norm itself would not."""
    t = x.type
    if str(t.element_type) == "f16" and order not in (0, 1) and not math.isinf(order):
        wide = vector_norm(b.cast(x, ir.F32Type.get()), order, dims, keepdim, b)
        return b.cast(wide, t.element_type)
    if order == 2:
        squares = reduce(x, "square_sum", dims, keepdim)
        return UNARY_OPS["sqrt"](squares, squares.type).result
    if order == 0:
        zero = b.constant(0, t.element_type)
        nonzero = COMPARE_OPS["ne"](x, zero, ir.RankedTensorType.get(
            t.shape, ir.IntegerType.get_signless(1))).result
        return reduce(b.cast(nonzero, t.element_type), "sum", dims, keepdim)
    magnitude = UNARY_OPS["abs"](x, t).result
    if math.isinf(order):
        return reduce(magnitude, "max" if order > 0 else "min", dims, keepdim)
    if order == 1:
        return reduce(magnitude, "sum", dims, keepdim)
    powered = BINARY_OPS["pow"](magnitude, b.constant(order, t.element_type), t).result
    total = reduce(powered, "sum", dims, keepdim)
    return BINARY_OPS["pow"](total, b.constant(1 / order, t.element_type), total.type).result


def linalg_vector_norm(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.linalg_vector_norm(x, ord, dim?, keepdim, dtype?)."""
    order, keepdim = b.scalar(op.operands[1]), b.scalar(op.operands[3])
    dims = dims_of(b, op.operands[2], rank_of(op.operands[0]))
    x = b.cast(b.tensor(op.operands[0]), b.result_type().element_type)
    return vector_norm(x, order, dims, keepdim, b)


def linalg_norm(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.linalg_norm(x, ord?, dim?, keepdim, dtype?): vector norms and Frobenius."""
    order, keepdim = b.scalar(op.operands[1]), b.scalar(op.operands[3])
    dims = dims_of(b, op.operands[2], rank_of(op.operands[0]))
    if order is not None and len(dims) != 1:
        raise Unsupported(f"matrix norms (ord={order} over {len(dims)} dims) are not supported")
    x = b.cast(b.tensor(op.operands[0]), b.result_type().element_type)
    return vector_norm(x, 2 if order is None else order, dims, keepdim, b)


def variance(root: bool, op: ir.OpView, b: Builder) -> ir.Value:
    """aten.var/std.correction(x, dim?, correction?, keepdim): sum((x - mean)^2) / (N - c)."""
    out = b.result_type()
    dims = dims_of(b, op.operands[1], rank_of(op.operands[0]))
    correction, keepdim = b.scalar(op.operands[2]), b.scalar(op.operands[3])
    x = b.cast(b.tensor(op.operands[0]), out.element_type)
    count = math.prod(x.type.shape[d] for d in dims)
    mean = reduce(x, "mean", dims, True)
    centred = BINARY_OPS["sub"](x, mean, x.type).result
    squares = reduce(centred, "square_sum", dims, keepdim)
    divisor = b.constant(max(0, count - (1 if correction is None else correction)),
                         out.element_type)
    var = BINARY_OPS["div"](squares, divisor, squares.type).result
    return UNARY_OPS["sqrt"](var, var.type).result if root else var


def logsumexp(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.logsumexp(x, dim, keepdim): log(sum(exp(x - m))) + m, m the finite max or 0."""
    out = b.result_type()
    dims = dims_of(b, op.operands[1], rank_of(op.operands[0]))
    keepdim = b.scalar(op.operands[2])
    x = b.cast(b.tensor(op.operands[0]), out.element_type)
    element = out.element_type
    peak = reduce(x, "max", dims, True)
    infinite = COMPARE_OPS["eq"](UNARY_OPS["abs"](peak, peak.type).result,
                                 b.constant(math.inf, element),
                                 ir.RankedTensorType.get(peak.type.shape,
                                                         ir.IntegerType.get_signless(1))).result
    shift = SelectOp(infinite, b.constant(0, element), peak, peak.type).result
    exps = UNARY_OPS["exp"](BINARY_OPS["sub"](x, shift, x.type).result, x.type).result
    total = reduce(exps, "sum", dims, keepdim)
    logs = UNARY_OPS["log"](total, total.type).result
    return BINARY_OPS["add"](logs, _reshape(shift, list(total.type.shape)), total.type).result


def weight_norm_backward(op: ir.OpView, b: Builder) -> tuple[ir.Value, ir.Value]:
    """aten._weight_norm_interface_backward(grad_w, v, g, norms, dim) -> (grad_v, grad_g)
    of `w = v * g / norms` (norms: v's 2-norm over every dim but `dim`, g's shape), as
    PyTorch's kernel computes them: with s = sum(grad_w * v) over those dims,
    grad_g = s / norms and grad_v = a * grad_w - (a * grad_g / norms) * v, a = g / norms."""
    grad_v_type, grad_g_type = b.result_type(0), b.result_type(1)
    rank = grad_v_type.rank
    dim = b.scalar(op.operands[4]) % max(rank, 1)
    norms_shape = list(builtin_type(op.operands[3].type).shape)
    kept = [1 if d != dim else n for d, n in enumerate(grad_v_type.shape)]
    if norms_shape != kept or list(grad_g_type.shape) != kept:
        raise Unsupported(f"weight norms of shape {norms_shape} for a weight of shape "
                          f"{list(grad_v_type.shape)} normalised along dim {dim}")
    element = grad_v_type.element_type
    grad_w, v, g, norms = (b.cast(b.tensor(value), element) for value in op.operands[:4])
    g = _reshape(g, kept)

    def binary(name: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
        shape = [max(m, n) for m, n in zip(lhs.type.shape, rhs.type.shape, strict=True)]
        return BINARY_OPS[name](lhs, rhs, ir.RankedTensorType.get(shape, element)).result

    sums = reduce(binary("mul", grad_w, v), "sum", [d for d in range(rank) if d != dim], True)
    grad_g = binary("div", sums, norms)
    a = binary("div", g, norms)
    scale = binary("div", binary("mul", a, grad_g), norms)
    grad_v = binary("sub", binary("mul", a, grad_w), binary("mul", scale, v))
    return grad_v, b.cast(grad_g, grad_g_type.element_type)


def singular_values(op: ir.OpView, b: Builder) -> ir.Value:
    """aten._linalg_svd, which torch.norm(x, 'nuc') and the matrix 2-norms reach: refused,
    as PopTorch refuses the nuclear norm ("Matrix nuclear norm is not supported.")."""
    raise Unsupported("singular value decompositions are not supported (PopTorch: \"Matrix "
                      "nuclear norm is not supported.\"): the nuclear norm (ord='nuc') and "
                      "the matrix 2-norms (ord=2 or -2 over two dims) need one; use "
                      "ord='fro', 1, -1, inf or -inf, or a vector norm")


# aten ops torch-mlir has no op for: `torch.operator "<name>"` -> lowering
OPERATORS: dict[str, Lowering] = {
    "torch.aten._weight_norm_interface_backward": weight_norm_backward,
    "torch.aten._linalg_svd": singular_values}


def populate_reduction(patterns: Patterns) -> None:
    """Register the reduction lowerings."""
    for aten, (kind, dims_at, keepdim_at) in REDUCTIONS.items():
        patterns.lower(f"torch.aten.{aten}", partial(reduction, kind, dims_at, keepdim_at))
    for kind in ("max", "min"):
        patterns.lower(f"torch.aten.arg{kind}", partial(arg_reduction, kind))
        patterns.lower(f"torch.aten.{kind}.dim", partial(value_and_index, kind))
    patterns.lower("torch.aten.cumsum", partial(scan, CumsumOp))
    patterns.lower("torch.aten.cumprod", partial(scan, CumprodOp))
    patterns.lower("torch.aten.linalg_vector_norm", linalg_vector_norm)
    patterns.lower("torch.aten.linalg_norm", linalg_norm)
    patterns.lower("torch.aten.var.correction", partial(variance, False))
    patterns.lower("torch.aten.std.correction", partial(variance, True))
    patterns.lower("torch.aten.logsumexp", logsumexp)
