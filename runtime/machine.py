"""The simulated IPU and its cost model: the cycles, exchange and temporary memory of one op.

`Machine` describes one IPU with the parameter names of Poplar's `poplar::IPUModel`
(tilesPerIPU, memoryBytesPerTile, tileClockFrequency, exchangeBytesPerCycle,
memcpyBytesPerCycle, globalSyncCycles, ...) plus the figures Poplar keeps outside that
struct (AMP rates, IPU-Link, host-link and streaming-memory bandwidth). Presets: `GC200`
(Mk2, "ipu2", the default), `GC2` (Mk1, "ipu1") and `GC200_FP8` (the C600's Mk2 IPU with
FP8, "ipu21"); `machine_for(version)` picks one. Each figure names its public source.

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
from dataclasses import dataclass, replace

from torch_mlir import ir

from poptorch.errors import Error

log = logging.getLogger("poptorch.machine")


@dataclass(frozen=True)
class Machine:
    """One IPU of the machine model; field names follow Poplar's `poplar::IPUModel`.

    Defaults are the GC200 (Mk2) IPU. Bandwidths are in bytes per second, the clock in
    Hz, latencies in seconds, everything else per tile and per cycle.
    """

    # "ipu2" is Poplar's name of the Mk2 architecture (poplar::IPUModel::IPUVersion,
    # Poplar API reference, IPUModel.hpp); `version` is PopTorch's number for it
    # (Options.useOfflineIpuTarget: 1 Mk1, 2 Mk2, 21 Mk2 with FP8; spec 11.1).
    IPUVersion: str = "ipu2"
    version: int = 2
    # 1472 tiles (IPU-Cores) per GC200: Graphcore's GC200 / IPU-M2000 datasheet.
    tilesPerIPU: int = 1472
    # 6 hardware worker threads per tile (8832 threads per GC200): GC200 datasheet.
    numWorkerContexts: int = 6
    # 624 KiB of In-Processor-Memory per tile; 1472 x 624 KiB = 897 MiB, the "900MB"
    # of the GC200 datasheet.
    memoryBytesPerTile: int = 624 * 1024
    # 1.33 GHz: 250 TFLOPS FP16 (GC200 datasheet) = 1472 tiles x 64 MACs x 2 FLOPs x
    # 1.327 GHz; the figure DESIGN.md lists.
    tileClockFrequency: float = 1.33e9
    # 4 bytes per tile per cycle of internal exchange: the IPU model's default
    # ("ipu-exchange-bandwidth ... per tile in bytes", default 4) in graphcore/poplibs'
    # tools; cross-check: 8 TB/s IPU-Exchange (Graphcore) / (1472 tiles x 1.33 GHz)
    # = 4.1 bytes per tile per cycle.
    exchangeBytesPerCycle: int = 4
    # dataPathWidth / 8 bytes a cycle: poplibs' IPU model sets memcpyBytesPerCycle =
    # dataPathWidth / 8 (graphcore/poplibs tools).
    memcpyBytesPerCycle: int = 8
    # 64-bit load/store data path (poplibs' IPU model option dataPathWidth = 64; its
    # vector width is dataPathWidth / 32 floats, / 16 halves).
    dataPathWidth: int = 64
    # 500 cycles per global (BSP) sync: the value poplibs' tools give the IPU model
    # (DeviceInfo.globalSyncCycles = 500, graphcore/poplibs).
    globalSyncCycles: int = 500
    # AMP (accumulating matrix product) MACs per tile per cycle. FP16: 250 TFLOPS /
    # (2 x 1472 tiles x 1.33 GHz) = 64 (GC200 datasheet); FP32: 62.5 TFLOPS gives 16.
    # FP8: 0 means no FP8 AMP (FP8 operands run at the FP16 rate after conversion).
    fp16AmpMacsPerCycle: int = 64
    fp32AmpMacsPerCycle: int = 16
    fp8AmpMacsPerCycle: int = 0
    # 10 IPU-Links, 320 GB/s per IPU: GC200 / IPU-M2000 datasheet. An inter-IPU copy is
    # charged at this aggregate rate (optimistic: no M2000 link topology).
    ipuLinks: int = 10
    ipuLinkBandwidth: float = 320e9
    # Host link: PCIe Gen4 x16, 64 GB/s both ways (GC200 datasheet), 32 GB/s each way.
    hostLinkBandwidth: float = 32e9
    # Fixed cost of one host transfer (stream copy set-up and the PCIe round trip). An
    # assumption, not a published figure: 1 us, the order of one PCIe DMA round trip.
    hostLinkLatency: float = 1e-6
    # Streaming Memory (DRAM behind the IPU-Gateway, IPU-M2000 datasheet): Graphcore
    # publishes no per-IPU figure; 16 GB/s is a PCIe Gen4 x8 link, the IPU-to-gateway
    # link of the IPU-M2000 block diagram (IPU-M2000 BMC user guide). A bound to refine.
    streamingMemoryBandwidth: float = 16e9

    def compute_tiles(self, io_tiles: int = 0) -> int:
        """Tiles left for compute when `io_tiles` are reserved for I/O (numIOTiles)."""
        if not 0 <= io_tiles < self.tilesPerIPU:
            raise Error(f"io_tiles must be between 0 and {self.tilesPerIPU - 1} on a "
                        f"{self.tilesPerIPU}-tile IPU, got {io_tiles}", type="runtime")
        return self.tilesPerIPU - io_tiles

    def amp_macs_per_cycle(self, element: ir.Type) -> int:
        """AMP MACs per tile per cycle for operands of this element type."""
        if isinstance(element, ir.FloatType) and element.width == 8:
            return self.fp8AmpMacsPerCycle or self.fp16AmpMacsPerCycle
        if isinstance(element, ir.F16Type | ir.BF16Type):
            return self.fp16AmpMacsPerCycle
        return self.fp32AmpMacsPerCycle

    def vector_width(self, element: ir.Type) -> int:
        """Elements in one natural vector (the data path width) of this element type."""
        return max(1, self.dataPathWidth // max(8, element_bits(element)))

    def transfer_cycles(self, nbytes: int, bandwidth: float) -> int:
        """Cycles to move `nbytes` at `bandwidth` bytes per second."""
        return math.ceil(nbytes * self.tileClockFrequency / bandwidth)

    def link_cycles(self, nbytes: int) -> int:
        """An inter-IPU copy over IPU-Links."""
        return self.transfer_cycles(nbytes, self.ipuLinkBandwidth)

    def streaming_cycles(self, nbytes: int) -> int:
        """A load from or store to Streaming Memory."""
        return self.transfer_cycles(nbytes, self.streamingMemoryBandwidth)

    def host_cycles(self, nbytes: int) -> int:
        """One transfer over the host link: its fixed latency plus bytes / bandwidth."""
        latency = math.ceil(self.hostLinkLatency * self.tileClockFrequency)
        return latency + self.transfer_cycles(nbytes, self.hostLinkBandwidth)

    def collective_cycles(self, nbytes: int, replicas: int) -> int:
        """A ring all-reduce of `nbytes` per replica over `replicas` IPUs: a reduce-scatter
        and an all-gather, 2(R-1) steps each moving nbytes / R over IPU-Links and ending in
        a sync: 2(R-1)/R x nbytes / ipuLinkBandwidth + 2(R-1) x globalSyncCycles."""
        if replicas <= 1:
            return 0
        steps = 2 * (replicas - 1)
        moved = math.ceil(steps * nbytes / replicas)
        return self.link_cycles(moved) + steps * self.globalSyncCycles


GC200 = Machine()

# The Mk1 Colossus GC2 (C2 card), "ipu1". 1216 tiles x 256 KiB = 304 MiB, 124.5 TFLOPS
# mixed precision and 31.1 TFLOPS FP32 (Jia et al., "Dissecting the Graphcore IPU
# Architecture via Microbenchmarking", arXiv:1912.03413, 2019). Clock: 124.5 TFLOPS /
# (2 x 1216 tiles x 32 MACs) = 1.6 GHz; FP32: 31.1 TFLOPS gives 8 MACs. 80 IPU-Links with
# 2.5 Tbps chip to chip = 312.5 GB/s, PCIe Gen4 x16 host link at 31.5 GB/s (Graphcore's
# C2 announcement, as reported by Silverton Consulting, 2018). Mk1 has no IPU-Gateway:
# remote buffers live in host memory, behind the host link. 8 TB/s IPU-Exchange /
# (1216 x 1.6 GHz) = 4.1 bytes per tile per cycle, as on Mk2.
GC2 = replace(
    GC200, IPUVersion="ipu1", version=1, tilesPerIPU=1216, memoryBytesPerTile=256 * 1024,
    tileClockFrequency=1.6e9, fp16AmpMacsPerCycle=32, fp32AmpMacsPerCycle=8, ipuLinks=80,
    ipuLinkBandwidth=312.5e9, hostLinkBandwidth=31.5e9, streamingMemoryBandwidth=31.5e9)

# The Mk2 IPU with FP8 of the C600 PCIe card, "ipu21": 1472 cores, 900 MB, 560 TFLOPS
# FP8 and 280 TFLOPS FP16, 4 IPU-Links with 1 Tbps (125 GB/s) in total, PCIe Gen4 x16
# (Graphcore C600 datasheet, docs.graphcore.ai). Clock: 280 TFLOPS / (2 x 1472 x 64
# MACs) = 1.486 GHz; FP8: 560 TFLOPS gives 128 MACs. FP32: no published figure; the
# GC200's AMP ratio (a quarter of FP16) is kept. No IPU-Gateway: remote buffers live in
# host memory, behind the host link.
GC200_FP8 = replace(
    GC200, IPUVersion="ipu21", version=21, tileClockFrequency=1.486e9,
    fp8AmpMacsPerCycle=128, ipuLinks=4, ipuLinkBandwidth=125e9, streamingMemoryBandwidth=32e9)

MACHINES = {1: GC2, 2: GC200, 21: GC200_FP8}

# The simulated system: an IPU-POD64, 16 IPU-M2000s of 4 GC200s = 64 IPUs (Graphcore
# IPU-POD64 datasheet). poptorch.ipuHardwareIsAvailable(n) is true up to this many.
IPUS_IN_SYSTEM = 64

# Default share of tile memory for temporaries (spec 4.6.9: "The default value is 0.6").
DEFAULT_AVAILABLE_MEMORY = 0.6


def machine_for(ipu_version: int) -> Machine:
    """The machine of `Options.useOfflineIpuTarget(ipu_version)`: 1, 2 or 21."""
    if isinstance(ipu_version, bool) or ipu_version not in MACHINES:
        raise Error(f"no IPU machine for ipu_version {ipu_version!r}; use 1 (Mk1 GC2), "
                    "2 (Mk2 GC200) or 21 (Mk2 with FP8, C600)", type="runtime")
    return MACHINES[ipu_version]


def element_bits(element: ir.Type) -> int:
    """Bits of one element (i1 counts as 8: booleans are stored as bytes)."""
    if isinstance(element, ir.IntegerType):
        return max(8, element.width)
    if isinstance(element, ir.FloatType):
        return element.width
    if isinstance(element, ir.IndexType):
        return 64
    raise TypeError(f"no size known for element type {element}")


def _static_shape(value: ir.Value, op: ir.Operation) -> list[int]:
    """The shape of a tensor value ([] for a scalar); a dynamic shape is an Error."""
    if not isinstance(value.type, ir.ShapedType):
        return []
    tensor = ir.ShapedType(value.type)
    if not tensor.has_static_shape:
        raise Error(f"'{op.name}' has the dynamic shape {value.type}; the cost model needs "
                    "static shapes", type="runtime", location=str(op.location))
    return list(tensor.shape)


def _element(value: ir.Value) -> ir.Type:
    vtype = value.type
    return ir.ShapedType(vtype).element_type if isinstance(vtype, ir.ShapedType) else vtype


def value_bytes(value: ir.Value) -> int:
    """Bytes of a statically shaped tensor (or scalar) value."""
    vtype = value.type
    if isinstance(vtype, ir.ShapedType):
        shaped = ir.ShapedType(vtype)
        return math.prod(shaped.shape) * element_bits(shaped.element_type) // 8
    return element_bits(vtype) // 8


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


def spread(elements: int, element_bytes: int, tiles: int) -> int:
    """Tiles a linearly mapped tensor occupies: at least 128 bytes a tile (poputil's
    calcLinearTileMapping, minBytesPerTile = 128, graphcore/poplibs)."""
    per_tile = math.ceil(128 / max(1, element_bytes))
    return max(1, min(tiles, math.ceil(elements / per_tile)))


class _Plan:
    """What every family reads: the op, the machine, tiles and the result's layout."""

    def __init__(self, op: ir.Operation, machine: Machine, tiles: int,
                 proportion: float) -> None:
        self.op, self.machine, self.proportion = op, machine, proportion
        self.available = tiles
        self.shapes = [_static_shape(v, op) for v in op.operands]
        self.out_shapes = [_static_shape(v, op) for v in op.results]
        main = op.results[0] if len(op.results) else op.operands[0]
        self.element = _element(main)
        self.bytes = max(1, element_bits(self.element) // 8)
        self.out = math.prod(self.out_shapes[0] if self.out_shapes else self.shapes[0])
        self.tiles = spread(self.out, self.bytes, tiles)
        self.per_tile = math.ceil(self.out / self.tiles)  # result elements on a tile

    def bytes_of(self, index: int) -> int:
        """Bytes of one element of operand `index`."""
        return max(1, element_bits(_element(self.op.operands[index])) // 8)

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
    rate = p.machine.amp_macs_per_cycle(_element(p.op.operands[0]))
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
    indices = [v for v in p.op.operands[1:] if isinstance(_element(v), ir.IntegerType)]
    index_bytes = sum(value_bytes(v) for v in indices)
    count = max(1, sum(math.prod(_static_shape(v, p.op)) for v in indices))
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
    element = _element(p.op.operands[0])
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
    element = _element(p.op.operands[0]) if len(p.op.operands) else p.element
    compute = vector_cycles(p.per_tile, vector_rate(name, element, p.machine), p.machine)
    received = sum(min(math.prod(s), p.per_tile) * max(1, element_bits(_element(v)) // 8)
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


def op_cycles(op: ir.Operation | ir.OpView, machine: Machine = GC200) -> int:
    """Cycles of one ipu op on one IPU with the default available memory proportion."""
    return op_cost(op, machine).cycles
