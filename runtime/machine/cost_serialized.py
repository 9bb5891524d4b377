"""The cost rule of `ipu.serialized_matmul` (poptorch.serializedMatMul): `factor`
products of a slice, one after the other.

Each slice is planned as the product it is (`cost_matmul`: poplin's 1x1 convolution)
on its own (B, M, N, K), M, N or K divided by the factor, and the slices run in
sequence (`OpCost.__add__`: cycles add up, the temporary is the slice's, freed between
slices). Over the reducing dimension the slices' results are summed: factor - 1
additions of the result share, at popops' add rate for the partials' type (fp32 with
keep_precision, else the result's; `plan.VECTOR_RATES`). So a serialised product costs
more cycles (factor times the syncs and exchange set-up of smaller steps) and less
temporary memory than the plain one, which is what PopART's serialisation trades
(graphcore/popart, willow/src/transforms/serializematmuls.cpp).
"""

from __future__ import annotations

import functools
import operator

from torch_mlir import ir

from poptorch.runtime.machine import cost_families as family
from poptorch.runtime.machine.cost_matmul import matmul
from poptorch.runtime.machine.plan import OpCost, Plan, vector_cycles, vector_rate


def slice_dims(p: Plan) -> family.Dims:
    """(B, M, N, K) of one slice."""
    batch, rows, cols, depth = family.matmul_dims(p)
    mode = ir.StringAttr(p.op.attributes["mode"]).value
    factor = ir.IntegerAttr(p.op.attributes["factor"]).value
    if mode == "input_channels":
        return batch, rows // factor, cols, depth
    if mode == "output_channels":
        return batch, rows, cols // factor, depth
    return batch, rows, cols, depth // factor


def serialized_matmul(p: Plan) -> OpCost:
    factor = ir.IntegerAttr(p.op.attributes["factor"]).value
    one = matmul(p, dims=slice_dims)
    total = functools.reduce(operator.add, [one] * factor)
    if ir.StringAttr(p.op.attributes["mode"]).value == "reducing_dim" and factor > 1:
        keep = ir.BoolAttr(p.op.attributes["keep_precision"]).value
        partial = ir.F32Type.get(p.op.context) if keep else p.element
        rate = vector_rate(family.ADD, partial, p.machine)
        total += OpCost(vector_cycles(p.per_tile * (factor - 1), rate, p.machine))
    return total
