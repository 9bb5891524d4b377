"""torch -> ipu: the indexing family (gather, index_select/embedding, advanced indexing
and index_put, scatter*, sort/topk, flip, roll, diagonal, slice/select/as_strided_scatter,
embedding_bag).

Advanced indexing `x[i, j]` arrives as `index.Tensor_hacked_twin` with one index tensor
per leading dim (torch-mlir has already turned slices between them into `arange`s);
the tensors are broadcast, cast to the widest index type and stacked on a last axis for
`ipu.index` / `ipu.index_put`. Index element types follow the IR (i32 from the host,
i64 from arange and sort): nothing is narrowed here.

Each lowering reads its constants and checks what it declines before it builds any op:
ops built by a lowering that then declines would stay behind, and the greedy driver
would never converge.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from torch_mlir import ir

from poptorch.dialects.creation import ConstantOp
from poptorch.dialects.data_movement import BroadcastOp, ConcatOp, ReshapeOp, SliceOp
from poptorch.dialects.elementwise import (
    BINARY_OPS,
    COMPARE_OPS,
    SelectOp,
    broadcast_shape,
)
from poptorch.dialects.indexing import (
    DiagonalOp,
    EmbeddingBagOp,
    FlipOp,
    GatherOp,
    IndexOp,
    IndexPutOp,
    IndexSelectOp,
    ScatterOp,
    SliceUpdateOp,
    SortOp,
)
from poptorch.dialects.ipu import i64, make_bool
from poptorch.dialects.types import Unsupported, builtin_type

from .common import FROM_BUILTIN, Builder, Patterns

BAG_MODES = ("sum", "mean", "max")  # aten.embedding_bag's integer mode
# scatter_reduce.two's reduce -> ipu.scatter's reduction; scatter.reduce's spelling too
REDUCTIONS = {"sum": "sum", "prod": "prod", "amax": "amax", "amin": "amin", "mean": "mean",
              "add": "sum", "multiply": "prod"}


def _tensor_type(shape: list[int], like: ir.Value) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(shape, like.type.element_type)


def _dim(b: Builder, value: ir.Value, rank: int) -> int:
    return b.scalar(value) % max(rank, 1)


def slice_along(x: ir.Value, dim: int, start: int, end: int, step: int = 1) -> ir.Value:
    """`x[start:end:step]` along `dim` (0 <= start <= end <= size)."""
    shape = list(x.type.shape)
    starts, ends, steps = [0] * len(shape), list(shape), [1] * len(shape)
    starts[dim], ends[dim], steps[dim] = start, end, step
    shape[dim] = -(-(end - start) // step)
    attrs = [ir.DenseI64ArrayAttr.get(v) for v in (starts, ends, steps)]
    return SliceOp(x, *attrs, _tensor_type(shape, x)).result


def reshape_to(x: ir.Value, shape: list[int]) -> ir.Value:
    return x if list(x.type.shape) == shape else ReshapeOp(x, _tensor_type(shape, x)).result


def _operand_type(op: ir.OpView, index: int) -> ir.RankedTensorType:
    """The builtin type of a tensor operand, read without creating a cast."""
    return builtin_type(op.operands[index].type)


def _index_list(value: ir.Value) -> tuple[list[ir.Value], list[int], ir.IntegerType]:
    """The index tensors of an advanced-indexing list, their broadcast shape and the
    widest index type; Unsupported (before any op is built) for masks and dynamic shapes."""
    owner = value.owner
    if not (isinstance(owner, ir.OpView) and owner.operation.name == "torch.prim.ListConstruct"):
        raise Unsupported("a tensor list that is not built in the graph")
    shape: list[int] | None = []
    widths = []
    for v in owner.operands:
        t = builtin_type(v.type)
        element = t.element_type
        if not isinstance(element, ir.IntegerType) or element.width == 1 or element.is_unsigned:
            raise Unsupported(f"index tensors of element type {element} (a boolean mask gives a "
                              "data-dependent shape; index with integer tensors)")
        if not t.has_static_shape:
            raise Unsupported("index tensors of data-dependent shape")
        widths.append(element.width)
        shape = broadcast_shape(shape, list(t.shape))
        if shape is None:
            raise Unsupported("index tensors whose shapes do not broadcast")
    return list(owner.operands), shape, ir.IntegerType.get_signless(max(widths))


def stack_indices(b: Builder, values: list[ir.Value], shape: list[int],
                  element: ir.IntegerType) -> ir.Value:
    """Index tensors cast to `element`, broadcast to `shape` and stacked on a new last
    axis (as `_index_list` found them)."""
    parts = []
    for value in values:
        t = b.cast(b.tensor(value), element)
        if list(t.type.shape) != shape:
            t = BroadcastOp(t, ir.RankedTensorType.get(shape, element)).result
        parts.append(reshape_to(t, [*shape, 1]))
    stacked = parts[0]
    for count, part in enumerate(parts[1:], start=2):
        stacked = ConcatOp(stacked, part, i64(len(shape)),
                           ir.RankedTensorType.get([*shape, count], element)).result
    return stacked


def gather(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.gather(x, dim, index, sparse_grad)."""
    out, dim = b.result_type(), _dim(b, op.operands[1], _operand_type(op, 0).rank)
    x, index = b.tensor(op.operands[0]), b.tensor(op.operands[2])
    return GatherOp(x, index, i64(dim), out).result


def index_select(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.index_select(x, dim, index); a 0-d index selects a size-1 slice."""
    out, dim = b.result_type(), _dim(b, op.operands[1], _operand_type(op, 0).rank)
    x, index = b.tensor(op.operands[0]), b.tensor(op.operands[2])
    return IndexSelectOp(x, reshape_to(index, list(index.type.shape) or [1]), i64(dim),
                         out).result


def embedding(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.embedding(weight, indices, padding_idx, ...): rows of weight (padding_idx only
    changes the gradient)."""
    out = b.result_type()
    weight, indices = b.tensor(op.operands[0]), b.tensor(op.operands[1])
    return IndexSelectOp(weight, indices, i64(0), out).result


def index(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.index.Tensor_hacked_twin(x, [i0, ..., ik-1]): x[i0, ..., ik-1]; a single
    index tensor is an index_select of dim 0, or a slice where it is a constant
    arithmetic run (the gathers torch-mlir makes of `as_strided` views)."""
    out = b.result_type()
    if not out.has_static_shape:
        raise Unsupported("indexing with a data-dependent result shape (a boolean mask)")
    values, shape, element = _index_list(op.operands[1])
    x = b.tensor(op.operands[0])
    run = _constant_run(values, shape, list(x.type.shape))
    if run is not None:  # constant positions in steps: a slice (torch's as_strided)
        leading = int(np.prod(x.type.shape[:len(values)], dtype=np.int64))
        if run == (0, leading, 1):  # every position in order
            return reshape_to(x, list(out.shape))
        flat = reshape_to(x, [leading, *x.type.shape[len(values):]])
        return reshape_to(slice_along(flat, 0, *run), list(out.shape))
    if len(values) == 1:
        return IndexSelectOp(x, b.tensor(values[0]), i64(0), out).result
    return IndexOp(x, stack_indices(b, values, shape, element), out).result


def _constant_array(value: ir.Value) -> np.ndarray | None:
    """The values of a torch literal or of an ipu.constant it became; None otherwise."""
    owner = value.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == FROM_BUILTIN:
        owner = owner.operands[0].owner
    literal = isinstance(owner, ir.OpView) and owner.operation.name == "torch.vtensor.literal"
    if not (literal or isinstance(owner, ConstantOp)):
        return None
    attr = owner.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr):
        return None
    shape = list(ir.ShapedType(attr.type).shape)
    if attr.is_splat:
        return np.full(shape, attr.get_splat_value().value)
    return np.array(attr).reshape(shape)


def _constant_run(values: list[ir.Value], shape: list[int],
                  sizes: list[int]) -> tuple[int, int, int] | None:
    """(start, end, step) when the index tensors `values` (broadcast to `shape`) are
    constants whose positions in the flattened leading dims of `sizes`, in row-major
    order, are start, start + step, ... (step >= 1); else None."""
    arrays = [_constant_array(v) for v in values]
    if any(a is None or a.dtype.kind not in "iu" for a in arrays) or len(arrays) > len(sizes):
        return None
    leading = sizes[:len(arrays)]
    indices = []
    for array, size in zip(arrays, leading, strict=True):
        array = np.broadcast_to(array.astype(np.int64), shape).ravel()
        if array.size and (array.min() < -size or array.max() >= size):
            return None
        indices.append(np.where(array < 0, array + size, array))
    if not indices[0].size:
        return None
    return arithmetic_run(np.ravel_multi_index(indices, leading))


def arithmetic_run(flat: np.ndarray) -> tuple[int, int, int] | None:
    """(start, end, step) of a 1-d array start, start + step, ... (step >= 1), or None."""
    start = int(flat[0])
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    if step < 1 or not np.array_equal(flat, start + step * np.arange(flat.size)):
        return None
    return start, start + step * (flat.size - 1) + 1, step


def index_put(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.index_put.hacked_twin(x, [i0, ...], values, accumulate)."""
    out, accumulate = b.result_type(), make_bool(b.scalar(op.operands[3]))
    values, shape, element = _index_list(op.operands[1])
    x = b.tensor(op.operands[0])
    indices = stack_indices(b, values, shape, element)
    update = b.cast(b.tensor(op.operands[2]), out.element_type)
    return IndexPutOp(x, indices, update, accumulate, out).result


def scatter(kind: str, op: ir.OpView, b: Builder) -> ir.Value:
    """scatter.src / scatter.value / scatter_add / scatter.reduce / scatter_reduce.two:
    (x, dim, index, src or value[, reduce[, include_self]])."""
    out = b.result_type()
    dim = _dim(b, op.operands[1], out.rank)
    reduction, include_self = {"add": "sum"}.get(kind, "none"), True
    if kind == "reduce":
        reduce = b.scalar(op.operands[4])
        if reduce not in REDUCTIONS:
            raise Unsupported(f"scatter reduction '{reduce}'")
        reduction = REDUCTIONS[reduce]
        include_self = len(op.operands) < 6 or bool(b.scalar(op.operands[5]))
    value = b.scalar(op.operands[3]) if kind == "value" else None
    x, index = b.tensor(op.operands[0]), b.tensor(op.operands[2])
    if kind == "value":
        src = b.constant(value, out.element_type, index.type.shape)
    else:
        src = b.cast(b.tensor(op.operands[3]), out.element_type)
        for d, size in enumerate(index.type.shape):  # torch reads only index's box of src
            if src.type.shape[d] != size:
                src = slice_along(src, d, 0, size)
    return ScatterOp(x, index, src, i64(dim), ir.StringAttr.get(reduction),
                     make_bool(include_self), out).result


def sort(op: ir.OpView, b: Builder) -> tuple[ir.Value, ir.Value]:
    """aten.sort(x, dim, descending): values and int64 indices (always stable)."""
    values_type, indices_type = b.result_type(0), b.result_type(1)
    dim = _dim(b, op.operands[1], values_type.rank)
    descending = make_bool(b.scalar(op.operands[2]))
    sorted_ = SortOp(b.tensor(op.operands[0]), i64(dim), descending, values_type,
                     indices_type)
    return sorted_.values, sorted_.indices


def topk(op: ir.OpView, b: Builder) -> tuple[ir.Value, ir.Value]:
    """aten.topk(x, k, dim, largest, sorted): the first k of a stable sort."""
    t = _operand_type(op, 0)
    indices_type = ir.RankedTensorType.get(t.shape, b.result_type(1).element_type)
    k, dim = b.scalar(op.operands[1]), _dim(b, op.operands[2], t.rank)
    largest = make_bool(b.scalar(op.operands[3]))
    sorted_ = SortOp(b.tensor(op.operands[0]), i64(dim), largest, t, indices_type)
    return slice_along(sorted_.values, dim, 0, k), slice_along(sorted_.indices, dim, 0, k)


def flip(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.flip(x, dims)."""
    rank = _operand_type(op, 0).rank
    dims = sorted({d % rank for d in b.scalar_list(op.operands[1])}) if rank else []
    x = b.tensor(op.operands[0])
    return FlipOp(x, ir.DenseI64ArrayAttr.get(dims), x.type).result if dims else x


def _roll_dim(x: ir.Value, shift: int, dim: int) -> ir.Value:
    size = x.type.shape[dim]
    shift = shift % size if size else 0
    if not shift:
        return x
    tail = slice_along(x, dim, size - shift, size)
    head = slice_along(x, dim, 0, size - shift)
    return ConcatOp(tail, head, i64(dim), x.type).result


def roll(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.roll(x, shifts, dims) as slices and a concat per dim; no dims rolls the
    flattened tensor."""
    shape = list(_operand_type(op, 0).shape)
    shifts, dims = b.scalar_list(op.operands[1]), b.scalar_list(op.operands[2])
    x = b.tensor(op.operands[0])
    if not dims:
        return reshape_to(_roll_dim(reshape_to(x, [int(np.prod(shape))]), shifts[0], 0), shape)
    for shift, dim in zip(shifts, dims, strict=True):
        x = _roll_dim(x, shift, dim % len(shape))
    return x


def diagonal(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.diagonal(x, offset, dim1, dim2)."""
    out, rank = b.result_type(), _operand_type(op, 0).rank
    offset, dim1, dim2 = (b.scalar(v) for v in op.operands[1:4])
    return DiagonalOp(b.tensor(op.operands[0]), i64(offset), i64(dim1 % rank),
                      i64(dim2 % rank), out).result


def _slice_update(op: ir.OpView, b: Builder, dim: int, start: int, end: int,
                  step: int) -> ir.Value:
    """slice/select_scatter's operand 0 with operand 1 written to a slice along `dim`."""
    out = b.result_type()
    starts, ends, steps = [0] * out.rank, list(out.shape), [1] * out.rank
    starts[dim], ends[dim], steps[dim] = start, end, step
    box = [-(-(e - s) // st) for s, e, st in zip(starts, ends, steps, strict=True)]
    x = b.tensor(op.operands[0])
    update = reshape_to(b.cast(b.tensor(op.operands[1]), out.element_type), box)
    attrs = [ir.DenseI64ArrayAttr.get(v) for v in (starts, ends, steps)]
    return SliceUpdateOp(x, update, *attrs, out).result


def slice_scatter(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.slice_scatter(x, src, dim, start?, end?, step): Python slicing rules."""
    shape = _operand_type(op, 0).shape
    dim = _dim(b, op.operands[2], len(shape))
    start, end, step = (b.scalar(v) for v in op.operands[3:6])
    start, end, step = slice(start, end, step).indices(shape[dim])
    if step < 1:
        raise Unsupported("slice_scatter with a negative step")
    return _slice_update(op, b, dim, start, max(start, end), step)


def select_scatter(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.select_scatter(x, src, dim, index): src fills x[..., index, ...]."""
    shape = _operand_type(op, 0).shape
    dim = _dim(b, op.operands[2], len(shape))
    index = b.scalar(op.operands[3])
    index = index + shape[dim] if index < 0 else index
    if not 0 <= index < shape[dim]:
        raise Unsupported(f"index {index} is out of range for dimension {dim} of size "
                          f"{shape[dim]}")
    return _slice_update(op, b, dim, index, index + 1, 1)


def _strided_positions(size: list[int], stride: list[int], offset: int) -> np.ndarray:
    """The storage positions `as_strided(size, stride, offset)` reads, in `size`'s shape."""
    positions = np.full(size, offset, dtype=np.int64)
    for dim, (count, step) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[dim] = count
        positions = positions + (np.arange(count, dtype=np.int64) * step).reshape(shape)
    return positions


def _strided_box(positions: np.ndarray, shape: list[int]) -> tuple[list[int], list[int],
                                                                    list[int]] | None:
    """starts, ends and steps of the box of a contiguous tensor of `shape` whose
    elements, in row-major order, are at `positions` (also row-major); None if there
    is no such box (a transposed or overlapping view)."""
    flat = positions.ravel()
    numel = int(np.prod(shape))
    if not flat.size or not shape:
        return None
    strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
    starts = [int(v) for v in np.unravel_index(int(flat[0]), shape)]
    counts, steps, dim = [1] * len(shape), [1] * len(shape), 0
    for count, step in ((c, s) for c, s in zip(positions.shape, _steps(positions),
                                                strict=True) if c > 1):
        while dim < len(shape) and not (
                shape[dim] > 1 and step > 0 and step % strides[dim] == 0
                and starts[dim] + step // strides[dim] * (count - 1) < shape[dim]):
            dim += 1
        if dim == len(shape):
            return None
        counts[dim], steps[dim] = count, step // strides[dim]
        dim += 1
    ends = [start + step * (count - 1) + 1
            for start, step, count in zip(starts, steps, counts, strict=True)]
    box = np.arange(numel).reshape(shape)[tuple(map(slice, starts, ends, steps))]
    return (starts, ends, steps) if np.array_equal(box.ravel(), flat) else None


def _steps(positions: np.ndarray) -> list[int]:
    """The distance between neighbours along each dim of a strided position grid."""
    return [int(np.take(positions, 1, axis=d).ravel()[0] - positions.ravel()[0])
            if n > 1 else 0 for d, n in enumerate(positions.shape)]


def as_strided_scatter(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.as_strided_scatter(x, src, size, stride, storage_offset): a copy of x (a
    value, so contiguous) whose elements at `storage_offset + sum(i_k * stride_k)` are
    src's (the backward of `as_strided`, which functionalisation makes of views): src
    reshaped where it covers x in order, an ipu.slice_update of the flattened x where
    the positions are one run in steps, of x where they are a box of it (a slice or a
    select), else an ipu.index_put of the flattened x at constant positions."""
    out = b.result_type()
    shape = list(out.shape)
    size, stride = b.scalar_list(op.operands[2]), b.scalar_list(op.operands[3])
    offset = 0 if b.is_none(op.operands[4]) else b.scalar(op.operands[4])
    if list(_operand_type(op, 1).shape) != size:
        raise Unsupported(f"src of shape {list(_operand_type(op, 1).shape)} for a view of "
                          f"size {size}")
    numel = int(np.prod(shape))
    positions = _strided_positions(size, stride, offset)
    if positions.size and not (0 <= positions.min() and positions.max() < numel):
        raise Unsupported(f"the view (size {size}, stride {stride}, offset {offset}) "
                          f"reaches outside the {numel} elements of the input")
    if np.unique(positions).size != positions.size:
        raise Unsupported(f"a view (size {size}, stride {stride}) whose elements overlap: "
                          "PyTorch cannot write to it either")
    x = b.tensor(op.operands[0])
    src = b.cast(b.tensor(op.operands[1]), out.element_type)
    if not positions.size:
        return x
    run = arithmetic_run(positions.ravel())
    if run is not None:  # a run of the flattened x (a reshaped or flattened view)
        if run == (0, numel, 1):
            return reshape_to(src, shape)
        attrs = [ir.DenseI64ArrayAttr.get([v]) for v in run]
        flat = SliceUpdateOp(reshape_to(x, [numel]), reshape_to(src, [positions.size]), *attrs,
                             _tensor_type([numel], x)).result
        return reshape_to(flat, shape)
    box = _strided_box(positions, shape)
    if box is not None:
        counts = [-(-(e - s) // st) for s, e, st in zip(*box, strict=True)]
        attrs = [ir.DenseI64ArrayAttr.get(v) for v in box]
        return SliceUpdateOp(x, reshape_to(src, counts), *attrs, out).result
    count = positions.size
    index_type = ir.IntegerType.get_signless(32 if numel < 2**31 else 64)
    indices = b.constant(positions.reshape(count, 1), index_type, [count, 1])
    flat = IndexPutOp(reshape_to(x, [numel]), indices, reshape_to(src, [count]), make_bool(False),
                      _tensor_type([numel], x)).result
    return reshape_to(flat, shape)


def embedding_bag(op: ir.OpView, b: Builder) -> list[ir.Value]:
    """aten.embedding_bag.padding_idx(weight, indices, offsets, scale_grad_by_freq, mode,
    sparse, per_sample_weights, include_last_offset, padding_idx): the bags' output; the
    other three results only serve the backward pass and must be unused."""
    if any(list(result.uses) for result in op.results[1:]):
        raise Unsupported("embedding_bag's offset2bag, bag_size and max_indices results")
    out, unused = b.result_type(0), [b.result_type(i) for i in range(1, 4)]
    mode = BAG_MODES[b.scalar(op.operands[4])]
    last, padding = make_bool(b.scalar(op.operands[7])), b.scalar(op.operands[8])
    padding = -1 if padding is None or padding < 0 else padding
    weight, indices = b.tensor(op.operands[0]), b.tensor(op.operands[1])
    offsets = b.tensor(op.operands[2])
    if not b.is_none(op.operands[6]):  # weighted sum: weight the rows, then bag them
        weight, indices = _weighted_rows(b, weight, indices, b.tensor(op.operands[6]), padding)
        padding = -1
    output = EmbeddingBagOp(weight, indices, offsets, ir.StringAttr.get(mode), last,
                            i64(padding), out).result
    return [output, *(_placeholder(b, t) for t in unused)]


def _placeholder(b: Builder, t: ir.RankedTensorType) -> ir.Value:
    """Zeros of type `t` for a result nothing reads (canonicalize removes them). An empty
    one is sliced from a non-empty constant: an empty dense attribute cannot be passed to
    an op builder."""
    value = b.constant(0, t.element_type, [size or 1 for size in t.shape])
    for dim, size in enumerate(t.shape):
        if size == 0:
            value = slice_along(value, dim, 0, 0)
    return value


def _weighted_rows(b: Builder, weight: ir.Value, indices: ir.Value, scale: ir.Value,
                   padding: int) -> tuple[ir.Value, ir.Value]:
    """The rows of `weight` at `indices` times per-sample weights (0 at padding_idx), and
    indices 0..n-1 that pick them in order."""
    count, width = indices.type.shape[0], weight.type.shape[1]
    rows = IndexSelectOp(weight, indices, i64(0), _tensor_type([count, width], weight)).result
    scale = reshape_to(b.cast(scale, weight.type.element_type), [count, 1])
    if padding >= 0:
        pad = b.constant(padding, indices.type.element_type)
        is_pad = COMPARE_OPS["eq"](indices, pad, ir.RankedTensorType.get(
            [count], ir.IntegerType.get_signless(1))).result
        zero = b.constant(0, weight.type.element_type)
        scale = SelectOp(reshape_to(is_pad, [count, 1]), zero, scale, scale.type).result
    weighted = BINARY_OPS["mul"](rows, scale, rows.type).result
    return weighted, b.constant(np.arange(count), indices.type.element_type, [count])


def populate_indexing(patterns: Patterns) -> None:
    """Register the indexing lowerings."""
    patterns.lower("torch.aten.gather", gather)
    patterns.lower("torch.aten.index_select", index_select)
    patterns.lower("torch.aten.embedding", embedding)
    patterns.lower("torch.aten.index.Tensor_hacked_twin", index)
    patterns.lower("torch.aten.index_put.hacked_twin", index_put)
    for name, kind in (("scatter.src", "src"), ("scatter.value", "value"),
                       ("scatter_add", "add"), ("scatter.reduce", "reduce"),
                       ("scatter_reduce.two", "reduce")):
        patterns.lower(f"torch.aten.{name}", partial(scatter, kind))
    patterns.lower("torch.aten.sort", sort)
    patterns.lower("torch.aten.topk", topk)
    patterns.lower("torch.aten.flip", flip)
    patterns.lower("torch.aten.roll", roll)
    patterns.lower("torch.aten.diagonal", diagonal)
    patterns.lower("torch.aten.slice_scatter", slice_scatter)
    patterns.lower("torch.aten.select_scatter", select_scatter)
    patterns.lower("torch.aten.as_strided_scatter", as_strided_scatter)
    patterns.lower("torch.aten.embedding_bag.padding_idx", embedding_bag)
