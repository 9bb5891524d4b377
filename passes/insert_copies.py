"""ipu-insert-copies: a value crossing IPUs goes through `ipu.copy` over the IPU-Links.

After ipu-outline-stages, a function calls its stages with `func.call`s tagged
`ipu.stage = #ipu.stage<s, i>`. Where a stage's operand is the result of a stage on
another IPU, this pass inserts `"ipu.copy"(%v) {src_ipu, dst_ipu}` just before the
consumer, once per (value, destination IPU), in the consumer's stage (`ipu.stage`).
Function arguments (inputs and weights) come from the host and results go back to it:
they need no inter-IPU copy.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.ipu import i64
from poptorch.dialects.placement import functions, placement, producer
from poptorch.dialects.structure import CopyOp

from .registry import Pass, register


@register
class InsertCopies(Pass):
    argument = "ipu-insert-copies"
    description = "Insert ipu.copy where a stage uses a value computed on another IPU"

    def run(self, module: ir.Operation) -> None:
        for func in functions(module):
            copies: dict[tuple[ir.Value, int], ir.Value] = {}
            for op in list(func.regions[0].blocks[0].operations):
                op = op.operation
                where = placement(op) if op.name == "func.call" else None
                if where is None:
                    continue
                for n, value in enumerate(op.operands):
                    source = _source_ipu(value)
                    if source is None or source == where[1]:
                        continue
                    key = (value, where[1])
                    if key not in copies:
                        with ir.InsertionPoint(op), op.location:
                            copy = CopyOp(value, i64(source), i64(where[1]), value.type)
                        copy.operation.attributes["ipu.stage"] = op.attributes["ipu.stage"]
                        copies[key] = copy.result
                    op.operands[n] = copies[key]


def _source_ipu(value: ir.Value) -> int | None:
    """The IPU a value is computed on, if it is the result of a stage call (or a copy)."""
    owner = producer(value)
    if owner is None:
        return None
    if op_class(owner) is CopyOp:
        return ir.IntegerAttr(owner.attributes["dst_ipu"]).value
    where = placement(owner) if owner.name == "func.call" else None
    return where[1] if where else None
