"""Per-IPU timeline of a module's run: list scheduling of its stage tasks in the order the
schedule pass wrote, with host I/O, transfers and per-step epilogue work.

Input contract (what the multi-IPU passes produce): `func.func @main` calls stage
functions with `func.call @fn(...) {ipu.stage = #ipu.stage<S, I>}` (stage S on IPU I,
optionally `ipu.phase = P`); values cross IPUs through `"ipu.copy"(%v) {src_ipu, dst_ipu}`
and go through Streaming Memory with `"ipu.remote_load"(%v) {ipu}` /
`"ipu.remote_store"(%v) {ipu}`. `@main` carries `ipu.schedule` ("gpipe", "1f1b",
"sharded", "phased"), `ipu.micro_batches = m` and `ipu.tasks = array<i64: k0, mb0, k1,
mb1, ...>`: the global order of tasks, task (k, mb) being the k-th `func.call` of @main
(program order) run on micro-batch mb. Without `ipu.tasks` (one IPU, schedule "single")
the whole of @main is one task on IPU 0, run once per micro-batch (`micro_batches`), in
sequence.

Simulation, per step (`steps` device iterations back to back), task by task in order:
a task starts when its IPU is free and every operand is ready: the producing task of
the same micro-batch has finished and any `ipu.copy` (`copy_cycles`: an external sync,
the bytes over the IPU-Links of its route from src_ipu to dst_ipu, a latency per hop) or
`ipu.remote_load` (`streaming_cycles`) on the way has arrived; a load or copy of data no
task produces (weights, inputs) starts when the receiving IPU is free. It lasts the
sum of `op_cost` of the stage function's ops (per IPU available memory proportion and
IO tiles). An `ipu.remote_store` starts as soon as its producers have finished. Streaming
Memory transfers run on the compute tiles, which they occupy (a load also waits for
them to be free), unless `io_streaming` moves them to the IO tiles (TensorLocations'
useIOTilesToLoad / useIOTilesToStore): then they overlap compute, one at a time per
IPU's IO tiles, waiting only for their data and the step (or phase) barrier; a weight
(an @main argument) is loaded from the barrier before (prefetched during the previous
phase's compute).

Host I/O (`streams`): each streamed input of each micro-batch is a "host_load" on the
IPU of the first task reading it, before that task; each streamed output a
"host_store" on the IPU holding it, once its producing tasks have finished. A transfer
takes `host_cycles` (latency + bytes / host-link bandwidth), one at a time per host link
(the IPU-Gateway's, shared by `Machine.ipusPerHostLink` IPUs) and direction, served when
its IPU asks for it (in a gap before a transfer the task order lists earlier but whose
IPU asks later: `Scheduler.link_slot`). A stream runs on the
compute tiles, so it also occupies the IPU, unless `streams.overlapped` names it
(set_overlap_for_input/output, which need `io_tiles`): then it runs on the IO tiles and
overlaps compute (Poplar's overlapped I/O, double buffering): a task's overlapped
inputs for the next micro-batch are loaded while it computes
("overlap_accumulation_loop"), and for the next step's first micro-batch too
("overlap_device_iteration_loop", whose transfers do not hold the step barrier).
`io_tiles` are taken from every op's compute tiles either way.

Barriers: a step starts when the previous one has ended (the pipeline fills and drains
every step, as PopART's does around each weight update), after an external sync of the
program's IPUs (`external_sync_cycles`, a "sync" event on each) when it has several;
the step's `epilogue` work (gradient all-reduce, or reduce-scatter and all-gather under
replicated tensor sharding; Streaming Memory loads and stores around the optimizer
update; the update) runs after its last task, serially per IPU, before the next step;
its "copy" work (an updated weight sent to another IPU reading it) starts when the work
listed before it has ended. With "update_load" / "update_store" in `io_streaming`, its
"remote_load" and "remote_store" run on the IO tiles: loads from the barrier on,
overlapping the gradients' reduction (the update waits for them), stores after the
update. "sharded" runs one task at a time; "phased" starts a phase (a change of
`ipu.phase` in the order) when everything before it has ended.

Iterations (steps x micro-batches) give the spec's perf counters per stream ('input':
load start, 'input_complete': load end, 'output': the output available on the IPU,
'output_complete': store end) and latencies (getLatency and friends). Without input
streams an iteration's inputs count as requested and transferred when its first task
starts; without output streams its outputs as available and written when its last task
ends: the round trip is then the compute span, host-IPU and IPU-host latencies 0.

`stash_bytes` replays one step's order: per IPU, the peak bytes of task results kept
for a later task of the same micro-batch on the same IPU (activations stashed between
a forward stage and its backward stage), so a GPipe order needs more than 1F1B.

Where the parts live: `events` (the results), `tasks` (reading @main), `scheduler` (list
scheduling and the stash); this module checks the caller's arguments and runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from torch_mlir import ir

from poptorch.errors import Error
from poptorch.runtime.machine.cost import OpCost, op_cost
from poptorch.runtime.machine.events import COUNTERS, Event, HostStreams, Timeline
from poptorch.runtime.machine.scheduler import STREAMING, Epilogue, Scheduler, stash_bytes
from poptorch.runtime.machine.system import GC200, Machine
from poptorch.runtime.machine.tasks import TaskGraph

OVERLAP_MODES = ("overlap_accumulation_loop", "overlap_device_iteration_loop")

__all__ = ["COUNTERS", "Epilogue", "Event", "HostStreams", "Timeline", "simulate"]


def _check(graph: TaskGraph, streams: HostStreams, proportions: dict[int, float],
           epilogue: Epilogue, io_tiles: int) -> None:
    """Stream indices, overlaps, proportions and epilogue entries a caller got wrong."""
    names = {name for _, name in (*streams.inputs, *streams.outputs)}
    for name, mode in streams.overlapped.items():
        if name not in names or mode not in OVERLAP_MODES:
            raise Error(f"overlapped host stream '{name}' ({mode}) is not a stream or its "
                        f"mode is not one of {', '.join(OVERLAP_MODES)}", type="runtime")
        if not io_tiles:
            raise Error(f"host stream '{name}' overlaps compute on the IO tiles, but there "
                        "are none: give io_tiles", type="runtime")
    for what, entries, count in (("input", streams.inputs, len(graph.arg_bytes)),
                                 ("output", streams.outputs, len(graph.result_bytes))):
        for index, name in entries:
            if not 0 <= index < count:
                raise Error(f"host {what} stream '{name}' names {what} {index}, but @main "
                            f"has {count} {what}s", type="runtime")
    for ipu, proportion in proportions.items():
        if not 0.0 <= proportion <= 1.0:
            raise Error(f"the available memory proportion of IPU {ipu} must be between 0.0 "
                        f"and 1.0, got {proportion}", type="runtime")
    for kind, name, ipu, cycles in epilogue:
        if ipu < 0 or cycles < 0:
            raise Error(f"epilogue work '{name}' ({kind}) needs an IPU and cycles of at "
                        f"least 0, got IPU {ipu} and {cycles} cycles", type="runtime")


def simulate(module: ir.Module, steps: int = 1, machine: Machine = GC200, *,
             micro_batches: int = 1, streams: HostStreams | None = None,
             proportions: dict[int, float] | None = None, io_tiles: int = 0,
             epilogue: Epilogue = (), cost: Callable[..., OpCost] = op_cost,
             io_streaming: Collection[str] = ()) -> Timeline:
    """The per-IPU timeline of `steps` runs of @main's task order (see module docstring).

    `micro_batches`: runs of @main a step when it has no `ipu.tasks` (with tasks, the
    schedule's own count). `streams`: host I/O per micro-batch (None: none).
    `proportions`: available memory proportion per IPU (default 0.6). `io_tiles`: tiles
    per IPU kept for I/O, which overlaps compute when there are any. `epilogue`:
    (kind, name, ipu, cycles) of the work after each step's tasks. `cost`: `op_cost`, or
    a `CostMemo` shared with other analyses of the module. `io_streaming`: the Streaming
    Memory transfers (`STREAMING`: "weight_load", "activation_load",
    "activation_store", "update_load", "update_store") the IO tiles run, overlapping
    compute; the others occupy the compute tiles.
    """
    if steps < 1:
        raise Error(f"steps must be at least 1, got {steps}", type="runtime")
    if micro_batches < 1:
        raise Error(f"micro_batches must be at least 1, got {micro_batches}", type="runtime")
    streams = streams or HostStreams()
    proportions = dict(proportions or {})
    machine.compute_tiles(io_tiles)
    graph = TaskGraph(module, machine, micro_batches, proportions, io_tiles, cost,
                      inputs=[index for index, _ in streams.inputs])
    _check(graph, streams, proportions, epilogue, io_tiles)
    unknown = sorted(set(io_streaming) - set(STREAMING))
    if unknown or (io_streaming and not io_tiles):
        raise Error(f"io_streaming takes {', '.join(STREAMING)} and needs io_tiles, got "
                    f"{sorted(io_streaming)} with {io_tiles} IO tiles", type="runtime")
    run = Scheduler(graph, streams, steps, frozenset(io_streaming))
    run.run(steps, epilogue)
    ipus = sorted({graph.calls[k].ipu for k, _ in graph.tasks})
    busy = {ipu: sum(e.end - e.start for e in run.events[ipu] if e.kind == "compute")
            for ipu in ipus}
    stash = stash_bytes(graph)
    return Timeline(graph.schedule, graph.micro_batches, steps, dict(sorted(run.events.items())),
                    busy, {ipu: stash.get(ipu, 0) for ipu in ipus}, machine, streams,
                    run.counters, run.spans(steps))
