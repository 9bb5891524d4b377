"""The cost rules of the op families: how PopLibs would plan each, in BSP steps.

A rule takes the `Plan` of one op and returns `OpCost(compute, exchange, sync,
temporary_bytes)`; `cost.COST_RULES` maps each ipu op class to one (a family's rule bound
to its op's particulars with `functools.partial`).

- Tiles: T = tilesPerIPU - io_tiles are available (Options numIOTiles reserves the rest).
  A tensor of n elements of b bytes is spread linearly over
  `spread(n, b) = min(T, ceil(n / ceil(128 / b)))` tiles, at least 128 bytes each
  (poputil's calcLinearTileMapping), so a small op uses few tiles. Ops are planned over
  the tiles of their result.
- Vector work (elementwise, reductions, pooling, optimizer updates): a tile's e elements
  are shared by its numWorkerContexts (W) worker threads; PopLibs' codelet tables give
  `c` cycles per loop of `u` elements (`plan.VECTOR_RATES`, one natural 64-bit vector a
  cycle unless listed), and the barrel-threaded tile issues for one worker every W
  cycles: `vector_cycles(e) = ceil(ceil(e / W) / u) * c * W`.
- AMP ops (grouped conv, conv_transpose, conv_weight_grad: ungrouped ones, and matmuls,
  are poplin's conv vertices, `cost_conv` and `cost_matmul`) are a batch of B products of
  (M x K) by (K x N), planned with K split in d parts (d = 1, 2, 4, ... <= K). The B*M*N
  outputs spread over t = min(spread(B*M*N, b), T // d) tiles, A = ceil(B*M*N / t)
  each: g = ceil(A / (M*N)) whole products when A >= M*N, else an mb x nb block with
  nb = min(N, ceil(A / mb)), mb square (min(M, max(ceil(sqrt(A)), ceil(A / N))): all
  of N and the rows A needs when N is narrower than the square) or 2^j within 16x of
  it (`amp_plans`: poplin's planner weighs the shapes); each of the d tiles of a block
  takes k = ceil(K / d) of K. compute = ceil(g*mb*nb*k / AMP MACs a cycle), the MACs
  of the operands' type and partials (`amp_rate`: fp16 with fp32 partials at
  fp16InFp32OutAmpMacsPerCycle, with fp16 partials at fp16AmpMacsPerCycle). The tile
  receives its operand slabs, g*mb*k*b of the left one and g*k*nb*b of the right one
  (once, for a right operand shared by the whole batch), except what it holds of a
  pre-arranged operand (`layout`: an argument or constant, laid out for the op): such a
  slab is spread over the s tiles sharing it (ceil(N / nb) for the left slab, ceil(M /
  mb) for the right), and a tile receives slab - floor(slab / s) (poplin's
  addExchangeCycleEstimates). Exchange moves exchangeBytesPerCycle a tile a cycle in
  (and out, at once: only what a tile receives bounds it), in its own BSP step. With
  d > 1 a second step sums the fp32 partials (fp16 ones with `ipu.partials_type =
  f16`): each tile receives and adds ceil(g*mb*nb*(d-1)/d) of them.
- Gathers (gather, index_select, index, embedding_bag, scatter, index_put): a tile
  copies its e result elements (`ceil(e*b / memcpyBytesPerCycle)`) and receives them
  plus the indices: `recv = e*b + index bytes`; a lookup in a pre-arranged table
  (`GATHERS_FROM_TABLE`) receives only the indices (popops::multiSlice). An op with an
  index per element (`ELEMENT_INDEXED`: torch.gather's index has the result's shape,
  scatter's the updates') receives only the indices of its tile's share e / n of the
  result, `ceil(index bytes * e / n)`, and a scatter its share of the updates instead
  of the result: the sliced dimension stays whole on a tile and the others are split
  (popops::createSliceableTensor), and a multiSlice / multiUpdate vertex is given the
  offsets of the slices it makes (graphcore/poplibs lib/popops/DynamicSlice.cpp,
  generateMultiSliceVertices / multiUpdate; gather is a multiSlice,
  lib/popops/GatherInternal.cpp).
- Available memory proportion p (spec 4.6.9; default 0.6; an op's own
  `ipu.available_memory` attribute, from `poptorch.set_available_memory`, wins): the
  received slabs (and partial sums) of AMP ops and gathers are temporary memory, capped
  at cap = p * memoryBytesPerTile per tile. Slabs needing more are serialised into
  s = min(max pieces, ceil(recv / cap)) pieces (K columns for AMP ops, indices for
  gathers), each its own exchange and sync: exchange = s * ceil(ceil(recv / s) /
  exchangeBytesPerCycle), sync = s * globalSyncCycles; temporary_bytes = tiles x
  (ceil(recv / s) + partial sums). The plan is the fastest whose temporaries a tile fit
  the cap (if none does, the smallest, with the spec's warning): lower p, fewer
  temporary bytes, more cycles.
- Reductions: stage 1 reduces each tile's share; when an output's inputs span several
  tiles, stage 2 exchanges fp32 partials to the output's tile and reduces them (a second
  sync). A fan-in of 2 sqrt(tilesPerIPU) partials or more (a batch norm's statistics:
  64 channels from every tile) first goes through an intermediate stage spread over the
  IPU, each tile summing groups of ceil(sqrt(span)) partials (a third sync), as PopLibs
  does (graphcore/poplibs lib/popops/reduction/ReductionPlan.cpp, calculateNextStep:
  straight to the output only when "the fan-in is low enough", < 2 sqrt(tiles)).
  Data movement (permute, slice, concat, pad, ...) copies and receives its result
  share. Elementwise operands with fewer elements than the result (broadcasts) are
  received; operands laid out like the result cost no exchange.
- Optimizer updates: passes of elementwise ops over the weights (`optimizer`'s `passes`).
- Zero-size work costs no cycles: an op whose results are empty costs nothing
  (`cost.op_cost`); an AMP op with no products to sum (K = 0, as Linear(0, n)) or a
  reduction over an empty dimension only fills its result (zeros, or the reduction's
  identity) on the tiles, as iota does (`movement` receiving nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from torch_mlir import ir

from poptorch.dialects.convolution_backward import ConvWeightGradOp
from poptorch.dialects.elementwise import BINARY_OPS
from poptorch.dialects.indexing import (
    EmbeddingBagOp,
    GatherOp,
    IndexOp,
    IndexSelectOp,
    ScatterOp,
)
from poptorch.dialects.linear import MatMulOp
from poptorch.runtime.machine.layout import shared_matrix
from poptorch.runtime.machine.plan import OpCost, Plan, vector_cycles, vector_rate
from poptorch.runtime.machine.system import (
    element_bits,
    element_type,
    spread,
    static_shape,
    value_bytes,
)

ADD, MUL, MAX = BINARY_OPS["add"], BINARY_OPS["mul"], BINARY_OPS["max"]

# Gathers that read rows of their operand 0 (the table) at the indices.
GATHERS_FROM_TABLE = (GatherOp, IndexSelectOp, IndexOp, EmbeddingBagOp)
# Gathers and scatters with an index per element, shaped like the result (gather) or
# the updates (scatter, operand 2), not per looked-up row.
ELEMENT_INDEXED = (GatherOp, ScatterOp)

Dims = tuple[int, int, int, int]  # (B, M, N, K) of an AMP op


def _groups(op: ir.Operation) -> int:
    return ir.IntegerAttr(op.attributes["groups"]).value if "groups" in op.attributes else 1


def matmul_dims(p: Plan) -> Dims:
    x, out = p.shapes[0], p.out_shapes[0]
    return math.prod(out[:-2]), out[-2], out[-1], x[-1]


def conv_dims(p: Plan) -> Dims:
    """Rows: batch x output positions; K: C_in/g x kernel."""
    groups, w, out = _groups(p.op), p.shapes[1], p.out_shapes[0]
    return groups, out[0] * math.prod(out[2:]), out[1] // groups, math.prod(w[1:])


def conv_transpose_dims(p: Plan) -> Dims:
    """Every input position scatters C_out/g x kernel."""
    groups, x, w = _groups(p.op), p.shapes[0], p.shapes[1]
    return groups, x[0] * math.prod(x[2:]), math.prod(w[1:]), x[1] // groups


def conv_weight_grad_dims(p: Plan) -> Dims:
    """(C_out/g) x (C_in/g x kernel), summed over batch x positions."""
    groups, grad, out = _groups(p.op), p.shapes[1], p.out_shapes[0]
    return groups, out[0] // groups, math.prod(out[1:]), grad[0] * math.prod(grad[2:])


def _blocks(area: int, rows: int, cols: int,
            block_rows: int | None = None) -> tuple[int, int, int]:
    """(g, mb, nb): whole products, or one mb x nb block (mb = `block_rows`, square by
    default), making up `area` outputs. A square block wider than the product (cols <
    sqrt(area), as the 64 output channels of a convolution over many positions) takes
    all the columns and as many rows as `area` needs: the block holds all of the tile's
    outputs, never fewer."""
    if area >= rows * cols:
        return math.ceil(area / (rows * cols)), rows, cols
    if block_rows is None:
        block_rows = min(rows, max(math.ceil(math.sqrt(area)), math.ceil(area / cols)))
    return 1, block_rows, min(cols, math.ceil(area / block_rows))


# The operands of an AMP op on the M side and on the N side of its (M x K) @ (K x N)
# products (`Dims`): the left and right operands, except for the weight gradient, whose
# rows are the gradient's output channels and columns the input's.
AMP_SIDES: dict[type, tuple[int, int]] = {ConvWeightGradOp: (1, 0)}


def amp_rate(p: Plan) -> int:
    """AMP MACs a tile a cycle: fp16 operands with fp32 partials (PopLibs' default
    partialsType, poplin MatMul.hpp) at `fp16InFp32OutAmpMacsPerCycle`, with fp16
    partials (`ipu.partials_type = f16`) at `fp16AmpMacsPerCycle`; others by type."""
    element, machine = element_type(p.op.operands[0]), p.machine
    if not isinstance(element, ir.FloatType) or element.width > 16:
        return machine.fp32AmpMacsPerCycle
    if element.width == 8 and machine.fp8AmpMacsPerCycle:
        return machine.fp8AmpMacsPerCycle
    # fp16, bf16, and fp8 converted to fp16 where the AMP has no fp8 mode
    return machine.fp16AmpMacsPerCycle if half_partials(p.op) \
        else machine.fp16InFp32OutAmpMacsPerCycle


def _received(p: Plan, index: int, slab: int, sharers: int) -> int:
    """Bytes of operand `index`'s `slab` a tile receives: all of it, or, for a
    pre-arranged operand spread evenly over the `sharers` tiles that use the slab, all
    but the 1/sharers it holds (`layout`; poplin's addExchangeCycleEstimates)."""
    return slab - slab // sharers if p.arranged[index] else slab


def amp_plan(p: Plan, dims: Dims, depth_split: int, block_rows: int | None = None,
             rate: int | None = None) -> tuple[OpCost, int]:
    """The AMP op split over output blocks (of `block_rows` rows, square by default)
    and `depth_split` parts of K (module docstring): its cost and temporary bytes a
    tile. `rate`: the op's `amp_rate`, if known."""
    batch, rows, cols, depth = dims
    rate = rate or amp_rate(p)
    tiles = min(p.tiles, p.available // depth_split)
    products, block_rows, block_cols = _blocks(math.ceil(batch * rows * cols / tiles),
                                               rows, cols, block_rows)
    part = math.ceil(depth / depth_split)
    compute = math.ceil(products * block_rows * block_cols * part / rate)
    lhs, rhs = AMP_SIDES.get(p.op_class, (0, 1))
    # tiles whose blocks take the same rows (the same columns): the slab's sharers
    row_sharers, col_sharers = math.ceil(cols / block_cols), math.ceil(rows / block_rows)
    col_products = products
    if p.op_class is MatMulOp and batch > 1 and shared_matrix(p.op.operands[rhs], p.op):
        # one right operand for the whole batch (a Linear's weight): a tile needs it
        # once for its products, and every tile of the op uses it
        col_products, col_sharers = 1, tiles
    received = (_received(p, lhs, products * block_rows * part * p.bytes_of(lhs),
                          row_sharers)
                + _received(p, rhs, col_products * part * block_cols * p.bytes_of(rhs),
                            col_sharers))
    reduction = (0, 0)
    if depth_split > 1:  # each of the split's tiles sums 1/d of the others' partials
        partials = products * block_rows * block_cols
        share = math.ceil(partials * (depth_split - 1) / depth_split)
        # fp32 partials, or fp16 ones (Precision.setPartialsType(torch.half), ipu-precision's
        # `ipu.partials_type`): half the bytes (the spec: "reduces on-chip memory use") and
        # twice the elements a vector op adds (dataPathWidth / 16 halves, / 32 floats)
        width = 16 if half_partials(p.op) else 32
        compute += vector_cycles(share, (1, p.machine.dataPathWidth // width), p.machine)
        reduction = (share * width // 8, partials * width // 8)
    return p.serialised(compute, received, part, tiles * depth_split, reduction)


def half_partials(op: ir.Operation) -> bool:
    attrs = op.attributes
    return "ipu.partials_type" in attrs and isinstance(
        ir.TypeAttr(attrs["ipu.partials_type"]).value, ir.F16Type)


def amp_plans(p: Plan, dims: Dims) -> list[tuple[OpCost, int]]:
    """The plans poplin's planner weighs, for each split of K in powers of two (1
    first: ties keep fewer partials): square blocks, then blocks of 2^j rows (taller or
    wider blocks trade the exchange of one operand's slabs for the other's)."""
    batch, rows, cols, depth = dims
    plans, rate = [], amp_rate(p)
    for i in range(depth.bit_length()):
        split = 2 ** i
        if split > min(depth, p.available):
            break
        area = math.ceil(batch * rows * cols / min(p.tiles, p.available // split))
        plans.append(amp_plan(p, dims, split, rate=rate))
        if area < rows * cols:  # within 16x of square: more lopsided blocks lose
            side = math.isqrt(area)
            plans += [amp_plan(p, dims, split, 2 ** j, rate)
                      for j in range(rows.bit_length())
                      if side // 16 <= 2 ** j <= min(rows, area, side * 16)
                      and math.ceil(area / 2 ** j) <= cols]
    return plans


def amp(p: Plan, dims: Callable[[Plan], Dims]) -> OpCost:
    """The cheapest plan of `amp_plans`; `dims(p)` gives the op's (B, M, N, K)."""
    shape = dims(p)
    if 0 in shape:  # no products (K = 0, as in Linear(0, n)): the result is zeros
        return fill(p)
    return p.choose(amp_plans(p, shape))


def gather(p: Plan) -> OpCost:
    """A tile copies its result share, receiving it and the indices; a lookup in a
    pre-arranged table (GATHERS_FROM_TABLE with a `layout.pre_arranged` operand 0: an
    embedding's weight) finds its rows on the tile (popops::multiSlice over a
    createSliceableTensor table split by columns) and receives only the indices. An
    ELEMENT_INDEXED op receives only its share of the indices (a scatter, of the
    updates too)."""
    indices = [v for v in p.op.operands[1:] if isinstance(element_type(v), ir.IntegerType)]
    index_bytes = sum(value_bytes(v) for v in indices)
    count = max(1, sum(math.prod(static_shape(v, p.op)) for v in indices))
    compute = math.ceil(p.per_tile * p.bytes / p.machine.memcpyBytesPerCycle)
    looked_up = p.op_class in GATHERS_FROM_TABLE and p.arranged[0]
    share = 0 if looked_up else p.per_tile * p.bytes
    if p.op_class in ELEMENT_INDEXED:  # the tile's share of the indices (and updates)
        index_bytes = math.ceil(index_bytes * p.per_tile / p.out)
        if p.op_class is ScatterOp:
            share = math.ceil(value_bytes(p.op.operands[2]) * p.per_tile / p.out)
    return p.choose([p.serialised(compute, share + index_bytes, count, p.tiles)])


def _reduced_dims(op: ir.Operation, rank: int) -> list[int]:
    if "dims" in op.attributes:
        dims = list(ir.DenseI64ArrayAttr(op.attributes["dims"]))
    else:
        dims = [ir.IntegerAttr(op.attributes["dim"]).value]
    return sorted(d % rank for d in dims) if rank else []


# The elementwise op whose vector rate a reduction's `kind` attribute runs at (max
# otherwise: max, min and the arg_max / arg_min comparisons).
REDUCE_KINDS: dict[str, type] = {"sum": ADD, "mean": ADD, "prod": MUL}


def reduce(p: Plan) -> OpCost:
    shape = p.shapes[0]
    inputs, outputs = math.prod(shape), max(1, p.out)
    if inputs == 0:  # over an empty dimension: the result is the reduction's identity
        return fill(p)
    element = element_type(p.op.operands[0])
    kind = (ir.StringAttr(p.op.attributes["kind"]).value if "kind" in p.op.attributes
            else "max")
    rate = vector_rate(REDUCE_KINDS.get(kind, MAX), element, p.machine)
    tiles = spread(inputs, max(1, element_bits(element) // 8), p.available)
    share = math.ceil(inputs / tiles)
    per_output = math.ceil(inputs / outputs)
    dims = _reduced_dims(p.op, len(shape))
    contiguous = dims == list(range(len(shape) - len(dims), len(shape)))
    span = min(tiles, math.ceil(per_output / share) if contiguous else per_output)
    stage1 = vector_cycles(share, rate, p.machine)
    if span <= 1:
        return p.step(stage1)
    compute, received, steps = stage1, 0, 2
    if span >= 2 * math.sqrt(p.machine.tilesPerIPU):
        # fan-in too wide for the result's tiles (ReductionPlan.cpp calculateNextStep):
        # an intermediate stage over the IPU sums groups of ceil(sqrt(span)) partials
        group = math.ceil(math.sqrt(span))
        pieces = outputs * math.ceil(span / group)
        inner = math.ceil(pieces / min(p.available, pieces)) * group
        compute += vector_cycles(inner, rate, p.machine)
        received, steps, span = inner * 4, 3, math.ceil(span / group)
    partials = p.per_tile * span  # fp32 partials a result tile receives and reduces
    return p.step(compute + vector_cycles(partials, rate, p.machine),
                  received + partials * 4, steps, outputs * span * 4)


def elementwise(p: Plan) -> OpCost:
    """At the vector rate of the op's own class (`plan.VECTOR_RATES`)."""
    element = element_type(p.op.operands[0]) if len(p.op.operands) else p.element
    compute = vector_cycles(p.per_tile, vector_rate(p.op_class, element, p.machine), p.machine)
    received = sum(min(math.prod(s), p.per_tile) * max(1, element_bits(element_type(v)) // 8)
                   for s, v in zip(p.shapes, p.op.operands, strict=True)
                   if math.prod(s) < p.out)
    return p.step(compute, received)


def scan(p: Plan, step: type) -> OpCost:
    """sort, cumsum, cumprod: log2(n) passes of `step` (an elementwise op class) along the
    dimension, then the layout back."""
    dim = ir.IntegerAttr(p.op.attributes["dim"]).value
    length = p.shapes[0][dim] if p.shapes[0] else 1
    passes = max(1, math.ceil(math.log2(max(2, length))))
    rate = vector_rate(step, p.element, p.machine)
    return p.step(passes * vector_cycles(p.per_tile, rate, p.machine), p.per_tile * p.bytes)


def movement(p: Plan, receives: str = "result") -> OpCost:
    """Copies its result share; receives it ("result"), nothing ("nothing": iota,
    random_uniform make their data on the tile) or the smaller of its source and its
    share ("source": broadcast)."""
    share = p.per_tile * p.bytes
    received = share if receives == "result" else 0
    if receives == "source":
        received = min(math.prod(p.shapes[0]), p.per_tile) * p.bytes
    return p.step(math.ceil(share / p.machine.memcpyBytesPerCycle), received)


def broadcast(p: Plan) -> OpCost:
    """A broadcast: a view of a pre-arranged operand (Poplar's broadcast is a stride-0
    view; its consumer receives what it needs), else a copy of its result share
    receiving the smaller of its source and that share."""
    return OpCost() if p.arranged[0] else movement(p, receives="source")


def permute(p: Plan) -> OpCost:
    """A transpose: a view of a pre-arranged operand (Poplar's dimShuffle; PopART lays a
    weight out for the transpose's consumer, TransposeOpx::unwindTensorLayout, so a
    Linear's transposed weight moves nothing), else a copy of its result share."""
    return OpCost() if p.arranged[0] else movement(p)


def fill(p: Plan) -> OpCost:
    """An op with no input elements to work on: it writes its result share, made on the
    tile (zero-size work costs no cycles; module docstring)."""
    return movement(p, receives="nothing")


def pool(p: Plan, step: type) -> OpCost:
    """Window ops: each of the smaller side's elements meets a whole window, at the
    vector rate of `step` (add for averages, max otherwise)."""
    first = math.prod(p.shapes[0])
    if "kernel" in p.op.attributes:
        window = math.prod(ir.DenseI64ArrayAttr(p.op.attributes["kernel"]))
    else:
        window = max(1, math.ceil(max(first, p.out) / min(first, p.out)))
    work = math.ceil(min(first, p.out) * window / p.tiles)
    received = math.ceil(first / p.tiles) * p.bytes
    return p.step(vector_cycles(work, vector_rate(step, p.element, p.machine), p.machine),
                  received)


def optimizer(p: Plan, passes: tuple[type, ...]) -> OpCost:
    """An update rule as `passes` of elementwise ops over the weights (a count of the
    operations in each rule of spec 4.5 / torch.optim, not a PopLibs figure)."""
    rates = (vector_rate(n, p.element, p.machine) for n in passes)
    return p.step(sum(vector_cycles(p.per_tile, r, p.machine) for r in rates))
