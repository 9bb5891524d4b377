"""Elementwise fusion: the JIT's groups of elementwise ipu ops (and a reduction ending
them), each compiled by MLIR into one loop nest over memory.

A NumPy kernel makes one pass over memory per op (GELU's erf alone is 28), so a chain of
elementwise ops costs a pass, a temporary and 5-25 us of call overhead per op. The JIT
groups such chains (`find_groups`); each group becomes one function of a kernel module
in MLIR's arith, math, scf and llvm dialects (`kernel_module`): nested loops over the
group's result shape whose body is the group's ops on scalars (`scalar_ir`). MLIR's
conversion passes lower the module to the LLVM dialect and MLIR's ExecutionEngine
compiles it (`compile_kernels`); LLVM vectorises the loops. The program calls each group
through a `FusedKernel`, which gives every operand its leading (replica) axes.

What is grouped: ops with an emitter (`scalar_ir.EMITTERS`) on f32 and i1 tensors of one
static result shape, each reading the others' results or values made outside the group
(those may broadcast: size-1 or missing dimensions). A group runs where its last op was,
so it may only take in an op when nothing outside it reads its values before that op.

Some ops are computed inside the kernels that read them instead (`inline`, listed in
`Group.absorbed`): a slice with unit steps is read in place (an LSTM cell's four gates
are slices of one tensor), a splat constant becomes a literal, and a fusible op read
only through such ops is computed where it is read, at most once per element (an LSTM's
gate sums: the input projection's bias add, read a step at a time, and each step's add,
read a gate at a time). Where a kernel reads is an argument (`%off<j>`), so an LSTM's
steps share one kernel function.

A sum, max or min (`REDUCTIONS`) over dims that include the last one ends the group of
its operand: the kernel's loops run over the dims it keeps first, then fold the others
into an accumulator, stored once per element of the kept ones (softmax's row max, layer
norm's row sums, batch norm's sums over N, H and W of NCHW, one channel at a time). The
fold is reassociated, which lets LLVM vectorise it: a sum differs from NumPy's pairwise
sum by rounding (within 2e-6 relative in the tests); max and min are exact and keep NaN.

Results of a group that only a concatenation of them reads (an LSTM's backward gate
gradients) are stored by the kernel straight into their places in it (`Group.concat`,
which the JIT sets): no concatenation call, no copy.

Max poolings and their gradients, and convolutions' windows, are one-op groups of their
own kind ("window"), whose functions `window` writes; they share the kernel module, the
calls and the cache.

Groups smaller than FUSE_MIN_ELEMENTS are left to NumPy (compiling a kernel costs 10-20
ms, which small tensors never repay), as are single ops that are one NumPy pass
(`COMPOSITE`).

The IR passes and the cost model never see these groups: the machine model's timeline
still costs each ipu op as the IPU runs it; fusion is how the host runs the numbers.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field

import cffi
import numpy as np
from torch_mlir import ir, passmanager

from poptorch.dialects import torch_mlir_version
from poptorch.errors import Error
from poptorch.runtime.jit.codegen import scalar_ir
from poptorch.runtime.jit.codegen.scalar_ir import COMPOSITE, EMITTERS, Body

_FFI = cffi.FFI()

# Groups whose result has fewer elements stay NumPy ops.
FUSE_MIN_ELEMENTS = 1 << 10

_TYPES = {"f32": np.dtype(np.float32), "i1": np.dtype(np.bool_), "i64": np.dtype(np.int64)}
_MEMORY = {"f32": "f32", "i1": "i8"}  # how each element type is stored (NumPy's bool: a byte)
LOWERING = ("builtin.module(convert-scf-to-cf, convert-math-to-llvm, convert-arith-to-llvm,"
            " convert-cf-to-llvm, convert-func-to-llvm, reconcile-unrealized-casts)")


def _element(t: ir.Type) -> str | None:
    """'f32' or 'i1' for a static ranked tensor of those, else None."""
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return None
    element = t.element_type  # (isinstance: 0.3 us, printing the type: 2.5 us)
    if isinstance(element, ir.F32Type):
        return "f32"
    return "i1" if isinstance(element, ir.IntegerType) and element.width == 1 \
        and element.is_signless else None


def storage(t: ir.Type) -> str | None:
    """What a kernel's argument of type `t` holds: `_element`'s types, or 'i64' (a
    pooling's indices, `window`)."""
    element = _element(t)
    if element is None and isinstance(t, ir.RankedTensorType) and t.has_static_shape \
            and isinstance(t.element_type, ir.IntegerType) and t.element_type.width == 64 \
            and t.element_type.is_signless:
        return "i64"
    return element


def _signature(op: ir.OpView) -> tuple[tuple[str, ...], str] | None:
    """The element types of a fusible op's operands and result, or None."""
    if len(op.results) != 1:
        return None
    types = [_element(v.type) for v in op.operands]
    result = _element(op.results[0].type)
    if result is None or None in types:
        return None
    name = op.operation.name
    if name == "ipu.cast":
        return (tuple(types), result) if len(types) == 1 else None
    if name == "ipu.reshape":  # adding or dropping leading size-1 dims: the same loop
        same = types == [result] and _core(op.operands[0].type.shape) == _core(
            op.results[0].type.shape)
        return ((result,), result) if same else None
    if name not in EMITTERS or tuple(types) != EMITTERS[name][1] or result != EMITTERS[name][2]:
        return None
    return tuple(types), result


def _core(shape) -> tuple[int, ...]:
    """`shape` without its leading size-1 dims: the loop nest is the same."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _broadcastable(source: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a value of `source` shape broadcasts to `shape` (NumPy's rule)."""
    return len(source) <= len(shape) and all(
        s in (1, d) for s, d in zip(source[::-1], shape[::-1], strict=False))


# reduction kind -> (the accumulator's first value, the combining arith op)
REDUCTIONS = {"sum": (0.0, "addf"), "max": (float("-inf"), "maximumf"),
              "min": (float("inf"), "minimumf")}


def _reduction(op: ir.Operation) -> tuple[int, ...] | None:
    """The dims of its operand `op` folds when it is an f32 `ipu.reduce` (sum, max or
    min) that a group may end with, else None: one that folds the last dim, so that the
    innermost loop runs along memory (a sum over the rows of a (256, 512) matrix, the
    columns kept, would fold each column with a stride of 512: 362 us against NumPy's
    25 us, which adds whole rows)."""
    if op.name != "ipu.reduce" or _element(op.operands[0].type) != "f32" \
            or _element(op.results[0].type) != "f32" \
            or op.attributes["kind"].value not in REDUCTIONS:
        return None
    rank = op.operands[0].type.rank
    dims = tuple(sorted({int(d) % rank for d in op.attributes["dims"]}))
    return dims if dims and dims[-1] == rank - 1 else None


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


def _facts(op: ir.Operation) -> tuple:
    """What `_through` needs of `op`: a slice's operand and starts, else each operand and
    its shape (read once: MLIR's attributes and types are slow to query)."""
    if op.name == "ipu.slice":
        return (op.operands[0], tuple(int(x) for x in op.attributes["starts"]))
    return tuple((value, tuple(value.type.shape)) for value in op.operands)


def _through(op: ir.Operation, offset: tuple[int, ...], view: tuple[int, ...],
             facts: dict[ir.Operation, tuple]
             ) -> list[tuple[ir.Value, tuple[int, ...], tuple[int, ...]]]:
    """Where an op computed inside a kernel (`inline`), read at `offset` over `view` of its
    result, reads each operand: a slice shifts the offset by its starts, a reshape adds
    or drops leading size-1 dims, an elementwise op reads each operand at the same place
    (right-aligned; index 0 along the operand's broadcast dims)."""
    if op not in facts:
        facts[op] = _facts(op)
    if op.name == "ipu.slice":
        source, starts = facts[op]
        return [(source, tuple(o + x for o, x in zip(offset, starts, strict=True)), view)]
    reads = []
    for value, shape in facts[op]:
        extra = len(offset) - len(shape)
        if extra >= 0:
            reads.append((value, tuple(0 if n == 1 else offset[extra + d]
                                       for d, n in enumerate(shape)),
                          tuple(1 if n == 1 else view[extra + d] for d, n in enumerate(shape))))
        else:  # a reshape dropping leading size-1 dims: read them at 0
            reads.append((value, (0,) * -extra + offset, (1,) * -extra + view))
    return reads


@dataclass(eq=False)
class Group:
    """Elementwise ops run as one fused kernel, in block order (or one pooling op: `kind`)."""

    shape: tuple[int, ...]
    ops: list[ir.Operation] = field(default_factory=list)
    absorbed: list[ir.Operation] = field(default_factory=list)  # `inline` ops it computes
    inputs: list[ir.Value] = field(default_factory=list)  # each array it reads, once
    reads: list[Read] = field(default_factory=list)
    outputs: list[ir.Value] = field(default_factory=list)
    layout: tuple | None = None  # `_access`'s answer, once asked
    # (value, offset, view) of an inline op's result -> where it reads its operands
    paths: dict[tuple, list[tuple]] = field(default_factory=dict)
    reduced: tuple[int, ...] = ()  # dims of `shape` its last op (an ipu.reduce) folds
    kind: str = "elementwise"  # or "window": one pooling op (`window`)
    # results stored straight into a concatenation of them (`into_concat`): the
    # concatenation's value (one of `outputs`), and each result's offset along its axis
    concat: ir.Value | None = None
    targets: dict[ir.Value, int] = field(default_factory=dict)

    @property
    def last(self) -> ir.Operation:
        return self.ops[-1]

    def worth(self) -> bool:
        elements = int(np.prod(self.shape, dtype=np.int64))
        computing = [op for op in self.ops if op.name != "ipu.reshape"]
        return elements >= FUSE_MIN_ELEMENTS and (
            len(computing) >= 2 or bool(self.reduced)
            or (computing and computing[0].name in COMPOSITE))


def _splat(value: ir.Value) -> float | bool | None:
    """The one value of a splat f32 or i1 `ipu.constant`, else None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "ipu.constant":
        return None
    attr = owner.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    element = _element(value.type)
    if element is None:
        return None
    splat = attr.get_splat_value()
    return bool(ir.BoolAttr(splat).value) if element == "i1" else ir.FloatAttr(splat).value


def _inline_candidates(block: ir.Block, reserved: set[ir.Operation],
                       fusible: dict[ir.Operation, bool]) -> set[ir.Operation]:
    """Ops that may be computed inside the kernels that read them rather than on their
    own (`inline`): splat constants, unit-step slices and fusible ops, each read only by
    fusible ops or other candidates, a fusible op only by other candidates (so that an
    LSTM's gate pre-activations, read through four slices, are computed inside the cell's
    kernel; a chain of fusible ops is a group instead)."""
    candidates: set[ir.Operation] = set()
    for op in reversed(list(block.operations)):
        op = op.operation
        if op in reserved or len(op.results) != 1 or _element(op.results[0].type) is None:
            continue
        readers = [use.owner.operation for use in op.results[0].uses]
        if not readers or any(r in reserved for r in readers):
            continue
        ours = [r in candidates or fusible.get(r, False) for r in readers]
        if op.name == "ipu.constant":
            ok = _splat(op.results[0]) is not None and all(ours)
        elif op.name == "ipu.slice":
            ok = all(int(x) == 1 for x in op.attributes["steps"]) and all(ours) \
                and _element(op.operands[0].type) is not None
        elif not fusible[op] or (op.name != "ipu.reshape" and not all(
                _broadcastable(tuple(v.type.shape), tuple(op.results[0].type.shape))
                for v in op.operands)):
            ok = False
        elif op.name == "ipu.reshape":
            ok = all(ours)
        else:
            ok = all(r in candidates for r in readers)
        if ok:
            candidates.add(op)
    return candidates


def find_groups(block: ir.Block, position: dict[ir.Operation, int],
                reserved: Iterable[ir.Operation] = ()) -> list[Group]:
    """The fusion groups of `block` worth a kernel, in block order. `reserved`: ops the
    JIT treats otherwise (a gradient's sum over replicas).

    Ops computed inside the kernels that read them (`Group.absorbed`) come from
    `_inline_candidates`, less those that turn out to be read by an op outside every
    kept group or would be computed at more places than their result has elements: the
    groups are found again without those until none is left."""
    reserved = set(reserved)
    fusible = {op.operation: _signature(op) is not None for op in block.operations}
    inline = _inline_candidates(block, reserved, fusible)
    facts: dict[ir.Operation, tuple] = {}
    while True:
        kept = [g for g in _form(block, position, reserved, inline, fusible) if g.worth()]
        members = {op for g in kept for op in g.ops}
        evaluated: dict[ir.Operation, int] = {}
        for group in kept:
            _connect(group, inline, evaluated, facts)
        bad = {op for op, n in evaluated.items()
               if n > int(np.prod(op.results[0].type.shape, dtype=np.int64))}
        changed = True
        while changed:  # an inline op read by an op that is not computed in a kernel
            left = inline - bad
            more = {op for op in left if any(
                use.owner.operation not in members and use.owner.operation not in left
                for use in op.results[0].uses)}
            changed = bool(more)
            bad |= more
        if not bad:
            return kept
        inline -= bad


def _form(block: ir.Block, position: dict[ir.Operation, int], reserved: set[ir.Operation],
          inline: set[ir.Operation], fusible: dict[ir.Operation, bool]) -> list[Group]:
    """Groups of fusible ops outside `reserved` and `inline`, in block order."""
    groups: list[Group] = []
    group_of: dict[ir.Operation, Group] = {}

    def read_early(members: set[ir.Operation], here: int) -> bool:
        """Whether an op outside `members` reads one of their values before `here`."""
        return any(use.owner.operation not in members
                   and position.get(use.owner.operation, here) < here
                   for member in members for result in member.results for use in result.uses)

    for op in block.operations:
        op = op.operation
        if op in reserved or op in inline:
            continue
        reduced = _reduction(op)
        if reduced is not None and not list(op.results[0].uses):
            continue  # dead: the NumPy call stays as it was
        if reduced is not None:  # ends the group of its operand (or one of its own)
            shape = tuple(op.operands[0].type.shape)
            source = op.operands[0].owner
            target = None if isinstance(source, ir.Block) else group_of.get(source.operation)
            if target is None or target.reduced or _core(target.shape) != _core(shape) \
                    or read_early(set(target.ops) | {op}, position[op]):
                target = Group(shape)
                groups.append(target)
            elif len(shape) > len(target.shape):
                target.shape = shape
            target.ops.append(op)
            extra = len(target.shape) - len(shape)  # the group's leading size-1 dims
            target.reduced = tuple(d + extra for d in reduced)
            group_of[op] = target
            continue
        if not fusible[op]:
            continue
        shape = tuple(op.results[0].type.shape)
        if op.name != "ipu.reshape" and not all(
                _broadcastable(tuple(v.type.shape), shape) for v in op.operands):
            continue
        here = position[op]
        candidates = sorted({group_of[v.owner.operation] for v in op.operands
                             if not isinstance(v.owner, ir.Block)
                             and v.owner.operation in group_of
                             and not group_of[v.owner.operation].reduced
                             and _core(group_of[v.owner.operation].shape) == _core(shape)},
                            key=lambda g: -position[g.last])
        # join every group it reads (they all run here then), else the latest it can
        joined = [] if not candidates or read_early(
            {m for g in candidates for m in g.ops} | {op}, here) else candidates
        if not joined:
            joined = [g for g in candidates if not read_early(set(g.ops) | {op}, here)][:1]
        if not joined and op.name == "ipu.reshape":
            continue  # a reshape only joins the group of its operand
        if joined:
            target = joined[0]
            if len(shape) > len(target.shape):
                target.shape = shape
            for other in joined[1:]:
                target.ops += other.ops
                groups.remove(other)
                group_of.update(dict.fromkeys(other.ops, target))
            target.ops.sort(key=position.__getitem__)
        else:
            target = Group(shape)
            groups.append(target)
        target.ops.append(op)
        group_of[op] = target
    return groups


def _connect(group: Group, inline: set[ir.Operation], evaluated: dict[ir.Operation, int],
             facts: dict[ir.Operation, tuple]) -> None:
    """Fill the group's absorbed ops (the `inline` ops its ops read, directly or through
    each other), its reads (the other values they reach, each at an offset and over a
    view), inputs (the arrays read) and outputs (its values read outside it). Counts in
    `evaluated` how many elements of each inline fusible op it computes."""
    members = set(group.ops)
    seen: set[tuple] = set()

    def visit(value: ir.Value, offset: tuple, view: tuple, inside: bool) -> None:
        key = (value, offset, view)
        if key in seen:
            return
        seen.add(key)
        owner = value.owner
        if not isinstance(owner, ir.Block) and owner.operation in members:
            # an inline op reading a member would read it at another element than the
            # loop computes; `_form` keeps such readers out (they read it early)
            assert not inside, owner
            return
        if not isinstance(owner, ir.Block) and owner.operation in inline:
            op = owner.operation
            if op not in group.absorbed:
                group.absorbed.append(op)
            if op.name == "ipu.constant":
                return
            if op.name not in ("ipu.slice", "ipu.reshape"):
                evaluated[op] = evaluated.get(op, 0) + int(np.prod(view, dtype=np.int64))
            group.paths[key] = _through(op, offset, view, facts)
            for read in group.paths[key]:
                visit(*read, True)
            return
        group.reads.append(Read(value, offset, view))
        if value not in group.inputs:
            group.inputs.append(value)

    for op in group.ops:
        for value in op.operands:
            visit(value, (0,) * value.type.rank, tuple(value.type.shape), False)
    for op in group.ops:
        for result in op.results:
            if any(use.owner.operation not in members for use in result.uses):
                group.outputs.append(result)


def row_strides(shape: tuple[int, ...]) -> list[int]:
    """The element strides of a C-contiguous array of `shape`."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


def _access(group: Group) -> tuple[tuple[int, ...], list[list[int]], list[int], int,
                                   list[int], list[int] | None]:
    """The loop nest of `group`: its shape's dims, those a reduction keeps first (in
    order) then those it folds, merged wherever every read and the results step through
    both contiguously; each read's stride per loop (0 where it broadcasts) and constant
    offset (a slice's start); how many outer loops the reduction keeps (all loops
    without one); the full-shape results' stride per loop; and the concatenation's
    (`Group.concat`) stride per loop, or None."""
    if group.layout is None:
        group.layout = _layout(group)
    return group.layout


def _layout(group: Group) -> tuple:
    shape = group.shape
    rank = len(shape)
    strides, offsets = [], []
    for item in group.reads:
        memory = tuple(item.value.type.shape)
        own = row_strides(memory)
        offsets.append(item.start)
        extra = len(memory) - rank  # dims beyond the loops' (an inline reshape's): one index
        if extra > 0:
            assert all(n == 1 for n in item.view[:extra]), item
            own, view = own[extra:], item.view[extra:]
        else:
            pad = (1,) * -extra
            own, view = row_strides(pad + memory), pad + item.view
        strides.append([0 if view[d] == 1 and shape[d] != 1 else own[d]
                        for d in range(rank)])
    if group.concat is not None:  # the concatenation's, merged with the reads'
        strides.append(row_strides(tuple(group.concat.type.shape)))
    strides.append(row_strides(shape))  # the results', merged with the reads'
    order = [d for d in range(rank) if d not in group.reduced] + list(group.reduced)
    boundary = rank - len(group.reduced)  # where the folded dims start in `order`
    loops: list[int] = []
    merged: list[list[int]] = [[] for _ in strides]
    kept = None  # how many outer loops a reduction keeps
    for position, d in enumerate(order):
        if position == boundary:
            kept = len(loops)
        # (a folded dim and a kept one stay apart: the fold is over whole loops)
        if loops and position != boundary and all(
                m[-1] == s[d] * shape[d] for m, s in zip(merged, strides, strict=True)):
            loops[-1] *= shape[d]
            for m, s in zip(merged, strides, strict=True):
                m[-1] = s[d]
        else:
            loops.append(shape[d])
            for m, s in zip(merged, strides, strict=True):
                m.append(s[d])
    if not loops:  # a rank-0 group: one iteration
        loops, merged = [1], [[0] for _ in strides]
    reads = len(group.reads)
    return (tuple(loops), merged[:reads], offsets, len(loops) if kept is None else kept,
            merged[-1], merged[reads] if group.concat is not None else None)


def _apply(body: Body, op: ir.Operation, operands: list[str]) -> str:
    """The scalar IR of fusible op `op` on `operands` (SSA names)."""
    if op.name in ("ipu.reshape", "ipu.slice"):
        return operands[0]
    if op.name == "ipu.cast":
        return scalar_ir.cast(body, operands[0], _element(op.operands[0].type),
                              _element(op.results[0].type))
    return EMITTERS[op.name][0](body, *operands)


def _function(name: str, group: Group) -> str:
    """The kernel of `group` as a func.func: pointer arguments (inputs, then outputs), the
    number of replicas, each input's replica stride (0: the input has none) and each
    read's offset. A group ending in a reduction folds its inner loops into an
    accumulator (`iter_args`), stored once per element of the outer ones."""
    loops, strides, _, kept, out_strides, concat_strides = _access(group)
    size = int(np.prod(group.shape, dtype=np.int64))
    n_in, n_out = len(group.inputs), len(group.outputs)
    args = [f"%in{i}: !llvm.ptr {{llvm.noalias}}" for i in range(n_in)]
    args += [f"%out{i}: !llvm.ptr {{llvm.noalias}}" for i in range(n_out)]
    args += ["%replicas: i64"] + [f"%step{i}: i64" for i in range(n_in)]
    args += [f"%off{j}: i64" for j in range(len(group.reads))]
    lines = [f"  func.func @{name}({', '.join(args)}) {{",
             "    %c0 = arith.constant 0 : i64", "    %c1 = arith.constant 1 : i64"]
    indent = "    "
    reduction = group.last if group.reduced else None
    if reduction is not None:
        first, combine = REDUCTIONS[reduction.attributes["kind"].value]
        lines.append(f"{indent}%init = arith.constant {scalar_ir.f32_literal(first)} : f32")
    lines.append(f"{indent}scf.for %r = %c0 to %replicas step %c1 : i64 {{")
    indent += "  "
    for i in range(n_in):
        lines.append(f"{indent}%r{i} = arith.muli %r, %step{i} : i64")
    base = []  # each read's index into its input, as the loops go in
    for j, item in enumerate(group.reads):
        lines.append(f"{indent}%b{j}_0 = arith.addi %r{group.inputs.index(item.value)}, "
                     f"%off{j} : i64")
        base.append(f"%b{j}_0")
    lines.append(f"{indent}%n{size}_ = arith.constant {size} : i64")
    lines.append(f"{indent}%ob_0 = arith.muli %r, %n{size}_ : i64")
    out_base = "%ob_0"
    if group.concat is not None:
        whole = int(np.prod(group.concat.type.shape, dtype=np.int64))
        lines.append(f"{indent}%nc_ = arith.constant {whole} : i64")
        lines.append(f"{indent}%cb_0 = arith.muli %r, %nc_ : i64")
    if reduction is not None:  # the folded result's index: over the kept loops
        folded = int(np.prod(loops[:kept], dtype=np.int64))
        lines.append(f"{indent}%nr_ = arith.constant {folded} : i64")
        lines.append(f"{indent}%rb_0 = arith.muli %r, %nr_ : i64")
        fold_strides = row_strides(loops[:kept])
    for d, extent in enumerate(loops):
        lines.append(f"{indent}%e{d} = arith.constant {extent} : i64")
        if reduction is not None and d >= kept:
            start = "%init" if d == kept else f"%a{d - 1}"
            lines.append(f"{indent}%acc{d} = scf.for %i{d} = %c0 to %e{d} step %c1 "
                         f"iter_args(%a{d} = {start}) -> (f32) : i64 {{")
        else:
            lines.append(f"{indent}scf.for %i{d} = %c0 to %e{d} step %c1 : i64 {{")
        indent += "  "
        for j in range(len(group.reads)):
            stride = strides[j][d]
            if stride:
                lines.append(f"{indent}%s{j}_{d} = arith.constant {stride} : i64")
                lines.append(f"{indent}%m{j}_{d} = arith.muli %i{d}, %s{j}_{d} : i64")
                lines.append(f"{indent}%b{j}_{d + 1} = arith.addi {base[j]}, %m{j}_{d} : i64")
                base[j] = f"%b{j}_{d + 1}"
        lines.append(f"{indent}%os_{d} = arith.constant {out_strides[d]} : i64")
        lines.append(f"{indent}%om_{d} = arith.muli %i{d}, %os_{d} : i64")
        lines.append(f"{indent}%ob_{d + 1} = arith.addi {out_base}, %om_{d} : i64")
        out_base = f"%ob_{d + 1}"
        if group.concat is not None:
            lines.append(f"{indent}%cs_{d} = arith.constant {concat_strides[d]} : i64")
            lines.append(f"{indent}%cm_{d} = arith.muli %i{d}, %cs_{d} : i64")
            lines.append(f"{indent}%cb_{d + 1} = arith.addi %cb_{d}, %cm_{d} : i64")
        if reduction is not None and d < kept:
            lines.append(f"{indent}%rs_{d} = arith.constant {fold_strides[d]} : i64")
            lines.append(f"{indent}%rm_{d} = arith.muli %i{d}, %rs_{d} : i64")
            lines.append(f"{indent}%rb_{d + 1} = arith.addi %rb_{d}, %rm_{d} : i64")
    body = Body(indent)
    values: dict[ir.Value, str] = {}
    read: dict[tuple, str] = {}
    for j, item in enumerate(group.reads):
        element = _element(item.value.type)
        memory = _MEMORY[element]
        pointer = f"%in{group.inputs.index(item.value)}"
        lines.append(f"{indent}%p{j} = llvm.getelementptr {pointer}[{base[j]}] : "
                     f"(!llvm.ptr, i64) -> !llvm.ptr, {memory}")
        lines.append(f"{indent}%l{j} = llvm.load %p{j} : !llvm.ptr -> {memory}")
        if element == "i1":
            lines.append(f"{indent}%v{j} = arith.trunci %l{j} : i8 to i1")
            read[item.key] = f"%v{j}"
        else:
            read[item.key] = f"%l{j}"
    absorbed = set(group.absorbed)

    def scalar(value: ir.Value, offset: tuple, view: tuple) -> str:
        """The SSA name of `value` at `offset` over `view` in this iteration."""
        key = (value, offset, view)
        if key in read:
            return read[key]
        owner = value.owner
        if value in values:  # a member's result
            name = values[value]
        elif owner.name == "ipu.constant":  # absorbed: a splat
            literal = _splat(value)
            name = body.const(literal) if _element(value.type) == "f32" else \
                body.emit(f"arith.constant {str(literal).lower()}")
        else:  # an inline op: computed here
            assert owner.operation in absorbed, owner
            name = _apply(body, owner, [scalar(*r) for r in group.paths[key]])
        read[key] = name
        return name

    for op in group.ops:
        operands = [scalar(v, (0,) * v.type.rank, tuple(v.type.shape)) for v in op.operands]
        if reduction is not None and op == reduction:  # reassociation: LLVM vectorises it
            folded_value = body.emit(f"arith.{combine} %a{len(loops) - 1}, {operands[0]} "
                                     f"fastmath<reassoc> : f32")
        else:
            values[op.results[0]] = _apply(body, op, operands)
    lines += body.lines
    stores = []  # (output, value, index)
    for j, value in enumerate(group.outputs):
        if reduction is not None and value == reduction.results[0]:
            continue  # stored once its loops are done
        if group.concat is not None and value == group.concat:  # each result in its place
            for k, (part, offset) in enumerate(group.targets.items()):
                lines.append(f"{indent}%co{k} = arith.constant {offset} : i64")
                lines.append(f"{indent}%ci{k} = arith.addi %cb_{len(loops)}, %co{k} : i64")
                stores.append((j, part, f"%ci{k}"))
        else:
            stores.append((j, value, out_base))
    for n, (j, value, index) in enumerate(stores):
        element = _element(value.type)
        memory = _MEMORY[element]
        stored = values[value]
        if element == "i1":
            lines.append(f"{indent}%w{n} = arith.extui {stored} : i1 to i8")
            stored = f"%w{n}"
        lines.append(f"{indent}%q{n} = llvm.getelementptr %out{j}[{index}] : "
                     f"(!llvm.ptr, i64) -> !llvm.ptr, {memory}")
        lines.append(f"{indent}llvm.store {stored}, %q{n} : {memory}, !llvm.ptr")
    for d in reversed(range(len(loops))):
        if reduction is not None and d >= kept:
            yielded = folded_value if d == len(loops) - 1 else f"%acc{d + 1}"
            lines.append(f"{indent}scf.yield {yielded} : f32")
        indent = indent[:-2]
        lines.append(f"{indent}}}")
        if reduction is not None and d == kept and reduction.results[0] in group.outputs:
            j = group.outputs.index(reduction.results[0])
            lines.append(f"{indent}%q{len(stores)} = llvm.getelementptr %out{j}[%rb_{kept}] : "
                         f"(!llvm.ptr, i64) -> !llvm.ptr, f32")
            lines.append(f"{indent}llvm.store %acc{kept}, %q{len(stores)} : f32, !llvm.ptr")
    lines += [f"{indent[:-2]}}}", "    return", "  }"]
    return "\n".join(lines)


def kernel_module(groups: list[Group]) -> tuple[str, list[int]]:
    """The kernel module of `groups` and each group's function number: function
    `fused_<i>` for the i-th distinct kernel (an LSTM's steps share one)."""
    functions: dict[str, int] = {}
    numbers = []
    from poptorch.runtime.jit.codegen import window  # (it builds on this module)

    for group in groups:
        text = _function("NAME", group) if group.kind == "elementwise" else \
            window.function("NAME", group)
        numbers.append(functions.setdefault(text, len(functions)))
    body = [text.replace("@NAME(", f"@fused_{i}(", 1) for text, i in functions.items()]
    return "module {\n" + "\n".join(body) + "\n}\n", numbers


class FusedKernel:
    """One group's compiled function, called on NumPy arrays: `outputs = kernel(*inputs)`.

    An input may have leading (replica) axes beyond its declared shape; inputs that have
    them share them, and the outputs get them. The function is MLIR's packed interface
    (one array of pointers to the arguments), called through cffi: it takes an array's
    address 5x faster than ctypes (0.5 against 2.4 us)."""

    def __init__(self, code, address: int, group: Group,
                 io: tuple[list, list] | None = None) -> None:
        """`io`: the function's inputs [(size, rank, dtype)] and outputs [(shape, dtype)]
        when they are not the group's values' (`window.io`)."""
        self.code = code  # the engine or library holding the machine code: kept alive
        if io is None:
            io = ([(int(np.prod(v.type.shape, dtype=np.int64)), v.type.rank,
                    _TYPES[storage(v.type)]) for v in group.inputs],
                  [(tuple(v.type.shape), _TYPES[storage(v.type)]) for v in group.outputs])
        self.spec = io[0]
        self.shapes = [shape for shape, _ in io[1]]
        self.outputs = [dtype for _, dtype in io[1]]
        n_in, n_out = len(self.spec), len(self.outputs)
        self.pointers = _FFI.new("void *[]", n_in + n_out)
        # replicas, each input's step, each read's offset (arguments, so that kernels
        # that differ only in where they read, as an LSTM's steps, share one function)
        offsets = [item.start for item in group.reads]  # (not `_access`: a warm
        # compile skips the layout)
        self.integers = _FFI.new("int64_t[]", [1] + [0] * n_in + offsets)
        self.packed = _FFI.new("void *[]", [_FFI.addressof(self.pointers, i)
                                            for i in range(n_in + n_out)]
                               + [_FFI.addressof(self.integers, i)
                                  for i in range(1 + n_in + len(offsets))])
        self.call = _FFI.cast("void (*)(void **)", address)
        # each seen set of input shapes -> (the integers, the output shapes): its calls
        # take the fast path, which skips the general path's checks (an LSTM step's bias
        # adds, a 3 us kernel: 12.5 -> 8.7 us a call)
        self.plans: dict[tuple, tuple[list[int], list[tuple]]] = {}
        self.last: tuple | None = None  # the plan the integers hold

    def __call__(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        try:
            shapes = tuple([a.shape for a in arrays])
        except AttributeError:
            return self._general(arrays)
        plan = self.plans.get(shapes)
        if plan is None:
            return self._general(arrays)
        pointers = self.pointers
        for i, (a, (_, _, dtype)) in enumerate(zip(arrays, self.spec, strict=True)):
            if type(a) is not np.ndarray or a.dtype != dtype or not a.flags.c_contiguous:
                return self._general(arrays)
            pointers[i] = _FFI.from_buffer(a)
        if plan is not self.last:
            self.integers[0:len(plan[0])] = plan[0]
            self.last = plan
        n = len(arrays)
        results = []
        for shape, dtype in plan[1]:
            result = np.empty(shape, dtype)
            pointers[n] = _FFI.from_buffer(result)
            n += 1
            results.append(result)
        self.call(self.packed)
        return tuple(results)

    def _general(self, arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Any inputs (converted to C-contiguous arrays of the declared types); learns the
        plan of their shapes for the fast path when none needed converting."""
        lead: tuple[int, ...] = ()
        replicas = 1
        pointers, integers = self.pointers, self.integers
        kept = []
        for i, (a, (size, rank, dtype)) in enumerate(zip(arrays, self.spec, strict=True)):
            if type(a) is not np.ndarray or a.dtype != dtype or not a.flags.c_contiguous:
                a = np.ascontiguousarray(a, dtype)
                kept.append(a)  # alive until the call is done
            if a.size != size:
                extra = a.shape[: a.ndim - rank]
                if lead and extra != lead:
                    raise Error(f"a fused kernel's operands have leading axes {lead} and "
                                f"{extra}", type="runtime")
                lead, replicas = extra, a.size // size
                integers[i + 1] = size
            else:
                integers[i + 1] = 0
            pointers[i] = _FFI.from_buffer(a)
        results = tuple(np.empty(lead + shape, dtype)
                        for shape, dtype in zip(self.shapes, self.outputs, strict=True))
        if results[0].size == 0:
            return results
        n_in = len(arrays)
        for j, result in enumerate(results):
            pointers[n_in + j] = _FFI.from_buffer(result)
        integers[0] = replicas
        self.last = None
        if not kept:
            plan = (list(integers[0:1 + n_in]), [(r.shape, r.dtype) for r in results])
            self.plans[tuple(a.shape for a in arrays)] = self.last = plan
        self.call(self.packed)
        return results


@dataclass
class Kernels:
    """A program's compiled kernels: `ir` is the kernel module before lowering."""

    ir: str
    kernels: list[FusedKernel]


# The executable cache directory of the compile in progress, if any: compiled kernel
# modules are kept there as shared objects, so that a warm compile loads them.
_DIRECTORY: contextvars.ContextVar[str | None] = contextvars.ContextVar("kernels", default=None)


@contextlib.contextmanager
def kernel_directory(directory: str | None):
    """Keep and load compiled kernel modules in `directory` within this block."""
    token = _DIRECTORY.set(directory)
    try:
        yield
    finally:
        _DIRECTORY.reset(token)


@functools.cache
def _host() -> str:
    """What compiled code depends on besides its IR: the LLVM in torch-mlir (its version)
    and the host CPU it targeted (the ExecutionEngine compiles for the host's features)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        cpu = ""
    return f"{torch_mlir_version()} {platform.machine()} {cpu}"


def _link(engine, path: str) -> None:
    """Write the engine's machine code as the shared object `path`, linked by the
    system's C compiler driver; nothing when there is none or linking fails (the next
    process compiles again)."""
    driver = shutil.which("cc")
    if driver is None:
        return
    # a cold compile runs before the executable cache stores its entry (and makes the
    # directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as scratch:
        obj, lib = os.path.join(scratch, "k.o"), os.path.join(scratch, "k.so")
        engine.dump_to_object_file(obj)
        done = subprocess.run([driver, "-shared", "-o", lib, obj], capture_output=True,
                              timeout=60)
        if done.returncode == 0:
            os.replace(lib, path)


@functools.cache
def _generator() -> str:
    """A digest of the JIT's code (every file of `poptorch.runtime.jit`: the grouping,
    the emitters, the kernels and the constants they use): an index entry
    (`compile_kernels`) holds only for the code that wrote it."""
    jit = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(jit, "**", "*.py"), recursive=True)):
        digest.update(os.path.relpath(path, jit).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def _index_path(directory: str, key: str) -> str:
    digest = hashlib.sha256(f"{_host()}\n{LOWERING}\n{_generator()}\n{key}".encode())
    return os.path.join(directory, f"kernels-{digest.hexdigest()[:32]}.json")


def _load(path: str, groups: list[Group], numbers: list[int], text: str
          ) -> Kernels | None:
    """The kernels of `groups` from the shared object at `path`, or None when it is
    missing, damaged or foreign (then they are compiled again and it is replaced)."""
    if not os.path.exists(path):
        return None
    try:
        library = ctypes.CDLL(path)
        addresses = [ctypes.cast(library[f"_mlir_fused_{i}"], ctypes.c_void_p).value
                     for i in range(max(numbers) + 1)]
    except (OSError, AttributeError):
        return None
    return Kernels(text, [_kernel(library, addresses[number], group)
                          for group, number in zip(groups, numbers, strict=True)])


def read_index(key: str) -> dict | None:
    """The index entry an earlier compile of the module `key` kept in the executable
    cache directory (`compile_kernels`), or None. It is JSON: the shared object's name,
    each group's function number, the kernel IR and the groups themselves
    (`groups_data`), found by SHA-256 over the module's text and the code that found
    the groups and wrote their IR (`_generator`)."""
    directory = _DIRECTORY.get()
    if not directory:
        return None
    try:
        with open(_index_path(directory, key), encoding="utf-8") as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    if not (isinstance(entry, dict) and isinstance(entry.get("library"), str)
            and re.fullmatch(r"kernels-[0-9a-f]{32}\.so", entry["library"])
            and isinstance(entry.get("ir"), str) and isinstance(entry.get("numbers"), list)
            and all(type(n) is int and n >= 0 for n in entry["numbers"])
            and isinstance(entry.get("functions"), list)):
        return None
    return entry


def groups_data(groups: list[Group], block: ir.Block) -> list[dict]:
    """`groups` of `block` as JSON data: ops by their place in the block, values as
    [op, result] or [-1, argument]. Layouts are left out (derived when asked)."""
    index = {op.operation: i for i, op in enumerate(block.operations)}

    def ref(value: ir.Value) -> list[int]:
        if isinstance(value.owner, ir.Block):
            return [-1, value.arg_number]
        return [index[value.owner.operation], value.result_number]

    def read(value: ir.Value, offset: tuple, view: tuple) -> list:
        return [ref(value), list(offset), list(view)]

    return [{"shape": list(g.shape), "ops": [index[op] for op in g.ops],
             "absorbed": [index[op] for op in g.absorbed],
             "inputs": [ref(v) for v in g.inputs], "reads": [read(*r.key) for r in g.reads],
             "outputs": [ref(v) for v in g.outputs], "reduced": list(g.reduced),
             "kind": g.kind,
             "concat": None if g.concat is None else ref(g.concat),
             "targets": [[ref(v), offset] for v, offset in g.targets.items()],
             "paths": [[read(*key), [read(*r) for r in reads]]
                       for key, reads in g.paths.items()]}
            for g in groups]


def groups_from(data: list[dict], block: ir.Block) -> list[Group]:
    """The inverse of `groups_data` on the same block; ValueError, KeyError, TypeError or
    IndexError when the data does not fit it. (The data is only ever what `groups_data`
    wrote for this module's text, so its numbers are not checked one by one.)"""
    ops = [op.operation for op in block.operations]
    arguments = list(block.arguments)

    def at(items, i: int):
        if not 0 <= i < len(items):
            raise IndexError(i)
        return items[i]

    def value(ref: list) -> ir.Value:
        op, number = ref
        return at(arguments, number) if op == -1 else at(at(ops, op).results, number)

    def read(item: list) -> tuple:
        where, offset, view = item
        return value(where), tuple(offset), tuple(view)

    groups = []
    for g in data:
        group = Group(tuple(g["shape"]), [at(ops, i) for i in g["ops"]],
                      [at(ops, i) for i in g["absorbed"]], [value(r) for r in g["inputs"]],
                      [Read(*read(r)) for r in g["reads"]], [value(r) for r in g["outputs"]],
                      reduced=tuple(g["reduced"]), kind=g["kind"])
        if group.kind not in ("elementwise", "window"):
            raise ValueError(f"a group of kind {group.kind!r}")
        group.paths = {read(key): [read(r) for r in reads] for key, reads in g["paths"]}
        if g["concat"] is not None:
            group.concat = value(g["concat"])
            group.targets = {value(r): int(offset) for r, offset in g["targets"]}
        if not group.ops or not group.outputs:
            raise ValueError("a group without ops or results")
        groups.append(group)
    return groups


def _write_index(directory: str, key: str, library: str, numbers: list[int], text: str,
                 functions: list[list[dict]]) -> None:
    """Write the index entry of module `key` atomically (a reader never sees a part)."""
    path = _index_path(directory, key)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".kernels-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"library": library, "numbers": numbers, "ir": text,
                       "functions": functions}, f)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def compile_kernels(groups: list[Group], context: ir.Context, key: str | None = None,
                    functions: list[list[dict]] | None = None,
                    index: dict | None = None) -> Kernels:
    """Lower and compile the kernel module of `groups` with MLIR's ExecutionEngine, or
    load it from the executable cache directory (`kernel_directory`) when an earlier
    process kept it there.

    Kept there: the shared object `kernels-<digest of its IR>.so` and, when the caller
    gives `key` (text that determines the groups: the printed module they come from)
    and `functions` (`groups_data` of each function's groups), an index entry
    `kernels-<digest of key>.json` (`read_index`). A warm compile that took its groups
    from the `index` entry loads their kernels without generating their IR (an LSTM's
    16 kernels: 20-25 ms)."""
    directory = _DIRECTORY.get()
    if directory and index is not None and len(index["numbers"]) == len(groups):
        kernels = _load(os.path.join(directory, index["library"]), groups, index["numbers"],
                        index["ir"])
        if kernels is not None:
            return kernels
    text, numbers = kernel_module(groups)
    path = None
    kernels = None
    if directory:
        digest = hashlib.sha256(f"{_host()}\n{LOWERING}\n{text}".encode()).hexdigest()[:32]
        path = os.path.join(directory, f"kernels-{digest}.so")
        kernels = _load(path, groups, numbers, text)
    if kernels is None:
        from torch_mlir.execution_engine import ExecutionEngine

        with context:
            module = ir.Module.parse(text)
            passmanager.PassManager.parse(LOWERING).run(module.operation)
            engine = ExecutionEngine(module, opt_level=3)
        addresses = [engine.raw_lookup(f"fused_{i}") for i in range(max(numbers) + 1)]
        if path:
            try:
                _link(engine, path)
            except (OSError, subprocess.SubprocessError):
                pass
        kernels = Kernels(text, [_kernel(engine, addresses[number], group)
                                 for group, number in zip(groups, numbers, strict=True)])
    if path and key is not None and functions is not None and os.path.exists(path):
        _write_index(directory, key, os.path.basename(path), numbers, text, functions)
    return kernels


def _kernel(code, address: int, group: Group):
    """What the program calls for `group`: its FusedKernel, or for a window group what
    `window.call` builds on it."""
    if group.kind == "elementwise":
        return FusedKernel(code, address, group)
    from poptorch.runtime.jit.codegen import window

    return window.call(FusedKernel(code, address, group, window.io(group)), group)
