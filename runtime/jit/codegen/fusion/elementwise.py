"""The emitter of elementwise groups: a group's kernel function in MLIR's arith, math,
scf and llvm dialects, nested loops over the group's result shape whose body is the
group's ops on scalars (`scalar_ir`).

A NumPy kernel makes one pass over memory per op (GELU's erf alone is 28), so a chain of
elementwise ops costs a pass, a temporary and 5-25 us of call overhead per op; here it
is one loop nest, which LLVM vectorises. Where a kernel reads is an argument
(`%off<j>`), so an LSTM's steps share one kernel function.

A group ending in a reduction runs its loops over the dims it keeps first, then folds
the others into an accumulator, stored once per element of the kept ones (batch norm's
sums over N, H and W of NCHW, one channel at a time). The fold is reassociated, which
lets LLVM vectorise it: a sum differs from NumPy's pairwise sum by rounding (within
2e-6 relative in the tests); max and min are exact and keep NaN.

Results of a group that only a concatenation of them reads (an LSTM's backward gate
gradients) are stored by the kernel straight into their places in it (`Group.concat`).
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.creation import ConstantOp
from poptorch.dialects.data_movement import BroadcastOp, ReshapeOp, SliceOp
from poptorch.dialects.elementwise import CastOp
from poptorch.runtime.jit.codegen import scalar_ir
from poptorch.runtime.jit.codegen.fusion.group import (
    MEMORY,
    Group,
    element_type,
    row_strides,
    splat,
)
from poptorch.runtime.jit.codegen.scalar_ir import EMITTERS, REDUCTIONS, Body


def access(group: Group) -> tuple[tuple[int, ...], list[list[int]], list[int], int,
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
    cls = op_class(op)
    if cls in (ReshapeOp, SliceOp, BroadcastOp):
        return operands[0]
    if cls is CastOp:
        return scalar_ir.cast(body, operands[0], element_type(op.operands[0].type),
                              element_type(op.results[0].type))
    return EMITTERS[cls][0](body, *operands)


def _outer(loops: list[int], kept: int) -> int:
    """The outer parallel loop's extent: the first loop a reduction keeps (1 when it
    folds them all: then calls split only the replicas)."""
    return loops[0] if kept else 1


def split(group: Group) -> tuple[int, int]:
    """The outer parallel loop (`FusedKernel`'s split, `_outer`); no scratch."""
    loops, _, _, kept, _, _ = access(group)
    return _outer(loops, kept), 0


def function(name: str, group: Group) -> str:
    """The kernel of `group` as a func.func: pointer arguments (inputs, then outputs), the
    number of replicas, each input's replica stride (0: the input has none), each read's
    offset and the range [%lo, %hi) of replicas x the outer parallel loop (`split`) the
    call runs. A group ending in a reduction folds its inner loops into an accumulator
    (`iter_args`), stored once per element of the outer ones: a fold is never split."""
    loops, strides, _, kept, out_strides, concat_strides = access(group)
    outer = _outer(loops, kept)
    size = int(np.prod(group.shape, dtype=np.int64))
    n_in, n_out = len(group.inputs), len(group.outputs)
    args = [f"%in{i}: !llvm.ptr {{llvm.noalias}}" for i in range(n_in)]
    args += [f"%out{i}: !llvm.ptr {{llvm.noalias}}" for i in range(n_out)]
    args += ["%replicas: i64"] + [f"%step{i}: i64" for i in range(n_in)]
    args += [f"%off{j}: i64" for j in range(len(group.reads))] + ["%lo: i64", "%hi: i64"]
    lines = [f"  func.func @{name}({', '.join(args)}) {{",
             "    %c0 = arith.constant 0 : i64", "    %c1 = arith.constant 1 : i64",
             f"    %outer = arith.constant {outer} : i64"]
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
    # this replica's part of the call's range of the outer loop
    lines.append(f"{indent}%rs = arith.muli %r, %outer : i64")
    for end in ("lo", "hi"):
        lines.append(f"{indent}%{end}0 = arith.subi %{end}, %rs : i64")
        lines.append(f"{indent}%{end}1 = arith.minsi %{end}0, %outer : i64")
        lines.append(f"{indent}%{end}_ = arith.maxsi %{end}1, %c0 : i64")
    if not kept:  # nothing kept to split: the replica runs when its one unit is in range
        lines.append(f"{indent}scf.for %u = %lo_ to %hi_ step %c1 : i64 {{")
        indent += "  "
    for d, extent in enumerate(loops):
        lines.append(f"{indent}%e{d} = arith.constant {extent} : i64")
        if reduction is not None and d >= kept:
            start = "%init" if d == kept else f"%a{d - 1}"
            lines.append(f"{indent}%acc{d} = scf.for %i{d} = %c0 to %e{d} step %c1 "
                         f"iter_args(%a{d} = {start}) -> (f32) : i64 {{")
        else:
            start, end = ("%lo_", "%hi_") if d == 0 else ("%c0", f"%e{d}")
            lines.append(f"{indent}scf.for %i{d} = {start} to {end} step %c1 : i64 {{")
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
        element = element_type(item.value.type)
        memory = MEMORY[element]
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
        elif op_class(owner) is ConstantOp:  # absorbed: a splat
            literal = splat(value)
            name = body.const(literal) if element_type(value.type) == "f32" else \
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
        element = element_type(value.type)
        memory = MEMORY[element]
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
    if not kept:
        indent = indent[:-2]
        lines.append(f"{indent}}}")
    lines += [f"{indent[:-2]}}}", "    return", "  }"]
    return "\n".join(lines)

