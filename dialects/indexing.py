"""ipu ops that read or write tensors at computed positions (PopLibs popops gather,
multiSlice/multiUpdate, scatter, sort): gather, index_select, index, index_put, scatter,
sort, flip, diagonal, slice_update, embedding_bag.

Index operands are signless integer tensors of any width (i32 from the host, i64 from
`arange` and `sort`). Ops that take several index tensors in PyTorch (`x[i, j]`) take
them stacked along a last axis instead: IRDL cannot type a list of tensors of different
shapes (see dialects/ipu.py). Every verifier checks that the result type is exactly the
one the operands and attributes imply.
"""

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .elementwise import broadcast_shape
from .ipu import (
    DenseI64Array,
    Ipu,
    VerifyError,
    bool_attr,
    i64_array,
    int_attr,
    shape_str,
    str_attr,
    tensor_type,
    verified,
)

SCATTER_REDUCTIONS = ("none", "sum", "prod", "amax", "amin", "mean")
BAG_MODES = ("sum", "mean", "max")


def _index_type(value: ir.Value, what: str) -> ir.RankedTensorType:
    """The type of an index operand: a ranked tensor of signless integers (not i1)."""
    t = tensor_type(value, what)
    element = t.element_type
    if not (isinstance(element, ir.IntegerType) and element.is_signless and element.width > 1):
        raise VerifyError(f"{what} must hold signless integers, got {element}")
    return t


def _dim(op: ir.OpView, name: str, rank: int) -> int:
    dim = int_attr(op, name)
    if dim >= max(rank, 1):
        raise VerifyError(f"attribute '{name}' = {dim} is out of range for rank {rank}")
    return dim


def _type_str(shape: list[int], element: ir.Type) -> str:
    """`tensor<2x3xf32>` (verifiers run without a location to build a type in)."""
    return f"tensor<{shape_str(shape)}{'x' if shape else ''}{element}>"


def _expect(out: ir.RankedTensorType, shape: list[int], element: ir.Type) -> None:
    if list(out.shape) != list(shape) or out.element_type != element:
        raise VerifyError(f"result type {out} should be {_type_str(shape, element)}")


def _check_gather(op: "GatherOp") -> None:
    """torch.gather: index has the input's rank and fits it outside `dim`."""
    t_in, index = tensor_type(op.input, "input"), _index_type(op.index, "index")
    dim = _dim(op, "dim", t_in.rank)
    if index.rank != t_in.rank or any(
        i > n for d, (i, n) in enumerate(zip(index.shape, t_in.shape, strict=True)) if d != dim
    ):
        raise VerifyError(f"index {shape_str(index.shape)} does not fit input "
                          f"{shape_str(t_in.shape)} outside dim {dim}")
    _expect(tensor_type(op.output, "result"), index.shape, t_in.element_type)


class GatherOp(Ipu.Operation, name="gather", traits=[Pure]):
    """`out[..., i, ...] = input[..., index[..., i, ...], ...]` along `dim` (torch.gather).

    `%g = "ipu.gather"(%x, %i) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xi32>)
        -> tensor<4x2xf32>`
    """

    input: Operand[ir.RankedTensorType]
    index: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_gather)


def _check_index_select(op: "IndexSelectOp") -> None:
    """The result replaces input dim `dim` by the index's shape."""
    t_in, index = tensor_type(op.input, "input"), _index_type(op.index, "index")
    dim = _dim(op, "dim", t_in.rank)
    shape = [*t_in.shape[:dim], *index.shape, *t_in.shape[dim + 1:]]
    _expect(tensor_type(op.output, "result"), shape, t_in.element_type)


class IndexSelectOp(Ipu.Operation, name="index_select", traits=[Pure]):
    """Whole slices of `input` along `dim` at each index (popops::multiSlice; embedding,
    `x[i]`); negative indices count from the end.

    `%s = "ipu.index_select"(%w, %i) {dim = 0 : i64} : (tensor<5x3xf32>, tensor<2x4xi32>)
        -> tensor<2x4x3xf32>`
    """

    input: Operand[ir.RankedTensorType]
    index: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_index_select)


def _indexed_shape(t_in: ir.RankedTensorType, indices: ir.RankedTensorType) -> list[int]:
    """`indices.shape[:-1] + input.shape[k:]`, k = indices.shape[-1] leading dims indexed."""
    if indices.rank < 1 or not 1 <= indices.shape[-1] <= t_in.rank:
        raise VerifyError(f"indices {shape_str(indices.shape)} must stack between 1 and "
                          f"{t_in.rank} indices along their last dim")
    return [*indices.shape[:-1], *t_in.shape[indices.shape[-1]:]]


def _check_index(op: "IndexOp") -> None:
    """Advanced indexing of the first k dims by k stacked index tensors."""
    t_in = tensor_type(op.input, "input")
    shape = _indexed_shape(t_in, _index_type(op.indices, "indices"))
    _expect(tensor_type(op.output, "result"), shape, t_in.element_type)


class IndexOp(Ipu.Operation, name="index", traits=[Pure]):
    """`input[indices[..., 0], ..., indices[..., k-1]]`: PyTorch advanced indexing of the
    first k dims, the k index tensors broadcast and stacked on a last axis of size k
    (popops::multiSlice over k dims). Negative indices count from the end.

    `%r = "ipu.index"(%x, %ij) : (tensor<4x5x6xf32>, tensor<3x2xi64>) -> tensor<3x6xf32>`
    """

    input: Operand[ir.RankedTensorType]
    indices: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_index)


def _check_index_put(op: "IndexPutOp") -> None:
    """Values broadcast to the indexed shape; the result is the input's type."""
    t_in, values = tensor_type(op.input, "input"), tensor_type(op.values, "values")
    shape = _indexed_shape(t_in, _index_type(op.indices, "indices"))
    bool_attr(op, "accumulate")
    if values.element_type != t_in.element_type:
        raise VerifyError(f"values element type {values.element_type} differs from the "
                          f"input's {t_in.element_type}")
    if values.rank > len(shape) or broadcast_shape(values.shape, shape) != shape:
        raise VerifyError(f"values {shape_str(values.shape)} do not broadcast to the indexed "
                          f"shape {shape_str(shape)}")
    _expect(tensor_type(op.output, "result"), t_in.shape, t_in.element_type)


class IndexPutOp(Ipu.Operation, name="index_put", traits=[Pure]):
    """`input[indices...] = values` (or `+=` with `accumulate`, summing duplicates) on a
    copy of `input`; indices as for `ipu.index` (popops::multiUpdate / multiUpdateAdd).

    `%r = "ipu.index_put"(%x, %i, %v) {accumulate = true} : (tensor<4x5xf32>,
        tensor<3x1xi32>, tensor<3x5xf32>) -> tensor<4x5xf32>`
    """

    input: Operand[ir.RankedTensorType]
    indices: Operand[ir.RankedTensorType]
    values: Operand[ir.RankedTensorType]
    accumulate: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_index_put)


def _check_scatter(op: "ScatterOp") -> None:
    """Index and src share one shape that fits the input outside `dim`."""
    t_in, index = tensor_type(op.input, "input"), _index_type(op.index, "index")
    src = tensor_type(op.src, "src")
    dim = _dim(op, "dim", t_in.rank)
    str_attr(op, "reduction", SCATTER_REDUCTIONS)
    bool_attr(op, "include_self")
    if src.element_type != t_in.element_type:
        raise VerifyError(f"src element type {src.element_type} differs from the input's "
                          f"{t_in.element_type}")
    if list(src.shape) != list(index.shape):
        raise VerifyError(f"src {shape_str(src.shape)} and index {shape_str(index.shape)} "
                          "must have one shape")
    if index.rank != t_in.rank or any(
        i > n for d, (i, n) in enumerate(zip(index.shape, t_in.shape, strict=True)) if d != dim
    ):
        raise VerifyError(f"index {shape_str(index.shape)} does not fit input "
                          f"{shape_str(t_in.shape)} outside dim {dim}")
    _expect(tensor_type(op.output, "result"), t_in.shape, t_in.element_type)


class ScatterOp(Ipu.Operation, name="scatter", traits=[Pure]):
    """`out[..., index[p], ...] (reduction)= src[p]` along `dim` on a copy of `input`
    (torch.scatter / scatter_add / scatter_reduce; popops::scatter). `reduction` is one of
    none, sum, prod, amax, amin, mean; `include_self` false drops the input's values at
    the positions written.

    `%r = "ipu.scatter"(%x, %i, %s) {dim = 1 : i64, include_self = true,
        reduction = "sum"} : (tensor<4x5xf32>, tensor<4x2xi32>, tensor<4x2xf32>)
        -> tensor<4x5xf32>`
    """

    input: Operand[ir.RankedTensorType]
    index: Operand[ir.RankedTensorType]
    src: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    reduction: ir.StringAttr
    include_self: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_scatter)


def _check_sort(op: "SortOp") -> None:
    """Values keep the input's type; indices have its shape."""
    t_in = tensor_type(op.input, "input")
    _dim(op, "dim", t_in.rank)
    bool_attr(op, "descending")
    _expect(tensor_type(op.values, "values"), t_in.shape, t_in.element_type)
    _index_type(op.indices, "indices result")
    if list(op.indices.type.shape) != list(t_in.shape):
        raise VerifyError(f"indices result {shape_str(op.indices.type.shape)} should have "
                          f"the input's shape {shape_str(t_in.shape)}")


class SortOp(Ipu.Operation, name="sort", traits=[Pure]):
    """Sort along `dim` and give where each value came from (popops::sortKeyValue). Always
    stable: equal values keep their order, also when `descending`; NaN sorts as largest.

    `%v, %i = "ipu.sort"(%x) {descending = false, dim = 1 : i64} : (tensor<4x5xf32>)
        -> (tensor<4x5xf32>, tensor<4x5xi64>)`
    """

    input: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    descending: ir.IntegerAttr
    values: Result[ir.RankedTensorType] = result()
    indices: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_sort)


def _check_flip(op: "FlipOp") -> None:
    """Distinct dims in range; the type is kept."""
    t_in = tensor_type(op.input, "input")
    dims = i64_array(op, "dims")
    if len(set(dims)) != len(dims) or not all(0 <= d < t_in.rank for d in dims):
        raise VerifyError(f"dims {dims} must be distinct dims of 0..{t_in.rank - 1}")
    _expect(tensor_type(op.output, "result"), t_in.shape, t_in.element_type)


class FlipOp(Ipu.Operation, name="flip", traits=[Pure]):
    """Reverse the order of elements along each of `dims` (torch.flip).

    `%f = "ipu.flip"(%x) {dims = array<i64: 0, 1>} : (tensor<4x5xf32>) -> tensor<4x5xf32>`
    """

    input: Operand[ir.RankedTensorType]
    dims: DenseI64Array
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_flip)


def _check_diagonal(op: "DiagonalOp") -> None:
    """dim1 and dim2 go; the diagonal's length becomes the last dim."""
    t_in = tensor_type(op.input, "input")
    offset = int_attr(op, "offset", minimum=None)
    dim1, dim2 = _dim(op, "dim1", t_in.rank), _dim(op, "dim2", t_in.rank)
    if dim1 == dim2:
        raise VerifyError(f"dim1 and dim2 must differ, both are {dim1}")
    rows, cols = t_in.shape[dim1], t_in.shape[dim2]
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    shape = [s for d, s in enumerate(t_in.shape) if d not in (dim1, dim2)] + [length]
    _expect(tensor_type(op.output, "result"), shape, t_in.element_type)


class DiagonalOp(Ipu.Operation, name="diagonal", traits=[Pure]):
    """`out[..., i] = input[..., i, i + offset, ...]` over dims `dim1`, `dim2`
    (torch.diagonal; a negative offset is below the main diagonal).

    `%d = "ipu.diagonal"(%x) {dim1 = 0 : i64, dim2 = 1 : i64, offset = 1 : i64}
        : (tensor<4x5xf32>) -> tensor<4xf32>`
    """

    input: Operand[ir.RankedTensorType]
    offset: ir.IntegerAttr
    dim1: ir.IntegerAttr
    dim2: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_diagonal)


def _check_slice_update(op: "SliceUpdateOp") -> None:
    """The update has exactly the shape of the strided box it replaces."""
    t_in, update = tensor_type(op.input, "input"), tensor_type(op.update, "update")
    starts, ends, steps = (i64_array(op, n) for n in ("starts", "ends", "steps"))
    if not len(starts) == len(ends) == len(steps) == t_in.rank:
        raise VerifyError(f"starts, ends and steps need {t_in.rank} entries each")
    box = []
    for dim, (start, end, step, size) in enumerate(zip(starts, ends, steps, t_in.shape,
                                                       strict=True)):
        if step < 1 or not 0 <= start <= end <= size:
            raise VerifyError(f"dim {dim}: slice {start}:{end}:{step} is not within 0:{size} "
                              "with a positive step")
        box.append(-(-(end - start) // step))
    if list(update.shape) != box or update.element_type != t_in.element_type:
        raise VerifyError(f"update {update} should be {_type_str(box, t_in.element_type)}")
    _expect(tensor_type(op.output, "result"), t_in.shape, t_in.element_type)


class SliceUpdateOp(Ipu.Operation, name="slice_update", traits=[Pure]):
    """A copy of `input` with the box `ipu.slice` would read replaced by `update`
    (torch.slice_scatter / select_scatter; popops::dynamicUpdate with static offsets).

    `%r = "ipu.slice_update"(%x, %u) {starts = array<i64: 0, 1>, ends = array<i64: 4, 5>,
        steps = array<i64: 1, 2>} : (tensor<4x5xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>`
    """

    input: Operand[ir.RankedTensorType]
    update: Operand[ir.RankedTensorType]
    starts: DenseI64Array
    ends: DenseI64Array
    steps: DenseI64Array
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_slice_update)


def _check_embedding_bag(op: "EmbeddingBagOp") -> None:
    """A [V, D] table, 1-d indices and offsets; one D-row per bag."""
    weight = tensor_type(op.weight, "weight")
    indices, offsets = _index_type(op.indices, "indices"), _index_type(op.offsets, "offsets")
    str_attr(op, "mode", BAG_MODES)
    int_attr(op, "padding_idx", minimum=-1)
    last = bool_attr(op, "include_last_offset")
    if weight.rank != 2 or indices.rank != 1 or offsets.rank != 1:
        raise VerifyError(f"weight, indices and offsets must have ranks 2, 1, 1, got "
                          f"{weight.rank}, {indices.rank}, {offsets.rank}")
    bags = offsets.shape[0] - 1 if last else offsets.shape[0]
    _expect(tensor_type(op.output, "result"), [max(bags, 0), weight.shape[1]],
            weight.element_type)


class EmbeddingBagOp(Ipu.Operation, name="embedding_bag", traits=[Pure]):
    """Rows of `weight` at `indices`, reduced per bag (`mode` sum, mean or max); bag b is
    `indices[offsets[b]:offsets[b + 1]]`. With `include_last_offset` the last offset only
    ends the last bag. Indices equal to `padding_idx` (>= 0) take no part; empty bags
    give zeros (torch.nn.functional.embedding_bag).

    `%e = "ipu.embedding_bag"(%w, %i, %o) {include_last_offset = false, mode = "sum",
        padding_idx = -1 : i64} : (tensor<10x3xf32>, tensor<6xi32>, tensor<2xi32>)
        -> tensor<2x3xf32>`
    """

    weight: Operand[ir.RankedTensorType]
    indices: Operand[ir.RankedTensorType]
    offsets: Operand[ir.RankedTensorType]
    mode: ir.StringAttr
    include_last_offset: ir.IntegerAttr
    padding_idx: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_embedding_bag)
