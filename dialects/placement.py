"""Where an op runs: the placement attributes of the ipu dialect and how to read them.

An op is placed by `ipu.block` / `ipu.ipu_id` (poptorch.Block, BeginBlock), then by
`ipu.stage = #ipu.stage<stage, ipu>` (ipu-assign-stages); ipu-outline-stages moves each
stage into a function tagged `ipu.stage` and calls it with a `func.call` carrying the same
attribute (and `ipu.phase`, `ipu.kind` in phased or training programs). The passes, the
machine model and the API read these through the helpers here.
"""

from __future__ import annotations

from torch_mlir import ir

from .creation import ConstantOp
from .ipu import StageAttr, walk

# ops that compute nothing and may stay outside blocks
NEUTRAL = (ConstantOp.OPERATION_NAME, "func.", "torch.constant.", "torch.prim.ListConstruct",
           "torch_c.", "builtin.", "arith.constant", "tensor.extract", "scf.yield")
# control flow (`scf.for` / `scf.if`, poptorch.for_loop and cond, and their index and
# condition scalars): these keep their placement through ipu-convert-torch-to-ipu, which
# leaves the ops it converts without one until ipu-import-annotations runs again, so they
# do not make a function count as placing its ops
CONTROL = ("scf.", "arith.constant", "tensor.extract")
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
        ops = walk(func)[1:]
        if "ipu.stage" in func.attributes or any(
                name in op.attributes for op in ops if not op.name.startswith(CONTROL)
                for name in PLACEMENT):
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


def int_attribute(op: ir.Operation, name: str, default: int | None = None) -> int | None:
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else default


def str_attribute(op: ir.Operation, name: str, default: str = "") -> str:
    return ir.StringAttr(op.attributes[name]).value if name in op.attributes else default


def functions(module: ir.Operation) -> list[ir.Operation]:
    """The functions of `module` that have a body."""
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "func.func" and op.regions[0].blocks]


def symbol(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def symbol_table(module: ir.Operation) -> dict[str, ir.Operation]:
    """The functions of `module` that have a body, by name."""
    return {symbol(func): func for func in functions(module)}
