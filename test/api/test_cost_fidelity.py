"""Per-op cost fidelity (issue 25): fp16 matrix products at the fp16 AMP rates, the
partials type picking the rate, pre-arranged operands not exchanged, PopLibs' rates for
pow by 2 (a square) and GELU. Figures are worked out by hand from the `Machine` fields
and PopLibs' tables (runtime/machine/plan.py, cost_families.py), as test_cost_model.py's.
"""

import math
from dataclasses import replace

import pytest
import torch
from test_cost_model import compiled_ops, named, ops_of

import poptorch
from poptorch.runtime.machine.cost import op_cost
from poptorch.runtime.machine.cost_conv import Vertex, one_by_one_cycles
from poptorch.runtime.machine.system import GC200

M = GC200
WORKERS, EXCHANGE = M.numWorkerContexts, M.exchangeBytesPerCycle
# A sync too dear to split K or serialise: every plan is one BSP step over all of K.
SLOW_SYNC = replace(M, globalSyncCycles=10**6)
ROWS = 4 * M.tilesPerIPU  # 5888 rows x 16 outputs: 64 outputs on each of the 1472 tiles


def linear_matmul(dtype: torch.dtype, partials: torch.dtype | None = None):
    """The ipu.matmul of a Linear(64, 16) in `dtype` on ROWS rows, through the API."""
    opts = poptorch.Options()
    if partials is not None:
        opts.Precision.setPartialsType(partials)
    ipu = poptorch.inferenceModel(torch.nn.Linear(64, 16).to(dtype), opts)
    ipu(torch.randn(ROWS, 64).to(dtype))
    return named(ops_of(ipu._compiled.module_text), "ipu.matmul")


# poplin runs a matmul as a 1x1 convolution (`cost_matmul`): the conv units of its
# vertex follow the AMP rate, units x weightsPerConvUnit / coreCycles MACs a cycle:
# floats 16 x 8 / 8 = 16 (fp32AmpMacsPerCycle); halves with fp32 partials 8 x 16 / 4 =
# 32 (FP16.32), with fp16 partials 16 x 16 / 4 = 64 (FP16.16).
F32 = Vertex(float_acts=True, float_partials=True, units=16, in_group=8, out_group=16,
             workers=WORKERS)
F16_32 = Vertex(float_acts=False, float_partials=True, units=8, in_group=16, out_group=16,
                workers=WORKERS)
F16_16 = Vertex(float_acts=False, float_partials=False, units=16, in_group=16,
                out_group=16, workers=WORKERS)


def test_fp16_linear_is_charged_at_the_fp16_rates():
    assert F32.units * 8 // F32.core == M.fp32AmpMacsPerCycle
    assert F16_32.units * 16 // F16_32.core == M.fp16InFp32OutAmpMacsPerCycle
    # 5888 positions on 1472 tiles, 4 a tile, one output group of 16 channels, K = 64
    # input channels: 8 groups of 8 floats, 4 groups of 16 halves.
    f32, f16 = linear_matmul(torch.float32), linear_matmul(torch.float16)
    assert "(tensor<5888x64xf16>, tensor<64x16xf16>) -> tensor<5888x16xf16>" in str(f16)
    assert op_cost(f32, SLOW_SYNC).compute == one_by_one_cycles(F32, 4, 8, 1)
    # PopLibs' default fp32 partials: FP16.32, and the tile's 64 partials cast to fp16
    # (estimateCastCycles: ceil(64 / 6) = 11 a worker, (max(6, 3) + 26) x 6 = 192)
    cast = (max(math.ceil(11 / 2), math.ceil(11 / 4)) + 26) * WORKERS
    assert op_cost(f16, SLOW_SYNC).compute == one_by_one_cycles(F16_32, 4, 4, 1) + cast \
        < op_cost(f32, SLOW_SYNC).compute
    explicit = linear_matmul(torch.float16, torch.float)
    assert op_cost(explicit, SLOW_SYNC).compute == op_cost(f16, SLOW_SYNC).compute


def test_half_partials_run_at_the_fp16_16_rate():
    half = linear_matmul(torch.float16, torch.half)
    assert "ipu.partials_type = f16" in str(half)
    # FP16.16: "1 petaFLOPS" an IPU-M2000 of 4 GC200s, 64 MACs a tile a cycle
    peak = 2 * M.fp16AmpMacsPerCycle * M.tilesPerIPU * M.tileClockFrequency * 4
    assert peak == pytest.approx(1e15, rel=0.01)
    assert F16_16.units * 16 // F16_16.core == M.fp16AmpMacsPerCycle
    # twice the conv units, and no cast: the partials are the result
    assert op_cost(half, SLOW_SYNC).compute == one_by_one_cycles(F16_16, 4, 4, 1) \
        < op_cost(linear_matmul(torch.float16), SLOW_SYNC).compute
    # a K split sums its partials in f16: half the bytes of fp32 ones
    long_dot = ops_of("""
func.func @f(%a: tensor<16x65536xf16>, %b: tensor<65536x16xf16>) {
  %0 = "ipu.matmul"(%a, %b) : (tensor<16x65536xf16>, tensor<65536x16xf16>) -> tensor<16x16xf16>
  %1 = "ipu.matmul"(%a, %b) {ipu.partials_type = f16}
      : (tensor<16x65536xf16>, tensor<65536x16xf16>) -> tensor<16x16xf16>
  return
}""")
    single, halves = op_cost(long_dot[0]), op_cost(long_dot[1])
    assert halves.cycles < single.cycles and halves.temporary_bytes < single.temporary_bytes


BATCHED = """
func.func @main(%x: tensor<1472x16x64xf32>, %w: tensor<1472x64x16xf32>) {
  %0 = "ipu.matmul"(%x, %w) : (tensor<1472x16x64xf32>, tensor<1472x64x16xf32>)
      -> tensor<1472x16x16xf32>
  %rx = "ipu.relu"(%x) : (tensor<1472x16x64xf32>) -> tensor<1472x16x64xf32>
  %rw = "ipu.relu"(%w) : (tensor<1472x64x16xf32>) -> tensor<1472x64x16xf32>
  %1 = "ipu.matmul"(%rx, %w) : (tensor<1472x16x64xf32>, tensor<1472x64x16xf32>)
      -> tensor<1472x16x16xf32>
  %2 = "ipu.matmul"(%rx, %rw) : (tensor<1472x16x64xf32>, tensor<1472x64x16xf32>)
      -> tensor<1472x16x16xf32>
  %t = "ipu.permute"(%w) {dims = array<i64: 0, 2, 1>}
      : (tensor<1472x64x16xf32>) -> tensor<1472x16x64xf32>
  %c = "ipu.cast"(%t) : (tensor<1472x16x64xf32>) -> tensor<1472x16x64xf16>
  %u = "ipu.permute"(%rw) {dims = array<i64: 0, 2, 1>}
      : (tensor<1472x64x16xf32>) -> tensor<1472x16x64xf32>
  return
}"""


def test_pre_arranged_operands_are_not_exchanged():
    plain, _, _, computed_lhs, computed_both, *_ = ops_of(BATCHED)
    # One 16 x 16 product over K = 64 a tile (1472 tiles): its 16 x 64 and 64 x 16 slabs
    # are used by that tile alone. Arguments of @main are laid out for the op (poplin's
    # createInput / createWeights): nothing to receive. An op's result is laid out by
    # that op: its 4096-byte slab comes in, 1024 cycles at 4 bytes a cycle.
    assert op_cost(plain, SLOW_SYNC).exchange == 0
    assert op_cost(computed_lhs, SLOW_SYNC).exchange == 16 * 64 * 4 // EXCHANGE == 1024
    assert op_cost(computed_both, SLOW_SYNC).exchange == 2 * 1024
    # The 1472 products are conv groups, one a tile: 16 positions, 8 input groups of
    # 8 floats, one output group.
    assert op_cost(plain, SLOW_SYNC).compute == op_cost(computed_both, SLOW_SYNC).compute \
        == one_by_one_cycles(F32, 16, 8, 1)


def test_views_and_casts_of_a_weight_stay_pre_arranged():
    from poptorch.runtime.machine.layout import pre_arranged

    ops = ops_of(BATCHED)
    permute, cast = named(ops, "ipu.permute"), named(ops, "ipu.cast")
    relu = named(ops, "ipu.relu")
    assert pre_arranged(permute.result) and pre_arranged(cast.result)
    assert not pre_arranged(relu.result)
    # The transpose of a weight is a view PopART lays out for its consumer: free. That
    # of an op's result copies its share (1024 floats a tile: 512 cycles at 8 bytes a
    # cycle) and receives it (1024 cycles at 4).
    moved = [op for op in ops if op.operation.name == "ipu.permute"][1]
    assert op_cost(permute).cycles == 0
    assert (op_cost(moved).compute, op_cost(moved).exchange) == (4096 // 8, 4096 // 4)


def test_a_shared_weight_slab_is_received_but_its_share():
    matmul = named(compiled_ops(torch.nn.Linear(256, 512, bias=False),
                                torch.randn(64, 256)), "ipu.matmul")
    # test_cost_model's 64 x 256 @ 256 x 512 plan (16 positions, 24 input channels, 16
    # output channels a tile): a tile holds 1/32 of its x slab and 1/4 of its weight
    # slab (the 32 and 4 tiles sharing them) and receives the rest, instead of 3072
    # bytes; then 233 floats of partials to sum.
    received = 1536 - 1536 // 32 + 1536 - 1536 // 4
    assert received == 2640 < (16 + 16) * 24 * 4
    cost = op_cost(matmul)
    assert cost.exchange == math.ceil(received / EXCHANGE) + 233


def test_a_lookup_in_a_weight_receives_only_the_indices():
    lookup, scaled, computed = ops_of("""
func.func @f(%w: tensor<1000x64xf32>, %i: tensor<512xi32>) {
  %0 = "ipu.index_select"(%w, %i) {dim = 0 : i64} : (tensor<1000x64xf32>, tensor<512xi32>)
      -> tensor<512x64xf32>
  %s = "ipu.relu"(%w) : (tensor<1000x64xf32>) -> tensor<1000x64xf32>
  %1 = "ipu.index_select"(%s, %i) {dim = 0 : i64} : (tensor<1000x64xf32>, tensor<512xi32>)
      -> tensor<512x64xf32>
  return
}""")[:3]
    # 512 x 64 floats on 1024 tiles, 128 bytes each; 2048 bytes of indices to every tile
    assert op_cost(lookup).exchange == 2048 // EXCHANGE == 512
    assert op_cost(computed).exchange == (128 + 2048) // EXCHANGE == 544


class Pow(torch.nn.Module):
    def forward(self, x):
        return x.pow(2)


class Square(torch.nn.Module):
    def forward(self, x):
        return torch.square(x)


def test_pow_by_two_costs_what_square_costs():
    x = torch.randn(M.tilesPerIPU * 64).half()  # 64 halves (128 bytes) a tile
    pow_op = named(compiled_ops(Pow(), x), "ipu.square")
    square = named(compiled_ops(Square(), x), "ipu.square")
    # popops SQUARE, half: 2 cycles a loop of 4; ceil(64 / 6) = 11 a worker
    assert op_cost(pow_op) == op_cost(square)
    assert op_cost(pow_op).compute == math.ceil(11 / 4) * 2 * WORKERS == 36
    # as a POWER (325 cycles an element for half) it would cost 600x more
    power = ops_of("""
func.func @f(%x: tensor<94208xf16>, %e: tensor<f16>) {
  %0 = "ipu.pow"(%x, %e) : (tensor<94208xf16>, tensor<f16>) -> tensor<94208xf16>
  return
}""")[0]
    assert op_cost(power).compute == 11 * 325 * WORKERS == 21450


@pytest.mark.parametrize("dtype, per_tile, exact, tanh", [
    # popops GELU_ERF {22, false, 1} float / {16, false, 1} half; popnn's GELU (tanh
    # approximation) vector loop 10 cycles for 2 floats, 5 for 4 halves
    (torch.float32, 32, 6 * 22 * 6, math.ceil(6 / 2) * 10 * 6),
    (torch.float16, 64, 11 * 16 * 6, math.ceil(11 / 4) * 5 * 6),
])
def test_gelu_at_poplibs_gelu_rates(dtype, per_tile, exact, tanh):
    x = torch.randn(M.tilesPerIPU * per_tile).to(dtype)
    gelu = named(compiled_ops(torch.nn.GELU(), x), "ipu.gelu")
    approximate = named(compiled_ops(torch.nn.GELU("tanh"), x), "ipu.gelu_tanh")
    assert op_cost(gelu).compute == exact
    assert op_cost(approximate).compute == tanh
    erf = ops_of(f"""
func.func @f(%x: tensor<{x.numel()}xf32>) {{
  %0 = "ipu.erf"(%x) : (tensor<{x.numel()}xf32>) -> tensor<{x.numel()}xf32>
  return
}}""")[0]
    if dtype is torch.float32:  # GELU is not charged as ERF (41 cycles a float)
        assert op_cost(erf).compute == 6 * 41 * 6 > exact


def test_a_broadcast_weight_is_a_view_its_matmul_receives_once():
    broadcast, matmul, relu, copied = ops_of("""
func.func @f(%x: tensor<1472x16x64xf32>, %w: tensor<64x16xf32>) {
  %b = "ipu.broadcast"(%w) : (tensor<64x16xf32>) -> tensor<1472x64x16xf32>
  %0 = "ipu.matmul"(%x, %b) : (tensor<1472x16x64xf32>, tensor<1472x64x16xf32>)
      -> tensor<1472x16x16xf32>
  %r = "ipu.relu"(%w) : (tensor<64x16xf32>) -> tensor<64x16xf32>
  %c = "ipu.broadcast"(%r) : (tensor<64x16xf32>) -> tensor<1472x64x16xf32>
  return
}""")[:4]
    # torch's matmul of a batch by a weight broadcasts the weight: in Poplar a view
    assert op_cost(broadcast).cycles == 0
    # one 16 x 16 product a tile; the input slab is the tile's own, the weight (4096
    # bytes, used by every tile, each holding 1/1472 of it) comes in once for the batch
    assert op_cost(matmul, SLOW_SYNC).exchange == math.ceil((4096 - 4096 // 1472) / 4)
    # a computed weight's broadcast is made: a copy of its 1024 floats a tile
    assert op_cost(copied).compute == 1024 * 4 // M.memcpyBytesPerCycle
