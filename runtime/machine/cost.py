"""The cost model: the cycles, exchange and temporary memory of one ipu op on a `Machine`.

`op_cost(op, machine, proportion)` plans one ipu op as PopLibs would, in BSP steps, and
returns `OpCost(compute, exchange, sync, temporary_bytes)`:

- Tiles: T = tilesPerIPU - io_tiles are available (Options numIOTiles reserves the rest).
  A tensor of n elements of b bytes is spread linearly over
  `spread(n, b) = min(T, ceil(n / ceil(128 / b)))` tiles, at least 128 bytes each
  (poputil's calcLinearTileMapping), so a small op uses few tiles. Ops are planned over
  the tiles of their result.
- Vector work (elementwise, reductions, pooling, optimizer updates): a tile's e elements
  are shared by its numWorkerContexts (W) worker threads; PopLibs' codelet tables give
  `c` cycles per loop of `u` elements (`VECTOR_RATES`, one natural 64-bit vector a cycle
  unless listed), and the barrel-threaded tile issues for one worker every W cycles:
  `vector_cycles(e) = ceil(ceil(e / W) / u) * c * W`.
- AMP ops (matmul, conv, conv_transpose, conv_weight_grad) are a batch of B products of
  (M x K) by (K x N), planned with K split in d parts (d = 1, 2, 4, ... <= K). The B*M*N
  outputs spread over t = min(spread(B*M*N, b), T // d) tiles, A = ceil(B*M*N / t)
  each: g = ceil(A / (M*N)) whole products when A >= M*N, else an mb x nb block with
  mb = min(M, ceil(sqrt(A))), nb = min(N, ceil(A / mb)); each of the d tiles of a block
  takes k = ceil(K / d) of K. compute = ceil(g*mb*nb*k / AMP MACs a cycle); the tile
  receives its operand slabs, `recv = g*(mb + nb)*k*b` bytes. With d > 1 a second step
  sums the fp32 partials: each tile receives and adds ceil(g*mb*nb*(d-1)/d) of them.
- Gathers (gather, index_select, index, embedding_bag, scatter, index_put): a tile
  copies its e result elements (`ceil(e*b / memcpyBytesPerCycle)`) and receives them
  plus the indices: `recv = e*b + index bytes`.
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
  sync). Data movement (permute, slice, concat, pad, ...) copies and receives its result
  share. Elementwise operands with fewer elements than the result (broadcasts) are
  received; operands laid out like the result cost no exchange.
- Views, constants, markers and structure ops (copies, host and streaming-memory
  transfers, collectives) cost nothing here: the timeline charges transfers with
  `link_cycles`, `host_cycles`, `streaming_cycles`, `collective_cycles`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

from torch_mlir import ir

from poptorch.runtime.machine.system import (
    DEFAULT_AVAILABLE_MEMORY,
    GC200,
    Machine,
    element_bits,
    element_type,
    spread,
    static_shape,
    value_bytes,
)

log = logging.getLogger("poptorch.machine")


@dataclass(frozen=True)
class OpCost:
    """The plan of one op on one IPU: cycles by kind and temporary bytes (whole IPU)."""

    compute: int = 0
    exchange: int = 0
    sync: int = 0
    temporary_bytes: int = 0

    @property
    def cycles(self) -> int:
        return self.compute + self.exchange + self.sync

    def __add__(self, other: OpCost) -> OpCost:
        """Ops in sequence: cycles add up; temporaries are freed between ops (peak)."""
        return OpCost(self.compute + other.compute, self.exchange + other.exchange,
                      self.sync + other.sync, max(self.temporary_bytes, other.temporary_bytes))


# PopLibs' inner-loop cycle estimates of popops codelets (graphcore/poplibs,
# lib/popops/popopsCycleEstimators.hpp, unaryOpPerfInfo / binaryOpPerfInfo): op ->
# ((cycles, elements) per loop for float, the same for half), integers as float. Ops
# without an entry there are charged as their nearest listed relative: exp2 as EXPONENT,
# log2 / log10 as LOGARITHM, acos / atan as ASIN, hyperbolic functions and their inverses
# as TANH, erfc and gelu as ERF, gelu_tanh as TANH, fmod as REMAINDER. Unlisted ops take
# one natural vector a cycle (ADD / SUBTRACT / MULTIPLY: {1, true}).
_EXP, _LOG, _TANH, _ERF, _ASIN = ((6, 2), (4, 4)), ((12, 2), (4, 4)), ((12, 2), (4, 4)), \
    ((18, 1), (16, 1)), ((102, 1), (102, 1))
_REM, _CMP = ((133, 2), (300, 4)), ((14, 4), (9, 4))
VECTOR_RATES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "exp": _EXP, "exp2": _EXP, "expm1": ((4, 1), (5, 4)),
    "log": _LOG, "log2": _LOG, "log10": _LOG, "log1p": ((180, 2), (180, 4)),
    "sqrt": ((10, 2), (23, 4)), "rsqrt": ((8, 2), (19, 4)), "reciprocal": ((6, 2), (15, 4)),
    "sin": ((2300, 1), (26, 1)), "cos": ((2300, 1), (26, 1)), "tan": ((5100, 1), (5700, 1)),
    "asin": _ASIN, "acos": _ASIN, "atan": _ASIN,
    "tanh": _TANH, "sinh": _TANH, "cosh": _TANH, "asinh": _TANH, "acosh": _TANH,
    "atanh": _TANH, "gelu_tanh": _TANH, "sigmoid": ((12, 2), (6, 4)),
    "erf": _ERF, "erfc": _ERF, "gelu": _ERF,
    "relu": ((3, 2), (3, 4)), "neg": ((2, 2), (2, 4)), "square": ((2, 2), (2, 4)),
    "abs": ((1, 1), (1, 1)), "floor": ((2, 2), (2, 4)), "ceil": ((2, 2), (2, 4)),
    "round": ((2, 2), (2, 4)), "sign": ((5, 2), (5, 4)),
    "div": ((10, 2), (21, 4)), "pow": ((312, 1), (325, 1)), "remainder": _REM, "fmod": _REM,
    "max": ((4, 2), (4, 4)), "min": ((4, 2), (4, 4)),
    "eq": _CMP, "gt": _CMP, "ge": _CMP, "lt": _CMP, "le": _CMP, "ne": ((20, 4), (11, 4)),
}

# Optimizer updates as passes of elementwise ops over the weights (a count of the
# operations in each update rule of spec 4.5 / torch.optim, not a PopLibs figure).
OPTIMIZER_PASSES: dict[str, tuple[str, ...]] = {
    "ipu.sgd_step": ("mul",) * 3,
    "ipu.sgd_momentum_step": ("mul",) * 6,
    "ipu.adam_step": ("mul",) * 8 + ("sqrt", "div"),
    "ipu.rmsprop_step": ("mul",) * 7 + ("sqrt", "div"),
    "ipu.lamb_step": ("mul",) * 12 + ("sqrt", "div", "sqrt", "sqrt"),
}


def vector_rate(name: str, element: ir.Type, machine: Machine) -> tuple[int, int]:
    """(cycles, elements) of one inner loop of elementwise op `name` (without "ipu.")."""
    if name in VECTOR_RATES:
        single, half = VECTOR_RATES[name]
        return half if element_bits(element) <= 16 and isinstance(element, ir.FloatType) \
            else single
    return 1, machine.vector_width(element)


def vector_cycles(elements: int, rate: tuple[int, int], machine: Machine) -> int:
    """Tile cycles for `elements` shared by the worker threads (module docstring)."""
    workers = machine.numWorkerContexts
    cycles, per_loop = rate
    return math.ceil(math.ceil(elements / workers) / per_loop) * cycles * workers


class _Plan:
    """What every family reads: the op, the machine, tiles and the result's layout."""

    def __init__(self, op: ir.Operation, machine: Machine, tiles: int,
                 proportion: float) -> None:
        self.op, self.machine, self.proportion = op, machine, proportion
        self.available = tiles
        self.shapes = [static_shape(v, op) for v in op.operands]
        self.out_shapes = [static_shape(v, op) for v in op.results]
        main = op.results[0] if len(op.results) else op.operands[0]
        self.element = element_type(main)
        self.bytes = max(1, element_bits(self.element) // 8)
        self.out = math.prod(self.out_shapes[0] if self.out_shapes else self.shapes[0])
        self.tiles = spread(self.out, self.bytes, tiles)
        self.per_tile = math.ceil(self.out / self.tiles)  # result elements on a tile

    def bytes_of(self, index: int) -> int:
        """Bytes of one element of operand `index`."""
        return max(1, element_bits(element_type(self.op.operands[index])) // 8)

    def step(self, compute: int, received: int = 0, steps: int = 1,
             temporary: int = 0) -> OpCost:
        """`steps` BSP steps; `received` bytes a tile takes in over all of them."""
        m = self.machine
        return OpCost(compute, math.ceil(received / m.exchangeBytesPerCycle),
                      steps * m.globalSyncCycles, temporary)

    def serialised(self, compute: int, received: int, max_pieces: int, tiles: int,
                   reduction: tuple[int, int] = (0, 0)) -> tuple[OpCost, int]:
        """A plan whose `received` temporary bytes a tile are capped at proportion x tile
        memory (module docstring), and its temporary bytes a tile. `reduction`: (bytes a
        tile receives, temporary bytes a tile) of an extra step summing partials."""
        m = self.machine
        cap = int(self.proportion * m.memoryBytesPerTile)
        pieces = 1 if received <= cap else max(1, max_pieces if cap == 0 else
                                               min(max_pieces, math.ceil(received / cap)))
        piece = math.ceil(received / pieces)
        extra_received, extra_temporary = reduction
        steps = pieces + (1 if extra_received else 0)
        temporary = piece + extra_temporary
        exchange = (pieces * math.ceil(piece / m.exchangeBytesPerCycle)
                    + math.ceil(extra_received / m.exchangeBytesPerCycle))
        return OpCost(compute, exchange, steps * m.globalSyncCycles, tiles * temporary), \
            temporary

    def choose(self, plans: list[tuple[OpCost, int]]) -> OpCost:
        """The fastest plan within the cap; if none fits, the one needing the least
        temporary memory a tile, with the spec's warning."""
        cap = int(self.proportion * self.machine.memoryBytesPerTile)
        fitting = [plan for plan in plans if plan[1] <= cap]
        if fitting:
            return min(fitting, key=lambda plan: plan[0].cycles)[0]
        cost, temporary = min(plans, key=lambda plan: (plan[1], plan[0].cycles))
        log.warning("%s needs %d bytes of temporary memory a tile, more than the %d "
                    "(available memory proportion %g) it may use",
                    self.op.name, temporary, cap, self.proportion)
        return cost


def _amp_dims(op: ir.Operation, p: _Plan) -> tuple[int, int, int, int]:
    """(B, M, N, K): the batch of (M x K) @ (K x N) products the op computes."""
    x, w = p.shapes[0], p.shapes[1]
    out = p.out_shapes[0]
    groups = ir.IntegerAttr(op.attributes["groups"]).value if "groups" in op.attributes else 1
    if op.name == "ipu.matmul":
        return math.prod(out[:-2]), out[-2], out[-1], x[-1]
    if op.name == "ipu.conv":  # rows: batch x output positions; K: C_in/g x kernel
        return groups, out[0] * math.prod(out[2:]), out[1] // groups, math.prod(w[1:])
    if op.name == "ipu.conv_transpose":  # every input position scatters C_out/g x kernel
        return groups, x[0] * math.prod(x[2:]), math.prod(w[1:]), x[1] // groups
    # conv_weight_grad: (C_out/g) x (C_in/g x kernel), summed over batch x positions
    grad = p.shapes[1]
    return groups, out[0] // groups, math.prod(out[1:]), grad[0] * math.prod(grad[2:])


def _blocks(area: int, rows: int, cols: int) -> tuple[int, int, int]:
    """(g, mb, nb): whole products, or one mb x nb block, making up `area` outputs."""
    if area >= rows * cols:
        return math.ceil(area / (rows * cols)), rows, cols
    block_rows = min(rows, math.ceil(math.sqrt(area)))
    return 1, block_rows, min(cols, math.ceil(area / block_rows))


def amp_plan(p: _Plan, depth_split: int) -> tuple[OpCost, int]:
    """The AMP op split over output blocks and `depth_split` parts of K (module docstring):
    its cost and temporary bytes a tile."""
    batch, rows, cols, depth = _amp_dims(p.op, p)
    tiles = min(p.tiles, p.available // depth_split)
    products, block_rows, block_cols = _blocks(math.ceil(batch * rows * cols / tiles),
                                               rows, cols)
    part = math.ceil(depth / depth_split)
    rate = p.machine.amp_macs_per_cycle(element_type(p.op.operands[0]))
    compute = math.ceil(products * block_rows * block_cols * part / rate)
    received = products * (block_rows + block_cols) * part * p.bytes_of(0)
    reduction = (0, 0)
    if depth_split > 1:  # each of the split's tiles sums 1/d of the others' fp32 partials
        partials = products * block_rows * block_cols
        share = math.ceil(partials * (depth_split - 1) / depth_split)
        compute += vector_cycles(share, (1, p.machine.dataPathWidth // 32), p.machine)
        reduction = (share * 4, partials * 4)
    return p.serialised(compute, received, part, tiles * depth_split, reduction)


def _amp(p: _Plan) -> OpCost:
    """The cheapest split of K in powers of two (1 first: ties keep fewer partials)."""
    depth = _amp_dims(p.op, p)[3]
    return p.choose([amp_plan(p, 2 ** i) for i in range(depth.bit_length())
                     if 2 ** i <= min(depth, p.available)])


def _gather(p: _Plan) -> OpCost:
    indices = [v for v in p.op.operands[1:] if isinstance(element_type(v), ir.IntegerType)]
    index_bytes = sum(value_bytes(v) for v in indices)
    count = max(1, sum(math.prod(static_shape(v, p.op)) for v in indices))
    compute = math.ceil(p.per_tile * p.bytes / p.machine.memcpyBytesPerCycle)
    return p.choose([p.serialised(compute, p.per_tile * p.bytes + index_bytes, count,
                                  p.tiles)])


def _reduced_dims(op: ir.Operation, rank: int) -> list[int]:
    if "dims" in op.attributes:
        dims = list(ir.DenseI64ArrayAttr(op.attributes["dims"]))
    else:
        dims = [ir.IntegerAttr(op.attributes["dim"]).value]
    return sorted(d % rank for d in dims) if rank else []


def _reduce(p: _Plan) -> OpCost:
    shape = p.shapes[0]
    inputs, outputs = math.prod(shape), max(1, p.out)
    element = element_type(p.op.operands[0])
    kind = (ir.StringAttr(p.op.attributes["kind"]).value if "kind" in p.op.attributes
            else "max")
    rate = vector_rate({"sum": "add", "mean": "add", "prod": "mul"}.get(kind, "max"),
                       element, p.machine)
    tiles = spread(inputs, max(1, element_bits(element) // 8), p.available)
    share = math.ceil(inputs / tiles)
    per_output = math.ceil(inputs / outputs)
    dims = _reduced_dims(p.op, len(shape))
    contiguous = dims == list(range(len(shape) - len(dims), len(shape)))
    span = min(tiles, math.ceil(per_output / share) if contiguous else per_output)
    stage1 = vector_cycles(share, rate, p.machine)
    if span <= 1:
        return p.step(stage1)
    partials = p.per_tile * span  # fp32 partials a result tile receives and reduces
    return p.step(stage1 + vector_cycles(partials, rate, p.machine), partials * 4, 2,
                  outputs * span * 4)


def _elementwise(p: _Plan) -> OpCost:
    name = p.op.name.removeprefix("ipu.")
    element = element_type(p.op.operands[0]) if len(p.op.operands) else p.element
    compute = vector_cycles(p.per_tile, vector_rate(name, element, p.machine), p.machine)
    received = sum(min(math.prod(s), p.per_tile) * max(1, element_bits(element_type(v)) // 8)
                   for s, v in zip(p.shapes, p.op.operands, strict=True)
                   if math.prod(s) < p.out)
    return p.step(compute, received)


def _scan(p: _Plan) -> OpCost:
    """sort, cumsum, cumprod: log2(n) passes along the dimension, then the layout back."""
    dim = ir.IntegerAttr(p.op.attributes["dim"]).value
    length = p.shapes[0][dim] if p.shapes[0] else 1
    passes = max(1, math.ceil(math.log2(max(2, length))))
    name = {"ipu.cumsum": "add", "ipu.cumprod": "mul"}.get(p.op.name, "max")
    rate = vector_rate(name, p.element, p.machine)
    return p.step(passes * vector_cycles(p.per_tile, rate, p.machine), p.per_tile * p.bytes)


def _movement(p: _Plan) -> OpCost:
    share = p.per_tile * p.bytes
    received = 0 if p.op.name in ("ipu.iota", "ipu.random_uniform") else share
    if p.op.name == "ipu.broadcast":
        received = min(math.prod(p.shapes[0]), p.per_tile) * p.bytes
    return p.step(math.ceil(share / p.machine.memcpyBytesPerCycle), received)


def _pool(p: _Plan) -> OpCost:
    """Window ops: each of the smaller side's elements meets a whole window."""
    first = math.prod(p.shapes[0])
    if "kernel" in p.op.attributes:
        window = math.prod(ir.DenseI64ArrayAttr(p.op.attributes["kernel"]))
    else:
        window = max(1, math.ceil(max(first, p.out) / min(first, p.out)))
    name = "add" if "avg" in p.op.name else "max"
    work = math.ceil(min(first, p.out) * window / p.tiles)
    received = math.ceil(first / p.tiles) * p.bytes
    return p.step(vector_cycles(work, vector_rate(name, p.element, p.machine), p.machine),
                  received)


def _optimizer(p: _Plan) -> OpCost:
    rates = (vector_rate(n, p.element, p.machine) for n in OPTIMIZER_PASSES[p.op.name])
    return p.step(sum(vector_cycles(p.per_tile, r, p.machine) for r in rates))


AMP_OPS = frozenset({"ipu.matmul", "ipu.conv", "ipu.conv_transpose", "ipu.conv_weight_grad"})
GATHER_OPS = frozenset({"ipu.gather", "ipu.index_select", "ipu.index", "ipu.embedding_bag",
                        "ipu.scatter", "ipu.index_put"})
# ipu ops this model does not charge: views, constants, markers, and structure ops whose
# cost is a transfer or a collective (the timeline charges those).
FREE_OPS = frozenset({
    "ipu.reshape", "ipu.constant", "ipu.nop", "ipu.print", "ipu.copy", "ipu.host_load",
    "ipu.host_store", "ipu.remote_load", "ipu.remote_store", "ipu.all_reduce",
})
FAMILIES: dict[str, Callable[[_Plan], OpCost]] = {
    **{name: _amp for name in AMP_OPS},
    **{name: _gather for name in GATHER_OPS},
    **{name: _reduce for name in ("ipu.reduce", "ipu.arg_max", "ipu.arg_min")},
    **{name: _scan for name in ("ipu.sort", "ipu.cumsum", "ipu.cumprod")},
    **{f"ipu.{name}": _movement for name in (
        "permute", "broadcast", "slice", "concat", "pad", "flip", "diagonal",
        "upsample_nearest", "slice_update", "iota", "random_uniform")},
    **{f"ipu.{name}": _pool for name in (
        "max_pool", "max_pool_with_indices", "avg_pool", "adaptive_max_pool",
        "adaptive_avg_pool", "max_pool_grad", "avg_pool_grad", "adaptive_avg_pool_grad",
        "adaptive_max_pool_with_indices")},
    **{name: _optimizer for name in OPTIMIZER_PASSES},
}


def op_proportion(op: ir.Operation | ir.OpView, proportion: float | None) -> float:
    """The available memory proportion for `op`: its own `ipu.available_memory`
    (poptorch.set_available_memory), else `proportion`, else the default 0.6."""
    op = op.operation
    if "ipu.available_memory" in op.attributes:
        return ir.FloatAttr(op.attributes["ipu.available_memory"]).value
    return DEFAULT_AVAILABLE_MEMORY if proportion is None else proportion


def op_cost(op: ir.Operation | ir.OpView, machine: Machine = GC200,
            proportion: float | None = None, *, io_tiles: int = 0) -> OpCost:
    """The plan of one ipu op on one IPU (see the module docstring for the formulas).

    `proportion` is the IPU's available memory proportion (Options
    .setAvailableMemoryProportion, default 0.6); `io_tiles` are kept out of compute.
    """
    op = op.operation
    name = op.name
    if not name.startswith("ipu.") or name in FREE_OPS:
        return OpCost()
    plan = _Plan(op, machine, machine.compute_tiles(io_tiles), op_proportion(op, proportion))
    return FAMILIES.get(name, _elementwise)(plan)


class CostMemo:
    """`op_cost`, computed once per (op, machine, proportion, io_tiles): a compiled
    module's timeline and memory estimate ask for every op's cost, and training's
    timeline again with the step's epilogue (a third of an LSTM's warm-cache compile).
    Keep it no longer than the module it has seen, which must not change meanwhile."""

    def __init__(self) -> None:
        self._costs: dict[tuple, OpCost] = {}

    def __call__(self, op: ir.Operation | ir.OpView, machine: Machine = GC200,
                 proportion: float | None = None, *, io_tiles: int = 0) -> OpCost:
        key = (op.operation, machine, proportion, io_tiles)
        cost = self._costs.get(key)
        if cost is None:
            cost = self._costs[key] = op_cost(op, machine, proportion, io_tiles=io_tiles)
        return cost


def op_cycles(op: ir.Operation | ir.OpView, machine: Machine = GC200) -> int:
    """Cycles of one ipu op on one IPU with the default available memory proportion."""
    return op_cost(op, machine).cycles
