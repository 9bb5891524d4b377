"""ipu-verify-placement: every computing op of a placed function has a placement.

Once a model uses blocks, every op belongs to a block, stage and IPU (`ipu.block`,
`ipu.ipu_id`, `ipu.stage`, or the stage function it was outlined into), and every op a
pass creates must inherit the placement of the ops it replaces. This pass checks that
invariant; the compiler runs the same check after every step of its pipeline, so a pass
that creates an op without a placement is named at once, not where a later pass trips
over the op. Functions without any placed op (a model without blocks, the optimizer's
and the gradient reduction's programs) are not checked.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.placement import unplaced

from .registry import Pass, register


@register
class VerifyPlacement(Pass):
    argument = "ipu-verify-placement"
    description = "Check that every computing op of a placed function has a block, " \
                  "stage or IPU"

    def run(self, module: ir.Operation) -> None:
        for op in unplaced(module) or ():
            self.report(op, f"'{op.name}' has no placement (ipu.block, ipu.ipu_id or "
                            "ipu.stage) in a function whose other ops have one; the pass "
                            "that created it must give it the placement of the op it "
                            "replaces")
