"""Where a configuration's simulated time goes, per op class: the reading behind each
row's "main reason" in FIDELITY.md.

`python bench/fidelity/breakdown.py CONFIG [--layers N] [--ipu I] [--top K]` compiles
the configuration (compile only, out of memory recorded, as run.py does) and, for one
IPU (default: the one that finishes last), adds up the cost of every op of every stage
function it ran, as many times as the timeline ran that function on that IPU, by op
class: compute, exchange and sync cycles (`runtime.machine.cost.op_cost`, the plan the
timeline charges), plus the timeline's own non-compute events (copies, host and
streaming transfers, collectives, optimizer) by kind. Ops inside a loop or branch are
counted once per run of the function (their trip count is not applied): the configurations
here have none in their stage functions.

It reads the compiled executor's private `_compiled` (the lowered module and its cost
memo): a diagnostic of the harness, not an API.
"""

from __future__ import annotations

import argparse
import collections
import sys

import common
from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.runtime.machine.cost import op_cost

CALL = "func.call"


def _ops(functions: dict[str, ir.Operation], name: str):
    """The ops one call of @name runs: its own and those of the functions it calls."""
    for op in functions[name].regions[0].blocks[0].operations:
        if op.operation.name == CALL:
            yield from _ops(functions, ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
            continue
        for region in op.operation.regions:
            for block in region.blocks:
                yield from block.operations
        yield op


def breakdown(model, ipu: int | None = None) -> tuple[int, dict[str, list[int]], int]:
    """(IPU, {op class or event kind: [compute, exchange, sync]}, the call's cycles)."""
    compiled, options = model._compiled, model._options  # noqa: SLF001 - a diagnostic
    timeline = compiled.timeline
    if ipu is None:
        ipu = max(timeline.events, key=lambda i: max((e.end for e in timeline.events[i]),
                                                     default=0))
    machine = timeline.machine
    proportion = options.available_memory_proportion.get(ipu)
    io_tiles = options.TensorLocations.num_io_tiles
    calls = collections.Counter(e.name for e in timeline.events[ipu] if e.kind == "compute")
    table: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    with compiled.context:
        functions = {ir.StringAttr(op.attributes["sym_name"]).value: op
                     for op in compiled.module.body.operations
                     if op.operation.name == "func.func"}
        for name, count in calls.items():
            if name not in functions:
                continue
            for op in _ops(functions, name):
                cls = op_class(op.operation)
                if cls is None:
                    continue
                cost = op_cost(op, machine, proportion, io_tiles=io_tiles)
                row = table[cls.__name__]
                row[0] += count * cost.compute
                row[1] += count * cost.exchange
                row[2] += count * cost.sync
    for event in timeline.events[ipu]:
        if event.kind != "compute":
            table[f"<{event.kind}>"][0] += event.end - event.start
    return ipu, dict(table), timeline.total_cycles


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--ipu", type=int, default=None)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    (config,) = common.load([args.config])
    model, inputs = config.module.build(args.layers) if args.layers is not None \
        else config.module.build()
    with common.deferred_memory_check() as refused:
        model.compile(*inputs)
    ipu, table, total = breakdown(model, args.ipu)
    print(f"{config.name}: IPU {ipu}, {total:,} cycles a call"
          f"{' (refused: out of memory)' if refused else ''}")
    ordered = sorted(table.items(), key=lambda item: -sum(item[1]))
    print(f"{'op class / event kind':32} {'share':>6} {'compute':>7} {'exchange':>8} "
          f"{'sync':>6}")
    for name, (compute, exchange, sync) in ordered[:args.top]:
        whole = compute + exchange + sync
        print(f"{name:32} {whole / total:6.1%} {compute / total:7.1%} "
              f"{exchange / total:8.1%} {sync / total:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
