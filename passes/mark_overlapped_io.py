"""ipu-mark-overlapped-io: `poptorch.set_overlap_for_input` / `set_overlap_for_output`
(`torch.operator "torch.poptorch.set_overlap_for_input"(%x, %mode)`) become an attribute
of the function's argument or result, `ipu.overlap = "overlap_accumulation_loop"` or
`"overlap_device_iteration_loop"` (PopART's exchange strategies OverlapInnerLoop and
OverlapLoops), and the op goes (its mode constant too, unless shared): the tensor flows
on unchanged. `NoOverlap` leaves no
attribute. PopTorch does the same to its graph's inputs and outputs
(`poptorch/source/OverlappedIO.cpp`), and refuses the same misuses, with its messages:

- an input mark whose tensor is not an argument of the function ("applied on a node
  which is not a tensor input to the model"), or an argument read by other ops too
  ("must be the only op applied to an input");
- an output mark whose tensor is returned twice, directly or through the mark ("cannot
  be used with a tensor that is returned twice"), or not returned at all.

An argument's attribute survives torch-mlir's backend pipeline and the multi-IPU passes
(they keep @main's signature); the machine model's timeline reads it
(`runtime/machine/scheduler.py`: the stream's transfer runs on the IO tiles, overlapping
compute). Runs first, on the imported torch-dialect module.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.types import Unsupported

from .conversion.common import Builder
from .registry import Pass, register

ATTRIBUTE = "ipu.overlap"
MODES = {1: "overlap_accumulation_loop", 2: "overlap_device_iteration_loop"}
INPUT = "torch.poptorch.set_overlap_for_input"
OUTPUT = "torch.poptorch.set_overlap_for_output"


def _set(function: ir.Operation, key: str, index: int, count: int, mode: str) -> None:
    """Set `ipu.overlap` in entry `index` of the function's `arg_attrs` / `res_attrs`."""
    attrs = function.attributes
    entries = [_items(a) for a in (ir.ArrayAttr(attrs[key]) if key in attrs else [])]
    entries += [{} for _ in range(count - len(entries))]
    entries[index][ATTRIBUTE] = ir.StringAttr.get(mode)
    attrs[key] = ir.ArrayAttr.get([ir.DictAttr.get(e) for e in entries])


def _items(attr: ir.Attribute) -> dict[str, ir.Attribute]:
    d = ir.DictAttr(attr)
    return {d[i].name: d[i].attr for i in range(len(d))}


@register
class MarkOverlappedIO(Pass):
    argument = "ipu-mark-overlapped-io"
    description = ("Turn set_overlap_for_input/output into ipu.overlap attributes of the "
                   "function's arguments and results")

    def run(self, module: ir.Operation) -> None:
        for function in self.walk(module):
            if function.name == "func.func" and function.regions[0].blocks:
                self.mark(function)

    def mark(self, function: ir.Operation) -> None:
        block = function.regions[0].blocks[0]
        marks = [op for op in block.operations if op.operation.name == "torch.operator"
                 and op.attributes["name"].value in (INPUT, OUTPUT)]
        returned = list(block.operations)[-1]
        for op in marks:
            op = op.operation
            mode = self.mode(op)
            if op.attributes["name"].value == INPUT:
                self.input(function, block, op, mode)
            else:
                self.output(function, returned, op, mode)
            op.results[0].replace_all_uses_with(op.operands[0])
            constant = op.operands[1].owner
            op.erase()
            if not list(constant.results[0].uses):  # the mode, unless shared
                constant.erase()

    def mode(self, op: ir.Operation) -> int:
        try:
            mode = Builder(op).scalar(op.operands[1])
        except Unsupported:  # not a constant
            mode = None
        if mode not in (0, *MODES):
            raise self.error(op, f"the overlap mode of {op.attributes['name'].value} must "
                                 "be a constant 0, 1 or 2 (poptorch.OverlapMode)")
        return mode

    def input(self, function: ir.Operation, block: ir.Block, op: ir.Operation,
              mode: int) -> None:
        value = op.operands[0]
        if not isinstance(value, ir.BlockArgument) or value.owner != block:
            raise self.error(op, "poptorch.set_overlap_for_input applied on a node which is "
                                 "not a tensor input to the model.")
        index = ir.BlockArgument(value).arg_number
        if any(use.owner != op for use in value.uses):
            raise self.error(op, "poptorch.set_overlap_for_input must be the only op applied "
                                 f"to an input. This is not the case for input {index} to "
                                 "the model.")
        if mode:
            _set(function, "arg_attrs", index, len(block.arguments), MODES[mode])

    def output(self, function: ir.Operation, returned: ir.Operation, op: ir.Operation,
               mode: int) -> None:
        values = (op.operands[0], op.results[0])
        positions = [i for i, v in enumerate(returned.operands) if v in values]
        if len(positions) > 1:
            raise self.error(op, "poptorch.set_overlap_for_output cannot be used with a "
                                 "tensor that is returned twice. Please check all returned "
                                 "tensors including those nested in tuples/lists.")
        if not positions:
            raise self.error(op, "poptorch.set_overlap_for_output applied on a tensor the "
                                 "model does not return; mark the tensors forward returns, "
                                 "just before returning them")
        if mode:
            _set(function, "res_attrs", positions[0], len(returned.operands), MODES[mode])
