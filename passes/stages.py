"""Reading the multi-IPU structure that ipu-assign-stages and ipu-outline-stages leave.

Shared by the passes after outlining: a function's stage calls are the `func.call`s
tagged `ipu.stage = #ipu.stage<stage, ipu>`, optionally `ipu.phase = p` and, in
training, `ipu.kind = "forward" | "backward" | "forward_backward"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from poptorch.dialects import StageAttr

from .registry import Pass

# ops that compute nothing and may stay outside blocks
NEUTRAL = ("ipu.constant", "func.", "torch.constant.", "torch.prim.ListConstruct",
           "torch_c.", "builtin.")
# the attributes that place an op: its block and IPU (poptorch.Block, BeginBlock), then
# its stage (ipu-assign-stages)
PLACEMENT = ("ipu.block", "ipu.ipu_id", "ipu.stage")
# ipu-assign-stages places backward ops without annotations next to their neighbours
INHERITS = "ipu.backward"


def is_placed(op: ir.Operation) -> bool:
    """Whether `op` has a placement of its own or lies in an outlined stage function."""
    attrs = op.attributes
    if INHERITS in attrs or any(name in attrs for name in PLACEMENT):
        return True
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        parent = parent.parent
    return parent is not None and "ipu.stage" in parent.attributes


def unplaced(module: ir.Operation) -> list[ir.Operation] | None:
    """The computing ops without a placement in the functions of `module` that place
    some of their ops (a function without blocks, or the optimizer's, has none); None
    when no function places any."""
    found, any_placed = [], False
    for func in functions(module):
        ops = Pass.walk(func)[1:]
        if "ipu.stage" in func.attributes or any(
                name in op.attributes for op in ops for name in PLACEMENT):
            any_placed = True
            found += [op for op in ops if not op.name.startswith(NEUTRAL) and not is_placed(op)]
    return found if any_placed else None


def placement(op: ir.Operation) -> tuple[int, int] | None:
    """(stage, ipu) of an op tagged `ipu.stage`, or None."""
    attrs = op.attributes
    if "ipu.stage" not in attrs:
        return None
    attr = attrs["ipu.stage"]
    if not isinstance(attr, StageAttr):
        attr = StageAttr(attr)
    return attr.stage.maybe_downcast().value, attr.ipu.maybe_downcast().value


def producer(value: ir.Value) -> ir.Operation | None:
    """The op computing `value`, or None for a block argument."""
    owner = value.owner
    return owner.operation if isinstance(owner, ir.Operation | ir.OpView) else None


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


def int_attribute(op: ir.Operation, name: str, default: int | None = None) -> int | None:
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else default


def str_attribute(op: ir.Operation, name: str, default: str = "") -> str:
    return ir.StringAttr(op.attributes[name]).value if name in op.attributes else default


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


def functions(module: ir.Operation) -> list[ir.Operation]:
    """The functions of `module` that have a body."""
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "func.func" and op.regions[0].blocks]


def symbol(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def symbol_table(module: ir.Operation) -> dict[str, ir.Operation]:
    """The functions of `module` that have a body, by name."""
    return {symbol(func): func for func in functions(module)}
