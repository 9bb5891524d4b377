"""torch -> ipu: tensors made in the graph (literals, full/zeros/ones/empty, *_like,
arange). Shapes are static, so each becomes an `ipu.constant` computed at compile time.

A literal that feeds a function's result directly never reaches its lowering: the greedy
driver folds its `torch_c.to_builtin_tensor` cast to an `arith.constant` first (torch-mlir
materializes folded constants in arith), which `materialized` turns into an
`ipu.constant`.

`empty_results` runs before the patterns: an aten op whose results all have no elements
computes nothing, whatever it is (arange(1, 1), a concatenation of empty tensors, a
convolution over zero channels, their gradients), so it becomes empty constants without
reaching its family's lowering, kernel or cost rule.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from torch_mlir import ir, rewrite

from poptorch.dialects.creation import constant
from poptorch.dialects.ipu import walk
from poptorch.dialects.types import Unsupported, builtin_type, numpy_dtype

from .common import FROM_BUILTIN, Builder, Patterns


def literal(op: ir.OpView, b: Builder) -> ir.Value:
    """torch.vtensor.literal(dense<...>)."""
    value = op.attributes["value"]
    if not isinstance(value, ir.DenseElementsAttr):
        raise Unsupported(f"literal of attribute kind {type(value).__name__}")
    out = b.result_type()
    array = np.array(value) if not value.is_splat else np.array(value.get_splat_value().value)
    return b.constant(array, out.element_type, out.shape)


def materialized(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """arith.constant of a tensor -> ipu.constant (a rewrite pattern: True = no match)."""
    value = op.attributes["value"]
    if not isinstance(value, ir.DenseElementsAttr):
        return True
    with rewriter.ip, op.location:
        rewriter.replace_op(op, [constant(value)])
    return False


def _empty_type(value: ir.Value) -> ir.RankedTensorType | None:
    """The builtin type of a torch tensor value with a static shape and no elements."""
    if not str(value.type).startswith("!torch.vtensor"):
        return None
    try:
        t = builtin_type(value.type)
    except Unsupported:
        return None
    return t if t.has_static_shape and 0 in t.shape else None


def empty_results(module: ir.Operation) -> None:
    """Replace each aten op whose results all have no elements by empty constants."""
    for op in walk(module):
        if not op.name.startswith("torch.aten."):
            continue
        with op.location:
            types = [_empty_type(r) for r in op.results]
        if not types or None in types:
            continue
        with ir.InsertionPoint(op), op.location:
            for result, t in zip(op.results, types, strict=True):
                empty = constant(ir.DenseElementsAttr.get(
                    np.zeros(t.shape, numpy_dtype(t.element_type)), type=t))
                cast = ir.Operation.create(FROM_BUILTIN, results=[result.type], operands=[empty])
                result.replace_all_uses_with(cast.result)
        op.erase()


def full(op: ir.OpView, b: Builder) -> ir.Value:
    """full(size, value, ...) / full_like(x, value, ...)."""
    out = b.result_type()
    return b.constant(b.scalar(op.operands[1]), out.element_type, out.shape)


def filled(value: float, op: ir.OpView, b: Builder) -> ir.Value:
    """zeros/ones/empty and their *_like forms (empty is zero-filled)."""
    out = b.result_type()
    return b.constant(value, out.element_type, out.shape)


def arange(op: ir.OpView, b: Builder) -> ir.Value:
    """arange / arange.start / arange.start_step."""
    out = b.result_type()
    name = op.operation.name
    if name.endswith("start_step"):
        start, end, step = (b.scalar(v) for v in op.operands[:3])
    elif name.endswith("start"):
        (start, end), step = (b.scalar(v) for v in op.operands[:2]), 1
    else:
        start, end, step = 0, b.scalar(op.operands[0]), 1
    values = np.arange(start, end, step).astype(numpy_dtype(out.element_type))
    if list(values.shape) != list(out.shape):
        raise Unsupported(f"arange gives {values.shape[0]} values, the result holds {out.shape}")
    return b.constant(values, out.element_type, out.shape)


def populate_creation(patterns: Patterns) -> None:
    patterns.lower("torch.vtensor.literal", literal)
    patterns.set.add("arith.constant", materialized)
    patterns.lower("torch.aten.full", full)
    patterns.lower("torch.aten.full_like", full)
    for name, value in (("zeros", 0), ("ones", 1), ("empty.memory_format", 0),
                        ("zeros_like", 0), ("ones_like", 1), ("empty_like", 0),
                        ("new_zeros", 0), ("new_ones", 1), ("new_empty", 0),
                        ("empty_strided", 0)):
        patterns.lower(f"torch.aten.{name}", partial(filled, value))
    for name in ("arange", "arange.start", "arange.start_step"):
        patterns.lower(f"torch.aten.{name}", arange)
