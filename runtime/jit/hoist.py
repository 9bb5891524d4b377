"""Weight-only work run once per weight upload: the entry's ops that read nothing but
weights (and constants) moved to a function of their own, which the program runs only
when a weight array changed.

An op of the entry function is hoisted when it is pure (the `Pure` trait: no random
draw, no host or remote transfer, no user code, no print, no all-reduce), has no
region, and each of its operands is a weight argument, the result of a hoisted op or
of a pure op without operands (a constant), at least one of them not a constant. The
hoisted ops move, in order, to `prepare_<entry>`, which takes the weight arguments they
read and returns their results that the entry still reads; the entry takes those as
arguments after its own. Constants the hoisted ops read are copied into it (and leave
the entry when nothing else there reads them). Not hoisted:
an op whose result the entry returns, or that an op not making new arrays (a view, a
broadcast) turns into a returned value: the caller would get an array that later calls
hand out again.

Inside the entry the hoisted values are arguments, so they are never `out=` targets
(`_Codegen.owned`). A permute (a transposed weight) that the entry's products read, by
itself or through views, is copied to a C-contiguous array in `prepare_<entry>` when
weights stay between calls (inference) and a product of more than one row reads it:
OpenBLAS multiplies by a transposed view more slowly (single-threaded, (8, 768) x
(768, 768)^T 480 us against 308, (32, 256) x (256, 512)^T 180 against 93), but for one
row (a matrix-vector product, 59 us against 70). The copy is kept as long as the weight:
memory for time. When weights are new arrays at every call (training), only as the
entry did (`SHARED_WEIGHT_ROWS`).

`Prepared` runs the pair: it keeps the weight arrays it last prepared from (references,
so an identity is never reused) and calls `prepare_<entry>` again when any argument is
not the same array: the executor's `DeviceWeights` replaces arrays on every upload,
buffer store and optimizer step and never writes into one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from operator import is_, itemgetter

from torch_mlir import ir
from torch_mlir.dialects import func
from torch_mlir.dialects.ext import Pure

from poptorch.dialects import op_class
from poptorch.dialects.data_movement import BroadcastOp, PermuteOp
from poptorch.dialects.linear import MatMulOp
from poptorch.dialects.placement import symbol_table
from poptorch.runtime.jit.kernels import kernel_of

# a permute the codegen copies to a C-contiguous array where it is made
CONTIGUOUS = "ipu.jit_contiguous"


@dataclass(frozen=True)
class Hoisted:
    """What `hoist_weights` moved: the function and the entry arguments it takes."""

    prepare: str
    weights: tuple[int, ...]


def _pure(op: ir.Operation) -> bool:
    cls = op_class(op)
    return cls is not None and Pure in cls._traits and not len(op.regions) \
        and kernel_of(op) is not None


def _returned(returned: ir.Operation) -> set[ir.Value]:
    """The returned values and those they may alias: operands of ops whose kernel does
    not make a new array (a view, a broadcast, a constant), transitively."""
    seen: set[ir.Value] = set()
    todo = list(returned.operands)
    while todo:
        value = todo.pop()
        if value in seen:
            continue
        seen.add(value)
        owner = value.owner
        if not isinstance(owner, ir.Block):
            k = kernel_of(owner)
            if k is None or not k.fresh:
                todo.extend(owner.operands)
    return seen


def hoistable(block: ir.Block, weights: Collection[int]) -> list[ir.Operation]:
    """The ops of `block` to move (module docstring), in order."""
    derived = {block.arguments[i] for i in weights}
    ops = [op.operation for op in block.operations]
    blocked = _returned(ops[-1])
    constants: set[ir.Value] = set()
    moved = []
    for op in ops[:-1]:
        if not _pure(op):
            continue
        if not len(op.operands):
            constants.update(op.results)
        elif all(v in derived or v in constants for v in op.operands) \
                and any(v in derived for v in op.operands) \
                and not any(r in blocked for r in op.results):
            derived.update(op.results)
            moved.append(op)
    return moved


def hoist_weights(module: ir.Operation, entry: str, weights: Collection[int],
                  persistent: bool, shared_rows: int) -> Hoisted | None:
    """Move the weight-only ops of `entry` in `module` (the JIT's own copy) to
    `prepare_<entry>` (module docstring); None when there are none. `persistent`:
    weights stay between calls; else a permute is made contiguous only when products of
    `shared_rows` left-operand rows or more read it directly."""
    entry_op = symbol_table(module)[entry]
    block = entry_op.regions[0].blocks[0]
    moved = hoistable(block, weights)
    if not moved:
        return None
    inside = set(moved)
    read = [i for i in sorted(weights)
            if any(use.owner.operation in inside for use in block.arguments[i].uses)]
    kept = [r for op in moved for r in op.results
            if any(use.owner.operation not in inside for use in r.uses)]
    name = f"prepare_{entry}"
    with module.context, entry_op.location:
        with ir.InsertionPoint(entry_op):
            prepare = func.FuncOp(name, ir.FunctionType.get(
                [block.arguments[i].type for i in read], [r.type for r in kept]))
        body = prepare.add_entry_block()
        derived = {block.arguments[i] for i in read} | {r for op in moved for r in op.results}
        copied = {block.arguments[i]: arg for i, arg in zip(read, body.arguments, strict=True)}
        with ir.InsertionPoint(body):
            for op in moved:
                for value in op.operands:
                    if value not in derived and value not in copied:  # a constant
                        clone = value.owner.clone()
                        copied.update(zip(value.owner.results, clone.results, strict=True))
                clone = op.clone()
                for index, value in enumerate(op.operands):
                    clone.operands[index] = copied[value]
                copied.update(zip(op.results, clone.results, strict=True))
            func.ReturnOp([copied[r] for r in kept])
        constants = {v.owner for op in moved for v in op.operands if v not in derived}
        arguments = [block.add_argument(value.type, value.location) for value in kept]
        for value, argument in zip(kept, arguments, strict=True):
            value.replace_all_uses_with(argument)
        for op in reversed(moved):
            op.erase()
        for op in constants:  # read only by moved ops: left unread
            if not any(len(list(r.uses)) for r in op.results):
                op.erase()
        results = ir.FunctionType(entry_op.attributes["function_type"].value).results
        entry_op.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in block.arguments], results))
        for value, argument in zip(kept, arguments, strict=True):
            _contiguous(copied[value], argument, persistent, shared_rows)
    return Hoisted(name, tuple(read))


def _contiguous(made: ir.Value, argument: ir.Value, persistent: bool, shared_rows: int
                ) -> None:
    """Tag the permute making `made` (through views, when `persistent`) to be copied to a
    C-contiguous array, if the entry's products read `argument` as their right operand:
    when `persistent`, one of more than one row, else of `shared_rows` rows in all."""
    rows = [_rows(use.owner) for use in argument.uses
            if op_class(use.owner) is MatMulOp and use.operand_number == 1]
    if not rows or persistent and max(rows) < 2:  # gemv reads the view as fast
        return
    owner = made.owner
    while persistent and not isinstance(owner, ir.Block) and op_class(owner) is not PermuteOp \
            and (op_class(owner) is BroadcastOp or kernel_of(owner).view):
        owner = owner.operands[0].owner  # a view or a broadcast of the permute
    if not isinstance(owner, ir.Block) and op_class(owner) is PermuteOp \
            and (persistent or sum(rows) >= shared_rows):
        owner.attributes[CONTIGUOUS] = ir.UnitAttr.get()


def _rows(product: ir.OpView) -> int:
    return math.prod(product.operands[0].type.shape[:-1])


class Prepared:
    """The entry of a program with a `prepare_<entry>`: `run(*args)` calls the entry with
    the prepared values, which it makes again when any weight argument is not the array
    they were made from (module docstring)."""

    __slots__ = ("_entry", "_prepare", "_pick", "_held", "_values")

    def __init__(self, entry: Callable[..., tuple], prepare: Callable[..., tuple],
                 weights: tuple[int, ...]) -> None:
        self._entry, self._prepare = entry, prepare
        pick = itemgetter(*weights)
        self._pick = pick if len(weights) > 1 else lambda args: (pick(args),)
        self._held: tuple = ()  # the weight arrays the values were made from
        self._values: tuple = ()

    def __call__(self, *args) -> tuple:
        weights = self._pick(args)
        if not self._held or not all(map(is_, weights, self._held)):
            self._values = self._prepare(*weights)
            self._held = weights
        return self._entry(*args, *self._values)
