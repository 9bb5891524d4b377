"""Shared machinery of the torch -> ipu conversion: the pattern table and the builder.

Each op family module exposes `populate_<family>(patterns)`, which registers one
lowering per aten op with `patterns.lower("torch.aten.relu", fn)`. Registering an op
also marks it illegal: after the conversion no `torch.aten.*` op may remain, and one
that does is reported as unsupported with the user's source location (and the reason a
lowering declined it, when one did).

A lowering is `fn(op, b) -> value(s)`: it reads the torch op, builds ipu ops on builtin
tensors through the `Builder` `b` (inserted before `op`, at `op`'s location) and returns
the builtin values that replace the op's results. A lowering makes every check before
it builds anything: ops built before it declines would stay behind. Casts between
`!torch.vtensor` and builtin tensors (`torch_c.to_builtin_tensor` /
`from_builtin_tensor`) are inserted around it and fold away when producer and
consumer are both converted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from torch_mlir import ir, rewrite

from poptorch.dialects.creation import constant
from poptorch.dialects.elementwise import CastOp
from poptorch.dialects.types import Unsupported, builtin_type, numpy_dtype

TO_BUILTIN = "torch_c.to_builtin_tensor"
FROM_BUILTIN = "torch_c.from_builtin_tensor"


class Builder:
    """Creates ipu ops before the torch op being converted, and reads its constants."""

    def __init__(self, op: ir.OpView) -> None:
        self.op = op

    # ---- values ---------------------------------------------------------------------
    def tensor(self, value: ir.Value) -> ir.Value:
        """The builtin-tensor form of a torch tensor value (static when a lowering knew
        a shape torch left dynamic, see `Patterns`)."""
        owner = value.owner
        if isinstance(owner, ir.OpView) and owner.operation.name == FROM_BUILTIN:
            inner = owner.operands[0]
            source = inner.owner
            if isinstance(source, ir.OpView) and source.operation.name == "tensor.cast":
                return source.operands[0]
            return inner
        return ir.Operation.create(TO_BUILTIN, results=[builtin_type(value.type)],
                                   operands=[value]).result

    def result_type(self, index: int = 0) -> ir.RankedTensorType:
        """The builtin type of the torch op's result `index`."""
        return builtin_type(self.op.results[index].type)

    def constant(self, value: Any, element_type: ir.Type,
                 shape: Sequence[int] = ()) -> ir.Value:
        """An `ipu.constant` holding `value` (broadcast to `shape`) as `element_type`.
        One value is given to MLIR as one element, which it makes the same splat as from
        the whole array without the array (an embedding gradient's zeros: 90 MB)."""
        source = np.asarray(value, dtype=numpy_dtype(element_type))
        tensor = ir.RankedTensorType.get(list(shape), element_type)
        if source.size == 1 and math.prod(shape):
            array = source.reshape(1)
        else:
            array = np.ascontiguousarray(np.broadcast_to(source, shape))
        return constant(ir.DenseElementsAttr.get(array, type=tensor))

    def cast(self, value: ir.Value, element_type: ir.Type) -> ir.Value:
        """`value` (builtin) converted to `element_type` (no op if it already has it)."""
        t = value.type
        if t.element_type == element_type:
            return value
        return CastOp(value, ir.RankedTensorType.get(t.shape, element_type)).result

    # ---- constants of the torch op -------------------------------------------------
    def scalar(self, value: ir.Value) -> Any:
        """The Python value of a `torch.constant.*` operand (None for torch.constant.none)."""
        owner = value.owner
        name = owner.operation.name if isinstance(owner, ir.OpView) else ""
        if name == "torch.constant.none":
            return None
        if name in ("torch.constant.int", "torch.constant.float", "torch.constant.bool"):
            attr = owner.attributes["value"]
            return bool(attr.value) if name.endswith("bool") else attr.value
        if name == "torch.constant.str":
            return owner.attributes["value"].value
        if name == "torch.constant.device":
            return owner.attributes["value"].value
        raise Unsupported(f"operand {value.get_name()} is not a constant ({name or 'argument'})")

    def scalar_list(self, value: ir.Value) -> list[Any]:
        """The Python values of a `torch.prim.ListConstruct` of constants."""
        owner = value.owner
        if not (isinstance(owner, ir.OpView)
                and owner.operation.name == "torch.prim.ListConstruct"):
            raise Unsupported(f"operand {value.get_name()} is not a constant list")
        return [self.scalar(v) for v in owner.operands]

    def is_none(self, value: ir.Value) -> bool:
        owner = value.owner
        return isinstance(owner, ir.OpView) and owner.operation.name == "torch.constant.none"

    def is_tensor(self, value: ir.Value) -> bool:
        return str(value.type).startswith("!torch.vtensor")


Lowering = Callable[[ir.OpView, Builder], "ir.Value | Sequence[ir.Value]"]


class Patterns:
    """The conversion's pattern set and the ops it makes illegal."""

    def __init__(self) -> None:
        self.set = rewrite.RewritePatternSet()
        self.illegal: set[str] = set()
        self.declined: dict[str, str] = {}  # str(location) + op name -> reason

    def lower(self, op_name: str, fn: Lowering) -> None:
        """Register `fn` as the lowering of `op_name` (once per op)."""
        if op_name in self.illegal:
            raise ValueError(f"a lowering for {op_name} is registered twice")
        self.illegal.add(op_name)
        self.set.add(op_name, self._pattern(fn))

    def _pattern(self, fn: Lowering):
        def apply(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
            try:
                with rewriter.ip, op.location:
                    results = fn(op, Builder(op))
                    if isinstance(results, ir.Value):
                        results = [results]
                    replacements = [_to_torch(new, old.type)
                                    for old, new in zip(op.results, results, strict=True)]
            except Unsupported as reason:
                self.declined[decline_key(op)] = str(reason)
                return True  # no match: the op stays and is reported
            except Exception as err:  # noqa: BLE001 - a lowering bug: report, don't crash
                self.declined[decline_key(op)] = f"internal error: {type(err).__name__}: {err}"
                return True
            rewriter.replace_op(op, replacements)
            return False

        return apply


def _to_torch(value: ir.Value, torch_type: ir.Type) -> ir.Value:
    """`value` as a torch value of `torch_type`. Where torch's type has dynamic sizes the
    lowering computed statically, a `tensor.cast` keeps the static value reachable."""
    expected = builtin_type(torch_type)
    if value.type != expected:
        value = ir.Operation.create("tensor.cast", results=[expected], operands=[value]).result
    return ir.Operation.create(FROM_BUILTIN, results=[torch_type], operands=[value]).result


def decline_key(op: ir.OpView | ir.Operation) -> str:
    return f"{op.operation.name}@{op.location}"
