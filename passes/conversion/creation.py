"""torch -> ipu: tensors made in the graph (literals, full/zeros/ones/empty, *_like,
arange). Shapes are static, so each becomes an `ipu.constant` computed at compile time."""

from __future__ import annotations

from functools import partial

import numpy as np
from torch_mlir import ir

from poptorch.dialects.creation import RandomUniformOp
from poptorch.dialects.types import Unsupported, numpy_dtype

from .common import Builder, Patterns


def literal(op: ir.OpView, b: Builder) -> ir.Value:
    """torch.vtensor.literal(dense<...>)."""
    value = op.attributes["value"]
    if not isinstance(value, ir.DenseElementsAttr):
        raise Unsupported(f"literal of attribute kind {type(value).__name__}")
    out = b.result_type()
    array = np.array(value) if not value.is_splat else np.array(value.get_splat_value().value)
    return b.constant(array, out.element_type, out.shape)


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


def uniform(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.uniform(x, low, high, generator): fresh samples of x's shape (x's values unused;
    rand, randn, bernoulli and training-mode dropout all arrive as this)."""
    if not b.is_none(op.operands[3]):
        raise Unsupported("an explicit torch.Generator: use Options.randomSeed instead")
    f64 = ir.F64Type.get()
    low, high = (ir.FloatAttr.get(f64, float(b.scalar(v))) for v in op.operands[1:3])
    return RandomUniformOp(low, high, b.result_type()).result


def populate_creation(patterns: Patterns) -> None:
    patterns.lower("torch.vtensor.literal", literal)
    patterns.lower("torch.aten.full", full)
    patterns.lower("torch.aten.full_like", full)
    for name, value in (("zeros", 0), ("ones", 1), ("empty.memory_format", 0),
                        ("zeros_like", 0), ("ones_like", 1), ("empty_like", 0),
                        ("new_zeros", 0), ("new_ones", 1), ("new_empty", 0)):
        patterns.lower(f"torch.aten.{name}", partial(filled, value))
    for name in ("arange", "arange.start", "arange.start_step"):
        patterns.lower(f"torch.aten.{name}", arange)
    patterns.lower("torch.aten.uniform", uniform)
