"""ipu-convert-torch-to-ipu: lower torch dialect ops to ipu compute ops.

Runs every family's patterns (`passes/conversion/<family>.py`) greedily on the module,
then reports each torch op that remains as unsupported, at its location (the user's
source line when it came from a model), with the reason a pattern gave for declining.
Values cross between the two worlds through torch_c casts, which fold away between
converted ops; `torch-finalizing-backend-type-conversion` removes the rest. A cast of a
torch literal folds to an `arith.constant` (a constant tensor the model returns, such
as an input it fills in place), which becomes an `ipu.constant` like any literal.
"""

from __future__ import annotations

from torch_mlir import ir, rewrite

from poptorch.dialects.creation import ConstantOp
from poptorch.dialects.placement import INHERITS, PLACEMENT

from .conversion import populate_all
from .conversion.common import FROM_BUILTIN, TO_BUILTIN, Patterns, decline_key
from .conversion.creation import empty_results
from .import_annotations import collect, unsupported
from .registry import Pass, register

# torch ops that are not computations: constants and lists that lowerings read, and
# that fold away once nothing uses them.
KEPT = ("torch.constant.", "torch.prim.ListConstruct", "torch_c.")


def fold_cast_pairs(module: ir.Operation) -> None:
    """Replace to_builtin(from_builtin(x)) by x and drop casts left without uses."""
    for op in Pass.walk(module):
        if op.name != TO_BUILTIN:
            continue
        source = op.operands[0].owner
        if isinstance(source, ir.OpView) and source.operation.name == FROM_BUILTIN:
            op.results[0].replace_all_uses_with(source.operands[0])
            op.erase()
    for op in reversed(Pass.walk(module)):
        if op.name == FROM_BUILTIN and not list(op.results[0].uses):
            op.erase()


def ipu_constants(module: ir.Operation) -> None:
    """Replace each tensor `arith.constant` (a folded cast of a torch literal) by the
    `ipu.constant` of its value."""
    for op in Pass.walk(module):
        if op.name != "arith.constant" or not isinstance(op.results[0].type,
                                                        ir.RankedTensorType):
            continue
        with ir.InsertionPoint(op), op.location:
            constant = ConstantOp(op.attributes["value"], op.results[0].type)
        op.results[0].replace_all_uses_with(constant.result)
        op.erase()


def keep_placement(module: ir.Operation) -> None:
    """Give each ipu op the placement (`ipu.block`, `ipu.ipu_id`, `ipu.backward`) of the
    torch op it replaces, which the lowering gave it as its location (whose metadata
    `ipu-import-annotations` read onto the torch op): otherwise a function whose other
    ops keep their placement (ops lowered before, such as poptorch.nop) would hold
    unplaced ops until the next ipu-import-annotations."""
    for op in Pass.walk(module):
        if not op.name.startswith("ipu."):
            continue
        found: dict[str, list[ir.Attribute]] = {}
        collect(op.location, found)
        for key in (*PLACEMENT, INHERITS):
            if key in found and key not in op.attributes and (
                    key != "ipu.block" or isinstance(found[key][0], ir.StringAttr)):
                op.attributes[key] = found[key][0]


@register
class ConvertTorchToIpu(Pass):
    argument = "ipu-convert-torch-to-ipu"
    description = "Lower torch dialect ops to ipu compute ops (one pattern per aten op)"

    def run(self, module: ir.Operation) -> None:
        patterns = Patterns()
        populate_all(patterns)
        empty_results(module)
        rewrite.apply_patterns_and_fold_greedily(module, patterns.set.freeze())
        fold_cast_pairs(module)
        ipu_constants(module)
        keep_placement(module)
        for op in self.walk(module):
            name = op.name
            if not name.startswith("torch.") or name.startswith(KEPT):
                continue
            reason = patterns.declined.get(decline_key(op))
            if reason is None and name not in patterns.illegal:
                reason = "no lowering to the ipu dialect"
            self.report(op, unsupported(op, reason))
