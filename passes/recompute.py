"""ipu-recompute: backward stages recompute their forward activations instead of stashing.

In pipelined training every activation a backward op reads from the forward ops of its
own stage must be stashed for each micro-batch in flight. With recomputation (spec:
`poptorch.recomputationCheckpoint`; enabled by `PipelinedExecution.useRecomputation`),
this pass clones, just before each such backward op, the forward ops computing the
activation, back to the stage's inputs (values from other stages, function arguments)
and to checkpoints (`ipu.nop` tagged `ipu.checkpoint`, which are kept). The clones are
tagged `ipu.backward` and `ipu.recomputed`, so ipu-outline-stages puts them in the
backward stage, whose stash shrinks to the stage inputs and checkpoints.

Random draws (`ipu.random_uniform`, `ipu.random_normal`: dropout's mask) are recomputed
too, as PopART recomputes dropout: the draw and its clone get the same seed modifier
(`ipu.seed_modifier`, unique in the function), from which the JIT draws the same numbers
(`runtime/jit/random.py`), so a layer's stash is its checkpoint, not its masks.

The last forward stage is fused with the first backward one and stashes nothing between
micro-batches, so by default its ops are left alone (PopART's RecomputationType.Pipeline).
With `fused-stage` (PopART's RecomputationType.RecomputeAll, which PopTorch users set with
`opts._Popart.set("autoRecomputation", 4)`: a model that is not pipelined has only this
stage; in a function without `ipu.stage` all ops are that stage) its backward ops
recompute the values of the ops computing its checkpoints too, from the checkpoints and
the program's inputs, so that only the checkpoints stay alive between its forward and
its backward. As PopART's RecomputeAll, the ops after the last checkpoints (computing
none of them) are kept, not recomputed: the backward starts right after them. A
recomputed batch norm updates no running statistics: its clone's statistics results are
never read, the forward op's still are. Runs after ipu-assign-stages, before
ipu-outline-stages.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.creation import RandomNormalOp, RandomUniformOp
from poptorch.dialects.placement import functions, int_attribute, placement, producer

from .registry import Option, Pass, register
from .stages import backward_ops

RANDOM_OPS = (RandomUniformOp, RandomNormalOp)
SEED_MODIFIER = "ipu.seed_modifier"
ONE_STAGE = (0, 0)  # where every op of a function without placement runs


@register
class Recompute(Pass):
    argument = "ipu-recompute"
    description = "Recompute forward activations in backward stages (up to checkpoints)"
    options = (
        Option("fused-stage", bool, False,
               "Recompute in the last forward stage, fused with its backward, too (PopART's "
               "RecomputeAll; the only stage of a model that is not pipelined)"),
    )

    def run(self, module: ir.Operation) -> None:
        for func in functions(module):
            ops = [op.operation for op in func.regions[0].blocks[0].operations][:-1]
            backward = backward_ops(ops)
            if not backward:
                continue
            # a model without blocks has no ipu.stage: one stage, the fused one
            single = self.fused_stage and not any(placement(op) for op in ops)
            self._where = (lambda op: ONE_STAGE) if single else placement
            forward = [op for op in ops if op not in backward and self._where(op) is not None]
            if not forward:
                continue
            last = max(self._where(op)[0] for op in forward)
            forward_set = set(forward)
            self._kept = self._after_last_checkpoint(
                [op for op in forward if self._where(op)[0] == last])
            self._modifiers = 1 + max((int_attribute(op, SEED_MODIFIER, -1) for op in ops),
                                      default=-1)
            clones_of: dict[tuple[int, int], dict] = {}  # one recomputation per stage
            for op in ops:
                where = self._where(op)
                if (op not in backward or where is None
                        or (where[0] == last and not self.fused_stage)):
                    continue
                clones = clones_of.setdefault(where, {})
                for n, value in enumerate(op.operands):
                    copy = self._recompute(value, where, forward_set, op, clones)
                    if copy is not value:
                        op.operands[n] = copy

    @staticmethod
    def _after_last_checkpoint(stage: list[ir.Operation]) -> set[ir.Operation]:
        """The ops of the fused `stage` that compute no checkpoint of it: kept, as PopART's
        RecomputeAll keeps the ops between the last checkpoints and the loss
        (willow/src/recompute.cpp, allCheckpointAfterLastCheckpoint: "no need to
        recompute twice the last recompute segment"). Without checkpoints, all of them."""
        members = set(stage)
        feeding, todo = set(), [op for op in stage if "ipu.checkpoint" in op.attributes]
        while todo:
            for value in todo.pop().operands:
                source = producer(value)
                if source in members and source not in feeding:
                    feeding.add(source)
                    todo.append(source)
        return members - feeding

    def _recompute(self, value: ir.Value, where, forward_set, before: ir.Operation,
                   clones: dict) -> ir.Value:
        """`value`, recomputed before `before` if a forward op of stage `where` made it."""
        if value in clones:
            return clones[value]
        source = producer(value)
        random = source is not None and op_class(source) in RANDOM_OPS
        if (source is None or source not in forward_set or self._where(source) != where
                or "ipu.checkpoint" in source.attributes or source in self._kept
                or not (source.operands or random)):
            return value
        if random and SEED_MODIFIER not in source.attributes:
            source.attributes[SEED_MODIFIER] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), self._modifiers)
            self._modifiers += 1
        operands = [self._recompute(v, where, forward_set, before, clones)
                    for v in source.operands]
        with ir.InsertionPoint(before):
            clone = source.clone()
        for n, v in enumerate(operands):
            clone.operands[n] = v
        clone.attributes["ipu.backward"] = ir.UnitAttr.get()
        clone.attributes["ipu.recomputed"] = ir.UnitAttr.get()
        for old, new in zip(source.results, clone.results, strict=True):
            clones[old] = new
        return clones[value]
