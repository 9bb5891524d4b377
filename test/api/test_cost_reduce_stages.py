"""A reduction whose fan-in is too wide for its result's tiles goes through an
intermediate stage spread over the IPU, as PopLibs plans it (graphcore/poplibs
lib/popops/reduction/ReductionPlan.cpp, calculateNextStep): a batch norm's statistics,
64 channels summed from all 1472 tiles, used to be charged as 47,104 partials received
by each of the result's 2 tiles (63% of ResNet-50's simulated training step,
FIDELITY.md). Figures by hand from cost_families' docstring.
"""

import math

from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.dialects.elementwise import BINARY_OPS
from poptorch.runtime.machine.cost import op_cost
from poptorch.runtime.machine.plan import vector_cycles, vector_rate
from poptorch.runtime.machine.system import GC200

STATISTICS = """
func.func @f(%x: tensor<16x64x64x64xf32>, %y: tensor<64x16x64xf32>) {
  %0 = "ipu.reduce"(%x) {dims = array<i64: 0, 2, 3>, keepdim = false, kind = "sum"}
      : (tensor<16x64x64x64xf32>) -> tensor<64xf32>
  %1 = "ipu.reduce"(%y) {dims = array<i64: 1>, keepdim = false, kind = "sum"}
      : (tensor<64x16x64xf32>) -> tensor<64x64xf32>
  return
}
"""


def _ops():
    module = ir.Module.parse(STATISTICS, make_context())
    func = next(op for op in module.body.operations if "sym_name" in op.attributes)
    return module, list(func.regions[0].blocks[0].operations)[:2]


def test_wide_fan_in_goes_through_an_intermediate_stage():
    module, (wide, _) = _ops()  # the module outlives its ops
    add = vector_rate(BINARY_OPS["add"], ir.F32Type.get(module.context), GC200)
    # 16 x 64 x 64 x 64 = 4,194,304 floats over 1472 tiles, 2850 a tile; each of the 64
    # channels gathers from every tile: fan-in 1472 >= 2 sqrt(1472) = 76.7. Intermediate
    # stage: groups of ceil(sqrt(1472)) = 39 partials, 64 x ceil(1472 / 39) = 2432 pieces
    # over 1472 tiles, 2 a tile: 78 partials in; then the result's 2 tiles (64 floats,
    # 128 bytes a tile) take 32 channels x 38 partials = 1216 each. Three syncs.
    assert 2 * math.sqrt(GC200.tilesPerIPU) <= 1472
    cost = op_cost(wide)
    assert cost.exchange == (78 + 1216) * 4 // GC200.exchangeBytesPerCycle == 1294
    assert cost.sync == 3 * GC200.globalSyncCycles
    assert cost.compute == (vector_cycles(2850, add, GC200) + vector_cycles(78, add, GC200)
                            + vector_cycles(1216, add, GC200))


def test_narrow_fan_in_goes_straight_to_the_output():
    module, (_, narrow) = _ops()  # the module outlives its ops
    # 64 x 16 x 64 = 65,536 floats over 1472 tiles; each of the 4096 results sums 16
    # values 64 floats apart, so its fan-in is 16 < 2 sqrt(1472): two steps, and the
    # result's tiles (4096 floats on 128 tiles, 32 each) take 32 x 16 partials.
    cost = op_cost(narrow)
    assert cost.sync == 2 * GC200.globalSyncCycles
    assert cost.exchange == 32 * 16 * 4 // GC200.exchangeBytesPerCycle
