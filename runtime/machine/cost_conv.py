"""Convolutions on the AMP as poplin plans and runs them: the cycles of its conv vertices
(not MACs over the peak rate) and the input window a tile receives (not im2col rows).

Sources: graphcore/poplibs lib/poplin/PerformanceEstimation.hpp (the vertex estimates
named below), ConvModel.cpp (addPartialCalcCycleEstimate: which vertex, its arguments),
ConvVertexType.cpp (getConvVertexAMPCandidates: channel groupings), ConvUtilInternal.cpp
(partitionConvPartialByWorker: rows to workers) and Convolution.cpp
(getWeightUpdateParams).

The convolution, per conv group, in poplin's canonical form: an output field of rows
(batch x the outer output dimensions) of `width` positions (the innermost one), C_in
input channels reduced for each of the kernel's positions, C_out output channels.

- The input-gradient pass (`ipu.conv_transpose`, poplin's getGradientParams) is a
  convolution over the forward's input field with the channels swapped and the
  forward's stride as input dilation: a kernel position meets 1 in s output rows and
  columns (partitionConvPartialByWorker's output stride).
- The weight-update pass (`ipu.conv_weight_grad`, getWeightUpdateParams: batch and
  input channels swapped, the output field as kernel) is planned as poplin's expandDims
  and flattenDims transforms leave it: a 1x1 convolution reducing batch x output
  positions (its input channels), over a field of C_in x kernel positions in one row.
- A 1x1 convolution with stride 1 and no padding (canUseConvPartial1x1Vertex) has its
  batch and field flattened into one row and runs ConvPartial1x1Out
  (getConvPartial1x1SupervisorCycleEstimate); others run ConvPartialnx1
  (getConvPartialnx1SupervisorCycleEstimate, plus estimateZeroSupervisorCycles).
- Channel groupings (getConvVertexAMPCandidates): input channels are padded to
  inChansPerGroup, weightsPerConvUnit (16 halves, 8 floats) or a smaller multiple of
  convInputLoadElems dividing it (8, 4 halves); a grouping of c < weightsPerConvUnit
  makes the conv unit take weightsPerConvUnit / c kernel rows at once (the vertex's
  filterHeight, getConvUnitWeightHeight). ResNet-50's first convolution (3 channels,
  7x7) pays 4 channels for 3 and 8 kernel rows for 7. Output channels come in groups
  of weightsPerConvUnit, `conv_units` of them a pass.
- Tiles: the planner's choice is approximated by a search over the splits of the output
  field (rows first, then columns), of the output channel groups and of the input
  channel groups (each split of C_in adds a step summing partials, as `amp_plan`),
  keeping the fastest plan within the available memory proportion (`Plan.choose`).
  Kernel positions are not split across tiles; a split field's tiles get whole rows.
- A tile's worker partition is partitionConvPartialByWorker's: the tile's
  rows x width positions cut into 6 equal runs of positions, each run a list of partial
  rows; every partial row costs the worker its own overhead
  (getConvPartialnx1WorkerCycles), every kernel position and output-channel pass the
  supervisor its weight load (getConvPartialAmpSupervisorWeightLoadCycleEstimate).
- Exchange (ConvModel.cpp addExchangeCycleEstimates, getMaxInputRangeSize): a tile
  receives the input window of its output block, ((o - 1) x stride + (k - 1) x dilation
  + 1) per field dimension (o block outputs, k kernel size) for its input channels, and
  the weights of its channels; a pre-arranged operand (`layout`) less the 1/s it holds,
  s the tiles sharing the slab. The weight update receives the output gradient of its
  reduction share and the input window of those output positions.
- Rearrangements (ConvModel.cpp addTransformCycleEstimate): the weight update copies
  its activations, output gradient and result into the layout its vertices read, and a
  convolution whose input channels are padded copies its input (`_rearrangement`): a
  copy at min(memcpyBytesPerCycle, element bytes) x getScaleFactorForTransform and an
  exchange step of the tile's share.
- Conv units: AMP MACs a cycle x coreCycles / weightsPerConvUnit (`_vertices`), so the
  vertex's inner loop (4 cycles a half output position, 8 a float one) runs at the
  machine's AMP rate (`cost_families.amp_rate`: 16 units hh16, 8 hf8 on the GC200).
- Not modelled: SLIC and VMAC vertices (grouped convolutions keep `cost_families.amp`),
  kernel splits across tiles, the planner's other transforms (swapOperands,
  combineConvGroups), the rearrangement of operands into the chosen grouping.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from torch_mlir import ir

from poptorch.dialects.convolution import ConvOp, ConvTransposeOp
from poptorch.dialects.convolution_backward import ConvWeightGradOp
from poptorch.runtime.machine import cost_families as family
from poptorch.runtime.machine.plan import OpCost, Plan, vector_cycles
from poptorch.runtime.machine.system import element_bits, element_type

# weightsPerConvUnit = convUnitMaxPipelineDepth (4) x convUnitInputLoadElemsPerCycle:
# 16 halves ("AMP would like 16 input channels per group", lib/poplin/ConvPlan.hpp),
# 8 floats; convUnitInputLoadElemsPerCycle = the 8-byte load over the element size (4
# halves, 2 floats: tools/single_conv_layer.cpp, fp16ConvUnitInputLoadElemsPerCycle =
# inputLoadWidth / 2, fp32... = inputLoadWidth / 4, with dataPathWidth 64 bits).
WEIGHTS_PER_CONV_UNIT = {16: 16, 32: 8}
INPUT_LOAD_ELEMS = {16: 4, 32: 2}
# Weight loads: 16 bytes a cycle with ld128, 8 with ld64 for filter height 4
# (PerformanceEstimation.hpp getConvPartialAmpSupervisorWeightLoadCycleEstimate).
COEFF_LOAD_BYTES = 16
# Worker cycles an output position in the vertices' inner loop: 4 half, 8 float
# (getConvPartialnx1WorkerCycles, getConvPartial1x1SupervisorInnerLoopCycleEstimate
# HalfFloat: coreCycles).
CORE_CYCLES = {16: 4, 32: 8}


@dataclass(frozen=True)
class Vertex:
    """What the conv vertices' estimates read: activation and partial types, conv units,
    output channels a group (`out_group`) and input channels a group (`in_group`)."""

    float_acts: bool
    float_partials: bool
    units: int
    in_group: int
    out_group: int
    workers: int

    @property
    def core(self) -> int:
        return CORE_CYCLES[32 if self.float_acts else 16]

    @property
    def filter_height(self) -> int:
        """Kernel rows the conv unit takes at once (getConvUnitWeightHeight)."""
        return WEIGHTS_PER_CONV_UNIT[32 if self.float_acts else 16] // self.in_group

    @property
    def passes(self) -> int:
        """Output-channel passes of a group (numOutChanPasses)."""
        return max(1, self.out_group // self.units)

    def weight_loads(self, filter_height: int) -> int:
        """getConvPartialAmpSupervisorWeightLoadCycleEstimate."""
        per_unit = WEIGHTS_PER_CONV_UNIT[32 if self.float_acts else 16] * \
            (4 if self.float_acts else 2)
        load = COEFF_LOAD_BYTES // 2 if filter_height == 4 else COEFF_LOAD_BYTES
        return self.units * per_unit // load


def worker_runs(rows: int, width: int, workers: int) -> list[list[int]]:
    """partitionConvPartialByWorker for one image of `rows` rows of `width` positions:
    each worker's partial rows (their lengths), as (first, whole rows, last) runs."""
    total, runs = rows * width, []
    for i in range(workers):
        begin, end = i * total // workers, (i + 1) * total // workers
        pieces: list[int] = []
        if begin < end:
            first_row, last_row = begin // width, (end - 1) // width
            if first_row == last_row:
                pieces.append(end - begin)
            else:
                pieces.append((first_row + 1) * width - begin)
                pieces += [width] * (last_row - first_row - 1)
                pieces.append(end - last_row * width)
        runs.append(pieces)
    return runs


def _nx1_worker(pieces: list[int], v: Vertex) -> int:
    """getConvPartialnx1WorkerCycles (retention savings 9: convnx1WorkerRetentionSavings)."""
    extra = 1 if not v.float_acts and ((v.units == 16 and not v.float_partials)
                                       or (v.units == 8 and v.float_partials)) else 0
    cycles = 17 + (0 if v.float_partials else 1)
    for n in pieces:
        if n == 0:
            cost = 17
        elif n == 1:
            cost = 33 if v.float_acts else 29
        elif n == 2:
            cost = 44 if v.float_acts else 33 + extra
        else:
            cost = (45 if v.float_acts else 34) + (n - 3) * v.core
        cycles += 3 + cost - 9
    return cycles


def nx1_cycles(v: Vertex, rows: int, width: int, kernel: tuple[int, int],
               in_groups: int, out_groups: int, stride: tuple[int, int] = (1, 1)) -> int:
    """getConvPartialnx1SupervisorCycleEstimate (+ estimateZeroSupervisorCycles) of one
    conv group on a tile: `rows` x `width` output positions, of which a kernel position
    meets 1 in `stride` rows and columns; `kernel`: (outer kernel rows, inner positions)."""
    workers = v.workers
    fh = v.filter_height
    outer, inner = math.ceil(kernel[0] / fh), kernel[1]
    active = worker_runs(math.ceil(rows / stride[0]), math.ceil(width / stride[1]), workers)
    cycles = [_nx1_worker(r, v) * workers for r in active]
    kernel_loop = max(max(cycles), min(cycles) + 9) * v.passes
    innermost = v.weight_loads(fh) + {4: 60, 2: 46, 1: 15}.get(fh, 20 * fh) + 3
    inner_loop = outer * (14 + inner * (17 - 5 + v.passes * innermost)) \
        + kernel_loop * outer * inner
    zero_savings = 9 if v.float_partials else 10  # zeroPartialsRetentionSavings
    supervisor = (109 + workers * 9 + workers * zero_savings  # convNx1Overhead, savings
                  + out_groups * 17 + (out_groups - 1) * 6 + 1 + 1
                  + 16 + in_groups * (14 + out_groups * (14 + inner_loop)))
    # estimateZeroSupervisorCycles: the partials zeroed as floats, 2 a cycle
    per_worker = math.ceil(rows * width * v.out_group / workers)
    zero = (math.ceil(per_worker / 2) + 14 - 9) * workers * out_groups
    return supervisor + zero


def _1x1_worker(n: int | None, v: Vertex, zeroing: bool) -> int:
    """getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat, one worker."""
    if n is None:
        return 0
    common = (not v.float_acts and v.units == 16) or v.float_partials
    zero_per_group = 8 if v.float_acts and v.units == 16 else 4 if v.float_partials else 2
    z = 1 if zeroing else 0
    if v.float_acts:
        base = {0: 24, 1: 47 + (2 + zero_per_group) * z,
                2: 46 + (2 + zero_per_group * 2) * z}
        cycles = base.get(n, 46 + (2 + zero_per_group * n) * z + (n - 3) * v.core)
    elif common:
        tail = 1 if zeroing else 2
        cycles = {0: 20 + tail, 1: 31 + tail, 2: 40 + tail}.get(
            n, (37 if zeroing else 38) + (n - 3) * v.core)
    else:
        base = {0: 24, 1: 39 + (2 + zero_per_group) * z,
                2: 40 + (2 + zero_per_group * 2) * z}
        cycles = base.get(n, 41 + (2 + zero_per_group * n) * z + (n - 3) * v.core)
    return cycles - _retention_1x1(v)[0]


def _retention_1x1(v: Vertex) -> tuple[int, int]:
    """conv1x1WorkerRetentionSavings."""
    if not v.float_acts and (v.float_partials or v.units == 16):
        return 7, 3
    return 0, 0


def one_by_one_cycles(v: Vertex, positions: int, in_groups: int, out_groups: int,
                      conv_groups: int = 1) -> int:
    """getConvPartial1x1SupervisorCycleEstimate of a tile's `positions` in one row, for
    each of its `conv_groups`."""
    workers = v.workers
    runs = [r[0] if r else None for r in worker_runs(1, positions, workers)]

    def inner(zeroing: bool) -> int:
        cycles = [_1x1_worker(n, v, zeroing) * workers for n in runs]
        return max(max(cycles), min(cycles) + 14)

    common = 1 if (not v.float_acts and v.units == 16) or v.float_partials else 0
    loads = v.weight_loads(1)
    first, per_in = _retention_1x1(v)
    return (50 + workers * (first + per_in * (in_groups * conv_groups - 1))
            + conv_groups * (
                12 + common
                + (in_groups - 1) * (15 - common + 1 + out_groups * (
                    19 + v.passes * (6 + loads + inner(False))))
                + 10 + 1 + out_groups * (19 - common + v.passes * (7 + loads + inner(True)))))


@dataclass(frozen=True)
class ProductSlabs:
    """The slabs of a 1x1 product whose field is one row (`width` positions): `lhs` and
    `rhs` bytes an element of the activations and of the weights."""

    lhs: int
    rhs: int

    def __call__(self, rows: int, width: int, ci: int, co: int) -> tuple[int, int]:
        return ci * width * self.lhs, co * ci * self.rhs


@dataclass(frozen=True)
class WindowSlabs:
    """The slabs of a forward or input-gradient convolution: the input window a block of
    `rows` output rows reads (`_window`), or the rows themselves when it is 1x1."""

    x: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    outer: tuple[int, ...]  # the outer output dimensions, batch first
    transposed: bool
    one_by_one: bool
    b_act: int
    b_w: int

    def __call__(self, rows: int, width: int, ci: int, co: int) -> tuple[int, int]:
        if self.one_by_one:
            return ci * rows * width * self.b_act, co * ci * self.b_w
        block = _block(rows, list(self.outer)) + [width]
        window = block[0] * _window(self.x[2:], block[1:], self.kernel, self.stride,
                                    self.dilation, self.transposed)
        return ci * window * self.b_act, co * ci * math.prod(self.kernel) * self.b_w


@dataclass(frozen=True)
class WeightGradSlabs:
    """The slabs of a weight-update pass: its field is C_in x kernel positions
    (`width`), its reduction `ci` output positions of `grad`."""

    x: tuple[int, ...]
    grad: tuple[int, ...]  # (N, C_out, output field...)
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    b_act: int
    b_w: int

    def __call__(self, rows: int, width: int, ci: int, co: int) -> tuple[int, int]:
        x, grad = self.x, self.grad
        chans = min(x[1], math.ceil(width / math.prod(self.kernel)))
        out_rows = math.ceil(ci / grad[-1])
        block = _block(out_rows, [grad[0], *grad[2:-1]]) + [min(ci, grad[-1])]
        window = block[0] * _window(x[2:], block[1:], self.kernel, self.stride,
                                    self.dilation)
        return chans * window * self.b_act, co * ci * self.b_w


@dataclass(frozen=True)
class Conv:
    """One convolution in canonical form (module docstring), and how its tiles' operand
    slabs are counted: `received(rows, width, ci, co)` gives the (activation-side,
    weight-side) bytes of one conv group; `groups` conv groups (a batched matmul's).
    Every field, `received`'s own included, is part of `conv_plans`' memo key, so two
    equal `Conv`s weigh the same plans."""

    rows: int
    width: int
    in_chans: int
    out_chans: int
    kernel: tuple[int, int]
    stride: tuple[int, int]  # output positions a kernel position meets: 1 in s
    one_by_one: bool
    received: ProductSlabs | WindowSlabs | WeightGradSlabs
    groups: int = 1


def _attr(op: ir.Operation, name: str, rank: int, default: int) -> list[int]:
    if name in op.attributes:
        return list(ir.DenseI64ArrayAttr(op.attributes[name]))
    return [default] * rank


def _block(rows: int, outer: list[int]) -> list[int]:
    """The sizes, in each outer output dimension (batch first), of a block of `rows`
    consecutive rows."""
    block, remaining = [], rows
    for size in reversed(outer):
        block.append(min(size, remaining))
        remaining = max(1, math.ceil(remaining / size))
    return block[::-1]


def _window(sizes: Sequence[int], block: Sequence[int], kernel: Sequence[int],
            stride: Sequence[int], dilation: Sequence[int], transposed: bool = False) -> int:
    """Input elements a channel of an output block reads (getMaxInputRangeSize), each
    field dimension clipped to the input's size."""
    count = 1
    for size, b, k, s, d in zip(sizes, block, kernel, stride, dilation, strict=True):
        span = (b + (k - 1) * d + s - 1) // s if transposed else (b - 1) * s + (k - 1) * d + 1
        count *= min(size, span)
    return count


def canonical(p: Plan) -> Conv | None:
    """The op as a canonical convolution, None when it has conv groups (not modelled)."""
    op = p.op
    if "groups" in op.attributes and ir.IntegerAttr(op.attributes["groups"]).value != 1:
        return None
    x, w, out = p.shapes[0], p.shapes[1], p.out_shapes[0]
    rank = len(x) - 2
    if rank < 1:
        return None
    stride = _attr(op, "strides", rank, 1)
    dilation = _attr(op, "dilations", rank, 1)
    b_act, b_w = p.bytes_of(0), p.bytes_of(1)
    if p.op_class is ConvWeightGradOp:
        grad = w  # (N, C_out, out field...)
        kernel = out[2:]
        positions = grad[0] * math.prod(grad[2:])

        return Conv(1, out[1] * math.prod(kernel), positions, out[0], (1, 1), (1, 1), True,
                    WeightGradSlabs(tuple(x), tuple(grad), tuple(kernel), tuple(stride),
                                    tuple(dilation), b_act, b_w))
    transposed = p.op_class is ConvTransposeOp
    c_in, c_out = x[1], out[1]
    kernel = w[2:]
    outer = [out[0], *out[2:-1]]
    padded = any(_attr(op, "padding_low", rank, 0)) or any(_attr(op, "padding_high", rank, 0)) \
        or any(_attr(op, "padding", rank, 0))
    one = math.prod(kernel) == 1 and all(s == 1 for s in stride) and not padded
    field_stride = tuple(stride[-2:]) if transposed and rank >= 2 else \
        ((1, stride[-1]) if transposed else (1, 1))
    kernel_pos = (math.prod(kernel[:-1]), kernel[-1])

    slabs = WindowSlabs(tuple(x), tuple(kernel), tuple(stride), tuple(dilation),
                        tuple(outer), transposed, one, b_act, b_w)
    return Conv(math.prod(outer), out[-1], c_in, c_out, kernel_pos, field_stride, one, slabs)


def _splits(total: int, limit: int) -> list[int]:
    """The splits of `total` units in at most `limit` parts that give distinct shares."""
    parts = {math.ceil(total / share) for share in range(1, total + 1)
             if math.ceil(total / share) <= limit} if total <= 4096 else \
        {2 ** i for i in range(total.bit_length()) if 2 ** i <= limit}
    return sorted(parts) or [1]


def _vertices(p: Plan) -> list[Vertex]:
    """The AMP candidates of getConvVertexAMPCandidates for the op's types."""
    element = element_type(p.op.operands[0])
    float_acts = not (isinstance(element, ir.FloatType) and element_bits(element) <= 16)
    bits = 32 if float_acts else 16
    weights, load = WEIGHTS_PER_CONV_UNIT[bits], INPUT_LOAD_ELEMS[bits]
    units = max(1, family.amp_rate(p) * CORE_CYCLES[bits] // weights)
    float_partials = float_acts or not family.half_partials(p.op)
    return [Vertex(float_acts, float_partials, units, group, max(weights, units),
                   p.machine.numWorkerContexts)
            for group in range(weights, 0, -load) if weights % group == 0]


# conv_plans' results by everything the plans read (`_plans_key`): a deep model repeats
# each of its products and convolutions once a layer, and weighing one's ~1,000 plans
# takes tens of milliseconds (a 12-layer BERT-base's 97 matmuls: most of its machine model).
_PLANS: dict[tuple, tuple[tuple[OpCost, int], ...]] = {}
_PLANS_KEPT = 4096


def _plans_key(p: Plan, conv: Conv) -> tuple:
    """What `_vertices`, `_plan` and `_rearrangement` read of `p` for `conv`."""
    return (conv, p.op_class, p.machine, p.available, p.proportion, p.arranged, p.bytes,
            p.operand_bytes, tuple(tuple(shape) for shape in p.shapes), p.out,
            str(element_type(p.op.operands[0])), family.half_partials(p.op))


def conv_plans(p: Plan, conv: Conv | None = None) -> list[tuple[OpCost, int]] | None:
    """The plans weighed for a convolution-like op (module docstring), or for `conv`
    when given (a matmul, `cost_matmul`); None for a convolution with conv groups
    (planned by `cost_families.amp`)."""
    conv = conv or canonical(p)
    if conv is None:
        return None
    key = _plans_key(p, conv)
    plans = _PLANS.get(key)
    if plans is None:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        plans = _PLANS[key] = tuple(_weigh(p, conv))
    return list(plans)


def _weigh(p: Plan, conv: Conv) -> list[tuple[OpCost, int]]:
    plans, tiles = [], p.available
    for v in _vertices(p):
        in_groups_total = math.ceil(conv.in_chans / v.in_group)
        out_groups_total = math.ceil(conv.out_chans / v.out_group)
        partial_bits = 32 if v.float_partials else 16
        for pg, po, pi in itertools.product(_splits(conv.groups, tiles),
                                            _splits(out_groups_total, tiles),
                                            _splits(in_groups_total, tiles)):
            if pg * po * pi > tiles:
                continue
            plans.append(_plan(p, conv, v, (pg, po, pi), tiles // (pg * po * pi),
                               partial_bits))
    return plans


def _plan(p: Plan, conv: Conv, v: Vertex, split: tuple[int, int, int], field_tiles: int,
          partial_bits: int) -> tuple[OpCost, int]:
    """A plan splitting the conv groups, output channel groups and input channel groups
    over `split` (pg, po, pi) tiles, and the field over `field_tiles`."""
    pg, po, pi = split
    groups = math.ceil(conv.groups / pg)  # conv groups on a tile
    out_groups = math.ceil(math.ceil(conv.out_chans / v.out_group) / po)
    in_groups = math.ceil(math.ceil(conv.in_chans / v.in_group) / pi)
    ci, co = min(conv.in_chans, in_groups * v.in_group), min(conv.out_chans,
                                                             out_groups * v.out_group)
    if conv.one_by_one and v.filter_height == 1:
        field = conv.rows * conv.width
        pf = min(field_tiles, field)
        rows, width = 1, math.ceil(field / pf)
        compute = one_by_one_cycles(v, width, in_groups, out_groups, groups)
    else:
        pf = min(field_tiles, conv.rows * conv.width)
        if pf <= conv.rows:
            rows, width = math.ceil(conv.rows / pf), conv.width
        else:
            rows, width = 1, math.ceil(conv.width / (pf // conv.rows))
        compute = groups * nx1_cycles(v, rows, width, conv.kernel, in_groups, out_groups,
                                      conv.stride)
    act, weight = (groups * b for b in conv.received(rows, width, ci, co))
    lhs, rhs = (1, 0) if p.op_class is ConvWeightGradOp else (0, 1)
    received = (act - act // po if p.arranged[lhs] else act) + \
        (weight - weight // pf if p.arranged[rhs] else weight)
    outputs = groups * rows * width * co
    reduction = (0, 0)
    if pi > 1:  # each of the split's tiles sums 1/pi of the others' partials
        share = math.ceil(outputs * (pi - 1) / pi)
        compute += vector_cycles(share, (1, p.machine.dataPathWidth // partial_bits),
                                 p.machine)
        reduction = (share * partial_bits // 8, outputs * partial_bits // 8)
    if partial_bits > 8 * p.bytes:  # estimateCastCycles: fp32 partials to the result
        n = math.ceil(math.ceil(outputs / pi) / v.workers)
        compute += (max(math.ceil(n / 2), math.ceil(n / 4)) + 26) * v.workers
    tiles = pf * po * pi * pg
    cost, temporary = p.serialised(compute, received, in_groups, tiles, reduction)
    copy, moved = _rearrangement(p, conv, v, tiles)
    if not moved:
        return cost, temporary
    m = p.machine
    return OpCost(cost.compute + copy, cost.exchange + math.ceil(moved / m.exchangeBytesPerCycle),
                  cost.sync + m.globalSyncCycles,
                  cost.temporary_bytes + tiles * moved), temporary + moved


def _rearrangement(p: Plan, conv: Conv, v: Vertex, tiles: int) -> tuple[int, int]:
    """(copy cycles, bytes a tile receives) of the operands poplin rearranges before the
    vertices run (ConvModel.cpp addTransformCycleEstimate): the weight update's
    activations, output gradient and result (rearrangeInput, rearrangeWeights and
    rearrangeOutput of Pass::TRAINING_WU), and the input of a convolution whose input
    channels are padded to the grouping (padInChannels). Each tile copies its share at
    min(memcpyBytesPerCycle, element bytes) bytes a cycle times poplin's
    getScaleFactorForTransform (4/5, or 3/5 when C_in x C_out of the transformed
    convolution is not a multiple of 4 halves or 2 floats), and receives it."""
    shares = []
    if p.op_class is ConvWeightGradOp:
        shares = [(math.prod(p.shapes[0]), p.bytes_of(0)), (math.prod(p.shapes[1]), p.bytes_of(1)),
                  (p.out, p.bytes)]
        scaled = p.shapes[0][0] * conv.out_chans  # the weight update's C_in (batch) x C_out
    elif conv.in_chans % v.in_group:
        shares = [(math.prod(p.shapes[0]), p.bytes_of(0))]
        scaled = conv.in_chans * conv.out_chans
    copy = moved = 0
    for elements, size in shares:
        share = math.ceil(elements * size / tiles)
        granularity = 2 if size >= 4 else 4
        factor = 4 if scaled % granularity == 0 else 3
        copy += math.ceil(share * 5 / (min(p.machine.memcpyBytesPerCycle, size) * factor))
        moved += share
    return copy, moved


def conv(p: Plan) -> OpCost:
    """The rule of an ungrouped convolution-like op (`ipu.conv`, `ipu.conv_transpose`,
    `ipu.conv_weight_grad`): the fastest plan of `conv_plans`; grouped ones as
    `cost_families.amp` plans them."""
    plans = conv_plans(p)
    if plans is None:
        return family.amp(p, dims=DIMS[p.op_class])
    if 0 in (p.shapes[0] + p.shapes[1]):
        return family.fill(p)
    return p.choose(plans)


DIMS = {ConvOp: family.conv_dims, ConvTransposeOp: family.conv_transpose_dims,
        ConvWeightGradOp: family.conv_weight_grad_dims}
