"""The machine presets and the cost model: op plans pinned against calculations by hand.

Each pinned figure is worked out here from the `Machine` fields and the planning rules
of runtime/cost.py's docstring (128-byte tile grain, AMP blocks and K split,
PopLibs' vector loop costs, available-memory serialisation), not by calling the model.
"""

import math
from dataclasses import replace

import numerics
import pytest
import torch
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.machine import cost_families as family
from poptorch.runtime.machine.cost import op_cost, op_cycles, op_proportion
from poptorch.runtime.machine.cost_conv import Vertex, one_by_one_cycles
from poptorch.runtime.machine.plan import Plan, vector_cycles
from poptorch.runtime.machine.system import (
    GC2,
    GC200,
    GC200_FP8,
    IPUS_IN_SYSTEM,
    Machine,
    machine_for,
)

M = GC200
TILES, WORKERS, SYNC = M.tilesPerIPU, M.numWorkerContexts, M.globalSyncCycles
EXCHANGE = M.exchangeBytesPerCycle  # 4 bytes a tile a cycle


_MODULES: list[ir.Module] = []  # parsed modules outlive the ops a test holds


def ops_of(text: str) -> list[ir.OpView]:
    """The ops of @main (or the only function) of a module in IR text."""
    module = ir.Module.parse(text, make_context())
    _MODULES.append(module)
    func = next(op for op in module.body.operations if "sym_name" in op.attributes)
    return list(func.regions[0].blocks[0].operations)


def named(ops: list[ir.OpView], name: str) -> ir.OpView:
    return next(op for op in ops if op.operation.name == name)


def compiled_ops(model: torch.nn.Module, *inputs: torch.Tensor) -> list[ir.OpView]:
    """The final ipu module of `model`, through the real pipeline."""
    ipu = poptorch.inferenceModel(model)
    ipu(*inputs)
    return ops_of(ipu._compiled.module_text)


def amp_cost(op: ir.OpView, machine: Machine = M, proportion: float | None = None):
    """The AMP family's plan of a matmul (`cost_families.amp`): the rule of grouped
    convolutions, and of matmuls before they became poplin's 1x1 convolutions
    (`cost_matmul`); its block and K-split planning is pinned here on matmuls."""
    plan = Plan(op.operation, machine, machine.compute_tiles(0),
                op_proportion(op.operation, proportion))
    return family.amp(plan, family.matmul_dims)


def amp_by_hand(rows: int, cols: int, depth: int, macs: int, split: int,
                block_rows: int | None = None,
                arranged: tuple[bool, bool] = (False, False)) -> tuple[int, int]:
    """One f32 AMP plan written out: (cycles, temporary bytes a tile) with K split in
    `split` parts, blocks of `block_rows` rows (square by default) and the left / right
    operand pre-arranged or not (no serialisation: the default proportion fits these)."""
    tiles = min(TILES, math.ceil(rows * cols / 32), TILES // split)  # 32 floats = 128 bytes
    area = math.ceil(rows * cols / tiles)
    block_rows = block_rows or min(rows, math.ceil(math.sqrt(area)))
    block_cols = min(cols, math.ceil(area / block_rows))
    part = math.ceil(depth / split)
    compute = math.ceil(block_rows * block_cols * part / macs)
    # a pre-arranged slab is spread over the tiles sharing it: a tile holds 1/sharers
    received = 0
    for slab, sharers, held in ((block_rows * part * 4, math.ceil(cols / block_cols),
                                 arranged[0]),
                                (part * block_cols * 4, math.ceil(rows / block_rows),
                                 arranged[1])):
        received += slab - slab // sharers if held else slab
    exchange, syncs, temporary = math.ceil(received / EXCHANGE), 1, received
    if split > 1:  # a second step sums the fp32 partials: 1/split of them on each tile
        partials = block_rows * block_cols
        share = math.ceil(partials * (split - 1) / split)
        compute += math.ceil(math.ceil(share / WORKERS) / 2) * WORKERS  # f32 add: 2 a cycle
        exchange += math.ceil(share * 4 / EXCHANGE)
        syncs, temporary = 2, received + partials * 4
    return compute + exchange + syncs * SYNC, temporary


def best_by_hand(rows: int, cols: int, depth: int,
                 arranged: tuple[bool, bool] = (False, False)) -> int:
    """The fastest of the plans the planner weighs: each K split, square blocks and
    blocks of 2^j rows within 16x of square."""
    plans = []
    for split in (2 ** i for i in range(depth.bit_length()) if 2 ** i <= depth):
        area = math.ceil(rows * cols / min(TILES, math.ceil(rows * cols / 32),
                                           TILES // split))
        side = math.isqrt(area)
        shapes = [None] + [2 ** j for j in range(rows.bit_length())
                           if side // 16 <= 2 ** j <= min(rows, area, side * 16)
                           and math.ceil(area / 2 ** j) <= cols]
        plans += [amp_by_hand(rows, cols, depth, M.fp32AmpMacsPerCycle, split, b,
                              arranged)[0] for b in shapes]
    return min(plans)


class MatMul(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(256, 512))

    def forward(self, x):
        return x @ self.w


def test_amp_family_plans_64x256_by_256x512_f32():
    matmul = named(compiled_ops(MatMul(), torch.randn(64, 256)), "ipu.matmul")
    # 64 x 512 = 32768 outputs at 32 a tile would fill 1024 tiles. The planner splits K
    # = 256 in 8: 1472 / 8 = 184 tiles of outputs, ceil(32768 / 184) = 179 each, a 14 x 13
    # block (14 = ceil(sqrt(179)), 13 = ceil(179 / 14)) over 256 / 8 = 32 of K:
    # compute 14 * 13 * 32 / 16 = 364 cycles. Both operands are @main's arguments (the
    # input and the weight), pre-arranged: the 14 x 32 slab of x (1792 bytes) is spread
    # over the ceil(512 / 13) = 40 tiles whose blocks take those rows, so a tile holds
    # 1792 // 40 = 44 bytes of it and receives 1748; the 32 x 13 slab of w (1664 bytes)
    # over ceil(64 / 14) = 5 tiles: 1664 - 332 = 1332 received. 3080 bytes: 770 cycles.
    # Summing partials: ceil(182 * 7 / 8) = 160 floats a tile, ceil(ceil(160 / 6) / 2) * 6
    # = 84 cycles and 640 bytes (160 cycles) in. Two syncs (globalSyncCycles each).
    assert amp_by_hand(64, 512, 256, 16, 8, arranged=(True, True)) == (
        364 + 84 + 770 + 160 + 2 * SYNC, 3080 + 728)
    cost = amp_cost(matmul)
    assert (cost.compute, cost.exchange, cost.sync) == (448, 930, 2 * SYNC)
    assert cost.cycles == best_by_hand(64, 512, 256, (True, True))
    assert cost.cycles == 448 + 930 + 2 * SYNC
    # With a sync this cheap, splitting K further loses only by a little: in 16 parts,
    # 1472 / 16 = 92 tiles of 19 x 19 blocks (357 outputs) over 16 of K compute
    # 19 * 19 * 16 / 16 = 361 cycles and receive 1216 - 1216 // 27 + 1216 - 1216 // 4 =
    # 2083 bytes of slabs (521 cycles), but sum ceil(361 * 15 / 16) = 339 partials (174
    # cycles, 339 in).
    assert amp_by_hand(64, 512, 256, 16, 16, arranged=(True, True))[0] == (
        361 + 174 + 521 + 339 + 2 * SYNC) > cost.cycles
    # Without the split (one BSP step) it is slower: 1024 tiles of 6 x 6 blocks over all
    # of K, 6 * 6 * 256 / 16 = 576 cycles, 6 * 256 * 4 = 6144 bytes of each operand, of
    # which a tile holds 1/86 of x's (86 tiles share its rows) and 1/11 of w's.
    assert amp_by_hand(64, 512, 256, 16, 1, arranged=(True, True)) == (
        576 + math.ceil((6144 - 6144 // 86 + 6144 - 6144 // 11) / 4) + SYNC,
        6144 - 6144 // 86 + 6144 - 6144 // 11)
    assert cost.temporary_bytes == 1472 * (3080 + 728)


# The vertex of a matmul of floats: 8-channel input groups (weightsPerConvUnit), 16
# output channels a group, 16 conv units (fp32AmpMacsPerCycle x coreCycles 8 / 8),
# float partials.
F32_VERTEX = Vertex(float_acts=True, float_partials=True, units=16, in_group=8,
                    out_group=16, workers=WORKERS)


def test_matmul_64x256_by_256x512_f32_runs_poplins_1x1_vertex():
    matmul = named(compiled_ops(MatMul(), torch.randn(64, 256)), "ipu.matmul")
    # poplin's matmul is a convolution of 64 positions, 256 input channels (32 groups of
    # 8 floats), 512 output channels (32 groups of 16). The fastest split: output groups
    # over 32 tiles, input groups over 11 (3 a tile: 24 channels), the 64 positions over
    # 1472 // (32 x 11) = 4 tiles (16 a tile): 1408 tiles. A tile runs the 1x1 vertex on
    # 16 positions, 3 input groups, 1 output group, then sums 10/11 of its 16 x 16
    # partials from the other tiles: ceil(256 x 10 / 11) = 233 floats, 2 a cycle a worker.
    reduce = vector_cycles(233, (1, 2), M)
    assert reduce == math.ceil(math.ceil(233 / 6) / 2) * 6 == 120
    compute = one_by_one_cycles(F32_VERTEX, 16, 3, 1) + reduce
    # Exchange: the tile's 16 x 24 slab of x (1536 bytes) is shared by the 32 tiles of
    # its output groups, so it holds 1/32 of it; the 24 x 16 weight slab (1536 bytes) by
    # the 4 tiles of its positions; then the 233 partials it sums (932 bytes).
    received = 1536 - 1536 // 32 + 1536 - 1536 // 4
    exchange = math.ceil(received / EXCHANGE) + 233
    cost = op_cost(matmul)
    assert (cost.compute, cost.exchange, cost.sync) == (compute, exchange, 2 * SYNC)
    assert cost.cycles == op_cycles(matmul)
    # Not splitting the input groups saves the reduction but pays 32 input groups a
    # tile's supervisor loop: slower.
    unsplit = one_by_one_cycles(F32_VERTEX, 2, 32, 1)
    assert unsplit > cost.cycles
    assert cost.temporary_bytes == 1408 * (received + 256 * 4)


def test_conv2d_4_to_8_channels_3x3():
    conv = torch.nn.Conv2d(4, 8, 3, padding=1, bias=False)
    op = named(compiled_ops(conv, torch.randn(2, 4, 16, 16)), "ipu.conv")
    # As a matrix product: rows = 2 images x 16 x 16 positions = 512, cols = 8 output
    # channels, K = 4 channels x 3 x 3 = 36. 4096 outputs: 128 tiles of 32. Square 6 x 6
    # blocks: compute 6 * 6 * 36 / 16 = 81; the input and the weight are @main's
    # arguments, pre-arranged: a tile receives all but 1/2 of its 6 x 36 input slab (2
    # tiles share its rows, ceil(8 / 6)) and all but 1/86 of its 36 x 6 weight slab.
    slab = 6 * 36 * 4
    square = math.ceil((slab - slab // 2 + slab - slab // 86) / 4)
    assert amp_by_hand(512, 8, 36, 16, 1, arranged=(True, True)) == (
        81 + square + SYNC, slab - slab // 2 + slab - slab // 86)
    # 4 x 8 blocks take whole rows of outputs: the input slab is all on the tile, only the
    # 36 x 8 weight slab (1152 bytes, shared by 512 / 4 = 128 tiles) comes in: 1152 - 9
    # bytes, 286 cycles; compute 4 * 8 * 36 / 16 = 72.
    assert amp_by_hand(512, 8, 36, 16, 1, 4, (True, True)) == (72 + 286 + SYNC, 1143)
    # With a sync of globalSyncCycles (90), the planner splits K in 8 (a second step
    # summing the partials): 128 tiles of 4 x 8 blocks for each of the 8 parts of K
    # (ceil(36 / 8) = 5 deep), 1024 tiles. Compute 4 * 8 * 5 / 16 = 10; the 5 x 8 weight
    # slab (160 bytes, 128 sharers) comes in less its 1/128: 159 bytes, 40 cycles.
    # Summing: ceil(32 * 7 / 8) = 28 floats a tile, ceil(ceil(28 / 6) / 2) * 6 = 18
    # cycles, 112 bytes (28 cycles) in. 8 x 4 blocks tie (80 + 79 bytes in): the planner
    # keeps the first.
    split = amp_by_hand(512, 8, 36, 16, 8, 4, (True, True))
    assert split == (10 + 18 + 40 + 28 + 2 * SYNC, 159 + 32 * 4)
    assert amp_by_hand(512, 8, 36, 16, 8, 8, (True, True)) == split
    assert best_by_hand(512, 8, 36, (True, True)) == split[0] < 72 + 286 + SYNC
    # The convolution itself is charged as poplin's conv vertices run it
    # (runtime/machine/cost_conv.py, pinned by hand in test_cost_conv.py): their
    # supervisor and worker overheads (hundreds of cycles a vertex) outweigh these
    # 4,608 MACs a tile, so it costs more than the product's best AMP plan.
    assert op_cost(op).cycles > split[0]


MATMULS = """
func.func @f(%a: tensor<512x64xf32>, %b: tensor<64x512xf32>, %h: tensor<512x64xf16>,
             %g: tensor<64x512xf16>, %p: tensor<512x64xf8E4M3FN>, %q: tensor<64x512xf8E4M3FN>) {
  %0 = "ipu.matmul"(%a, %b) : (tensor<512x64xf32>, tensor<64x512xf32>) -> tensor<512x512xf32>
  %1 = "ipu.matmul"(%h, %g) : (tensor<512x64xf16>, tensor<64x512xf16>) -> tensor<512x512xf16>
  %2 = "ipu.matmul"(%p, %q) : (tensor<512x64xf8E4M3FN>, tensor<64x512xf8E4M3FN>)
      -> tensor<512x512xf8E4M3FN>
  return
}
"""


def test_amp_rate_by_dtype():
    f32, f16, f8, _ = ops_of(MATMULS)
    # A sync too dear to split K: one 14 x 13 block a tile on all 1472 tiles either way
    # (262144 outputs), 14 * 13 * 64 MACs; AMP MACs a cycle 16 (fp32), 32 (fp16 with
    # PopLibs' default fp32 partials: FP16.32).
    slow_sync = replace(M, globalSyncCycles=10**6)
    assert amp_cost(f32, slow_sync).compute == math.ceil(14 * 13 * 64 / 16) == 728
    assert M.fp16InFp32OutAmpMacsPerCycle == 32
    assert amp_cost(f16, slow_sync).compute == math.ceil(14 * 13 * 64 / 32) == 364
    # FP8 runs at the FP16 rate on the GC200 (converted), twice the FP16.16 rate on the
    # C600's IPU (ipu21): 128 MACs.
    assert amp_cost(f8, slow_sync).compute == 364
    assert amp_cost(f8, replace(GC200_FP8, globalSyncCycles=10**6)).compute == 91


def test_available_memory_trades_temporary_bytes_for_cycles():
    matmul = named(compiled_ops(MatMul(), torch.randn(64, 256)), "ipu.matmul")
    proportions = (1.0, 0.6, 0.01, 0.003, 0.001, 0.0005)
    for plan in (op_cost, amp_cost):  # the matmul's rule (poplin's 1x1 vertex) and AMP's
        costs = [plan(matmul, proportion=p) for p in proportions]
        assert all(a.cycles <= b.cycles for a, b in zip(costs, costs[1:], strict=False))
        assert all(a.temporary_bytes >= b.temporary_bytes
                   for a, b in zip(costs, costs[1:], strict=False))
        assert costs[0] == costs[1] == costs[2] and costs[-1].cycles > 4 * costs[0].cycles
    # The AMP family's plans (`costs`, the loop's last), by hand:
    # 0.0005 of 624 KiB: 319 bytes a tile; the unsplit plan of 4 x 8 blocks (11712 bytes
    # to receive, below) in ceil(11712 / 319) = 37 pieces of 317 bytes (80 exchange
    # cycles), each with its sync.
    assert math.ceil(11712 / 37) == 317 <= int(0.0005 * M.memoryBytesPerTile) == 319
    assert costs[-1].cycles == 512 + 37 * 80 + 37 * SYNC
    # 0.001 of 624 KiB: 638 bytes a tile. The K-split plans need partial sums besides their
    # slabs (e.g. split 2, square 7 x 7 blocks: 7 * 128 * 4 = 3584 bytes of each operand,
    # less the 1/74 and 1/10 the tile holds, in 12 pieces of 589, plus 7 * 7 partials * 4
    # = 196: 785); the unsplit plan of 4 x 8 blocks over all of K fits: 4 * 256 * 4 =
    # 4096 bytes of x (its rows shared by 64 tiles: 4032 to receive) and 256 * 8 * 4 =
    # 8192 of w (shared by 16: 7680), in ceil(11712 / 638) = 19 pieces of ceil(11712 /
    # 19) = 617 bytes, each its own exchange (155 cycles) and sync; compute 4 * 8 * 256
    # / 16 = 512 cycles.
    cap = int(0.001 * M.memoryBytesPerTile)
    split2 = 2 * 3584 - 3584 // 74 - 3584 // 10
    assert cap == 638 and math.ceil(split2 / 12) + 196 > cap
    assert math.ceil(11712 / 19) == 617 <= cap < math.ceil(11712 / 18)
    cost = costs[4]
    assert (cost.compute, cost.exchange, cost.sync) == (512, 19 * 155, 19 * SYNC)
    assert cost.temporary_bytes == 1024 * 617 <= 0.001 * M.memoryBytesPerTile * TILES


def test_gather_serialises_under_a_small_proportion():
    ops = ops_of("""
func.func @f(%w: tensor<1000x64xf32>, %i: tensor<512xi32>) -> tensor<512x64xf32> {
  %0 = "ipu.index_select"(%w, %i) {dim = 0 : i64} : (tensor<1000x64xf32>, tensor<512xi32>)
      -> tensor<512x64xf32>
  return %0 : tensor<512x64xf32>
}""")
    # 32768 floats: 1024 tiles of 32 = 128 bytes copied (16 cycles at 8 bytes a cycle).
    # The table is an argument, pre-arranged: each tile looks its rows up where they are
    # and receives only the 2048 bytes of indices, 512 cycles.
    assert op_cost(ops[0]).cycles == 16 + 512 + SYNC
    # 638 bytes a tile: ceil(2048 / 638) = 4 pieces of 512 bytes, 128 cycles each.
    small = op_cost(ops[0], proportion=0.001)
    assert (small.exchange, small.sync, small.temporary_bytes) == (512, 4 * SYNC, 1024 * 512)


ELEMENTWISE = """
func.func @f(%x: tensor<64x512xf32>, %b: tensor<512xf32>, %y: tensor<256x1024xf32>) {
  %0 = "ipu.add"(%x, %x) : (tensor<64x512xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  %1 = "ipu.exp"(%x) : (tensor<64x512xf32>) -> tensor<64x512xf32>
  %2 = "ipu.erf"(%x) : (tensor<64x512xf32>) -> tensor<64x512xf32>
  %3 = "ipu.add"(%x, %b) : (tensor<64x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
  %4 = "ipu.exp"(%y) : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %5 = "ipu.reshape"(%x) : (tensor<64x512xf32>) -> tensor<32768xf32>
  return
}
"""


def test_transcendental_ops_cost_more_than_plain_ones():
    add, exp, erf, bias, _, reshape, _ = ops_of(ELEMENTWISE)
    # 32768 floats on 1024 tiles, 32 a tile, ceil(32 / 6) = 6 for each worker. PopLibs'
    # float loops: ADD 1 cycle per 2, EXPONENT 6 per 2, ERF 41 per 1; a worker issues every
    # 6th cycle.
    assert op_cost(add).compute == math.ceil(6 / 2) * 1 * WORKERS == 18
    assert op_cost(exp).compute == math.ceil(6 / 2) * 6 * WORKERS == 108
    assert op_cost(erf).compute == 6 * 41 * WORKERS == 1476
    assert op_cost(add).exchange == 0 and op_cost(add).cycles == 18 + SYNC
    # A broadcast operand is received: 32 of the 512 bias floats a tile, 128 bytes.
    assert op_cost(bias).exchange == 128 // EXCHANGE
    assert op_cost(reshape).cycles == 0


def test_io_tiles_take_tiles_from_compute():
    *_, big, _, _ = ops_of(ELEMENTWISE)
    # 262144 floats fill all tiles: 179 a tile; with 128 IO tiles, 1344 tiles of 196.
    assert math.ceil(262144 / 1472) == 179 and math.ceil(262144 / 1344) == 196
    assert op_cost(big).compute == math.ceil(math.ceil(179 / 6) / 2) * 6 * WORKERS == 540
    assert op_cost(big, io_tiles=128).compute == math.ceil(math.ceil(196 / 6) / 2) * 36 == 612
    with pytest.raises(poptorch.Error, match=r"io_tiles must be between 0 and 1471 on a "
                                             r"1472-tile IPU, got 1472"):
        op_cost(big, io_tiles=1472)


def test_mk1_and_mk2_presets():
    assert (GC2.IPUVersion, GC2.version, GC2.tilesPerIPU, GC2.memoryBytesPerTile) == (
        "ipu1", 1, 1216, 256 * 1024)
    assert GC2.tilesPerIPU * GC2.memoryBytesPerTile == 304 * 2**20  # 304 MiB
    # Published peaks: GC2 124.5 / 31.1 TFLOPS, GC200 250 / 62.5, C600 280 FP16, 560 FP8.
    def peak(machine: Machine, macs: int) -> float:
        return 2 * macs * machine.tilesPerIPU * machine.tileClockFrequency

    assert peak(GC2, GC2.fp16AmpMacsPerCycle) == pytest.approx(124.5e12, rel=0.01)
    assert peak(GC2, GC2.fp32AmpMacsPerCycle) == pytest.approx(31.1e12, rel=0.01)
    assert peak(GC200, GC200.fp32AmpMacsPerCycle) == pytest.approx(62.5e12, rel=0.01)
    assert peak(GC200_FP8, GC200_FP8.fp16AmpMacsPerCycle) == pytest.approx(280e12, rel=0.01)
    assert peak(GC200_FP8, GC200_FP8.fp8AmpMacsPerCycle) == pytest.approx(560e12, rel=0.01)
    assert GC200.fp8AmpMacsPerCycle == 0
    # The same matmul takes more cycles and more time on the Mk1.
    matmul = named(compiled_ops(MatMul(), torch.randn(64, 256)), "ipu.matmul")
    mk1, mk2 = op_cycles(matmul, GC2), op_cycles(matmul, GC200)
    assert mk1 > mk2 and mk1 / GC2.tileClockFrequency > mk2 / GC200.tileClockFrequency


def test_machine_for_each_ipu_version():
    assert machine_for(1) is GC2 and machine_for(2) is GC200 and machine_for(21) is GC200_FP8
    assert [machine_for(v).version for v in (1, 2, 21)] == [1, 2, 21]
    for bad in (0, 3, True, "2"):
        with pytest.raises(poptorch.Error, match=r"no IPU machine for ipu_version .*; use 1 "
                                                 r"\(Mk1 GC2\), 2 \(Mk2 GC200\) or 21 \(Mk2 "
                                                 r"with FP8, C600\)"):
            machine_for(bad)


def test_ipu_hardware_is_the_machine_model():
    assert IPUS_IN_SYSTEM == 64
    assert poptorch.ipuHardwareIsAvailable() and poptorch.ipuHardwareIsAvailable(64)
    assert not poptorch.ipuHardwareIsAvailable(65) and not poptorch.ipuHardwareIsAvailable(0)
    assert poptorch.ipuHardwareVersion() == 2 == machine_for(2).version
    with pytest.raises(poptorch.Error, match="num_ipus must be an int, got '4'"):
        poptorch.ipuHardwareIsAvailable("4")


def test_transfers_host_latency_and_ring_all_reduce():
    # 1.2 us of latency is 1596 cycles; 1 MiB at 12.5 GB/s 111568.4 more.
    assert M.host_cycles(0) == 1596
    assert M.host_cycles(2**20) == 1596 + math.ceil(2**20 * 1.33e9 / 12.5e9) == 1596 + 111569
    # Ring all-reduce over 4 replicas of one IPU: 2 x 3 steps of 1 MiB / 4 over the rails
    # (2 links of 16 GB/s x 0.85, both directions), a 15 ns hop and a 4-IPU sync each.
    step = (math.ceil(2**20 // 4 * 1.33e9 / (2 * 2 * 16e9 * 0.85)) + 20
            + SYNC + math.ceil(2 * 2 * 15e-9 * 1.33e9))
    assert M.collective_cycles(2**20, 4) == 6 * step
    assert M.collective_cycles(2**20, 1) == 0
    assert Machine(hostLinkLatency=0).host_cycles(32) == 4  # 3.4 cycles


class Embed(torch.nn.Module):
    def __init__(self, proportion=None):
        super().__init__()
        self.proportion = proportion
        self.w = torch.nn.Parameter(torch.randn(256, 512))

    def forward(self, x):
        y = x @ self.w
        if self.proportion is not None:
            y = poptorch.set_available_memory(y, self.proportion)
        return torch.relu(y)


def test_set_available_memory_reaches_the_ipu_module_and_its_cycles():
    x = torch.randn(64, 256)
    model = Embed(0.001)
    torch.testing.assert_close(model(x), torch.relu(x @ model.w))  # an identity on the CPU
    numerics.check(model, x, rtol=1e-4, atol=1e-4)  # a K = 256 float sum
    ipu = poptorch.inferenceModel(model)
    ipu(x)
    assert "ipu.available_memory = 1.000000e-03 : f64" in ipu._compiled.module_text
    ops = ops_of(ipu._compiled.module_text)
    tuned = named(ops, "ipu.matmul")
    assert "ipu.available_memory" not in named(ops, "ipu.relu").attributes
    plain = poptorch.inferenceModel(Embed())
    plain(x)
    untuned = named(ops_of(plain._compiled.module_text), "ipu.matmul")
    # The op's own proportion wins over the IPU's: its plan is the 0.001 one.
    tuned_cycles = op_cost(untuned, proportion=0.001).cycles
    assert op_cost(tuned, proportion=0.6).cycles == tuned_cycles
    assert tuned_cycles > op_cost(untuned, proportion=0.6).cycles
    # The same program but for the matmul's plan.
    assert ipu.getTimeline().total_cycles - plain.getTimeline().total_cycles == (
        tuned_cycles - op_cost(untuned, proportion=0.6).cycles)


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.5", True])
def test_set_available_memory_checks_its_proportion(bad):
    with pytest.raises(poptorch.Error, match=r"set_available_memory: available_memory_"
                                             r"proportion must be a proportion between 0.0 "
                                             r"and 1.0 \(inclusive\) of tile memory"):
        poptorch.set_available_memory(torch.ones(2), bad)
    assert torch.equal(poptorch.set_available_memory(torch.ones(2), 0), torch.ones(2))


def test_cost_memo_plans_each_op_once_per_setting(monkeypatch):
    """The timeline and the memory estimate of a compiled model share one `CostMemo`:
    each op is planned once per (machine, proportion, io_tiles), with op_cost's plan."""
    from poptorch.runtime.machine import cost
    from poptorch.runtime.machine.timeline import simulate

    ops = [op for op in compiled_ops(torch.nn.Sequential(torch.nn.Linear(8, 16),
                                                         torch.nn.GELU()),
                                     torch.randn(4, 8)) if op.operation.name != "func.return"]
    plans = []
    plan = cost.op_cost
    monkeypatch.setattr(cost, "op_cost", lambda *a, **k: plans.append(a[0]) or plan(*a, **k))
    memo = cost.CostMemo()
    for proportion in (None, None, 0.3):
        for op in ops:
            assert memo(op, GC2, proportion, io_tiles=8) == plan(op, GC2, proportion,
                                                                io_tiles=8)
    assert len(plans) == 2 * len(ops)  # once per op for each of the two settings
    module = _MODULES[-1]
    memo = cost.CostMemo()
    assert simulate(module, cost=memo).to_dict() == simulate(module).to_dict()
