"""`ipu.matmul` is charged as poplin runs it: a 1x1 convolution (cost_matmul).

Figures by hand from PerformanceEstimation.hpp's 1x1 estimate, whose value for one
group of 48 positions is pinned in test_cost_conv (487 cycles).
"""

from dataclasses import replace

from test_cost_conv import HH16, ONE_TILE, SYNC, op_of

from poptorch.runtime.machine.cost import op_cost
from poptorch.runtime.machine.cost_conv import one_by_one_cycles


def matmul(lhs: str, rhs: str, out: str) -> str:
    return f"""
func.func @f(%a: tensor<{lhs}xf16>, %b: tensor<{rhs}xf16>) {{
  %0 = "ipu.matmul"(%a, %b) {{ipu.partials_type = f16}}
      : (tensor<{lhs}xf16>, tensor<{rhs}xf16>) -> tensor<{out}xf16>
  return
}}"""


def test_a_product_is_a_1x1_convolution_of_its_rows():
    # 48 rows x K = 16 @ 16 x 16: 48 positions, one input and one output group of 16
    # halves, fp16 partials (HH16); both operands are @f's arguments on the one tile.
    op = op_of(matmul("48x16", "16x16", "48x16"))
    assert one_by_one_cycles(HH16, 48, 1, 1) == 487
    cost = op_cost(op, ONE_TILE)
    assert (cost.compute, cost.exchange, cost.sync) == (487, 0, SYNC)


def test_a_batch_of_products_is_conv_groups():
    # 4 products of 48 x 16 @ 16 x 16 on one tile: the supervisor's loop over 4 conv
    # groups. 50 + 6 x (7 + 3 x (4 x 1 - 1)) = 146 once, and for each group 12 + 1 +
    # 10 + 1 + (19 - 1 + (7 + 32 + 314)) = 395 (test_cost_conv's 487 less its 92 once):
    # 146 + 4 x 395 = 1726.
    op = op_of(matmul("4x48x16", "4x16x16", "4x48x16"))
    assert one_by_one_cycles(HH16, 48, 1, 1, conv_groups=4) == 146 + 4 * 395 == 1726
    assert op_cost(op, ONE_TILE).compute == 1726
    # On 4 tiles the planner gives each tile a group: 487 cycles.
    assert op_cost(op, replace(ONE_TILE, tilesPerIPU=4)).compute == 487


def test_a_batch_by_one_matrix_is_one_product_of_all_rows():
    # A Linear's weight shared by a batch of 2 x 24 rows: one convolution of 48
    # positions (PopART flattens the batch), not 2 conv groups of 24.
    op = op_of(matmul("2x24x16", "16x16", "2x24x16"))
    assert op_cost(op, ONE_TILE).compute == 487
    assert one_by_one_cycles(HH16, 24, 1, 1, conv_groups=2) > 487


def test_an_empty_reduction_is_a_fill():
    # K = 0: no products; the result is zeros, written at the fill rate.
    op = op_of(matmul("48x0", "0x16", "48x16"))
    cost = op_cost(op, ONE_TILE)
    assert cost.exchange == 0 and 0 < cost.compute < 487
