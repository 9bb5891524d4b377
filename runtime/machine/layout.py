"""Which operands of an op Poplar has already laid out for it: the pre-arranged tensors.

PopART creates a weight, a constant or a program input with the tile mapping its first
consumer asks for (poplin's createWeights / createInput for a matmul or convolution,
popops' createSliceableTensor for a gather), unwinding that layout back through views
and layout-preserving ops (a transpose is a `dimShuffle` view, a cast keeps its
operand's mapping: TransposeOpx / CastOpx `unwindTensorLayout`, graphcore/popart). Such
an operand is spread evenly over the tiles that use it, so an AMP op receives only the
part of each slab that other tiles hold (poplin's planner: "because we distribute the
weights evenly across all tiles that require them we can deduce that 1/Nth of the
weights are already on the correct tile", addExchangeCycleEstimates in
lib/poplin/ConvModel.cpp, graphcore/poplibs), and a gather from a pre-arranged table
looks its rows up where they are, receiving only the indices (popops::multiSlice).

A value is pre-arranged when it is an argument of the function that holds the op
(@main's weights and inputs, a pipeline stage's arguments: what the IPU copies and
host streams deliver into a layout chosen for their consumer) or an `ipu.constant`,
seen through `PRE_ARRANGED_THROUGH`. A value an op computes is laid out by that op
(poputil's linear mapping, or the producer's own plan) and is exchanged in full.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.creation import ConstantOp
from poptorch.dialects.data_movement import BroadcastOp, PermuteOp, ReshapeOp
from poptorch.dialects.elementwise import CastOp

# Views (a Poplar dimShuffle / reshape / stride-0 broadcast moves no data) and casts
# (elementwise: the result keeps its operand's tile mapping), through which PopART
# unwinds a consumer's layout.
PRE_ARRANGED_THROUGH = (PermuteOp, ReshapeOp, BroadcastOp, CastOp)


def pre_arranged(value: ir.Value) -> bool:
    """True for a function argument or an ipu.constant, directly or through views and
    casts (module docstring)."""
    while True:
        owner = value.owner
        if isinstance(owner, ir.Block):
            parent = owner.owner
            return parent is not None and parent.operation.name == "func.func"
        kind = op_class(owner)
        if kind is ConstantOp:
            return True
        if kind not in PRE_ARRANGED_THROUGH:
            return False
        value = owner.operands[0]


def shared_matrix(value: ir.Value, op: ir.Operation) -> bool:
    """True when every batch entry of the matmul operand `value` is one matrix: no batch
    dimensions with more than one entry, or a broadcast (seen through views and casts)
    of such a matrix, as torch's matmul of a batch by a Linear weight makes."""
    while True:
        shape = ir.ShapedType(value.type).shape
        if math.prod(shape[:-2]) == 1:
            return True
        owner = value.owner
        if isinstance(owner, ir.Block) or op_class(owner) not in PRE_ARRANGED_THROUGH:
            return False
        if op_class(owner) is not BroadcastOp and \
                list(ir.ShapedType(owner.operands[0].type).shape[-2:]) != shape[-2:]:
            return False  # a view that changes the matrix
        value = owner.operands[0]
