"""List scheduling of a `TaskGraph`'s task order, step after step (`Scheduler`), and the
activations stashed between the tasks of a micro-batch (`stash_bytes`). The rules: the
`timeline` module docstring.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence

from poptorch.errors import Error
from poptorch.runtime.machine.events import COUNTERS, Event, HostStreams
from poptorch.runtime.machine.tasks import ARG, Source, TaskGraph, TaskNode

Epilogue = Sequence[tuple[str, str, int, int]]  # (kind, name, ipu, cycles) per step
LOOPS = "overlap_device_iteration_loop"  # an overlap across steps as well as micro-batches
# Streaming Memory transfers that TensorLocations' useIOTilesToLoad / useIOTilesToStore
# can move to the IO tiles: loads of @main's arguments (weights), of activations, stores
# of activations, and the epilogue's loads and stores around the optimizer update
# (optimizer state, off-chip weights)
STREAMING = ("weight_load", "activation_load", "activation_store", "update_load",
             "update_store")
# The epilogue's Streaming Memory transfers and the STREAMING kind placing each
EPILOGUE_STREAMING = {"remote_load": "update_load", "remote_store": "update_store"}


class Scheduler:
    """List scheduling of the task order, step after step."""

    def __init__(self, graph: TaskGraph, streams: HostStreams, steps: int,
                 io_streaming: frozenset[str] = frozenset()) -> None:
        self.graph, self.streams, self.steps = graph, streams, steps
        self.io_streaming = io_streaming  # STREAMING kinds that run on the IO tiles
        self.free: dict[int, int] = defaultdict(int)  # IPU -> cycle it is free from
        # (host link, "host_load" | "host_store") -> that direction's busy intervals, as
        # sorted starts and ends (`link_slot`)
        self.link: dict[tuple[int, str], tuple[list[int], list[int]]] = defaultdict(
            lambda: ([], []))
        self.events: dict[int, list[Event]] = defaultdict(list)
        self.finish: dict[tuple[int, int, int], int] = {}  # (step, k, mb) -> end
        self.ready_at: dict[tuple[int, int, int], int | None] = {}  # (node, step, mb)
        self.stored: dict[tuple[str, int, int, int], int] = defaultdict(int)  # producers done
        self.store_producers = [graph.producers(s.inputs[0]) for s in graph.stores]
        self.output_producers = [graph.producers(graph.returns[j])
                                 for j, _ in streams.outputs]
        self.streamed = {arg: n for n, (arg, _) in enumerate(streams.inputs)}
        self.loaded: dict[tuple[int, int, int], int] = {}  # (step, mb, arg) -> end
        iterations = steps * graph.micro_batches
        self.counters = {key: [[0] * iterations for _ in (
            streams.inputs if key.startswith("input") else streams.outputs)]
            for key in COUNTERS}
        self.latest = 0  # end of the last event so far that the next step waits for
        self.floor = 0  # no task starts before this barrier
        self.previous = 0  # the barrier before it (IO tiles prefetch weights from there)
        self.streaming: dict[int, int] = defaultdict(int)  # IPU -> IO tiles' channel free
        # id(call) -> (its operands that can be waited for, its streamed reads): the
        # arguments that are not streamed are there at any time (`ready` gives None), and
        # a step of many micro-batches asked again for each of a call's hundreds of weights
        self.waits: dict[int, tuple[list[Source], list[int]]] = {}

    def _waits(self, call: TaskNode) -> tuple[list[Source], list[int]]:
        waits = self.waits.get(id(call))
        if waits is None:
            waits = self.waits[id(call)] = (
                [s for s in call.inputs if s[0] != ARG or s[1] in self.streamed],
                [a for a in call.reads if a in self.streamed])
        return waits

    def add(self, ipu: int, event: Event, barrier: bool = True) -> None:
        """Record `event`; with `barrier`, the next step (or phase) starts after it."""
        self.events[ipu].append(event)
        if barrier:
            self.latest = max(self.latest, event.end)

    def idle_from(self, ipu: int) -> int:
        return max(self.free[ipu], self.floor)

    def ready(self, source: Source, step: int, mb: int, consumer: str) -> int | None:
        """When the value `source` of micro-batch `mb` is available to its consumer; None
        when it is host data available at any time."""
        if source[0] == ARG:
            return self.loaded.get((step, mb, source[1]))
        key = (source[0], step, mb)
        if key in self.ready_at:
            return self.ready_at[key]
        node = self.graph.nodes[source[0]]
        if node.kind == "call":
            if (step, node.call, mb) not in self.finish:
                raise Error(f"ipu.tasks runs @{consumer} on micro-batch {mb} before "
                            f"@{node.name}, which computes its operand", type="runtime")
            time = self.finish[step, node.call, mb]
        elif node.kind == "copy":
            base = self.ready(node.inputs[0], step, mb, consumer)
            start = self.idle_from(node.ipu) if base is None else base
            time = start + node.cycles
            self.add(node.ipu, Event(node.kind, consumer, mb, start, time, step))
        elif node.kind == "remote_load":
            base = self.ready(node.inputs[0], step, mb, consumer)
            what = "weight_load" if node.inputs[0][0] == ARG else "activation_load"
            io = what in self.io_streaming
            if io:  # one transfer at a time; a weight as early as the barrier before
                start = max(self.streaming[node.ipu], self.previous if base is None
                            else max(base, self.floor))
                self.streaming[node.ipu] = start + node.cycles
            else:  # the compute tiles run the load: no compute meanwhile
                start = max(self.idle_from(node.ipu), base or 0)
                self.free[node.ipu] = start + node.cycles
            time = start + node.cycles
            self.add(node.ipu, Event(node.kind, consumer, mb, start, time, step,
                                     tiles="io" if io else "compute"))
        else:
            times = [t for s in node.inputs if (t := self.ready(s, step, mb, consumer))
                     is not None]
            time = max(times, default=None)
        self.ready_at[key] = time
        return time

    def link_slot(self, link: tuple[int, str], earliest: int, cycles: int) -> int:
        """The start of the first gap of `cycles` from `earliest` on one direction of a
        host link, which it then occupies. The IPUs sharing the link run their own
        programs: the gateway serves each transfer when its IPU asks for it, so a transfer
        the task order lists later, but ready earlier, goes before."""
        starts, ends = self.link[link]
        i, start = bisect_right(ends, earliest), earliest
        while i < len(starts) and starts[i] < start + cycles:
            start = max(start, ends[i])
            i += 1
        starts.insert(i, start)
        ends.insert(i, start + cycles)
        return start

    def host(self, kind: str, ipu: int, ready: int, nbytes: int, name: str, stream: int,
             step: int, mb: int) -> tuple[int, int]:
        """(start, end) of one host transfer on the host link `ipu` shares with the other
        IPUs of its IPU-Gateway (`Machine.ipusPerHostLink`), one at a time each way (the
        link is full duplex; `link_slot`), on its compute tiles (which it occupies), or on
        its IO tiles for an overlapped stream (`HostStreams.overlapped`); a stream
        overlapping the device iteration loop also crosses the step barrier."""
        mode = self.streams.overlapped.get(name)
        link = (ipu // self.graph.machine.ipusPerHostLink, kind)
        cycles = self.graph.machine.host_cycles(nbytes)
        start = self.link_slot(link, max(ready, self.floor if mode != LOOPS else 0,
                                         0 if mode else self.free[ipu]), cycles)
        end = start + cycles
        if not mode:
            self.free[ipu] = end
        self.add(ipu, Event(kind, name, mb, start, end, step, stream=stream,
                            tiles="io" if mode else "compute"), barrier=mode != LOOPS)
        return start, end

    def prefetch(self, step: int, call: TaskNode, mb: int) -> None:
        """The IO tiles load the overlapped inputs of the iteration after `mb` while it
        computes: the next micro-batch, or the next step's first one when the stream
        overlaps the device iteration loop too."""
        if mb + 1 < self.graph.micro_batches:
            self.load_inputs(step, call, mb + 1, overlapped_only=True)
        elif step + 1 < self.steps:
            self.load_inputs(step + 1, call, 0, overlapped_only=True, mode=LOOPS)

    def load_inputs(self, step: int, call: TaskNode, mb: int, overlapped_only: bool = False,
                    mode: str | None = None) -> None:
        for arg in self._waits(call)[1]:
            if (step, mb, arg) not in self.loaded:
                n = self.streamed[arg]
                overlap = self.streams.overlapped.get(self.streams.inputs[n][1])
                if overlapped_only and (not overlap or (mode and overlap != mode)):
                    continue
                start, end = self.host("host_load", call.ipu, 0, self.graph.arg_bytes[arg],
                                       self.streams.inputs[n][1], n, step, mb)
                self.loaded[step, mb, arg] = end
                it = step * self.graph.micro_batches + mb
                self.counters["input"][n][it] = start
                self.counters["input_complete"][n][it] = end

    def store_output(self, n: int, step: int, mb: int, consumer: str) -> None:
        source = self.graph.returns[self.streams.outputs[n][0]]
        ipu = self.graph.holder(source)
        ready = self.ready(source, step, mb, consumer)
        ready = self.idle_from(ipu) if ready is None else ready
        result, name = self.streams.outputs[n]
        _, end = self.host("host_store", ipu, ready, self.graph.result_bytes[result], name,
                           n, step, mb)
        it = step * self.graph.micro_batches + mb
        self.counters["output"][n][it] = ready
        self.counters["output_complete"][n][it] = end

    def task(self, step: int, k: int, mb: int) -> None:
        call = self.graph.calls[k]
        self.load_inputs(step, call, mb)
        self.prefetch(step, call, mb)
        sources, streamed = self._waits(call)
        inputs = [self.ready(s, step, mb, call.name) for s in sources]
        start = max([self.idle_from(call.ipu), *(t for t in inputs if t is not None),
                     *(self.loaded[step, mb, a] for a in streamed)])
        cost = call.cost
        self.free[call.ipu] = end = start + cost.cycles
        self.add(call.ipu, Event("compute", call.name, mb, start, end, step, call.stage,
                                 call.phase, breakdown={"compute": cost.compute,
                                                        "exchange": cost.exchange,
                                                        "sync": cost.sync}))
        self.finish[step, k, mb] = end
        for kind, groups in (("remote", self.store_producers), ("host", self.output_producers)):
            for s, producers in enumerate(groups):
                if k in producers:
                    self.stored[kind, s, step, mb] += 1
                    if self.stored[kind, s, step, mb] == len(producers):
                        self.after(kind, s, step, mb, call.name)

    def after(self, kind: str, s: int, step: int, mb: int, name: str) -> None:
        if kind == "host":
            self.store_output(s, step, mb, name)
        else:
            self.store(s, step, mb, name)

    def store(self, s: int, step: int, mb: int, name: str) -> None:
        node = self.graph.stores[s]
        ready = self.ready(node.inputs[0], step, mb, name)
        io = "activation_store" in self.io_streaming
        start = max(self.streaming[node.ipu] if io else self.idle_from(node.ipu),
                    ready or 0, self.floor)
        end = start + node.cycles
        if io:
            self.streaming[node.ipu] = end
        else:  # the compute tiles run the store: no compute meanwhile
            self.free[node.ipu] = end
        self.add(node.ipu, Event("remote_store", name, mb, start, end, step,
                                 tiles="io" if io else "compute"))

    def run(self, steps: int, epilogue: Epilogue) -> None:
        """Each step starts when the previous one (and its epilogue) has ended, after an
        external sync of the program's IPUs when there are several (a "sync" event on
        each); "sharded" runs one task at a time, "phased" starts a phase when the tasks
        before it have ended."""
        tasks, schedule = self.graph.tasks, self.graph.schedule
        ipus = sorted({self.graph.calls[k].ipu for k, _ in tasks})
        for step in range(steps):
            if len(ipus) > 1:
                start = self.latest
                cycles = self.graph.machine.external_sync_cycles(1 + ipus[-1])
                for ipu in ipus:
                    self.add(ipu, Event("sync", "step", None, start, start + cycles, step))
            self.floor = self.previous = self.latest
            started: set[int] = set()
            phase = None
            for k, mb in tasks:
                call = self.graph.calls[k]
                if schedule == "sharded" or (schedule == "phased" and call.phase != phase):
                    self.previous, self.floor = self.floor, self.latest
                phase = call.phase
                if mb not in started:  # stores of host data: before the micro-batch's tasks
                    started.add(mb)
                    for kind, groups in (("remote", self.store_producers),
                                         ("host", self.output_producers)):
                        for s, producers in enumerate(groups):
                            if not producers:
                                self.after(kind, s, step, mb, "main")
                self.task(step, k, mb)
            self.epilogue(step, epilogue)

    def epilogue(self, step: int, epilogue: Epilogue) -> None:
        """The work ending a step, in order, serially per IPU; a "copy" also waits for
        all the work before it. Its Streaming Memory transfers on the IO tiles
        (`EPILOGUE_STREAMING`) run one at a time per IPU beside the compute tiles: a load
        from the barrier on (overlapping the gradients' reduction; the update waits for
        it), a store once the work before it on its IPU has ended."""
        barrier = updated = self.latest
        loaded: dict[int, int] = defaultdict(int)  # IPU -> end of its IO-tile loads
        for kind, name, ipu, cycles in epilogue:
            if EPILOGUE_STREAMING.get(kind) in self.io_streaming:
                ready = barrier if kind == "remote_load" else self.free[ipu]
                start = max(ready, self.streaming[ipu])
                end = self.streaming[ipu] = start + cycles
                if kind == "remote_load":
                    loaded[ipu] = end
                self.add(ipu, Event(kind, name, None, start, end, step, tiles="io"))
                continue
            start = max(barrier, self.free[ipu], loaded[ipu],
                        updated if kind == "copy" else 0)
            self.free[ipu] = start + cycles
            if kind != "copy":
                updated = max(updated, start + cycles)
            self.add(ipu, Event(kind, name, None, start, start + cycles, step,
                                tiles="compute" if kind in EPILOGUE_STREAMING else None))

    def spans(self, steps: int) -> list[tuple[int, int]]:
        """Each iteration's (first task start, last task end)."""
        spans: dict[tuple[int, int], tuple[int, int]] = {}
        for events in self.events.values():
            for e in events:
                if e.kind == "compute":
                    first, last = spans.get((e.step, e.micro_batch), (e.start, e.end))
                    spans[e.step, e.micro_batch] = (min(first, e.start), max(last, e.end))
        mbs = self.graph.micro_batches
        return [spans.get((step, mb), (0, 0)) for step in range(steps) for mb in range(mbs)]


def stash_bytes(graph: TaskGraph) -> dict[int, int]:
    """Per IPU, the peak bytes of call results waiting for a later call of the same
    micro-batch on the same IPU, replaying one step of the task order."""
    live: dict[int, int] = defaultdict(int)
    peak: dict[int, int] = defaultdict(int)
    waiting: dict[tuple[int, int, int], set[int]] = {}  # (k, result, mb) -> readers left
    for k, mb in graph.tasks:
        call = graph.calls[k]
        for result, users in enumerate(call.stash_users):
            if users:
                waiting[k, result, mb] = set(users)
                live[call.ipu] += call.result_bytes[result]
        peak[call.ipu] = max(peak[call.ipu], live[call.ipu])
        for producer, result in call.stash_inputs:
            readers = waiting.get((producer, result, mb))
            if readers is not None:
                readers.discard(k)
                if not readers:
                    del waiting[producer, result, mb]
                    live[call.ipu] -= graph.calls[producer].result_bytes[result]
    return peak
