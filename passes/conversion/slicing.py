"""torch -> ipu: PopTorch's dynamic slicing ops (`torch.poptorch.dynamic_slice` and
`torch.poptorch.dynamic_update`, poptorch/_ops/slicing.py) to `ipu.dynamic_slice` and
`ipu.dynamic_update`, whose start is read when the program runs.

As PopTorch's canonicalisation does (graphcore/poptorch,
poptorch/source/popart_canonicalization/SliceOps.cpp, ptDynamicSliceHandler), a
strided dynamic slice is the dynamic slice of `size` elements followed by a static
`ipu.slice` taking every `step`-th of them. The start reaches the ipu op as the
one-element tensor the user passed (a 0-d start is reshaped to one element).
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.data_movement import ReshapeOp, SliceOp
from poptorch.dialects.ipu import dense_i64, i64
from poptorch.dialects.slicing import DynamicSliceOp, DynamicUpdateOp
from poptorch.dialects.types import Unsupported, builtin_type

from .common import Builder, Lowering


def _check_start(value: ir.Value) -> None:
    """A start the ipu ops take: a one-element integer tensor (checked before building)."""
    t = builtin_type(value.type)
    if not isinstance(t.element_type, ir.IntegerType) or t.element_type.width == 1:
        raise Unsupported(f"dynamic slice start of element type {t.element_type}: pass an "
                          "integer tensor")
    if any(size != 1 for size in t.shape):
        raise Unsupported(f"dynamic slice start of shape {list(t.shape)}: pass one element")


def _start(b: Builder, value: ir.Value) -> ir.Value:
    """The start as a one-element integer tensor."""
    start = b.tensor(value)
    t = start.type
    if t.rank == 0:
        start = ReshapeOp(start, ir.RankedTensorType.get([1], t.element_type)).result
    return start


def _dim(b: Builder, value: ir.Value, rank: int) -> int:
    dim = b.scalar(value)
    return dim + rank if dim < 0 else dim


def dynamic_slice(op: ir.OpView, b: Builder) -> ir.Value:
    """dynamic_slice(tensor, dim, start, size, step)."""
    t = builtin_type(op.operands[0].type)
    dim = _dim(b, op.operands[1], t.rank)
    size, step = b.scalar(op.operands[3]), b.scalar(op.operands[4])
    if step < 1:
        raise Unsupported(f"dynamic slice step {step}: it must be at least 1")
    _check_start(op.operands[2])
    x = b.tensor(op.operands[0])
    start = _start(b, op.operands[2])
    shape = list(t.shape)
    shape[dim] = size
    sliced = DynamicSliceOp(x, start, i64(dim), i64(size),
                            ir.RankedTensorType.get(shape, t.element_type)).result
    if step == 1:
        return sliced
    ends = list(shape)
    steps = [1] * t.rank
    steps[dim] = step
    return SliceOp(sliced, dense_i64([0] * t.rank), dense_i64(ends), dense_i64(steps),
                   b.result_type()).result


def dynamic_update(op: ir.OpView, b: Builder) -> ir.Value:
    """dynamic_update(input, src, dim, start, size): `size` is src's extent along dim."""
    t, src = builtin_type(op.operands[0].type), builtin_type(op.operands[1].type)
    dim = _dim(b, op.operands[2], t.rank)
    size = b.scalar(op.operands[4])
    if src.shape[dim] != size:
        raise Unsupported(f"dynamic update of size {size} with a src of "
                          f"{src.shape[dim]} elements along dim {dim}")
    _check_start(op.operands[3])
    x, update = b.tensor(op.operands[0]), b.tensor(op.operands[1])
    start = _start(b, op.operands[3])
    return DynamicUpdateOp(x, update, start, i64(dim), b.result_type()).result


OPERATORS: dict[str, Lowering] = {
    "torch.poptorch.dynamic_slice": dynamic_slice,
    "torch.poptorch.dynamic_update": dynamic_update,
}
