"""The cost of the control-flow ops of a function (`scf.for`, `scf.if`): their regions'
ops, charged by the ops' own rules, plus the copies PopART's lowering adds.

- `scf.for` (poptorch.for_loop): the body's cost times the trip count, plus the loop's
  own copies. PopART lowers a loop (graphcore/popart, willow/src/popx/op/loopx.cpp,
  `LoopOpx::grow`) by copying the op's inputs into the body's inputs once, the body's
  outputs back into its inputs after every iteration, and the body's outputs into the
  op's outputs at the end: count + 2 on-tile copies of the carried tensors, each at the
  machine's `memcpyBytesPerCycle` on the fullest tile of a linear mapping. The
  iteration counter's increment is an op of the body (`ipu.add`) and charged by its
  rule each iteration. The body's temporary memory is its own, not count times.
- `scf.if` (poptorch.cond): the timeline is one static schedule for every call, so it
  charges the dearer branch (a bound: the branch taken depends on the data), plus the
  copy of the results out of the branch (graphcore/popart, willow/src/popx/op/ifx.cpp:
  the branch's outputs are copied to the op's outputs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from torch_mlir import ir

from poptorch.errors import Error
from poptorch.runtime.machine.plan import OpCost
from poptorch.runtime.machine.system import Machine, spread, value_bytes

OpsCost = Callable[[Iterable[ir.OpView]], OpCost]


def trip_count(op: ir.OpView) -> int:
    """The iterations of an `scf.for` whose bounds and step are constants."""
    bounds = []
    for value in list(op.operands)[:3]:
        owner = value.owner
        if isinstance(owner, ir.Block) or owner.name != "arith.constant":
            raise Error("the machine model needs an scf.for with constant bounds and step",
                        type="runtime", location=str(op.location))
        bounds.append(ir.IntegerAttr(owner.attributes["value"]).value)
    lower, upper, step = bounds
    return max(0, math.ceil((upper - lower) / step))


def copy_cycles(values: Iterable[ir.Value], machine: Machine, tiles: int) -> int:
    """Cycles of an on-tile copy of `values`, each spread linearly over the tiles (the
    fullest tile's bytes at memcpyBytesPerCycle)."""
    cycles = 0
    for value in values:
        nbytes = value_bytes(value)
        if nbytes:
            on_tile = math.ceil(nbytes / spread(nbytes, 1, tiles))
            cycles += math.ceil(on_tile / machine.memcpyBytesPerCycle)
    return cycles


def _times(cost: OpCost, count: int) -> OpCost:
    return OpCost(cost.compute * count, cost.exchange * count, cost.sync * count,
                  cost.temporary_bytes if count else 0)


def region_cost(op: ir.OpView, ops_cost: OpsCost, machine: Machine, tiles: int) -> OpCost:
    """The cost of an `scf.for` or `scf.if` (module docstring); `ops_cost` charges a
    region's ops."""
    name = op.operation.name
    body = [ops_cost(region.blocks[0].operations) for region in op.regions if region.blocks]
    if name == "scf.for":
        count = trip_count(op)
        copies = copy_cycles(op.results, machine, tiles) * (count + 2)
        return _times(body[0], count) + OpCost(compute=copies)
    if name == "scf.if":
        dearer = max(body, key=lambda cost: cost.cycles, default=OpCost())
        return dearer + OpCost(compute=copy_cycles(op.results, machine, tiles))
    raise Error(f"the machine model has no cost for '{name}'", type="runtime",
                location=str(op.location))


REGION_OPS = ("scf.for", "scf.if")
