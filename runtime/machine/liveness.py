"""The liveness walk of one function: the bytes of its intermediate values live at each
op, by class (`Peak.curve`), their peak, the values live at a position and its constants
(`liveness`, giving a `Peak`).

A value lives from its op to its last use; what an op's results are (new activations,
views of its operands, weights) is its `op_memory.MEMORY_RULES` entry. A value's class
is "activations", "recomputation" for the results of ops ipu-recompute cloned into a
backward stage (`ipu.recomputed`: alive only during that backward), or the class the
caller gives a returned value (a gradient @main returns: "gradients"). Values are named
as MLIR's printer names them, counted rather than printed (`local_names`).

A gradient added into its accumulator (`accumulated`) that is a scatter-add into a
splat constant (`ipu.index_put {accumulate}` of zeros: an embedding's or a gather's
weight gradient), seen through casts, views and the addition of another stage's
partial (tied weights: tasks.py), takes no buffer of its own: PopART
replaces a gather's gradient followed by its accumulation with `SparseAccumulateOp`,
a `popops::multiUpdateAdd` of the gathered rows straight into the accumulator
(graphcore/popart, willow/include/popart/op/accumulate.hpp and
willow/src/popx/op/accumulatex.cpp), so neither the dense zeros nor the dense sum exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.elementwise import CastOp
from poptorch.dialects.indexing import IndexPutOp
from poptorch.dialects.placement import symbol
from poptorch.runtime.machine.op_memory import VIEW, constant_bytes, is_splat, memory_rule
from poptorch.runtime.machine.system import value_bytes


def function_ops(func: ir.Operation) -> list[ir.Operation]:
    """The ops of a function's entry block, each preceded by the ops of its regions (a
    loop's body or a branch, `scf.for` / `scf.if`): once, as the body is one program
    whatever the trip count, and before the op whose results they make."""
    return _block_ops(func.regions[0].blocks[0])


def _block_ops(block: ir.Block) -> list[ir.Operation]:
    ops = []
    for op in block.operations:
        for region in op.regions:
            for inner in region.blocks:
                ops += _block_ops(inner)
        ops.append(op.operation)
    return ops


@dataclass
class _Buffer:
    """A value given memory: live from its op's position to its last use's."""

    first: int
    last: int
    bytes: int
    value: ir.Value
    origin: str  # where a received argument comes from; "" for an op's result
    cls: str = "activations"


@dataclass
class Peak:
    """A function's liveness walk: the live bytes by class at each position of
    `function_ops` (`curve`), the peak of their sum and the values live there, its
    constants, and every buffer (`buffers`, for `live_at` another position)."""

    function: str
    scope: ir.Operation  # the function, for naming its values
    bytes: int = 0
    live: list[tuple[int, ir.Value, str]] = field(default_factory=list)  # bytes, value, from
    constants: list[tuple[int, ir.Value, str]] = field(default_factory=list)
    curve: dict[str, list[int]] = field(default_factory=dict)  # class -> bytes per position
    buffers: list[_Buffer] = field(default_factory=list)
    _numbers: dict[ir.Value, str] | None = None

    def at(self, position: int) -> dict[str, int]:
        """Live bytes by class at `position` (only the classes with some)."""
        return {cls: sizes[position] for cls, sizes in self.curve.items() if sizes[position]}

    def live_at(self, position: int) -> list[tuple[int, ir.Value, str, str]]:
        """(bytes, value, from, class) of the buffers live at `position`, largest first."""
        return sorted(((b.bytes, b.value, b.origin, b.cls) for b in self.buffers
                       if b.first <= position <= b.last), key=lambda t: -t[0])

    def name(self, value: ir.Value, origin: str) -> Callable[[], str]:
        """A value's name, printed on demand (printing is slow)."""
        if origin == "constant":
            return lambda: f"constant {self._ssa(value)} in @{self.function}"
        if isinstance(value, ir.OpResult):
            return lambda: f"{value.owner.name} {self._ssa(value)} in @{self.function}"
        return lambda: f"{self._ssa(value)} of @{self.function} ({origin})"

    def _ssa(self, value: ir.Value) -> str:
        """`%n`, numbered in the function as MLIR's printer numbers it in local scope
        (`local_names`; the walk only sees the entry block's arguments and ops).
        Counted because an AsmState, or `get_name()`, runs every op's verifier first
        (27 of an LSTM's 57 ms of memory estimate, every compile)."""
        if self._numbers is None:
            self._numbers = local_names(self.scope)
        return self._numbers[value]

    def tensors(self, cls: str, which: str) -> list[tuple[int, str, Callable[[], str]]]:
        """(bytes, class, name) of the live values ("live") or constants ("constants")."""
        return [(size, cls, self.name(value, origin))
                for size, value, origin in getattr(self, which)]


# ops whose result MLIR's printer names itself (OpAsmOpInterface): the scalar bounds and
# conditions of control flow
_ASM_NAMED: dict[str, Callable[[ir.Operation], str]] = {
    "arith.constant": lambda op: f"%c{ir.IntegerAttr(op.attributes['value']).value}"
    if isinstance(op.results[0].type, ir.IndexType) else "%cst",
    "tensor.extract": lambda op: "%extracted",
}


def local_names(func: ir.Operation) -> dict[ir.Value, str]:
    """The SSA names of `func`'s block arguments (`%argN`) and op results (`%n` in order,
    `%n#i` for the i-th of an op's several results), nested regions included."""
    names: dict[ir.Value, str] = {}
    counts = [0, 0]  # arguments, results named so far

    def walk(block: ir.Block) -> None:  # the printer's order: an op, then its regions
        for arg in block.arguments:
            names[arg] = f"%arg{counts[0]}"
            counts[0] += 1
        for op in block.operations:
            results, number = list(op.results), counts[1]
            if op.name in _ASM_NAMED:  # named by the op (`%c3`, `%extracted`), not counted
                names[results[0]] = _ASM_NAMED[op.name](op)
            elif len(results) == 1:
                names[results[0]] = f"%{number}"
            else:  # none, or several
                names.update((result, f"%{number}#{i}") for i, result in enumerate(results))
            counts[1] += bool(results) and op.name not in _ASM_NAMED
            for region in op.regions:
                for inner in region.blocks:
                    walk(inner)

    walk(func.regions[0].blocks[0])
    return names


def sparse_accumulation(value: ir.Value) -> list[ir.Value]:
    """The values of a gradient PopART accumulates sparsely (module docstring): `value`
    and what makes it back to the `ipu.index_put {accumulate}` into a splat constant,
    through casts and views; [] when it is not one."""
    chain = []
    while isinstance(value, ir.OpResult):
        op = value.owner.operation
        chain.append(value)
        kind = op_class(op)
        if kind is IndexPutOp:
            target = op.operands[0]
            source = target.owner.operation if isinstance(target, ir.OpResult) else None
            splat = (source is not None and memory_rule(source).results == "weights"
                     and is_splat(source))
            return chain if splat and ir.BoolAttr(op.attributes["accumulate"]).value else []
        if op.name == "ipu.add" and sum(isinstance(v, ir.BlockArgument)
                                        for v in op.operands) == 1:
            # plus another stage's partial, itself added into the accumulator where it
            # was made (tasks.py): each part goes into the accumulator on its own
            value = next(v for v in op.operands if not isinstance(v, ir.BlockArgument))
            continue
        if (kind is not CastOp and memory_rule(op) is not VIEW) or len(op.operands) != 1:
            return []
        value = op.operands[0]
    return []


def liveness(func: ir.Operation, received: Mapping[int, str] | None = None,
             excluded: set[int] | frozenset[int] = frozenset(),
             returned: Mapping[int, str] | None = None, tiles: int = 1,
             accumulated: set[int] | frozenset[int] = frozenset()) -> Peak:
    """Live bytes of `func`'s intermediate values at each op, and their peak (module
    docstring). Arguments in `received` (index -> where from) are live from the start;
    other arguments (weights, inputs, stash) are not counted, nor values returned at a
    position in `excluded` (buffer updates, gradients counted elsewhere); values returned
    at a position in `returned` take its class ("gradients") and live to the return.
    Results of ops whose rule makes them weights (`ipu.constant`) come back as
    constants (a splat one as one element on each of up to `tiles` tiles). Values
    returned at a position in `accumulated` are gradients added into an accumulator:
    the sparse ones take no buffer (module docstring)."""
    received, returned = received or {}, returned or {}
    name = symbol(func)
    buffers: list[_Buffer] = []
    alias: dict[ir.Value, set[int]] = {}
    for k, arg in enumerate(func.regions[0].blocks[0].arguments):
        alias[arg] = {len(buffers)} if k in received else set()
        if k in received:
            buffers.append(_Buffer(0, 0, value_bytes(arg), arg, received[k]))
    peak, dropped = Peak(name, func.operation), set()
    ops = function_ops(func)
    for i, op in enumerate(ops):
        for value in op.operands:
            for b in alias.get(value, ()):
                buffers[b].last = i
        if op.name == "func.return":
            dropped = set().union(*(alias.get(op.operands[k], set()) for k in excluded))
            for k in accumulated:
                for value in sparse_accumulation(op.operands[k]):
                    dropped |= alias.get(value, set())
            for k, cls in returned.items():
                for b in alias.get(op.operands[k], set()):
                    buffers[b].cls = cls
            continue
        rule = memory_rule(op)
        results = "none" if rule is None else rule.results
        if results == "weights":
            for result in op.results:
                alias[result] = set()
                peak.constants.append((constant_bytes(op, tiles), result, "constant"))
        elif results == "views":
            sources = set().union(*(alias.get(v, set()) for v in op.operands))
            alias.update((result, sources) for result in op.results)
        elif results == "activations":
            cls = "recomputation" if "ipu.recomputed" in op.attributes else "activations"
            for result in op.results:
                alias[result] = {len(buffers)}
                buffers.append(_Buffer(i, i, value_bytes(result), result, "", cls))
        else:  # an exempt op (op_memory.MEMORY_EXEMPT): its results take no buffer
            alias.update((result, set()) for result in op.results)
    peak.buffers = [b for n, b in enumerate(buffers) if n not in dropped]
    changes: dict[str, list[int]] = {}
    for b in peak.buffers:
        delta = changes.setdefault(b.cls, [0] * (len(ops) + 1))
        delta[b.first] += b.bytes
        delta[b.last + 1] -= b.bytes
    for cls, delta in changes.items():
        running, sizes = 0, []
        for change in delta[:len(ops)]:
            running += change
            sizes.append(running)
        peak.curve[cls] = sizes
    totals = [sum(sizes[i] for sizes in peak.curve.values()) for i in range(len(ops))]
    at = max(range(len(ops)), key=lambda i: (totals[i], -i), default=None)
    if at is not None and totals[at] > 0:
        peak.bytes = totals[at]
        peak.live = [(size, value, origin) for size, value, origin, _ in peak.live_at(at)]
    return peak
