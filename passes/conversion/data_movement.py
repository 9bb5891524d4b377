"""torch -> ipu: views and layout (reshape family, permute/transpose, expand, slice,
select, cat, stack-as-cat)."""

from __future__ import annotations

from functools import partial

from torch_mlir import ir

from poptorch.dialects.data_movement import BroadcastOp, ConcatOp, PermuteOp, ReshapeOp, SliceOp
from poptorch.dialects.ipu import i64
from poptorch.dialects.types import Unsupported

from .common import Builder, Patterns


def to_result_type(op_class: type, op: ir.OpView, b: Builder) -> ir.Value:
    """Ops whose result type says it all: reshape (view, squeeze, unsqueeze, flatten...)
    and broadcast (expand, broadcast_to, expand_as). Nothing when the type is unchanged."""
    out = b.result_type()
    x = b.tensor(op.operands[0])
    if x.type == out:
        return x
    return op_class(x, out).result


def permute(op: ir.OpView, b: Builder) -> ir.Value:
    x = b.tensor(op.operands[0])
    rank = x.type.rank
    dims = [d % rank for d in b.scalar_list(op.operands[1])] if rank else []
    return PermuteOp(x, ir.DenseI64ArrayAttr.get(dims), b.result_type()).result


def transpose(op: ir.OpView, b: Builder) -> ir.Value:
    """transpose.int(x, a, b) and t(x)."""
    x = b.tensor(op.operands[0])
    rank = x.type.rank
    dims = list(range(rank))
    if len(op.operands) == 3:
        first, second = (b.scalar(v) % rank for v in op.operands[1:3])
    elif rank == 2:
        first, second = 0, 1
    else:
        return x
    dims[first], dims[second] = dims[second], dims[first]
    return PermuteOp(x, ir.DenseI64ArrayAttr.get(dims), b.result_type()).result


def slice_(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.slice.Tensor(x, dim, start?, end?, step), Python slicing rules."""
    x = b.tensor(op.operands[0])
    shape = list(x.type.shape)
    dim = b.scalar(op.operands[1]) % len(shape)
    start, end, step = (b.scalar(v) for v in op.operands[2:5])
    start, end, step = slice(start, end, step).indices(shape[dim])
    if step < 1:
        raise Unsupported("slices with a negative step")
    end = max(start, end)
    shape[dim] = -(-(end - start) // step)
    out = ir.RankedTensorType.get(shape, x.type.element_type)  # torch may leave it dynamic
    return _slice(x, dim, start, end, step, out)


def _slice(x: ir.Value, dim: int, start: int, end: int, step: int,
           out: ir.RankedTensorType) -> ir.Value:
    shape = list(x.type.shape)
    starts, ends, steps = [0] * len(shape), list(shape), [1] * len(shape)
    starts[dim], ends[dim], steps[dim] = start, end, step
    attrs = [ir.DenseI64ArrayAttr.get(v) for v in (starts, ends, steps)]
    return SliceOp(x, *attrs, out).result


def select(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.select.int(x, dim, index): a size-1 slice, reshaped without that dim."""
    x = b.tensor(op.operands[0])
    shape = list(x.type.shape)
    dim = b.scalar(op.operands[1]) % len(shape)
    index = b.scalar(op.operands[2])
    index = index + shape[dim] if index < 0 else index
    if not 0 <= index < shape[dim]:
        raise Unsupported(f"index {index} is out of range for dimension {dim} of size "
                          f"{shape[dim]}")
    kept = shape.copy()
    kept[dim] = 1
    part = _slice(x, dim, index, index + 1, 1,
                  ir.RankedTensorType.get(kept, x.type.element_type))
    return ReshapeOp(part, b.result_type()).result


def cat(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.cat(list, dim) as a chain of binary ipu.concat (see dialects/ipu.py)."""
    list_op = op.operands[0].owner
    if list_op.operation.name != "torch.prim.ListConstruct":
        raise Unsupported("cat of a tensor list that is not built in the graph")
    out = b.result_type()
    parts = [b.cast(b.tensor(v), out.element_type) for v in list_op.operands]
    parts = [p for p in parts if not (p.type.rank == 1 and p.type.shape[0] == 0)]
    dim = b.scalar(op.operands[1]) % out.rank
    result = parts[0]
    for part in parts[1:]:
        shape = list(result.type.shape)
        shape[dim] += part.type.shape[dim]
        result = ConcatOp(result, part, i64(dim),
                          ir.RankedTensorType.get(shape, out.element_type)).result
    return result


def populate_data_movement(patterns: Patterns) -> None:
    for name in ("view", "reshape", "_unsafe_view", "squeeze", "squeeze.dim", "squeeze.dims",
                 "unsqueeze", "flatten.using_ints", "unflatten.int", "_reshape_alias"):
        patterns.lower(f"torch.aten.{name}", partial(to_result_type, ReshapeOp))
    patterns.lower("torch.aten.permute", permute)
    patterns.lower("torch.aten.transpose.int", transpose)
    patterns.lower("torch.aten.t", transpose)
    for name in ("expand", "broadcast_to", "expand_as"):
        patterns.lower(f"torch.aten.{name}", partial(to_result_type, BroadcastOp))
    patterns.lower("torch.aten.slice.Tensor", slice_)
    patterns.lower("torch.aten.select.int", select)
    patterns.lower("torch.aten.cat", cat)


