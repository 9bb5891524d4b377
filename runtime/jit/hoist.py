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
from collections.abc import Callable, Collection, Mapping
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


def _returned(values: list[ir.Value], table: Mapping[str, ir.OpView]) -> set[ir.Value]:
    """`values` and those they may alias: operands of ops whose kernel does not make a
    new array (a view, a broadcast, a constant), transitively, and the operands of a
    call that its function may return."""
    seen: set[ir.Value] = set()
    todo = list(values)
    while todo:
        value = todo.pop()
        if value in seen:
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, ir.Block):
            continue
        if owner.name == "func.call":
            body = table[ir.FlatSymbolRefAttr(owner.attributes["callee"]).value] \
                .regions[0].blocks[0]
            returned = list(body.operations)[-1].operands[ir.OpResult(value).result_number]
            inner = _returned([returned], table)
            todo.extend(v for v, arg in zip(owner.operands, body.arguments, strict=True)
                        if arg in inner)
            continue
        k = kernel_of(owner)
        if k is None or not k.fresh:
            todo.extend(owner.operands)
    return seen


def hoistable(block: ir.Block, weights: Collection[int], table: Mapping[str, ir.OpView]
              ) -> list[ir.Operation]:
    """The ops of `block` to move (module docstring), in order; `table`: the module's
    functions."""
    derived = {block.arguments[i] for i in weights}
    ops = [op.operation for op in block.operations]
    blocked = _returned(list(ops[-1].operands), table)
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


def has_weight_work(module: ir.Operation, entry: str, weights: Collection[int]) -> bool:
    """Whether `hoist_weights` may move ops: the entry has some to move, or calls
    functions (whose own it checks)."""
    table = symbol_table(module)
    block = table[entry].regions[0].blocks[0]
    return any(op.operation.name == "func.call" for op in block.operations) \
        or bool(hoistable(block, weights, table))


def hoist_weights(module: ir.Operation, entry: str, weights: Collection[int],
                  persistent: bool, shared_rows: int) -> Hoisted | None:
    """Move the weight-only ops of `entry` in `module` (the JIT's own copy), and those of
    the functions it calls (`_from_callees`), to `prepare_<entry>` (module docstring);
    None when there are none. `persistent`: weights stay between calls; else a permute
    is made contiguous only when products of `shared_rows` left-operand rows or more
    read it directly."""
    table = symbol_table(module)
    entry_op = table[entry]
    block = entry_op.regions[0].blocks[0]
    with module.context, entry_op.location:
        _from_callees(table, block, weights)
        moved = hoistable(block, weights, table)
        if not moved:
            return None
        inside = set(moved)
        read = [i for i in sorted(weights)
                if any(use.owner.operation in inside for use in block.arguments[i].uses)]
        kept = _kept(moved)
        name = f"prepare_{entry}"
        with ir.InsertionPoint(entry_op):
            prepare = func.FuncOp(name, ir.FunctionType.get(
                [block.arguments[i].type for i in read], [r.type for r in kept]))
        body = prepare.add_entry_block()
        copied = dict(zip((block.arguments[i] for i in read), body.arguments, strict=True))
        with ir.InsertionPoint(body):
            _copy(moved, copied)
            func.ReturnOp([copied[r] for r in kept])
        arguments = _detach(entry_op, moved, kept)
        for value, argument in zip(kept, arguments, strict=True):
            _contiguous(copied[value], argument, persistent, shared_rows, table)
    return Hoisted(name, tuple(read))


def _from_callees(table: Mapping[str, ir.OpView], block: ir.Block, weights: Collection[int]
                  ) -> None:
    """Copy the weight-only ops of each function `block` calls (a pipelined or sharded
    program's stages) into `block`, before its first call: the arguments every call
    passes the same weight argument of `block` are weights there. The function takes
    the copies' results as arguments after its own, which every call passes."""
    given = {block.arguments[i] for i in weights}
    sites: dict[str, list[ir.Operation]] = {}
    for op in block.operations:
        if op.operation.name == "func.call":
            sites.setdefault(ir.FlatSymbolRefAttr(op.attributes["callee"]).value,
                             []).append(op.operation)
    for name, calls in sites.items():
        callee = table[name]
        body = callee.regions[0].blocks[0]
        first = calls[0].operands
        fixed = [j for j, value in enumerate(first) if value in given
                 and all(call.operands[j] == value for call in calls)]
        moved = hoistable(body, fixed, table)
        if not moved:
            continue
        kept = _kept(moved)
        copied = {body.arguments[j]: first[j] for j in fixed}
        with ir.InsertionPoint(calls[0]):
            _copy(moved, copied)
        _detach(callee, moved, kept)
        for call in calls:
            with ir.InsertionPoint(call):
                new = func.CallOp([r.type for r in call.results], name,
                                  [*call.operands, *(copied[r] for r in kept)])
            for key, attr in call.attributes.items():
                if key != "callee":
                    new.attributes[key] = attr
            for mine, theirs in zip(call.results, new.results, strict=True):
                mine.replace_all_uses_with(theirs)
            call.erase()


def _kept(moved: list[ir.Operation]) -> list[ir.Value]:
    """The results of `moved` that other ops read."""
    inside = set(moved)
    return [r for op in moved for r in op.results
            if any(use.owner.operation not in inside for use in r.uses)]


def _copy(moved: list[ir.Operation], copied: dict[ir.Value, ir.Value]) -> None:
    """Clone `moved` at the insertion point, each operand replaced by its entry in
    `copied` (an argument, or an earlier clone's result, added there); a constant an op
    reads is cloned before it."""
    derived = set(copied) | {r for op in moved for r in op.results}
    for op in moved:
        for value in op.operands:
            if value not in derived and value not in copied:  # a constant
                clone = value.owner.clone()
                copied.update(zip(value.owner.results, clone.results, strict=True))
        clone = op.clone()
        for index, value in enumerate(op.operands):
            clone.operands[index] = copied[value]
        copied.update(zip(op.results, clone.results, strict=True))


def _detach(function: ir.OpView, moved: list[ir.Operation], kept: list[ir.Value]
            ) -> list[ir.Value]:
    """Erase `moved` from `function`, whose new arguments (returned) stand for `kept`;
    constants only `moved` read go too."""
    block = function.regions[0].blocks[0]
    derived = set(block.arguments) | {r for op in moved for r in op.results}
    constants = {v.owner for op in moved for v in op.operands if v not in derived}
    arguments = [block.add_argument(value.type, value.location) for value in kept]
    for value, argument in zip(kept, arguments, strict=True):
        value.replace_all_uses_with(argument)
    for op in reversed(moved):
        op.erase()
    for op in constants:  # read only by moved ops: left unread
        if not any(len(list(r.uses)) for r in op.results):
            op.erase()
    results = ir.FunctionType(function.attributes["function_type"].value).results
    function.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([a.type for a in block.arguments], results))
    return arguments


def _contiguous(made: ir.Value, argument: ir.Value, persistent: bool, shared_rows: int,
                table: Mapping[str, ir.OpView]) -> None:
    """Tag the permute making `made` (through views, when `persistent`) to be copied to a
    C-contiguous array, if the entry's products read `argument` as their right operand:
    when `persistent`, one of more than one row, else of `shared_rows` rows in all."""
    rows = _product_rows(argument, table)
    if not rows or persistent and max(rows) < 2:  # gemv reads the view as fast
        return
    owner = made.owner
    while persistent and not isinstance(owner, ir.Block) and op_class(owner) is not PermuteOp \
            and (op_class(owner) is BroadcastOp or kernel_of(owner).view):
        owner = owner.operands[0].owner  # a view or a broadcast of the permute
    if not isinstance(owner, ir.Block) and op_class(owner) is PermuteOp \
            and (persistent or sum(rows) >= shared_rows):
        owner.attributes[CONTIGUOUS] = ir.UnitAttr.get()


def _product_rows(value: ir.Value, table: Mapping[str, ir.OpView]) -> list[int]:
    """The left-operand rows of each product reading `value` as its right operand, in
    the functions it is passed to too."""
    rows = []
    for use in value.uses:
        owner = use.owner
        if op_class(owner) is MatMulOp and use.operand_number == 1:
            rows.append(math.prod(owner.operands[0].type.shape[:-1]))
        elif owner.name == "func.call":
            callee = table[ir.FlatSymbolRefAttr(owner.attributes["callee"]).value]
            rows += _product_rows(callee.regions[0].blocks[0].arguments[use.operand_number],
                                  table)
    return rows


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
