"""ipu-recompute: backward stages recompute their forward activations instead of stashing.

In pipelined training every activation a backward op reads from the forward ops of its
own stage must be stashed for each micro-batch in flight. With recomputation (spec:
`poptorch.recomputationCheckpoint`; enabled by `PipelinedExecution.useRecomputation`),
this pass clones, just before each such backward op, the forward ops computing the
activation, back to the stage's inputs (values from other stages, function arguments)
and to checkpoints (`ipu.nop` tagged `ipu.checkpoint`, which are kept). The clones are
tagged `ipu.backward` and `ipu.recomputed`, so ipu-outline-stages puts them in the
backward stage, whose stash shrinks to the stage inputs and checkpoints.

The last forward stage is fused with the first backward one and stashes nothing, so its
ops are left alone. Runs after ipu-assign-stages, before ipu-outline-stages.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.placement import functions, placement, producer

from .registry import Pass, register
from .stages import backward_ops


@register
class Recompute(Pass):
    argument = "ipu-recompute"
    description = "Recompute forward activations in backward stages (up to checkpoints)"

    def run(self, module: ir.Operation) -> None:
        for func in functions(module):
            ops = [op.operation for op in func.regions[0].blocks[0].operations][:-1]
            backward = backward_ops(ops)
            if not backward:
                continue
            forward = [op for op in ops if op not in backward and placement(op) is not None]
            if not forward:
                continue
            last = max(placement(op)[0] for op in forward)
            forward_set = set(forward)
            clones_of: dict[tuple[int, int], dict] = {}  # one recomputation per stage
            for op in ops:
                where = placement(op)
                if op not in backward or where is None or where[0] == last:
                    continue
                clones = clones_of.setdefault(where, {})
                for n, value in enumerate(op.operands):
                    copy = self._recompute(value, where, forward_set, op, clones)
                    if copy is not value:
                        op.operands[n] = copy

    def _recompute(self, value: ir.Value, where, forward_set, before: ir.Operation,
                   clones: dict) -> ir.Value:
        """`value`, recomputed before `before` if a forward op of stage `where` made it."""
        if value in clones:
            return clones[value]
        source = producer(value)
        if (source is None or source not in forward_set or placement(source) != where
                or "ipu.checkpoint" in source.attributes or not source.operands):
            return value
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
