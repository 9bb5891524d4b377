"""Grouping: which elementwise ipu ops (and a reduction ending them) run as one fused
kernel (`find_groups`), what each group reads and where, and which ops are computed
inside the kernels that read them (`Group.absorbed`).

What is grouped: ops with a scalar emitter (`scalar_ir.EMITTERS`) on f32 and i1 tensors
of one static result shape, each reading the others' results or values made outside
the group (those may broadcast: size-1 or missing dimensions). A group runs where its
last op was, so it may only take in an op when nothing outside it reads its values
before that op.

Some ops are computed inside the kernels that read them instead (`inline`): a slice
with unit steps is read in place (an LSTM cell's four gates are slices of one tensor),
so is a broadcast (its operand read with stride 0 along the new dims: the backward of
a transformer's fused QKV projection selects among three broadcasts of (32, 32, 128),
which the kernel's call copied to contiguous arrays first), a splat constant becomes a
literal, and a fusible op read only through such ops is
computed where it is read, at most once per element (an LSTM's gate sums: the input
projection's bias add, read a step at a time, and each step's add, read a gate at a
time). A reshape that splits rows into leading dims is read through when every reader
slices one row of them but the last (a stacked LSTM's second layer projects all steps'
outputs as one matrix, then views it by step).

A sum, max or min (`scalar_ir.REDUCTIONS`) over dims that include the last one ends the
group of its operand (softmax's row max, layer norm's row sums).

Groups smaller than FUSE_MIN_ELEMENTS are left to NumPy (compiling a kernel costs 10-20
ms, which small tensors never repay), unless at least FUSE_MIN_REPEATS groups of the
block have the same ops on the same shapes (an unrolled recurrence's steps, a stack of
identical layers): they share one kernel function, and each call saves a NumPy call per
op (the LSTM classifier of the model zoo at batch 1: 20 cells of 24 elements, 13 NumPy
calls each, 2.0 -> 0.77 ms an inference). Single ops that are one NumPy pass
(`scalar_ir.COMPOSITE`) are left to NumPy too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.creation import ConstantOp
from poptorch.dialects.data_movement import BroadcastOp, ReshapeOp, SliceOp
from poptorch.dialects.elementwise import CastOp
from poptorch.dialects.reduction import ReduceOp
from poptorch.runtime.jit.codegen.fusion.group import (
    FUSE_MIN_ELEMENTS,
    FUSE_MIN_REPEATS,
    Group,
    Read,
    broadcastable,
    core,
    element_type,
    row_strides,
    splat,
)
from poptorch.runtime.jit.codegen.scalar_ir import COMPOSITE, EMITTERS, REDUCTIONS


def _signature(op: ir.OpView) -> tuple[tuple[str, ...], str] | None:
    """The element types of a fusible op's operands and result, or None."""
    if len(op.results) != 1:
        return None
    types = [element_type(v.type) for v in op.operands]
    result = element_type(op.results[0].type)
    if result is None or None in types:
        return None
    cls = op_class(op)
    if cls is CastOp:
        return (tuple(types), result) if len(types) == 1 else None
    if cls is ReshapeOp:  # adding or dropping leading size-1 dims: the same loop
        same = types == [result] and core(op.operands[0].type.shape) == core(
            op.results[0].type.shape)
        return ((result,), result) if same else None
    emitter = EMITTERS.get(cls)
    if emitter is None or tuple(types) != emitter[1] or result != emitter[2]:
        return None
    return tuple(types), result


def _reduction(op: ir.Operation) -> tuple[int, ...] | None:
    """The dims of its operand `op` folds when it is an f32 `ipu.reduce` (sum, max or
    min) that a group may end with, else None: one that folds the last dim, so that the
    innermost loop runs along memory (a sum over the rows of a (256, 512) matrix, the
    columns kept, would fold each column with a stride of 512: 362 us against NumPy's
    25 us, which adds whole rows)."""
    if op_class(op) is not ReduceOp or element_type(op.operands[0].type) != "f32" \
            or element_type(op.results[0].type) != "f32" \
            or op.attributes["kind"].value not in REDUCTIONS:
        return None
    rank = op.operands[0].type.rank
    dims = tuple(sorted({int(d) % rank for d in op.attributes["dims"]}))
    return dims if dims and dims[-1] == rank - 1 else None



def _facts(op: ir.Operation) -> tuple:
    """What `_through` needs of `op`: a slice's operand and starts, else each operand and
    its shape (read once: MLIR's attributes and types are slow to query)."""
    if op_class(op) is SliceOp:
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
    if op_class(op) is SliceOp:
        source, starts = facts[op]
        return [(source, tuple(o + x for o, x in zip(offset, starts, strict=True)), view)]
    lead = _leading(op)
    if lead is not None:  # a run of rows (`_split_rows`: one row of each leading dim but
        # the last, read through a slice)
        assert len(offset) == len(op.results[0].type.shape), (op, offset)
        rows = tuple(op.results[0].type.shape[:lead])
        first = sum(o * s for o, s in zip(offset[:lead], row_strides(rows), strict=True))
        return [(op.operands[0], (first,) + offset[lead:], (view[lead - 1],) + view[lead:])]
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



def _small(group: Group) -> bool:
    return int(np.prod(group.shape, dtype=np.int64)) < FUSE_MIN_ELEMENTS


def _structure(group: Group) -> tuple:
    """What repeated groups have in common: their computing ops and the shapes they read
    (an LSTM's steps differ only in which arrays they read, its last step in the reshape
    of its result)."""
    return (core(group.shape), tuple(
        (op.name, tuple(tuple(v.type.shape) for v in op.operands))
        for op in group.ops if op_class(op) is not ReshapeOp))


def _worth(group: Group, repeats: Counter) -> bool:
    """Whether `group` repays compiling: big enough or repeated (`repeats`: how many
    small groups have each `_structure`), and more than one NumPy pass."""
    if _small(group) and repeats[_structure(group)] < FUSE_MIN_REPEATS:
        return False
    computing = [op for op in group.ops if op_class(op) is not ReshapeOp]
    return len(computing) >= 2 or bool(group.reduced) \
        or bool(computing and op_class(computing[0]) in COMPOSITE)


def _leading(op: ir.Operation) -> int | None:
    """How many leading dims a reshape splits its operand's first dim into, keeping the
    rest ((2560, 96) -> (10, 256, 96): 2), when it does so into at least 2 dims that are
    not all but one of size 1 (those a fusible reshape adds), else None."""
    if op_class(op) is not ReshapeOp:
        return None
    source, result = tuple(op.operands[0].type.shape), tuple(op.results[0].type.shape)
    lead = len(result) - len(source) + 1
    if not source or lead < 2 or core(source) == core(result) or result[lead:] != source[1:] \
            or int(np.prod(result[:lead], dtype=np.int64)) != source[0] \
            or element_type(op.operands[0].type) != element_type(op.results[0].type):
        return None
    return lead


def _split_rows(op: ir.Operation, readers: list[ir.Operation],
                candidates: set[ir.Operation]) -> bool:
    """Whether `op` is a reshape splitting its operand's rows (`_leading`) that only
    candidate slices read, each one row of its leading dims but the last: each slice is
    then a run of the operand's rows (a stacked LSTM's second layer: its input
    projection's bias add, a (steps x batch, 4 x hidden) matrix viewed by step, is
    computed where each step's kernel reads it, `_through`)."""
    lead = _leading(op)
    if lead is None:
        return False
    for reader in readers:
        if reader not in candidates or op_class(reader) is not SliceOp:
            return False
        starts, ends = (tuple(int(x) for x in reader.attributes[n]) for n in ("starts",
                                                                               "ends"))
        if any(e - s != 1 for s, e in zip(starts[:lead - 1], ends[:lead - 1], strict=True)):
            return False
    return True


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
        if op in reserved or len(op.results) != 1 or element_type(op.results[0].type) is None:
            continue
        readers = [use.owner.operation for use in op.results[0].uses]
        if not readers or any(r in reserved for r in readers):
            continue
        ours = [r in candidates or fusible.get(r, False) for r in readers]
        if op_class(op) is ConstantOp:
            ok = splat(op.results[0]) is not None and all(ours)
        elif op_class(op) is SliceOp:
            ok = all(int(x) == 1 for x in op.attributes["steps"]) and all(ours) \
                and element_type(op.operands[0].type) is not None
        elif _split_rows(op, readers, candidates):
            ok = True
        elif op_class(op) is BroadcastOp:  # read in place: stride 0 along the new dims
            ok = all(ours) and element_type(op.operands[0].type) is not None \
                and broadcastable(tuple(op.operands[0].type.shape),
                                  tuple(op.results[0].type.shape))
        elif not fusible[op] or (op_class(op) is not ReshapeOp and not all(
                broadcastable(tuple(v.type.shape), tuple(op.results[0].type.shape))
                for v in op.operands)):
            ok = False
        elif op_class(op) is ReshapeOp:
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
        formed = _form(block, position, reserved, inline, fusible)
        repeats = Counter(_structure(g) for g in formed if _small(g))
        kept = [g for g in formed if _worth(g, repeats)]
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
            if target is None or target.reduced or core(target.shape) != core(shape) \
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
        if op_class(op) is not ReshapeOp and not all(
                broadcastable(tuple(v.type.shape), shape) for v in op.operands):
            continue
        here = position[op]
        candidates = sorted({group_of[v.owner.operation] for v in op.operands
                             if not isinstance(v.owner, ir.Block)
                             and v.owner.operation in group_of
                             and not group_of[v.owner.operation].reduced
                             and core(group_of[v.owner.operation].shape) == core(shape)},
                            key=lambda g: -position[g.last])
        # join every group it reads (they all run here then), else the latest it can
        joined = [] if not candidates or read_early(
            {m for g in candidates for m in g.ops} | {op}, here) else candidates
        if not joined:
            joined = [g for g in candidates if not read_early(set(g.ops) | {op}, here)][:1]
        if not joined and op_class(op) is ReshapeOp:
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
            if op_class(op) is ConstantOp:
                return
            if op_class(op) not in (SliceOp, ReshapeOp, BroadcastOp):
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

