"""The `ipu` dialect object, its attributes and the shared pieces of op verification.

Ops are defined in one module per family (`structure`, `elementwise`, `linear`) on
`Ipu.Operation`; they all register on the `Ipu` class defined here, which
`poptorch.dialects.make_context` loads into every context.

Op modules must not use `from __future__ import annotations`: `dialects.ext` reads the
field annotations (`Operand[...]`, `ir.StringAttr`) as live types.

IRDL binds the one constraint behind a variadic operand or result to the first
element's type, so an IRDL op cannot take or return a list of values of different
types (measured: `"t.a"() : () -> (tensor<4xf32>, tensor<8xf32>)` fails with "expected
'tensor<4xf32>' but got 'tensor<8xf32>'" even for an `Any` constraint). Ops here
therefore have fixed arities. What needs heterogeneous lists uses upstream ops: a
pipeline stage is a `func.func` tagged `ipu.stage = #ipu.stage<stage, ipu>` and called
with `func.call`, rather than a region op with results.
"""

import functools
from collections.abc import Iterable, Sequence
from typing import ClassVar

from torch_mlir import ir
from torch_mlir.dialects.ext import AttributeDef, Dialect, OperandDef, RegionDef, ResultDef


class Ipu(Dialect, name="ipu"):
    """The IPU dialect: graph-level compute ops and machine-level structure."""

    # The IRDL module's text, once emitted in this process, and the number of operations,
    # types and attributes it was emitted for.
    _irdl: ClassVar[tuple[tuple[int, int, int], str] | None] = None

    @classmethod
    def _registered(cls) -> tuple[int, int, int]:
        return len(cls.operations), len(cls.types), len(cls.attributes)

    @classmethod
    def _emit_module(cls) -> ir.Module:
        """The IRDL module `Dialect.load` loads: emitted from the op classes the first time
        in a process, then parsed from that text (on the development VM, 19 ms to emit
        against 4 ms to parse, in every context after the first)."""
        text = cls.irdl_text()
        if text is not None:
            return ir.Module.parse(text)
        module = super()._emit_module()
        cls._irdl = (cls._registered(), str(module))
        return module

    @classmethod
    def irdl_text(cls) -> str | None:
        """The IRDL module's text if this process has emitted or been given it."""
        return cls._irdl[1] if cls._irdl is not None and \
            cls._irdl[0] == cls._registered() else None

    @classmethod
    def use_irdl_text(cls, text: str | None) -> None:
        """Load the dialect from `text` (an earlier process's `irdl_text()` of the same
        dialect sources) instead of emitting it; None: emit it."""
        cls._irdl = None if text is None else (cls._registered(), text)


# A builtin attribute class the bindings leave without the `attr_name` that IRDL
# constraints are built from. (`dense<...>` elements attributes have no registered name
# IRDL can use at all: ops holding one declare it `Any` and check it in Python.)
class DenseI64Array(ir.DenseI64ArrayAttr):
    """Constraint for `array<i64: ...>` attributes (dims, sizes, strides).

    Build these with `dense_i64`: an empty array is falsy in Python, and the builder of
    `dialects.ext` drops falsy attributes ("invalid (`None`?) attribute value")."""

    attr_name = "builtin.dense_array"

    def __bool__(self) -> bool:
        return True


def dense_i64(values: Iterable[int]) -> DenseI64Array:
    """An `array<i64: ...>` attribute for an op builder, kept even when empty (the dims
    of a reduction of a 0-d tensor)."""
    return DenseI64Array(ir.DenseI64ArrayAttr.get([int(v) for v in values]))


class Bool(ir.BoolAttr):
    """Constraint for `true` / `false` attributes (an i1 `builtin.integer` in IRDL)."""

    attr_name = "builtin.integer"


def i64(value: int) -> ir.IntegerAttr:
    """An `i64` integer attribute for an op builder."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))


def make_bool(value: bool) -> ir.Attribute:
    """`true` / `false` for an op builder (as an i1 IntegerAttr: the builder of
    `dialects.ext` drops attributes that are falsy in Python, and `BoolAttr(false)` is)."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(1), int(value))


class ReplicaGroupAttr(Ipu.Attribute, name="replica_group"):
    """Which replicas a collective or a grouped variable spans.

    `#ipu.replica_group<"orthogonal", 4 : i64>`: `kind` is one of PopTorch's
    CommGroupType values in snake case, `size` the number of replicas per group
    (0 for "all" and "no_grouping", where it has no meaning).
    """

    kind: ir.StringAttr
    size: ir.IntegerAttr


REPLICA_GROUP_KINDS = ("all", "consecutive", "orthogonal", "no_grouping")


class StageAttr(Ipu.Attribute, name="stage"):
    """Where a stage runs: `#ipu.stage<1 : i64, 0 : i64>` is pipeline stage 1 on IPU 0.

    Placed as `ipu.stage` on the `func.func` holding a stage's ops and on the
    `func.call`s that run it.
    """

    stage: ir.IntegerAttr
    ipu: ir.IntegerAttr


def stage_attr(stage: int, ipu: int) -> "StageAttr":
    """Build `#ipu.stage<stage, ipu>` in the current context."""
    return StageAttr.get(i64(stage), i64(ipu))


def replica_group(kind: str, size: int = 0) -> "ReplicaGroupAttr":
    """Build `#ipu.replica_group<kind, size>` in the current context."""
    return ReplicaGroupAttr.get(ir.StringAttr.get(kind), i64(size))


class VerifyError(Exception):
    """Raised inside a verifier; `verified` turns it into an MLIR diagnostic."""


def declared_shape_holds(op: ir.OpView) -> bool:
    """Whether `op` has the operands, results, regions and attributes its class declares.

    MLIR runs the Python verifier before IRDL's own checks; when this is False the
    Python checks are skipped so that IRDL reports the problem in its own words
    ("attribute "dst_ipu" is expected but not provided", "expected base type ...").
    """
    operands, results, regions, attributes = _declared(type(op))
    operation = op.operation
    for constraints, values in ((operands, operation.operands), (results, operation.results)):
        if len(constraints) != len(values):
            return False
        for constraint, value in zip(constraints, values, strict=True):
            if constraint is not None and not isinstance(value.type, constraint):
                return False
    if len(operation.regions) != regions:
        return False
    present = operation.attributes
    return all(name in present for name in attributes)


@functools.cache
def _declared(cls: type) -> tuple[tuple, tuple, int, tuple[str, ...]]:
    """An op class's declared operand and result type classes (None: any), its region
    count and attribute names, worked out once per class: the verifiers run for every
    op after every pass."""

    def constraints(kind):
        return tuple(f.constraint if isinstance(f.constraint, type) else None
                     for f in cls._fields if isinstance(f, kind))

    return (constraints(OperandDef), constraints(ResultDef),
            sum(isinstance(f, RegionDef) for f in cls._fields),
            tuple(f.name for f in cls._fields if isinstance(f, AttributeDef)))


def verified(check):
    """Wrap a `check(op)` that raises VerifyError into MLIR's `verify_invariants` protocol.

    The message goes out as an error diagnostic on the op (prefixed, as C++ verifiers
    are, with `'ipu.x' op`) and the verifier returns failure, so bad IR is an MLIR
    diagnostic and never a Python exception. A bug in a verifier is reported the
    same way rather than escaping into the parser or pass manager. Ops that do not
    have the declared shape are left to IRDL (see `declared_shape_holds`).
    """

    def verify_invariants(self) -> bool:
        if not declared_shape_holds(self):
            return True
        try:
            check(self)
        except VerifyError as err:
            self.location.emit_error(f"'{self.operation.name}' op {err}")
            return False
        except Exception as err:  # noqa: BLE001 - a verifier bug must stay a diagnostic
            self.location.emit_error(
                f"'{self.operation.name}' op verifier failed: {type(err).__name__}: {err}"
            )
            return False
        return True

    verify_invariants.__doc__ = check.__doc__
    return verify_invariants


def tensor_type(value: ir.Value, what: str) -> ir.RankedTensorType:
    """The ranked tensor type of `value`, or a VerifyError naming `what`."""
    t = value.type
    if not isinstance(t, ir.RankedTensorType):
        raise VerifyError(f"{what} must be a ranked tensor, got {t}")
    return t


def binary_types(op: ir.OpView) -> tuple[ir.RankedTensorType, ...]:
    """The (lhs, rhs, output) tensor types of a two-operand op, all of one element type."""
    lhs, rhs = tensor_type(op.lhs, "lhs"), tensor_type(op.rhs, "rhs")
    out = tensor_type(op.output, "result")
    if not (lhs.element_type == rhs.element_type == out.element_type):
        raise VerifyError(
            f"element types differ: lhs {lhs.element_type}, rhs {rhs.element_type}, "
            f"result {out.element_type}"
        )
    return lhs, rhs, out


def int_attr(op: ir.OpView, name: str, minimum: int | None = 0) -> int:
    """An integer attribute's value, checked against a lower bound."""
    attr = op.attributes[name]
    if not isinstance(attr, ir.IntegerAttr):
        raise VerifyError(f"attribute '{name}' must be an integer, got {attr}")
    value = attr.value
    if minimum is not None and value < minimum:
        raise VerifyError(f"attribute '{name}' must be >= {minimum}, got {value}")
    return value


def bool_attr(op: ir.OpView, name: str) -> bool:
    """A `true` / `false` attribute's value."""
    attr = op.attributes[name]
    if not isinstance(attr, ir.BoolAttr):
        raise VerifyError(f"attribute '{name}' must be true or false, got {attr}")
    return attr.value


def str_attr(op: ir.OpView, name: str, allowed: Iterable[str] | None = None) -> str:
    """A string attribute's value, checked against the allowed values."""
    attr = op.attributes[name]
    if not isinstance(attr, ir.StringAttr):
        raise VerifyError(f"attribute '{name}' must be a string, got {attr}")
    value = attr.value
    if allowed is not None and value not in allowed:
        choices = ", ".join(f'"{a}"' for a in allowed)
        raise VerifyError(f"attribute '{name}' must be one of {choices}, got \"{value}\"")
    return value


def i64_array(op: ir.OpView, name: str) -> list[int]:
    """The values of a `array<i64: ...>` attribute."""
    attr = op.attributes[name]
    if not isinstance(attr, ir.DenseI64ArrayAttr):
        raise VerifyError(f"attribute '{name}' must be an array<i64: ...>, got {attr}")
    return list(attr)


def shape_str(shape: Sequence[int]) -> str:
    """`2x?x3` style, as MLIR prints tensor shapes."""
    return "x".join("?" if ir.ShapedType.is_dynamic_size(d) else str(d) for d in shape)


def dims_compatible(a: int, b: int) -> bool:
    """Two static-or-dynamic dimension sizes that may be equal at run time."""
    dyn = ir.ShapedType.is_dynamic_size
    return dyn(a) or dyn(b) or a == b


def walk(op: ir.Operation) -> list[ir.Operation]:
    """Every op nested in `op` (pre-order), as a list to loop over.

    Loop over this rather than raising inside an `op.walk` callback: the bindings turn an
    exception in a callback into a bare "Exception raised in callback".
    """
    ops: list[ir.Operation] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        ops.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ops
