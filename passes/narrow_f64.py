"""ipu-narrow-f64: the IPU has no 64-bit floats, so f64 computation becomes f32.

User inputs, weights and outputs of 64-bit types are narrowed on the host before the
capture (`poptorch._frontend.capture.NARROWED`), as PopTorch does; f64 values left in the module
come from torch's decompositions, which upcast on their own (`var`, and so LayerNorm's
variance, sums its squares in f64). This pass gives every f64 tensor, function argument
and result the f32 type of the same shape, converts f64 `ipu.constant` values, and
removes the casts that then cast a value to its own type. A transformer layer's
inference at batch 256 was 4 of its casts and four passes over 8 M f64 values
(32 MB each).
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.creation import ConstantOp
from poptorch.dialects.elementwise import CastOp

from .registry import Pass, register


def _narrowed(t: ir.Type) -> ir.Type:
    """`t` with an f64 element type made f32 (other types unchanged)."""
    if isinstance(t, ir.RankedTensorType) and isinstance(t.element_type, ir.F64Type):
        return ir.RankedTensorType.get(t.shape, ir.F32Type.get())
    if isinstance(t, ir.F64Type):
        return ir.F32Type.get()
    return t


def _narrow_constant(op: ir.Operation) -> None:
    value = op.attributes["value"]
    if not (isinstance(value, ir.DenseElementsAttr)
            and isinstance(value.type.element_type, ir.F64Type)):
        return
    t = _narrowed(value.type)
    if value.is_splat:
        op.attributes["value"] = ir.DenseElementsAttr.get_splat(
            t, ir.FloatAttr.get(ir.F32Type.get(), value.get_splat_value().value))
    else:
        op.attributes["value"] = ir.DenseElementsAttr.get(
            np.asarray(value, dtype=np.float64).astype(np.float32), type=t)


@register
class NarrowF64(Pass):
    argument = "ipu-narrow-f64"
    description = "Compute in f32 what torch's decompositions compute in f64 (no f64 on the IPU)"

    def run(self, module: ir.Operation) -> None:
        for op in self.walk(module):
            with op.location:  # (building a type takes a location for its diagnostics)
                if op.name == "func.func":
                    self._narrow_signature(op)
                    continue
                for result in op.results:
                    result.set_type(_narrowed(result.type))
                if op_class(op) is ConstantOp:
                    _narrow_constant(op)
        for op in self.walk(module):
            if op_class(op) is CastOp and op.operands[0].type == op.results[0].type:
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()

    @staticmethod
    def _narrow_signature(func: ir.Operation) -> None:
        signature = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        narrowed = ir.FunctionType.get([_narrowed(t) for t in signature.inputs],
                                       [_narrowed(t) for t in signature.results])
        if narrowed != signature:
            func.attributes["function_type"] = ir.TypeAttr.get(narrowed)
        for block in func.regions[0].blocks:
            for argument in block.arguments:
                argument.set_type(_narrowed(argument.type))
