"""ipu-check-torch-ops: report aten ops that torch-mlir imports as opaque `torch.operator`.

torch-mlir has no op definition for some aten ops (`aten.lgamma`, ...) and imports them
as `torch.operator {name = "torch.aten.lgamma"}`, which its backend pipeline then
rejects with "failed to legalize operation 'torch.operator'". Running this first turns
that into the error every other unsupported op gets: the aten op's name at the user's
source line. An aten operator that `ipu-convert-poptorch-ops` could have lowered but
declined is reported with its lowering's reason.
"""

from __future__ import annotations

from torch_mlir import ir

from .convert_poptorch_ops import UNSUPPORTED
from .import_annotations import unsupported
from .registry import Pass, register


@register
class CheckTorchOps(Pass):
    argument = "ipu-check-torch-ops"
    description = "Report aten ops imported as opaque torch.operator as unsupported"

    def run(self, module: ir.Operation) -> None:
        for op in self.walk(module):
            if op.name != "torch.operator":
                continue
            name = op.attributes["name"].value
            if UNSUPPORTED in op.attributes:  # a lowering of ours declined it
                reason = op.attributes[UNSUPPORTED].value
            elif name.startswith("torch.poptorch."):
                reason = "a PopTorch op whose non-tensor arguments are not constants"
            else:
                reason = "torch-mlir has no definition for it, so it cannot be lowered to " \
                         "the ipu dialect"
            self.report(op, unsupported(op, reason))
