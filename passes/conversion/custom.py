"""Lowerings of the torch.library ops that run user code (`torch.operator
"torch.poptorch.<name>"`, listed in `LOWERINGS` for `ipu-convert-poptorch-ops`).

- `custom_operation_<n>` (poptorch.custom_op with n outputs) -> `ipu.custom` with the
  op's name, domain, version and attributes; `custom_operation_grad_<n>` (its gradient,
  n inputs) -> `ipu.custom` with `gradient = true`.
- `host_call_<n>` (poptorch.CPU with n outputs) -> `ipu.host_call` with the callback ID.

Each takes its tensors as one `torch.prim.ListConstruct` and a JSON `spec` string
(`poptorch/_ops`): the attributes, in Table 4.1's types, become a dictionary attribute
(float -> f32, int -> i64, str, lists -> arrays of those).
"""

from __future__ import annotations

import json
from typing import Any

from torch_mlir import ir

from poptorch.dialects.custom import (
    MAX_INPUTS,
    MAX_OUTPUTS,
    CustomOp,
    HostCallOp,
    build_slotted,
    custom_attributes,
)
from poptorch.dialects.types import Unsupported

from .common import Builder


def _list_tensors(b: Builder, value: ir.Value) -> list[ir.Value]:
    """The builtin tensors of a `torch.prim.ListConstruct` (it checks, then builds)."""
    owner = value.owner
    if not (isinstance(owner, ir.OpView) and owner.operation.name == "torch.prim.ListConstruct"
            and all(b.is_tensor(v) for v in owner.operands)):
        raise Unsupported("its inputs are not a list of tensors")
    return [b.tensor(v) for v in owner.operands]


def attribute(value: Any) -> ir.Attribute:
    """A Table 4.1 attribute value as an MLIR attribute."""
    if isinstance(value, list):
        return ir.ArrayAttr.get([attribute(v) for v in value])
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Unsupported(f"attribute value {value!r} is not a float, int or str")
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get(ir.F32Type.get(), value)
    return ir.StringAttr.get(value)


def _spec(b: Builder, value: ir.Value) -> dict[str, Any]:
    try:
        return json.loads(b.scalar(value))
    except (json.JSONDecodeError, TypeError) as err:
        raise Unsupported(f"its spec is not JSON ({err})") from None


def _custom(op: ir.OpView, b: Builder, gradient: bool) -> list[ir.Value]:
    name, domain, version = (b.scalar(v) for v in op.operands[1:4])
    attrs = _spec(b, op.operands[4]).get("attributes", {})
    dictionary = ir.DictAttr.get({k: attribute(v) for k, v in attrs.items()})
    results = [b.result_type(i) for i in range(len(op.results))]
    tensors = _list_tensors(b, op.operands[0])  # (last: it builds casts)
    return list(build_slotted(CustomOp, tensors, results, custom_attributes(
        name, domain, version, dictionary, gradient)).results)


def _host_call(op: ir.OpView, b: Builder) -> list[ir.Value]:
    callback = b.scalar(op.operands[1])
    results = [b.result_type(i) for i in range(len(op.results))]
    tensors = _list_tensors(b, op.operands[0])  # (last: it builds casts)
    return list(build_slotted(HostCallOp, tensors, results,
                              {"callback": ir.StringAttr.get(callback)}).results)


def _forward(op: ir.OpView, b: Builder) -> list[ir.Value]:
    return _custom(op, b, gradient=False)


def _gradient(op: ir.OpView, b: Builder) -> list[ir.Value]:
    return _custom(op, b, gradient=True)


LOWERINGS = {
    **{f"torch.poptorch.custom_operation_{n}": _forward for n in range(1, MAX_OUTPUTS + 1)},
    **{f"torch.poptorch.custom_operation_grad_{n}": _gradient
       for n in range(1, MAX_INPUTS + 1)},
    **{f"torch.poptorch.host_call_{n}": _host_call for n in range(1, MAX_OUTPUTS + 1)},
}
