"""ipu-assign-stages: blocks -> pipeline stages and IPUs, as `ipu.stage = #ipu.stage<s, i>`.

Reads the `ipu.block` / `ipu.ipu_id` annotations that poptorch.Block, BlockFunction and
BeginBlock leave on every op (spec 4.4.1) and gives each annotated op its stage and IPU:
from an explicit `stages` map (poptorch.Stage: "A=0:0,B=1:1", block=stage:ipu), or by
AutoStage (`auto-stage=same-as-ipu`, the default: stage = ipu; `auto-increment`: a new
stage per block in program order). Checks from the spec: with a pipeline, stage ids
must ascend in program order; a stage may not name a block that does not exist; once
blocks are used, every computing op must be in one.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects import stage_attr

from .registry import Option, Pass, register

# ops that compute nothing and may stay outside blocks
NEUTRAL = ("ipu.constant", "func.", "torch.constant.", "torch.prim.ListConstruct",
           "torch_c.", "builtin.")


def _block_of(op: ir.Operation) -> tuple[str, int | None] | None:
    """(block key, ipu id) of an annotated op, or None."""
    attrs = op.attributes
    block = attrs["ipu.block"].value if "ipu.block" in attrs else None
    ipu = None
    if "ipu.ipu_id" in attrs:
        raw = attrs["ipu.ipu_id"]
        ipu = raw.value if isinstance(raw, ir.IntegerAttr) else raw.value
    if block is None and ipu is None:
        return None
    return (block if block is not None else f"ipu{ipu}"), ipu


@register
class AssignStages(Pass):
    argument = "ipu-assign-stages"
    description = "Give every op in a block its pipeline stage and IPU (#ipu.stage)"
    options = (
        Option("stages", str, "", "Explicit stages as block=stage:ipu,... (poptorch.Stage)"),
        Option("auto-stage", str, "same-as-ipu",
               "Without stages: same-as-ipu or auto-increment (poptorch.AutoStage)"),
        Option("pipelined", bool, True, "Check that stage ids ascend (PipelinedExecution)"),
    )

    def run(self, module: ir.Operation) -> None:
        annotated = [(op, _block_of(op)) for op in self.walk(module)]
        if not any(block for _, block in annotated):
            return
        for op, block in annotated:
            if block is None and not op.name.startswith(NEUTRAL):
                raise self.error(op, f"'{op.name}' is outside every Block; once a model uses "
                                     "blocks, put every layer inside a poptorch.Block or "
                                     "after a poptorch.BeginBlock")
        placement = self._placement([(op, b) for op, b in annotated if b is not None])
        for op, block in annotated:
            if block is not None:
                op.attributes["ipu.stage"] = stage_attr(*placement[block[0]])

    def _placement(self, annotated) -> dict[str, tuple[int, int]]:
        """block key -> (stage, ipu), checked."""
        order: list[str] = []
        first_op: dict[str, ir.Operation] = {}
        ipus: dict[str, int] = {}
        for op, (key, ipu) in annotated:
            if key not in first_op:
                order.append(key)
                first_op[key] = op
            if ipu is not None:
                ipus[key] = self._ipu(op, ipu)
        if self.stages:
            placement = self._explicit(order, first_op)
        elif self.auto_stage == "auto-increment":
            placement = {key: (n, ipus.get(key, 0)) for n, key in enumerate(order)}
        elif self.auto_stage == "same-as-ipu":
            placement = {key: (ipus.get(key, 0), ipus.get(key, 0)) for key in order}
        else:
            raise self.error(first_op[order[0]], f"auto-stage must be same-as-ipu or "
                                                 f"auto-increment, got '{self.auto_stage}'")
        if self.pipelined:
            for earlier, later in zip(order, order[1:], strict=False):
                if placement[later][0] < placement[earlier][0]:
                    raise self.error(
                        first_op[later],
                        f"stage ids must ascend in PipelinedExecution: block '{later}' "
                        f"(stage {placement[later][0]}) runs after block '{earlier}' (stage "
                        f"{placement[earlier][0]}); use AutoStage.AutoIncrement or give "
                        "later blocks higher stages")
        return placement

    def _explicit(self, order, first_op) -> dict[str, tuple[int, int]]:
        placement = {}
        for item in self.stages.split(","):
            name, _, where = item.partition("=")
            stage, _, ipu = where.partition(":")
            if name not in first_op:
                raise self.error(first_op[order[0]],
                                 f"a Stage names block '{name}', which does not exist; the "
                                 f"model's blocks are {', '.join(order)}")
            placement[name] = (int(stage), int(ipu or stage))
        missing = [key for key in order if key not in placement]
        if missing:
            raise self.error(first_op[missing[0]], f"block '{missing[0]}' is in no Stage; add "
                                                   "it to one")
        return placement

    def _ipu(self, op: ir.Operation, ipu) -> int:
        if isinstance(ipu, int):
            return ipu
        if str(ipu).isdigit():
            return int(ipu)
        raise self.error(op, f"ipu_id '{ipu}' is not an IPU number")
