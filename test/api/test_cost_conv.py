"""Convolutions charged as poplin's conv vertices run them (runtime/machine/cost_conv.py):
figures by hand from graphcore/poplibs lib/poplin/PerformanceEstimation.hpp, as the
module docstring names them, not by calling the functions they check.

Worker cycles of ConvPartialnx1 (getConvPartialnx1WorkerCycles, half activations,
hh16): 17 + 1 to start, then for each partial row of n positions 3 + (29, 33 + 1, 34 +
(n - 3) x 4 for n = 1, 2, >= 3) - 9 retention savings.
"""

import math
from dataclasses import replace

from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime.machine import cost_conv
from poptorch.runtime.machine.cost import op_cost
from poptorch.runtime.machine.cost_conv import (
    Vertex,
    canonical,
    nx1_cycles,
    one_by_one_cycles,
    worker_runs,
)
from poptorch.runtime.machine.plan import Plan
from poptorch.runtime.machine.system import GC200

SYNC = GC200.globalSyncCycles
ONE_TILE = replace(GC200, tilesPerIPU=1)
HH16 = Vertex(float_acts=False, float_partials=False, units=16, in_group=16,
              out_group=16, workers=6)
_MODULES: list[ir.Module] = []


def op_of(text: str) -> ir.OpView:
    module = ir.Module.parse(text, make_context())
    _MODULES.append(module)
    func = next(op for op in module.body.operations if "sym_name" in op.attributes)
    return next(iter(func.regions[0].blocks[0].operations))


def conv(c_in: int, kernel: int = 3, pad: int = 1, extra: str = "") -> ir.OpView:
    """An fp16 conv of a 1 x c_in x 4 x 8 input to 16 channels, fp16 partials."""
    return op_of(f"""
func.func @f(%x: tensor<1x{c_in}x4x8xf16>, %w: tensor<16x{c_in}x{kernel}x{kernel}xf16>) {{
  %0 = "ipu.conv"(%x, %w) {{strides = array<i64: 1, 1>, padding_low = array<i64: {pad}, {pad}>,
    padding_high = array<i64: {pad}, {pad}>, dilations = array<i64: 1, 1>, groups = 1 : i64,
    ipu.partials_type = f16{extra}}}
    : (tensor<1x{c_in}x4x8xf16>, tensor<16x{c_in}x{kernel}x{kernel}xf16>) -> tensor<1x16x4x8xf16>
  return
}}""")


def test_workers_take_equal_runs_of_positions_cut_at_rows():
    # partitionConvPartialByWorker: 4 rows of 8 = 32 positions, worker i from
    # floor(32 i / 6): 0, 5, 10, 16, 21, 26, 32; a run crossing a row is two partial rows
    assert worker_runs(4, 8, 6) == [[5], [3, 2], [6], [5], [3, 2], [6]]
    assert worker_runs(1, 16, 6) == [[2], [3], [3], [2], [3], [3]]
    assert worker_runs(1, 4, 6) == [[], [1], [1], [], [1], [1]]


def test_nx1_vertex_of_a_3x3_tile_by_hand():
    # 2 rows of 8: runs 2, 3, 3, 2, 3, 3; each worker 18 + 28 = 46 cycles, x 6 = 276;
    # kernel loop max(276, 276 + 9) = 285 a kernel position. Weight loads 16 units x 32
    # bytes / 16 = 32; innermost 32 + 15 + 3 = 50; inner loop 3 x (14 + 3 x (12 + 50))
    # + 9 x 285 = 3165. Supervisor 109 + 6 x 9 + 6 x 10 + 17 + 1 + 1 + 16 + (14 + (14 +
    # 3165)) = 3451; zeroing ceil(16 x 16 / 6) = 43 floats a worker, (22 + 5) x 6 = 162.
    assert nx1_cycles(HH16, 2, 8, (3, 3), 1, 1) == 3451 + 162 == 3613
    # the MACs at the peak: 16 positions x 16 x 16 x 9 / 64 = 576 cycles
    assert 3613 > 6 * (16 * 16 * 16 * 9 // 64)


def test_1x1_vertex_by_hand():
    # 48 positions in one row, 8 a worker: (37 + 5 x 4 - 7) = 50 with zeroing, 51
    # without; inner loops max(300, 300 + 14) = 314 and 320. 50 + 6 x 7 + 12 + 1 + 10 +
    # 1 + (19 - 1 + (7 + 32 + 314)) = 487 for one input and one output group.
    assert one_by_one_cycles(HH16, 48, 1, 1) == 487


def test_conv_on_one_tile_is_the_cheapest_vertex_grouping():
    op = conv(16)
    # one tile: 4 rows of 8 (runs above): workers 54, 74, 58, 54, 74, 58 cycles, kernel
    # loop max(74 x 6, 54 x 6 + 9) = 444. Groupings of 16 input channels (filter height
    # 1): inner loop 3 x (14 + 3 x (12 + 50)) + 9 x 444 = 4596, supervisor 109 + 54 + 60
    # + 19 + 16 + 14 + 14 + 4596 = 4882, zeroing ceil(32 x 16 / 6) = 86 a worker: (43 +
    # 5) x 6 = 288. 8 channels (filter height 2, 2 groups): innermost 32 + 46 + 3 = 81,
    # inner 2 x (14 + 3 x 93) + 6 x 444 = 3250, 258 + 2 x (28 + 3250) + 288 = 7102.
    # 4 channels (height 4, ld64: 64-cycle loads): 431 + 3 x 444 = 1763, 258 + 4 x
    # (28 + 1763) + 288 = 7710. The operands are @f's arguments, held by the one tile.
    cost = op_cost(op, ONE_TILE)
    assert (cost.compute, cost.exchange, cost.sync) == (4882 + 288, 0, SYNC)


def test_three_input_channels_are_padded_to_the_grouping():
    op = conv(3)
    # 3 channels: groupings of 16 (as 16 channels: 5170), 8 (one group, filter height
    # 2: 258 + 28 + 3250 + 288 = 3824) or 4 (one group, height 4: 258 + 28 + 1763 +
    # 288 = 2337): 4 channels for 3 and 4 kernel rows for 3. The input is rearranged
    # into the padded grouping (padInChannels): its 3 x 32 halves = 192 bytes copied at
    # 2 bytes a cycle x 4/5 (C_in x C_out = 48, a multiple of 4): 120 cycles, received
    # in a step of its own (48 cycles).
    cost = op_cost(op, ONE_TILE)
    assert (cost.compute, cost.exchange, cost.sync) == (2337 + 120, 48, 2 * SYNC)
    # 13.6x its MACs at the peak rate: 32 x 16 x 3 x 9 / 64 = 216
    assert cost.compute > 10 * 216


def test_exchange_of_a_3x3_conv_is_its_input_window():
    op = op_of("""
func.func @f(%x: tensor<20x64x56x56xf16>, %w: tensor<64x64x3x3xf16>) {
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 1, 1>,
    padding_high = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
    : (tensor<20x64x56x56xf16>, tensor<64x64x3x3xf16>) -> tensor<20x64x56x56xf16>
  return
}""")
    problem = canonical(Plan(op.operation, GC200, 1472, 0.6))
    assert (problem.rows, problem.width, problem.kernel) == (20 * 56, 56, (3, 3))
    # a tile of 2 output rows x 56, 64 input and 16 output channels reads 4 input rows
    # x 56 columns (the halo clipped by the padding) of 64 channels: 28,672 bytes, and
    # 16 x 64 x 9 weights; im2col rows would be 2 x 56 x 64 x 9 halves, 4.5x as much
    act, weight = problem.received(2, 56, 64, 16)
    assert (act, weight) == (4 * 56 * 64 * 2, 16 * 64 * 9 * 2)
    assert 2 * 56 * 64 * 9 * 2 == 4.5 * act
    # across images: 60 rows are a whole image of 56 rows and 4 of the next: 2 images
    assert problem.received(60, 56, 64, 16)[0] == 2 * 56 * 56 * 64 * 2


def test_weight_update_is_a_1x1_convolution_with_its_operands_rearranged():
    op = op_of("""
func.func @f(%x: tensor<1x16x4x8xf16>, %g: tensor<1x16x4x8xf16>) {
  %0 = "ipu.conv_weight_grad"(%x, %g) {strides = array<i64: 1, 1>,
    padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>,
    dilations = array<i64: 1, 1>, groups = 1 : i64, ipu.partials_type = f16}
    : (tensor<1x16x4x8xf16>, tensor<1x16x4x8xf16>) -> tensor<16x16x1x1xf16>
  return
}""")
    # the field is C_in x kernel = 16 positions in one row, reducing the 32 output
    # positions (2 groups of 16) for 16 output channels. Runs 2, 3, 3, 2, 3, 3: with
    # zeroing 40 + 1 - 7 = 34 and 37 - 7 = 30 cycles, max(204, 194) = 204; without,
    # 35 and 31, max(210, 200) = 210. 50 + 6 x (7 + 3) + 13 + (15 + 19 + 6 + 32 + 210)
    # + 11 + (18 + 7 + 32 + 204) = 677 (the nx1 groupings of 8 and 4 cost 2100 and
    # more). Rearranged first (addTransformCycleEstimate, Pass::TRAINING_WU): the
    # activations and the gradient, 1,024 bytes each, and the 512-byte result, copied
    # at 2 bytes x 4/5 a cycle: 640 + 640 + 320, and received: 2,560 bytes, 640 cycles.
    cost = op_cost(op, ONE_TILE)
    assert (cost.compute, cost.exchange, cost.sync) == (677 + 1600, 640, 2 * SYNC)


def test_resnet_convolution_runs_below_the_peak_rate():
    op = op_of("""
func.func @f(%x: tensor<20x64x56x56xf16>, %w: tensor<64x64x3x3xf16>) {
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 1, 1>,
    padding_high = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64,
    ipu.partials_type = f16}
    : (tensor<20x64x56x56xf16>, tensor<64x64x3x3xf16>) -> tensor<20x64x56x56xf16>
  return
}""")
    cost = op_cost(op)
    ideal = math.ceil(20 * 56 * 56 * 64 * 64 * 9 / (1472 * 64))
    # vertex overheads: more than the MACs at 64 a tile a cycle, less than 2x
    assert ideal < cost.compute < 2 * ideal


def test_equal_convolutions_share_their_plans_and_others_do_not():
    # conv_plans memoises on the `Conv`, its slab counter's fields included: the same
    # convolution parsed twice weighs one set of plans, and a dilated one (same shapes,
    # same Conv but for the input window its tiles read) weighs its own
    def conv_op(dilation: int) -> ir.OpView:
        return op_of(f"""
func.func @f(%x: tensor<2x16x12x12xf32>, %w: tensor<16x16x3x3xf32>) {{
  %0 = "ipu.conv"(%x, %w) {{strides = array<i64: 1, 1>, padding_low = array<i64: {dilation},
    {dilation}>, padding_high = array<i64: {dilation}, {dilation}>,
    dilations = array<i64: {dilation}, {dilation}>, groups = 1 : i64}}
    : (tensor<2x16x12x12xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x12x12xf32>
  return
}}""")
    plans = [Plan(conv_op(d).operation, GC200, 1472, 0.6) for d in (1, 1, 2)]
    first, same, dilated = (canonical(p) for p in plans)
    assert first == same and hash(first) == hash(same)
    assert dilated != first and dilated.received != first.received
    assert (dilated.rows, dilated.width, dilated.kernel) == (first.rows, first.width,
                                                              first.kernel)
    cost_conv._PLANS.clear()
    assert cost_conv.conv_plans(plans[0]) == cost_conv.conv_plans(plans[1])
    assert len(cost_conv._PLANS) == 1
    cost_conv.conv_plans(plans[2])
    assert len(cost_conv._PLANS) == 2
