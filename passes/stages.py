"""Reading the multi-IPU structure that ipu-assign-stages and ipu-outline-stages leave.

Shared by the passes after outlining: a function's stage calls are the `func.call`s
tagged `ipu.stage = #ipu.stage<stage, ipu>`, optionally `ipu.phase = p` and, in
training, `ipu.kind = "forward" | "backward" | "forward_backward"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from poptorch.dialects.placement import (
    int_attribute,
    placement,
    str_attribute,
)


def backward_ops(ops: list[ir.Operation]) -> set[ir.Operation]:
    """Ops of the backward pass: tagged `ipu.backward` and not feeding a forward op (CSE
    may merge a forward op with a backward one; the merged op is forward)."""
    body = set(ops)
    backward = {op for op in ops if "ipu.backward" in op.attributes}
    changed = True
    while changed:
        changed = False
        for op in list(backward):
            users = {use.owner.operation for r in op.results for use in r.uses}
            if any(u in body and u not in backward and placement(u) is not None
                   for u in users):
                backward.discard(op)
                changed = True
    return backward


@dataclass
class StageCall:
    """One `func.call` of a stage, as the schedule passes see it."""

    index: int  # position among the stage calls of the function
    op: ir.Operation
    stage: int
    ipu: int
    phase: int | None
    kind: str  # forward, backward or forward_backward ("forward" in inference)

    @property
    def name(self) -> str:
        return ir.FlatSymbolRefAttr(self.op.attributes["callee"]).value


def stage_calls(func: ir.Operation) -> list[StageCall]:
    """The stage calls of `func` in program order."""
    calls = []
    for op in func.regions[0].blocks[0].operations:
        op = op.operation
        where = placement(op) if op.name == "func.call" else None
        if where is not None:
            calls.append(StageCall(len(calls), op, where[0], where[1],
                                   int_attribute(op, "ipu.phase"),
                                   str_attribute(op, "ipu.kind", "forward")))
    return calls
