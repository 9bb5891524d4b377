"""The cost of convolutions grouped by poptorch.MultiConv (`ipu.multiconv` group,
`ipu.multiconv_options`; poptorch/_ops/multiconv.py), as poplin's multi-convolution
plans them (graphcore/poplibs, lib/poplin/ConvPlan.cpp, MultiPlanOptions: planType
[=parallel], perConvReservedTiles [=50], cycleBackOff [=0.1]).

- Serial: the convolutions one after the other, each on all tiles: the sum of their
  plain costs.
- Parallel: the convolutions at once on disjoint tile sets, each given a share of the
  tiles in proportion to its cost on all of them, and at least perConvReservedTiles;
  the group takes the longest of them (cycles are the max, not the sum) and the sum of
  their temporaries. When the reserved tiles do not fit (n x perConvReservedTiles >
  tiles), poplin plans the group serially, and so does this.
- cycleBackOff: each convolution may take a plan up to that proportion slower than its
  fastest when it needs less temporary memory (poplin's cycle back-off); here among
  the plans `cost_conv.conv_plans` weighs.
- availableMemoryProportions: each convolution's own proportion (its temporary cap).

The first convolution of a group (in program order) is charged the whole group; the
others cost nothing more (their temporaries are in the first's). Ungrouped
convolutions keep `cost_conv.conv`.
"""

from __future__ import annotations

import json

from torch_mlir import ir

from poptorch.runtime.machine import cost_conv
from poptorch.runtime.machine import cost_families as family
from poptorch.runtime.machine.plan import OpCost, Plan

GROUP, OPTIONS = "ipu.multiconv", "ipu.multiconv_options"
RESERVED_TILES, CYCLE_BACK_OFF = 50, 0.1  # poplin's MultiPlanOptions defaults


def _options(op: ir.Operation) -> dict:
    return json.loads(ir.StringAttr(op.attributes[OPTIONS]).value) if OPTIONS in \
        op.attributes else {}


def members(op: ir.Operation) -> list[ir.Operation]:
    """The convolutions of `op`'s multi-convolution group, in program order."""
    group = op.attributes[GROUP]
    return [o.operation for o in op.block.operations
            if o.operation.name == op.name and GROUP in o.operation.attributes
            and o.operation.attributes[GROUP] == group]


def _plain(p: Plan, tiles: int, proportion: float, back_off: float) -> OpCost:
    """One convolution on `tiles` tiles: the fastest K split within the proportion's cap,
    or a slower one (within back_off) needing less temporary memory."""
    plan = Plan(p.op, p.machine, tiles, proportion)
    dims = family.conv_dims(plan)
    if 0 in dims:
        return family.fill(plan)
    candidates = cost_conv.conv_plans(plan) or family.amp_plans(plan, dims)
    best = plan.choose(candidates)
    near = [c for c, temporary in candidates if c.cycles <= best.cycles * (1 + back_off)
            and temporary <= int(proportion * p.machine.memoryBytesPerTile)]
    return min(near, key=lambda c: (c.temporary_bytes, c.cycles), default=best)


def conv(p: Plan) -> OpCost:
    """The rule of `ipu.conv`: a plain convolution, or its multi-convolution group."""
    op = p.op
    if GROUP not in op.attributes:
        return cost_conv.conv(p)
    group = members(op)
    if group[0] != op:
        return OpCost()
    options = _options(op)
    n = len(group)

    def per_conv(key, default):
        values = options.get(key, [default])
        return values if len(values) == n else values[:1] * n

    proportions = per_conv("available_memory_proportions", p.proportion)
    back_off = options.get("cycle_back_off", CYCLE_BACK_OFF)
    reserved = options.get("per_conv_reserved_tiles", RESERVED_TILES)
    full = [_plain(Plan(o, p.machine, p.available, a), p.available, a, back_off)
            for o, a in zip(group, proportions, strict=True)]
    serial = sum(full[1:], full[0])
    if options.get("plan_type", "parallel") == "serial" or n * reserved > p.available:
        return serial
    spare = p.available - n * reserved
    weight = sum(c.cycles for c in full) or 1
    shares = [reserved + spare * c.cycles // weight for c in full]
    parts = [_plain(Plan(o, p.machine, tiles, a), tiles, a, back_off)
             for o, tiles, a in zip(group, shares, proportions, strict=True)]
    longest = max(parts, key=lambda c: c.cycles)
    return OpCost(longest.compute, longest.exchange, longest.sync,
                  sum(c.temporary_bytes for c in parts))
