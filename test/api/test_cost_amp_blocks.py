"""The AMP plan's output blocks hold every output of their tile: a product narrower than
the square block (few columns, many rows: the 64 output channels of a convolution over
80 x 112 x 112 positions) used to be charged for a sqrt(A) x N block, a fraction of
the tile's A outputs, so ResNet-50's convolutions cost less than their MACs at the AMP
rate allow (FIDELITY.md, ResNet-50 inference). Figures by hand from cost_families'
docstring.
"""

import itertools
import math
from dataclasses import replace

from test_cost_model import amp_cost
from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime.machine.cost_families import _blocks
from poptorch.runtime.machine.system import GC200

NARROW = """
func.func @f(%x: tensor<8192x64xf32>, %w: tensor<64x4xf32>) {
  %0 = "ipu.matmul"(%x, %w) : (tensor<8192x64xf32>, tensor<64x4xf32>) -> tensor<8192x4xf32>
  return
}
"""


def test_square_block_wider_than_the_product_takes_all_columns_and_more_rows():
    # 32 outputs a tile of an 8192 x 4 product: the square would be 6 x 6, but there
    # are 4 columns, so 8 rows x 4 columns
    assert _blocks(32, 8192, 4) == (1, 8, 4)
    # ResNet-50's first convolution, batch 80: 80 x 112 x 112 rows, 64 columns, over
    # 1408 tiles (64 IO tiles): ceil(64225280 / 1408) = 45615 outputs a tile, a
    # ceil(45615 / 64) = 713-row block of all 64 columns (not 214 x 64 = 13696)
    area = math.ceil(80 * 112 * 112 * 64 / 1408)
    assert area == 45615
    assert _blocks(area, 80 * 112 * 112, 64) == (1, 713, 64)
    # a wide product keeps its square block (the 14 x 13 of test_cost_model)
    assert _blocks(179, 64, 512) == (1, 14, 13)


def test_every_block_holds_its_tiles_outputs():
    for area, rows, cols in itertools.product((1, 7, 32, 179, 4096, 45615),
                                              (1, 3, 64, 1000, 10**6), (1, 4, 64, 4096)):
        products, block_rows, block_cols = _blocks(area, rows, cols)
        assert products * block_rows * block_cols >= min(area, rows * cols) or \
            area >= rows * cols, (area, rows, cols)
        assert block_rows <= rows and block_cols <= cols


def test_narrow_product_costs_its_macs_at_the_amp_rate():
    """The AMP family (grouped convolutions' rule) on a narrow product."""
    module = ir.Module.parse(NARROW, make_context())
    func = next(op for op in module.body.operations if "sym_name" in op.attributes)
    matmul = next(iter(func.regions[0].blocks[0].operations))
    # A sync too dear to split K: 8192 x 4 = 32768 outputs on ceil(32768 / 32) = 1024
    # tiles (32 floats = 128 bytes a tile), 32 each as an 8 x 4 block over all 64 of K:
    # 8 * 4 * 64 / 16 fp32 MACs a cycle = 128 cycles, exactly the op's 2,097,152 MACs
    # over 1024 tiles x 16. The square 6 x 4 block charged 96.
    slow_sync = replace(GC200, globalSyncCycles=10**6)
    cost = amp_cost(matmul, slow_sync)
    assert cost.compute == math.ceil(8 * 4 * 64 / 16) == 128
    assert cost.compute * 1024 * GC200.fp32AmpMacsPerCycle == 8192 * 4 * 64
