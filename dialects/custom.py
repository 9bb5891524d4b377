"""ipu ops that run user code: custom ops (`poptorch.custom_op`) and host callbacks
(`poptorch.CPU`).

Both take and return lists of tensors of different types. IRDL binds the one
constraint behind a variadic operand to the first element's type (`ipu.py`), so these
ops declare `SLOTS` optional operands and `SLOTS` optional results instead, each its own
constraint: an op fills the first n of each (its `operandSegmentSizes` and
`resultSegmentSizes` say how many), which its verifier checks. Build them with
`build_slotted`. A custom op's gradient is the same op with `gradient = true`: its
operands are the forward's inputs, outputs and output gradients, in that order, its
results the inputs' gradients.
"""

from collections.abc import Sequence
from typing import Optional

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Result

from .ipu import Ipu, VerifyError, make_bool

# operands and results an op may have: a custom op of MAX_INPUTS inputs and MAX_OUTPUTS
# outputs, and its gradient (inputs, outputs and output gradients)
MAX_INPUTS = MAX_OUTPUTS = 8
SLOTS = MAX_INPUTS + 2 * MAX_OUTPUTS


class _Slotted(Ipu.Operation):
    """Ops with `SLOTS` optional operands `in<i>` and results `out<i>`."""

    __annotations__ = {}  # noqa: RUF012 - the fields, read by dialects.ext
    for _i in range(SLOTS):
        __annotations__[f"in{_i}"] = Optional[Operand[ir.RankedTensorType]]  # noqa: UP045 - ext reads Optional
    for _i in range(SLOTS):
        __annotations__[f"out{_i}"] = Optional[Result[ir.RankedTensorType]]  # noqa: UP045
    del _i


def _verifier(check):
    """MLIR's `verify_invariants` for a slotted op: its slots form a prefix, then
    `check(op)`; a VerifyError becomes a diagnostic on the op (as `ipu.verified`, which
    cannot be used: it leaves ops whose operand count differs from the declared to IRDL)."""

    def verify_invariants(self) -> bool:
        try:
            for kind in ("operand", "result"):
                name = f"{kind}SegmentSizes"
                if name not in self.operation.attributes:
                    return True  # IRDL reports it
                sizes = list(ir.DenseI32ArrayAttr(self.operation.attributes[name]))
                if sizes != sorted(sizes, reverse=True):
                    raise VerifyError(f"{kind}s must fill the first slots, got {name} "
                                      f"{sizes}")
            check(self)
        except VerifyError as err:
            self.location.emit_error(f"'{self.operation.name}' op {err}")
            return False
        return True

    verify_invariants.__doc__ = check.__doc__
    return verify_invariants


def _check_custom(op: "CustomOp") -> None:
    """A named op of a domain and version, its attributes a dictionary, with results."""
    attrs = op.operation.attributes
    for name in ("op_name", "domain"):
        if not isinstance(attrs[name], ir.StringAttr) or not ir.StringAttr(attrs[name]).value:
            raise VerifyError(f"attribute '{name}' must be a non-empty string")
    if not isinstance(attrs["domain_version"], ir.IntegerAttr):
        raise VerifyError("attribute 'domain_version' must be an integer")
    if not isinstance(attrs["attrs"], ir.DictAttr):
        raise VerifyError(f"attribute 'attrs' must be a dictionary, got {attrs['attrs']}")
    if not op.operation.results:
        raise VerifyError("a custom op has at least one result")


class CustomOp(_Slotted, name="custom"):
    """poptorch.custom_op: the user's op `op_name` of `domain`, version `domain_version`,
    run by the implementation registered under those (poptorch.register_custom_op) with
    its attributes `attrs` (spec Table 4.1); `gradient = true`: its gradient.

    `%y = "ipu.custom"(%x) <{operandSegmentSizes = array<i32: 1, 0, ...>,
        resultSegmentSizes = array<i32: 1, 0, ...>}> {op_name = "LeakyRelu",
        domain = "com.acme", domain_version = 1 : i64, attrs = {alpha = 2.0e-02 : f32},
        gradient = false} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    op_name: ir.StringAttr
    domain: ir.StringAttr
    domain_version: ir.IntegerAttr
    attrs: ir.DictAttr
    gradient: ir.IntegerAttr

    verify_invariants = _verifier(_check_custom)


def _check_host_call(op: "HostCallOp") -> None:
    """A callback named by a non-empty ID, with results."""
    callback = op.operation.attributes["callback"]
    if not isinstance(callback, ir.StringAttr) or not ir.StringAttr(callback).value:
        raise VerifyError("attribute 'callback' must be a non-empty string")
    if not op.operation.results:
        raise VerifyError("a host call has at least one result")


class HostCallOp(_Slotted, name="host_call"):
    """poptorch.CPU: stream the operands to the host, call the Python callable registered
    under `callback` with them, stream its results back.

    `%y = "ipu.host_call"(%x) <{operandSegmentSizes = array<i32: 1, 0, ...>,
        resultSegmentSizes = array<i32: 1, 0, ...>}> {callback = "MyCPUOp"}
        : (tensor<4xf32>) -> tensor<4xf32>`
    """

    callback: ir.StringAttr

    verify_invariants = _verifier(_check_host_call)


def segments(count: int) -> ir.DenseI32ArrayAttr:
    """The segment sizes of `count` filled slots."""
    return ir.DenseI32ArrayAttr.get([1] * count + [0] * (SLOTS - count))


def build_slotted(cls: type, operands: Sequence[ir.Value], result_types: Sequence[ir.Type],
                  attributes: dict[str, ir.Attribute]) -> ir.Operation:
    """A `CustomOp` or `HostCallOp` of these operands, results and attributes."""
    if len(operands) > SLOTS or len(result_types) > SLOTS:
        raise ValueError(f"{cls.OPERATION_NAME} takes at most {SLOTS} operands and results")
    return ir.Operation.create(
        cls.OPERATION_NAME, results=list(result_types), operands=list(operands),
        attributes={**attributes, "operandSegmentSizes": segments(len(operands)),
                    "resultSegmentSizes": segments(len(result_types))})


def custom_attributes(op_name: str, domain: str, version: int, attrs: ir.DictAttr,
                      gradient: bool) -> dict[str, ir.Attribute]:
    """The attributes of an `ipu.custom`."""
    return {"op_name": ir.StringAttr.get(op_name), "domain": ir.StringAttr.get(domain),
            "domain_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), version),
            "attrs": attrs, "gradient": make_bool(gradient)}
