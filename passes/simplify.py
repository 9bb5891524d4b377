"""ipu-simplify: algebraic clean-ups on ipu ops that decompositions leave behind.

torch's decompositions write `linear` as `mm(x, w.T) * 1 + b * 1`; this pass removes
multiplications by a splat 1, additions of a splat 0, reshapes, permutes and
broadcasts that do not change anything (when the result has the operand's type), and
merges chains of reshapes (batch norm's decomposition unsqueezes one dim at a time) and
of permutes (a weight gradient is transposed twice on its way out of `mm`'s backward),
removes reductions over size-1 dims, moves reshapes below unary elementwise ops (a
linear layer on a 3-d input leaves `relu(reshape(x + b))`: the relu then follows the
add, and the JIT fuses them), and makes a sum of products `x1^T y1 + x2^T y2` one
product of concatenations (an RNN's weight gradient: one matrix product of all steps
instead of one per step and their sum), as it makes a sum of sums over the same dims one
sum of their concatenation (the RNN's bias gradient). A slice moves above a permute and
into the operand of a concat it lies in (an RNN's last output, `out[:, -1]` of all steps'
outputs concatenated, is the last step's output: the concatenation goes unused).
"""

from __future__ import annotations

from collections.abc import Callable

from torch_mlir import ir, rewrite

from poptorch.dialects.creation import ConstantOp
from poptorch.dialects.data_movement import BroadcastOp, ConcatOp, PermuteOp, ReshapeOp, SliceOp
from poptorch.dialects.elementwise import BINARY_OPS, UNARY_OPS, CastOp
from poptorch.dialects.ipu import make_bool
from poptorch.dialects.linear import MatMulOp
from poptorch.dialects.reduction import ReduceOp

from .registry import Pass, register

# A rewrite at a matched op: it rewrites and returns False, or returns True (no match).
Pattern = Callable[[ir.OpView, rewrite.PatternRewriter], bool]


def splat_value(value: ir.Value) -> float | None:
    """The value of a splat `ipu.constant`, or None."""
    owner = value.owner
    if not isinstance(owner, ConstantOp):
        return None
    attr = owner.attributes["value"]
    if not (isinstance(attr, ir.DenseElementsAttr) and attr.is_splat):
        return None
    return attr.get_splat_value().value


def _forward(op: ir.OpView, rewriter: rewrite.PatternRewriter, operand: ir.Value) -> bool:
    """Replace `op` by `operand` when the types agree; True (no match) otherwise."""
    if operand.type != op.results[0].type:
        return True
    rewriter.replace_op(op, [operand])
    return False


def identity_operand(neutral: float) -> Pattern:
    """Pattern: `x op neutral` or `neutral op x` is x (commutative ops)."""

    def apply(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
        lhs, rhs = op.operands[0], op.operands[1]
        if splat_value(rhs) == neutral:
            return _forward(op, rewriter, lhs)
        if splat_value(lhs) == neutral:
            return _forward(op, rewriter, rhs)
        return True

    return apply


def right_identity(neutral: float) -> Pattern:
    """Pattern: `x op neutral` is x (sub, div)."""

    def apply(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
        if splat_value(op.operands[1]) == neutral:
            return _forward(op, rewriter, op.operands[0])
        return True

    return apply


def same_type(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: a layout op whose result has its operand's type."""
    return _forward(op, rewriter, op.operands[0])


def reshape_chain(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: reshape(reshape(x)) is one reshape of x (or x itself)."""
    inner = op.operands[0].owner
    if not isinstance(inner, ReshapeOp):
        return _forward(op, rewriter, op.operands[0])
    source = inner.operands[0]
    if source.type == op.results[0].type:
        rewriter.replace_op(op, [source])
        return False
    with rewriter.ip, op.location:
        merged = ReshapeOp(source, op.results[0].type)
    _stamp([merged.operation], _attributes(op))
    rewriter.replace_op(op, [merged.result])
    return False


def permute_chain(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: permute(permute(x)) is one permute of x (or x itself); an identity
    permute is its operand."""
    dims = list(op.attributes["dims"])
    if dims == sorted(dims):
        return _forward(op, rewriter, op.operands[0])
    inner = op.operands[0].owner
    if not isinstance(inner, PermuteOp):
        return True
    first = list(inner.attributes["dims"])
    composed = [first[d] for d in dims]  # result dim i is x's dim first[dims[i]]
    source = inner.operands[0]
    if composed == sorted(composed) and source.type == op.results[0].type:
        rewriter.replace_op(op, [source])
        return False
    with rewriter.ip, op.location:
        merged = PermuteOp(source, ir.DenseI64ArrayAttr.get(composed), op.results[0].type)
    _stamp([merged.operation], _attributes(op))
    rewriter.replace_op(op, [merged.result])
    return False


def _attributes(op: ir.OpView) -> dict[str, ir.Attribute]:
    """The op's discardable attributes (dialect-prefixed: a stage, a name scope)."""
    return {name: op.attributes[name] for name in op.attributes if "." in name}


def _stamp(ops, attributes: dict[str, ir.Attribute]) -> None:
    """Give the ops a rewrite made the attributes of the op they replace."""
    for made in ops:
        for name, attr in attributes.items():
            made.attributes[name] = attr


def unary_of_reshape(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: a unary elementwise op of a reshape is the reshape of the op on the
    reshape's operand (`relu(reshape(x))`, as a linear layer's decomposition leaves
    between its bias add and the activation, becomes `reshape(relu(x))`: the op is next
    to the add, and a reshape back to x's shape folds away)."""
    inner = op.operands[0].owner
    if not isinstance(inner, ReshapeOp):
        return True
    source = inner.operands[0]
    attributes = _attributes(op)  # both keep the op's (its stage, its name scope)
    with rewriter.ip, op.location:
        moved = type(op)(source, source.type)
        reshaped = ReshapeOp(moved.result, op.results[0].type)
    _stamp([moved.operation, reshaped.operation], attributes)
    rewriter.replace_op(op, [reshaped.result])
    return False


def unit_reduce(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: a reduction over dims of size 1 only (an LSTM's backward sums its gate
    gradients over the one step a slice took) is its operand, reshaped when the dims go."""
    source, result = op.operands[0], op.results[0].type
    shape = source.type.shape
    if op.attributes["kind"].value == "square_sum" or \
            source.type.element_type != result.element_type or \
            any(shape[d] != 1 for d in op.attributes["dims"]):
        return True
    if source.type == result:
        rewriter.replace_op(op, [source])
        return False
    with rewriter.ip, op.location:
        reshaped = ReshapeOp(source, result)
    _stamp([reshaped.operation], _attributes(op))
    rewriter.replace_op(op, [reshaped.result])
    return False


def _transposed_product(value: ir.Value) -> tuple[ir.Value, ir.Value] | None:
    """(x, y) when `value` is `matmul(permute(x, [1, 0]), y)` of matrices, read once."""
    owner = value.owner
    if not isinstance(owner, MatMulOp) or len(list(value.uses)) != 1:
        return None
    lhs, rhs = owner.operands
    permute = lhs.owner
    if lhs.type.rank != 2 or rhs.type.rank != 2 or not (
            isinstance(permute, PermuteOp) and list(permute.attributes["dims"]) == [1, 0]):
        return None
    return permute.operands[0], rhs


def sum_of_products(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: `x1^T y1 + x2^T y2` is one product, `concat(x1, x2)^T concat(y1, y2)`
    (an RNN's weight gradient adds one such product per step: one matrix product of all
    steps instead of a small one per step, and no sum). Repeated, a sum of n products
    becomes one; the concatenations are chains, which the JIT makes one copy."""
    result = op.results[0].type
    if op.operands[0].type != result or op.operands[1].type != result:
        return True
    first, second = (_transposed_product(v) for v in op.operands)
    if first is None or second is None or first[0].type.element_type != \
            second[0].type.element_type or first[1].type.element_type != \
            second[1].type.element_type:
        return True
    (x1, y1), (x2, y2) = first, second

    def joined(a: ir.Value, b: ir.Value) -> ir.Value:
        shape = [a.type.shape[0] + b.type.shape[0], a.type.shape[1]]
        return ConcatOp(a, b, ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0),
                        ir.RankedTensorType.get(shape, a.type.element_type)).result

    with rewriter.ip, op.location:
        xs, ys = joined(x1, x2), joined(y1, y2)
        shape = [xs.type.shape[1], xs.type.shape[0]]
        transposed = PermuteOp(xs, ir.DenseI64ArrayAttr.get([1, 0]),
                               ir.RankedTensorType.get(shape, xs.type.element_type)).result
        product = MatMulOp(transposed, ys, result)
    _stamp([xs.owner, ys.owner, transposed.owner, product.operation], _attributes(op))
    rewriter.replace_op(op, [product.result])
    return False


def _single_reader(op: ir.OpView, cls: type) -> ir.OpView | None:
    """The producer of `op`'s first operand when it is a `cls` op read only by `op`."""
    owner = op.operands[0].owner
    if isinstance(owner, cls) and len(list(op.operands[0].uses)) == 1:
        return owner
    return None


def _box(op: ir.OpView) -> tuple[list[int], list[int], list[int]]:
    return tuple([int(x) for x in op.attributes[n]] for n in ("starts", "ends", "steps"))


def _slice(value: ir.Value, starts, ends, steps, result: ir.Type) -> ir.Value:
    """`ipu.slice` of `value`, or `value` when the box is all of it."""
    if value.type == result and all(s == 0 and e == n and k == 1 for s, e, k, n in zip(
            starts, ends, steps, value.type.shape, strict=True)):
        return value
    return SliceOp(value, ir.DenseI64ArrayAttr.get(starts), ir.DenseI64ArrayAttr.get(ends),
                   ir.DenseI64ArrayAttr.get(steps), result).result


def slice_of_permute(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: a slice of a permute (read only by it) is the permute of the slice of its
    operand (`out.permute(1, 0, 2)[:, -1]`, an RNN's last output, then slices what the
    permute's operand is made of: `slice_of_concat`)."""
    permute = _single_reader(op, PermuteOp)
    if permute is None:
        return True
    dims = [int(d) for d in permute.attributes["dims"]]
    source = permute.operands[0]
    starts, ends, steps = ([0] * len(dims) for _ in range(3))
    for i, (start, end, step) in enumerate(zip(*_box(op), strict=True)):
        starts[dims[i]], ends[dims[i]], steps[dims[i]] = start, end, step
    shape = list(source.type.shape)
    for d in range(len(shape)):
        shape[d] = max(0, -(-(ends[d] - starts[d]) // steps[d]))
    attributes = _attributes(op)
    with rewriter.ip, op.location:
        sliced = _slice(source, starts, ends, steps,
                        ir.RankedTensorType.get(shape, source.type.element_type))
        moved = PermuteOp(sliced, ir.DenseI64ArrayAttr.get(dims), op.results[0].type)
    _stamp([moved.operation] + ([sliced.owner] if sliced != source else []), attributes)
    rewriter.replace_op(op, [moved.result])
    return False


def slice_of_concat(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: a slice of a concat that lies within one of its operands is a slice of
    that operand (the operand itself when it is all of it)."""
    owner = op.operands[0].owner
    if not isinstance(owner, ConcatOp):
        return True
    lhs, rhs = owner.operands
    dim = int(owner.attributes["dim"].value) % lhs.type.rank
    starts, ends, steps = _box(op)
    split = lhs.type.shape[dim]
    if ends[dim] <= split:
        source = lhs
    elif starts[dim] >= split:
        source = rhs
        starts[dim] -= split
        ends[dim] -= split
    else:
        return True
    with rewriter.ip, op.location:
        sliced = _slice(source, starts, ends, steps, op.results[0].type)
    if sliced != source:
        _stamp([sliced.owner], _attributes(op))
    rewriter.replace_op(op, [sliced])
    return False


def _summed(value: ir.Value) -> tuple[ir.Value, list[int], bool, ir.Type] | None:
    """(x, dims, keepdim, the sum's type) when `value` is a sum of x over dims, maybe
    reshaped, with the sum (and the reshape) read once."""
    owner = value.owner
    if not isinstance(owner, ir.OpView) or len(list(value.uses)) != 1:
        return None
    if isinstance(owner, ReshapeOp):
        inner = owner.operands[0]
        if len(list(inner.uses)) != 1:
            return None
        owner = inner.owner
    if not (isinstance(owner, ReduceOp) and owner.attributes["kind"].value == "sum"):
        return None
    x = owner.operands[0]
    dims = sorted({int(d) % x.type.rank for d in owner.attributes["dims"]})
    return (x, dims, bool(owner.attributes["keepdim"].value),
            owner.results[0].type) if dims else None


def sum_of_reductions(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Pattern: `sum(x1, D) + sum(x2, D)` (each maybe reshaped alike) is
    `sum(concat(x1, x2), D)`, concatenated along D's first dim (an RNN's bias gradient
    adds one sum over the batch per step: one sum of all steps instead, of the
    concatenation `sum_of_products` makes for the weight gradient, which CSE shares)."""
    result = op.results[0].type
    if op.operands[0].type != result or op.operands[1].type != result:
        return True
    first, second = (_summed(v) for v in op.operands)
    if first is None or second is None:
        return True
    (x1, dims, keepdim, summed), (x2, dims2, keepdim2, summed2) = first, second
    a, b = x1.type, x2.type
    axis = dims[0]
    if (dims, keepdim, summed) != (dims2, keepdim2, summed2) or a.rank != b.rank \
            or a.element_type != b.element_type \
            or any(a.shape[d] != b.shape[d] for d in range(a.rank) if d != axis):
        return True
    shape = list(a.shape)
    shape[axis] += b.shape[axis]
    with rewriter.ip, op.location:
        joined = ConcatOp(x1, x2, ir.IntegerAttr.get(ir.IntegerType.get_signless(64), axis),
                          ir.RankedTensorType.get(shape, a.element_type))
        total = ReduceOp(joined.result, ir.StringAttr.get("sum"),
                         ir.DenseI64ArrayAttr.get(dims), make_bool(keepdim), summed)
        made = [joined.operation, total.operation]
        if summed != result:
            made.append(ReshapeOp(total.result, result).operation)
    _stamp(made, _attributes(op))
    rewriter.replace_op(op, [made[-1].results[0]])
    return False


# The rewrites, keyed by the class of the op they match at.
PATTERNS: list[tuple[type, Pattern]] = [
    (BINARY_OPS["mul"], identity_operand(1.0)),
    (BINARY_OPS["add"], identity_operand(0.0)),
    (BINARY_OPS["add"], sum_of_products),
    (BINARY_OPS["add"], sum_of_reductions),
    (BINARY_OPS["sub"], right_identity(0.0)),
    (BINARY_OPS["div"], right_identity(1.0)),
    (ReshapeOp, reshape_chain),
    (PermuteOp, permute_chain),
    (ReduceOp, unit_reduce),
    (SliceOp, slice_of_permute),
    (SliceOp, slice_of_concat),
    *((unary, unary_of_reshape) for unary in UNARY_OPS.values()),
    (BroadcastOp, same_type),
    (CastOp, same_type),
]


@register
class Simplify(Pass):
    argument = "ipu-simplify"
    description = ("Remove multiplications by 1, additions of 0, no-op layout ops, "
                   "reshape and permute chains and reductions over size-1 dims; move "
                   "reshapes below unary elementwise ops; make a sum of products x^T y "
                   "one product, and a sum of sums one sum; slice through permutes and "
                   "concats")

    def run(self, module: ir.Operation) -> None:
        patterns = rewrite.RewritePatternSet()
        for root, pattern in PATTERNS:
            patterns.add(root, pattern)
        rewrite.apply_patterns_and_fold_greedily(module, patterns.freeze())
