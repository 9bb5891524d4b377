"""The indices an element-indexed gather or scatter receives (issue 25): torch.gather's
index has the result's shape and scatter's the updates', so a tile of popops' gather
(a multiSlice) or scatter (a multiUpdate) over a sliceable tensor is given the offsets
of its own share of the result, not all of them (runtime/machine/cost_families.py,
`gather`). Figures by hand from the `Machine` fields, as test_cost_model.py's.
"""

import math

import torch
from test_cost_model import compiled_ops, named, ops_of

from poptorch.runtime.machine.cost import op_cost
from poptorch.runtime.machine.system import GC200

M = GC200
TILES, SYNC = M.tilesPerIPU, M.globalSyncCycles
EXCHANGE, MEMCPY = M.exchangeBytesPerCycle, M.memcpyBytesPerCycle

# BERT's masked tokens: 76 of 512 positions of 2 packs, the index expanded over the
# 1024 features (608 KiB of int32).
MASKED = """
func.func @f(%x: tensor<2x512x1024xf16>, %i: tensor<2x76x1024xi32>,
             %g: tensor<2x76x1024xf16>, %z: tensor<2x512x1024xf16>) {
  %0 = "ipu.gather"(%x, %i) {dim = 1 : i64}
      : (tensor<2x512x1024xf16>, tensor<2x76x1024xi32>) -> tensor<2x76x1024xf16>
  %1 = "ipu.scatter"(%z, %i, %g) {dim = 1 : i64, include_self = true,
      reduction = "sum"} : (tensor<2x512x1024xf16>, tensor<2x76x1024xi32>,
      tensor<2x76x1024xf16>) -> tensor<2x512x1024xf16>
  return
}
"""
INDEX_BYTES = 2 * 76 * 1024 * 4
assert INDEX_BYTES == 608 * 1024


def test_gather_receives_the_indices_of_its_tiles_outputs():
    gather, _, _ = ops_of(MASKED)
    # 155648 halves over min(1472, 155648 / 64) = 1472 tiles, ceil(155648 / 1472) = 106
    # a tile: 212 bytes copied (27 cycles at 8 bytes a cycle). %x, an argument, is laid
    # out for the lookup (the tile holds its rows), so the tile receives only the 106
    # indices of its outputs, 424 bytes (not all 608 KiB, which at the default
    # proportion took 2 pieces): 106 cycles, one step; 424 bytes of temporaries a tile.
    assert math.ceil(155648 / TILES) == 106
    assert math.ceil(INDEX_BYTES * 106 / 155648) == 106 * 4 == 424
    cost = op_cost(gather)
    assert (cost.compute, cost.exchange, cost.sync) == (math.ceil(212 / MEMCPY), 424 //
                                                        EXCHANGE, SYNC) == (27, 106, SYNC)
    assert cost.temporary_bytes == TILES * 424


def test_scatter_receives_its_share_of_the_updates_and_indices():
    _, scatter, _ = ops_of(MASKED)
    # The result, 1048576 halves, over 1472 tiles: 713 a tile (1426 bytes copied, 179
    # cycles), 713 / 1048576 of the 2 x 512 x 1024 positions, whose updates (of 311,296
    # bytes) and indices (608 KiB) it receives: ceil(211.7) = 212 and ceil(423.4) = 424
    # bytes, 636 in all, 159 cycles.
    assert math.ceil(1048576 / TILES) == 713
    updates = 2 * 76 * 1024 * 2
    assert (math.ceil(updates * 713 / 1048576), math.ceil(INDEX_BYTES * 713 / 1048576)) \
        == (212, 424)
    cost = op_cost(scatter)
    assert (cost.compute, cost.exchange, cost.sync) == (179, 159, SYNC)
    assert cost.temporary_bytes == TILES * 636


def test_table_lookups_still_receive_all_their_indices():
    # An index_select's index names rows, each needed by every tile holding columns of
    # the table: 512 int32 indices, 2048 bytes a tile (test_cost_model's figure).
    ops = ops_of("""
func.func @f(%w: tensor<1000x64xf32>, %i: tensor<512xi32>) -> tensor<512x64xf32> {
  %0 = "ipu.index_select"(%w, %i) {dim = 0 : i64} : (tensor<1000x64xf32>, tensor<512xi32>)
      -> tensor<512x64xf32>
  return %0 : tensor<512x64xf32>
}""")
    assert op_cost(ops[0]).exchange == 2048 // EXCHANGE


def test_torch_gather_through_the_api():
    # torch.gather of 8 of 64 rows, expanded over 256 features: 2048 f32 results on
    # min(1472, 2048 / 32) = 64 tiles, 32 each (128 bytes copied, 16 cycles). The input
    # is laid out for the lookup; a tile receives the 32 int32 indices of its outputs,
    # 128 bytes of the 8 KiB: 32 cycles.
    class Gather(torch.nn.Module):
        def forward(self, x, positions):
            return torch.gather(x, 0, positions.unsqueeze(-1).expand(-1, 256))

    ops = compiled_ops(Gather(), torch.randn(64, 256), torch.randint(0, 64, (8,)))
    gather = named(ops, "ipu.gather")
    assert "(tensor<64x256xf32>, tensor<8x256xi32>) -> tensor<8x256xf32>" in str(gather)
    cost = op_cost(gather)
    assert (cost.compute, cost.exchange, cost.temporary_bytes) == (16, 32, 64 * 128)
