"""ipu-convert-poptorch-ops: PopTorch's own ops (custom ops `torch.poptorch.*`) to ipu ops.

torch-mlir imports torch.library custom ops as opaque `torch.operator`s, which its
backend pipeline rejects, so this runs first, on the freshly imported module: each
`torch.operator "torch.poptorch.<name>"` becomes its ipu op between torch_c casts.
Other opaque operators are left for `ipu-check-torch-ops` to report.
"""

from __future__ import annotations

from torch_mlir import ir, rewrite

from poptorch.dialects.ipu import make_bool
from poptorch.dialects.reduction import ReduceOp
from poptorch.dialects.structure import NopOp, PrintOp

from .conversion.common import Builder, Patterns, Unsupported
from .registry import Pass, register


def nop(op: ir.OpView, b: Builder) -> ir.Value:
    return NopOp(b.tensor(op.operands[0]), b.result_type()).result


def recomputation_checkpoint(op: ir.OpView, b: Builder) -> ir.Value:
    """A value kept (not recomputed) between forward and backward: a tagged ipu.nop."""
    nop_op = NopOp(b.tensor(op.operands[0]), b.result_type())
    nop_op.operation.attributes["ipu.checkpoint"] = ir.UnitAttr.get()
    return nop_op.result


def ipu_print_tensor(op: ir.OpView, b: Builder) -> ir.Value:
    title = ir.StringAttr.get(b.scalar(op.operands[1]))
    return PrintOp(b.tensor(op.operands[0]), title, b.result_type()).result


def identity_loss(op: ir.OpView, b: Builder) -> ir.Value:
    """The loss marker: reduce with its reduction ("none" keeps the tensor as it is)."""
    reduction = b.scalar(op.operands[1])
    x = b.tensor(op.operands[0])
    if reduction == "none" or x.type.rank == 0:
        return x
    if reduction not in ("sum", "mean"):
        raise Unsupported(f"identity_loss reduction '{reduction}'")
    dims = ir.DenseI64ArrayAttr.get(list(range(x.type.rank)))
    return ReduceOp(x, ir.StringAttr.get(reduction), dims, make_bool(False),
                    b.result_type()).result


LOWERINGS = {"torch.poptorch.nop": nop, "torch.poptorch.ipu_print_tensor": ipu_print_tensor,
             "torch.poptorch.identity_loss": identity_loss,
             "torch.poptorch.recomputation_checkpoint": recomputation_checkpoint}


def lower_operator(op: ir.OpView, b: Builder) -> ir.Value:
    lowering = LOWERINGS.get(op.attributes["name"].value)
    if lowering is None:
        raise Unsupported("not a PopTorch op")
    return lowering(op, b)


@register
class ConvertPoptorchOps(Pass):
    argument = "ipu-convert-poptorch-ops"
    description = "Lower PopTorch's custom ops (torch.operator \"torch.poptorch.*\") to ipu ops"

    def run(self, module: ir.Operation) -> None:
        patterns = Patterns()
        patterns.lower("torch.operator", lower_operator)
        rewrite.apply_patterns_and_fold_greedily(module, patterns.set.freeze())
