"""The cost rule of `ipu.matmul` (and of a slice of `ipu.serialized_matmul`): poplin
runs a matrix product as a convolution, so it is charged as `cost_conv` charges one.

Source: graphcore/poplibs lib/poplin/MatMul.cpp getConvParams: a grouped product
(G, M, K) @ (G, K, N) is a 1-D convolution of batch M over a field of 1 with a kernel
of 1, K input channels, N output channels and G conv groups. Such a convolution meets
canUseConvPartial1x1Vertex, so it runs ConvPartial1x1Out on every tile
(getConvPartial1x1SupervisorCycleEstimate): per conv group, input channel group and
output channel group a supervisor loop, per worker a run of M / 6 positions at
coreCycles a position, and the partials cast to the result's type.

- A batch of products sharing one right operand (a Linear's weight seen through a
  broadcast, `layout.shared_matrix`) is one product of batch x M rows, as PopART
  flattens the batch of a matmul by a matrix; other batches are conv groups, which
  the planner may split over tiles (`cost_conv.conv_plans`).
- A tile receives the rows of the left operand (the activations) for its input
  channels, and the right operand's slab (the weights) for its input and output
  channels; a pre-arranged operand less the share it holds, as for a convolution.
"""

from __future__ import annotations

from collections.abc import Callable

from poptorch.runtime.machine import cost_families as family
from poptorch.runtime.machine.cost_conv import Conv, ProductSlabs, conv_plans
from poptorch.runtime.machine.layout import shared_matrix
from poptorch.runtime.machine.plan import OpCost, Plan


def canonical(p: Plan, dims: family.Dims) -> Conv:
    """The product of `dims` (B, M, N, K) as poplin's convolution (module docstring)."""
    batch, rows, cols, depth = dims
    shared = batch > 1 and shared_matrix(p.op.operands[1], p.op)
    groups, positions = (1, batch * rows) if shared else (batch, rows)
    return Conv(1, positions, depth, cols, (1, 1), (1, 1), True,
                ProductSlabs(p.bytes_of(0), p.bytes_of(1)), groups)


def matmul(p: Plan, dims: Callable[[Plan], family.Dims] = family.matmul_dims) -> OpCost:
    """The fastest of poplin's plans for the product; `dims(p)` gives its (B, M, N, K)."""
    shape = dims(p)
    if 0 in shape:  # no products (K = 0, as in Linear(0, n)): the result is zeros
        return family.fill(p)
    return p.choose(conv_plans(p, canonical(p, shape)))
