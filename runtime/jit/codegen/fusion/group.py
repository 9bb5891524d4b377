"""What grouping, the emitters, the compiled kernels and the cache share: a `Group` (the
ops one kernel function computes, and how it reads its inputs), its `Kind` (which
emitter writes its function), element types as kernels store them, and the size below
which nothing is compiled (FUSE_MIN_ELEMENTS) unless it repeats (FUSE_MIN_REPEATS)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.creation import ConstantOp

# Groups whose result has fewer elements stay NumPy ops, unless the block has at least
# FUSE_MIN_REPEATS groups of their structure (`grouping`).
FUSE_MIN_ELEMENTS = 1 << 10
FUSE_MIN_REPEATS = 4

# a kernel argument's element type -> its NumPy dtype
DTYPES = {"f32": np.dtype(np.float32), "i1": np.dtype(np.bool_), "i64": np.dtype(np.int64)}
MEMORY = {"f32": "f32", "i1": "i8"}  # how each element type is stored (NumPy's bool: a byte)


class Kind(enum.Enum):
    """Which emitter writes a group's function (`emitters.EMITTERS`)."""

    ELEMENTWISE = "elementwise"  # fused elementwise ops, maybe ending in a reduction
    WINDOW = "window"  # one pooling op or convolution (`window`)


def element_type(t: ir.Type) -> str | None:
    """'f32' or 'i1' for a static ranked tensor of those, else None."""
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return None
    element = t.element_type  # (isinstance: 0.3 us, printing the type: 2.5 us)
    if isinstance(element, ir.F32Type):
        return "f32"
    return "i1" if isinstance(element, ir.IntegerType) and element.width == 1 \
        and element.is_signless else None


def storage(t: ir.Type) -> str | None:
    """What a kernel's argument of type `t` holds: `element_type`'s types, or 'i64' (a
    pooling's indices, `window`)."""
    found = element_type(t)
    if found is None and isinstance(t, ir.RankedTensorType) and t.has_static_shape \
            and isinstance(t.element_type, ir.IntegerType) and t.element_type.width == 64 \
            and t.element_type.is_signless:
        return "i64"
    return found


def row_strides(shape: tuple[int, ...]) -> list[int]:
    """The element strides of a C-contiguous array of `shape`."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


def core(shape) -> tuple[int, ...]:
    """`shape` without its leading size-1 dims: the loop nest is the same."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def broadcastable(source: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a value of `source` shape broadcasts to `shape` (NumPy's rule)."""
    return len(source) <= len(shape) and all(
        s in (1, d) for s, d in zip(source[::-1], shape[::-1], strict=False))


def splat(value: ir.Value) -> float | bool | None:
    """The one value of a splat f32 or i1 `ipu.constant`, else None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or op_class(owner) is not ConstantOp:
        return None
    attr = owner.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    found = element_type(value.type)
    if found is None:
        return None
    one = attr.get_splat_value()
    return bool(ir.BoolAttr(one).value) if found == "i1" else ir.FloatAttr(one).value


@dataclass(eq=False)
class Read:
    """How a group reads one of its inputs: `value` (an array at run time) from `offset`
    (a slice's starts, else zeros) over `view` (the slice's shape, else the value's),
    broadcast along the view's size-1 or missing dims."""

    value: ir.Value
    offset: tuple[int, ...]
    view: tuple[int, ...]

    @property
    def key(self) -> tuple:
        return (self.value, self.offset, self.view)

    @property
    def start(self) -> int:
        """The flat index of `offset` in the value's array."""
        strides = row_strides(tuple(self.value.type.shape))
        return sum(o * s for o, s in zip(self.offset, strides, strict=True))


@dataclass(eq=False)
class Group:
    """Ops run as one kernel function, in block order: elementwise ops (`grouping`), or
    one pooling op or convolution (`kind`: `Kind.WINDOW`)."""

    shape: tuple[int, ...]
    ops: list[ir.Operation] = field(default_factory=list)
    absorbed: list[ir.Operation] = field(default_factory=list)  # `inline` ops it computes
    inputs: list[ir.Value] = field(default_factory=list)  # each array it reads, once
    reads: list[Read] = field(default_factory=list)
    outputs: list[ir.Value] = field(default_factory=list)
    layout: tuple | None = None  # `elementwise.access`'s answer, once asked
    window: Any = None  # a window group's `window.Window` entry, once known
    # (value, offset, view) of an inline op's result -> where it reads its operands
    paths: dict[tuple, list[tuple]] = field(default_factory=dict)
    reduced: tuple[int, ...] = ()  # dims of `shape` its last op (an ipu.reduce) folds
    kind: Kind = Kind.ELEMENTWISE
    # results stored straight into a concatenation of them (the JIT's `into_concat`):
    # the concatenation's value (one of `outputs`), and each result's offset along its axis
    concat: ir.Value | None = None
    targets: dict[ir.Value, int] = field(default_factory=dict)

    @property
    def last(self) -> ir.Operation:
        return self.ops[-1]
