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
the same micro-batch has finished and any `ipu.copy` (`link_cycles`) or
`ipu.remote_load` (`streaming_cycles`) on the way has arrived; a load or copy of data no
task produces (weights, inputs) starts when the receiving IPU is free. It lasts the
sum of `op_cost` of the stage function's ops (per IPU available memory proportion and
IO tiles). An `ipu.remote_store` occupies its IPU as soon as its producers have finished.

Host I/O (`streams`): each streamed input of each micro-batch is a "host_load" on the
IPU of the first task reading it, before that task; each streamed output a
"host_store" on the IPU holding it, once its producing tasks have finished. A transfer
takes `host_cycles` (latency + bytes / host-link bandwidth), one at a time per IPU's
link. Without IO tiles the transfers run on the compute tiles, so they also occupy the
IPU; with `io_tiles` they overlap compute (Poplar's overlapped I/O): a task's inputs
for the next micro-batch are loaded as soon as the link allows (double buffering).

Barriers: a step starts when the previous one has ended (the pipeline fills and drains
every step, as PopART's does around each weight update); the step's `epilogue` work
(gradient all-reduce, optimizer update) runs after its last task, serially per IPU,
before the next step; its "copy" work (an updated weight sent to another IPU reading
it) starts when the work listed before it has ended. "sharded" runs one task at a time;
"phased" starts a phase (a change of `ipu.phase` in the order) when everything before it
has ended.

Iterations (steps x micro-batches) give the spec's perf counters per stream ('input':
load start, 'input_complete': load end, 'output': the output available on the IPU,
'output_complete': store end) and latencies (getLatency and friends). Without input
streams an iteration's inputs count as requested and transferred when its first task
starts; without output streams its outputs as available and written when its last task
ends: the round trip is then the compute span, host-IPU and IPU-host latencies 0.

`stash_bytes` replays one step's order: per IPU, the peak bytes of task results kept
for a later task of the same micro-batch on the same IPU (activations stashed between
a forward stage and its backward stage), so a GPipe order needs more than 1F1B.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from torch_mlir import ir

from poptorch.dialects.placement import int_attribute, placement, symbol_table
from poptorch.errors import Error
from poptorch.runtime.machine.cost import OpCost, op_cost
from poptorch.runtime.machine.system import GC200, Machine, value_bytes


@dataclass(frozen=True)
class Event:
    """One interval on one IPU. `name` is the stage function computing (compute), storing
    (remote_store) or receiving (copy, remote_load) the data, the stream's name (host_load,
    host_store) or the epilogue work's. Copies and loads use the links, not the tiles: they
    may overlap compute events of the same IPU. `micro_batch` is None for per-step work;
    `breakdown` splits a compute event into compute / exchange / sync cycles."""

    kind: str
    name: str
    micro_batch: int | None
    start: int
    end: int
    step: int = 0
    stage: int | None = None
    phase: int | None = None
    stream: int | None = None
    breakdown: dict[str, int] | None = None


@dataclass(frozen=True)
class HostStreams:
    """Host I/O per micro-batch: (@main argument index, name) of each streamed input and
    (@main result index, name) of each streamed output, in stream order."""

    inputs: list[tuple[int, str]] = field(default_factory=list)
    outputs: list[tuple[int, str]] = field(default_factory=list)


COUNTERS = ("input", "input_complete", "output", "output_complete")


@dataclass
class Timeline:
    """The simulated execution: events per IPU, in cycles from the start of the run."""

    schedule: str
    micro_batches: int
    steps: int
    events: dict[int, list[Event]]
    busy_cycles: dict[int, int]  # compute cycles per IPU used by a task
    stash_bytes: dict[int, int]  # peak stashed activations per IPU used by a task
    machine: Machine = field(default=GC200, repr=False)
    streams: HostStreams = field(default_factory=HostStreams)
    # cycles per counter, per stream, per iteration; and each iteration's compute span
    counters: dict[str, list[list[int]]] = field(default_factory=dict, repr=False)
    spans: list[tuple[int, int]] = field(default_factory=list, repr=False)

    @property
    def iterations(self) -> int:
        return self.steps * self.micro_batches

    @property
    def total_cycles(self) -> int:
        return max((e.end for events in self.events.values() for e in events), default=0)

    @property
    def idle_fraction(self) -> float:
        """1 - compute cycles / (total cycles x IPUs used)."""
        total = self.total_cycles * len(self.busy_cycles)
        return 1.0 - sum(self.busy_cycles.values()) / total if total else 0.0

    @property
    def total_seconds(self) -> float:
        return self.total_cycles / self.machine.tileClockFrequency

    def perf_counters(self) -> dict[str, list[list[float]]]:
        """The spec's getPerfCounters: per counter, per stream, per iteration, seconds."""
        clock = self.machine.tileClockFrequency
        return {key: [[c / clock for c in stream] for stream in self.counters.get(key, [])]
                for key in COUNTERS}

    def latencies(self) -> dict[str, tuple[float, float, float]]:
        """(min, max, average) seconds over iterations of the spec's getLatency ('latency'),
        getComputeLatency ('compute'), getHostIpuLatency ('host_ipu') and
        getIpuHostLatency ('ipu_host'); see the module docstring without streams."""
        values: dict[str, list[int]] = {"latency": [], "compute": [], "host_ipu": [],
                                        "ipu_host": []}
        c = {key: self.counters.get(key, []) for key in COUNTERS}
        for it, (first, last) in enumerate(self.spans):
            requested = min((s[it] for s in c["input"]), default=first)
            loaded = max((s[it] for s in c["input_complete"]), default=requested)
            available = [s[it] for s in c["output"]] or [last]
            written = max((s[it] for s in c["output_complete"]), default=max(available))
            values["latency"].append(written - requested)
            values["compute"].append(max(available) - loaded)
            values["host_ipu"].append(loaded - requested)
            values["ipu_host"].append(written - min(available))
        clock = self.machine.tileClockFrequency
        return {key: (min(v) / clock, max(v) / clock, sum(v) / len(v) / clock) if v
                else (0.0, 0.0, 0.0) for key, v in values.items()}

    def to_dict(self) -> dict:
        """Plain data for the API and the profile report (IPU keys as strings, for JSON)."""
        return {
            "schedule": self.schedule,
            "micro_batches": self.micro_batches,
            "steps": self.steps,
            "iterations": self.iterations,
            "total_cycles": self.total_cycles,
            "total_seconds": self.total_seconds,
            "idle_fraction": self.idle_fraction,
            "clock_hz": self.machine.tileClockFrequency,
            "ipu_version": self.machine.version,
            "streams": {"inputs": [name for _, name in self.streams.inputs],
                        "outputs": [name for _, name in self.streams.outputs]},
            "perf_counters": self.perf_counters(),
            "latencies": self.latencies(),
            "ipus": {
                str(ipu): {
                    "busy_cycles": self.busy_cycles.get(ipu, 0),
                    "stash_bytes": self.stash_bytes.get(ipu, 0),
                    "events": [asdict(e) for e in events],
                }
                for ipu, events in sorted(self.events.items())
            },
        }


Source = tuple[int, int]  # (node, result number) of an operand; (-1, n): @main argument n
ARG = -1


@dataclass
class _Node:
    """An op of @main: a stage call, a transfer, or anything else (passes readiness on)."""

    kind: str  # "call" | "copy" | "remote_load" | "remote_store" | "other"
    inputs: list[Source]
    ipu: int = 0  # the call's IPU, the copy's destination, the load's or store's IPU
    cycles: int = 0  # the transfer's time (a call's is in `cost`)
    name: str = ""  # a call's callee
    call: int = -1  # a call's index k among the calls of @main
    stage: int | None = None  # a call's ipu.stage
    phase: int | None = None  # a call's ipu.phase
    cost: OpCost = field(default_factory=OpCost)
    result_bytes: list[int] = field(default_factory=list)
    stash_users: list[set[int]] = field(default_factory=list)  # per result: calls k reading it
    stash_inputs: set[tuple[int, int]] = field(default_factory=set)  # (k, result) it reads
    reads: list[int] = field(default_factory=list)  # @main arguments a call reads


class _Module:
    """What the simulation reads from the module, in plain Python."""

    def __init__(self, module: ir.Module, machine: Machine, micro_batches: int,
                 proportions: dict[int, float], io_tiles: int,
                 cost: Callable[..., OpCost] = op_cost) -> None:
        self.machine, self.proportions, self.io_tiles = machine, proportions, io_tiles
        self.cost = cost
        self.functions = symbol_table(module.operation)
        if "main" not in self.functions:
            raise Error("the module has no func.func @main to simulate", type="runtime")
        self.main = self.functions["main"]
        self.block = self.main.regions[0].blocks[0]
        self.costs: dict[tuple[str, int], OpCost] = {}
        attrs = self.main.attributes
        self.schedule = (ir.StringAttr(attrs["ipu.schedule"]).value
                         if "ipu.schedule" in attrs else "single")
        flat = list(ir.DenseI64ArrayAttr(attrs["ipu.tasks"])) if "ipu.tasks" in attrs else None
        self.tasks = None if flat is None else list(zip(flat[::2], flat[1::2], strict=True))
        self.nodes: list[_Node] = []
        self.calls: list[_Node] = []  # the k-th stage call of @main
        self.stores: list[_Node] = []
        self.returns: list[Source] = []
        self.arg_bytes = [value_bytes(a) for a in self.block.arguments]
        if self.tasks is None:
            self.micro_batches = micro_batches
            self._whole_main()
        else:
            self.micro_batches = int_attribute(
                self.main, "ipu.micro_batches",
                1 + max((mb for _, mb in self.tasks), default=0))
            if micro_batches not in (1, self.micro_batches):
                raise Error(f"the module's schedule runs {self.micro_batches} micro-batches a "
                            f"step, not {micro_batches}", type="runtime")
            self._read_main()
            self._check_tasks()
        self.result_bytes = [value_bytes(v) for v in self._return_op().operands]

    def _return_op(self) -> ir.OpView:
        return list(self.block.operations)[-1]

    def function_cost(self, name: str, ipu: int) -> OpCost:
        """The plan of one call of @name on `ipu`: its ops and the functions it calls."""
        if (name, ipu) not in self.costs:
            if name not in self.functions:
                raise Error(f"@main calls @{name}, which the module does not define",
                            type="runtime")
            self.costs[name, ipu] = self.ops_cost(
                self.functions[name].regions[0].blocks[0].operations, ipu)
        return self.costs[name, ipu]

    def ops_cost(self, ops, ipu: int) -> OpCost:
        total = OpCost()
        for op in ops:
            if op.operation.name == "func.call":
                total += self.function_cost(
                    ir.FlatSymbolRefAttr(op.attributes["callee"]).value, ipu)
            else:
                total += self.cost(op, self.machine, self.proportions.get(ipu),
                                 io_tiles=self.io_tiles)
        return total

    def _whole_main(self) -> None:
        """No schedule: @main is one task on IPU 0 reading every argument."""
        ops = list(self.block.operations)
        call = _Node("call", [], 0, name="main", call=0, cost=self.ops_cost(ops[:-1], 0),
                     reads=list(range(len(self.arg_bytes))))
        self.nodes.append(call)
        self.calls.append(call)
        self.returns = [(0, j) for j in range(len(ops[-1].operands))]
        self.tasks = [(0, mb) for mb in range(self.micro_batches)]

    def _read_main(self) -> None:
        index: dict[ir.Operation, int] = {}

        def source(v: ir.Value) -> Source:
            if isinstance(v, ir.OpResult):
                return index[v.owner.operation], ir.OpResult(v).result_number
            return ARG, ir.BlockArgument(v).arg_number

        for op in self.block.operations:
            name = op.operation.name
            inputs = [source(v) for v in op.operands]
            if name == "func.return":
                self.returns = inputs
                continue
            if name == "func.call" and "ipu.stage" in op.attributes:
                callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                stage, ipu = placement(op.operation)
                node = _Node("call", inputs, ipu, name=callee, call=len(self.calls),
                             stage=stage, phase=int_attribute(op.operation, "ipu.phase"),
                             result_bytes=[value_bytes(r) for r in op.results],
                             stash_users=[set() for _ in op.results])
                node.cost = self.function_cost(callee, node.ipu)
                self.calls.append(node)
            elif name == "ipu.copy":
                node = _Node("copy", inputs, int_attribute(op.operation, "dst_ipu"),
                             self.machine.link_cycles(value_bytes(op.operands[0])))
            elif name in ("ipu.remote_load", "ipu.remote_store"):
                node = _Node(name.removeprefix("ipu."), inputs,
                             int_attribute(op.operation, "ipu"),
                             self.machine.streaming_cycles(value_bytes(op.operands[0])))
                if node.kind == "remote_store":
                    self.stores.append(node)
            else:
                node = _Node("other", inputs)
            index[op.operation] = len(self.nodes)
            self.nodes.append(node)
        for call in self.calls:
            call.reads = sorted(set().union(*(self.arguments(s) for s in call.inputs)))
            for s in call.inputs:
                for producer, result in self._direct_producers(s):
                    if producer.ipu == call.ipu:
                        producer.stash_users[result].add(call.call)
                        call.stash_inputs.add((producer.call, result))

    def _direct_producers(self, source: Source) -> list[tuple[_Node, int]]:
        """The call results feeding `source` through no copy or Streaming Memory."""
        if source[0] == ARG:
            return []
        node = self.nodes[source[0]]
        if node.kind == "call":
            return [(node, source[1])]
        if node.kind == "other":
            return [p for s in node.inputs for p in self._direct_producers(s)]
        return []

    def producers(self, source: Source) -> set[int]:
        """The calls (k) whose results reach `source` by any path."""
        if source[0] == ARG:
            return set()
        node = self.nodes[source[0]]
        if node.kind == "call":
            return {node.call}
        return set().union(*(self.producers(s) for s in node.inputs))

    def arguments(self, source: Source) -> set[int]:
        """The @main arguments reaching `source` through ops other than calls."""
        if source[0] == ARG:
            return {source[1]}
        node = self.nodes[source[0]]
        return set() if node.kind == "call" else set().union(
            *(self.arguments(s) for s in node.inputs))

    def holder(self, source: Source) -> int:
        """The IPU holding the value `source` (IPU 0 for host data)."""
        if source[0] == ARG:
            return 0
        node = self.nodes[source[0]]
        if node.kind == "other":
            return min((self.holder(s) for s in node.inputs), default=0)
        return node.ipu

    def _check_tasks(self) -> None:
        seen: set[tuple[int, int]] = set()
        for k, mb in self.tasks:
            if not 0 <= k < len(self.calls) or not 0 <= mb < self.micro_batches:
                raise Error(f"ipu.tasks names task ({k}, {mb}), but @main has "
                            f"{len(self.calls)} stage calls and {self.micro_batches} "
                            "micro-batches", type="runtime")
            if (k, mb) in seen:
                raise Error(f"ipu.tasks runs @{self.calls[k].name} on micro-batch {mb} "
                            "twice", type="runtime")
            seen.add((k, mb))


Epilogue = Sequence[tuple[str, str, int, int]]  # (kind, name, ipu, cycles) per step


class _Run:
    """List scheduling of the task order, step after step."""

    def __init__(self, module: _Module, streams: HostStreams, overlap_io: bool,
                 steps: int) -> None:
        self.module, self.streams, self.overlap_io = module, streams, overlap_io
        self.free: dict[int, int] = defaultdict(int)  # IPU -> cycle it is free from
        self.link: dict[int, int] = defaultdict(int)  # IPU -> cycle its host link is free
        self.events: dict[int, list[Event]] = defaultdict(list)
        self.finish: dict[tuple[int, int, int], int] = {}  # (step, k, mb) -> end
        self.ready_at: dict[tuple[int, int, int], int | None] = {}  # (node, step, mb)
        self.stored: dict[tuple[str, int, int, int], int] = defaultdict(int)  # producers done
        self.store_producers = [module.producers(s.inputs[0]) for s in module.stores]
        self.output_producers = [module.producers(module.returns[j])
                                 for j, _ in streams.outputs]
        self.streamed = {arg: n for n, (arg, _) in enumerate(streams.inputs)}
        self.loaded: dict[tuple[int, int, int], int] = {}  # (step, mb, arg) -> end
        iterations = steps * module.micro_batches
        self.counters = {key: [[0] * iterations for _ in (
            streams.inputs if key.startswith("input") else streams.outputs)]
            for key in COUNTERS}
        self.latest = 0  # end of the last event so far
        self.floor = 0  # no task starts before this barrier

    def add(self, ipu: int, event: Event) -> None:
        self.events[ipu].append(event)
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
        node = self.module.nodes[source[0]]
        if node.kind == "call":
            if (step, node.call, mb) not in self.finish:
                raise Error(f"ipu.tasks runs @{consumer} on micro-batch {mb} before "
                            f"@{node.name}, which computes its operand", type="runtime")
            time = self.finish[step, node.call, mb]
        elif node.kind in ("copy", "remote_load"):
            base = self.ready(node.inputs[0], step, mb, consumer)
            start = self.idle_from(node.ipu) if base is None else base
            time = start + node.cycles
            self.add(node.ipu, Event(node.kind, consumer, mb, start, time, step))
        else:
            times = [t for s in node.inputs if (t := self.ready(s, step, mb, consumer))
                     is not None]
            time = max(times, default=None)
        self.ready_at[key] = time
        return time

    def host(self, kind: str, ipu: int, ready: int, nbytes: int, name: str, stream: int,
             step: int, mb: int) -> int:
        """One host transfer on `ipu`'s link (and its tiles without IO tiles)."""
        start = max(ready, self.link[ipu], self.floor,
                    0 if self.overlap_io else self.free[ipu])
        end = self.link[ipu] = start + self.module.machine.host_cycles(nbytes)
        if not self.overlap_io:
            self.free[ipu] = end
        self.add(ipu, Event(kind, name, mb, start, end, step, stream=stream))
        return start

    def load_inputs(self, step: int, call: _Node, mb: int) -> None:
        for arg in call.reads:
            if arg in self.streamed and (step, mb, arg) not in self.loaded:
                n = self.streamed[arg]
                start = self.host("host_load", call.ipu, 0, self.module.arg_bytes[arg],
                                  self.streams.inputs[n][1], n, step, mb)
                self.loaded[step, mb, arg] = self.link[call.ipu]
                it = step * self.module.micro_batches + mb
                self.counters["input"][n][it] = start
                self.counters["input_complete"][n][it] = self.link[call.ipu]

    def store_output(self, n: int, step: int, mb: int, consumer: str) -> None:
        source = self.module.returns[self.streams.outputs[n][0]]
        ipu = self.module.holder(source)
        ready = self.ready(source, step, mb, consumer)
        ready = self.idle_from(ipu) if ready is None else ready
        result, name = self.streams.outputs[n]
        self.host("host_store", ipu, ready, self.module.result_bytes[result], name, n, step,
                  mb)
        it = step * self.module.micro_batches + mb
        self.counters["output"][n][it] = ready
        self.counters["output_complete"][n][it] = self.link[ipu]

    def task(self, step: int, k: int, mb: int) -> None:
        call = self.module.calls[k]
        self.load_inputs(step, call, mb)
        if self.overlap_io and mb + 1 < self.module.micro_batches:
            self.load_inputs(step, call, mb + 1)  # IO tiles prefetch the next micro-batch
        inputs = [self.ready(s, step, mb, call.name) for s in call.inputs]
        start = max([self.idle_from(call.ipu), *(t for t in inputs if t is not None),
                     *(self.loaded[step, mb, a] for a in call.reads if a in self.streamed)])
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
        node = self.module.stores[s]
        ready = self.ready(node.inputs[0], step, mb, name)
        start = max(self.idle_from(node.ipu), ready or 0)
        self.free[node.ipu] = end = start + node.cycles
        self.add(node.ipu, Event("remote_store", name, mb, start, end, step))

    def run(self, steps: int, epilogue: Epilogue) -> None:
        """Each step starts when the previous one (and its epilogue) has ended; "sharded"
        runs one task at a time, "phased" starts a phase when the tasks before it have
        ended."""
        tasks, schedule = self.module.tasks, self.module.schedule
        for step in range(steps):
            self.floor = self.latest
            started: set[int] = set()
            phase = None
            for k, mb in tasks:
                call = self.module.calls[k]
                if schedule == "sharded" or (schedule == "phased" and call.phase != phase):
                    self.floor = self.latest
                phase = call.phase
                if mb not in started:  # stores of host data: before the micro-batch's tasks
                    started.add(mb)
                    for kind, groups in (("remote", self.store_producers),
                                         ("host", self.output_producers)):
                        for s, producers in enumerate(groups):
                            if not producers:
                                self.after(kind, s, step, mb, "main")
                self.task(step, k, mb)
            barrier = updated = self.latest
            for kind, name, ipu, cycles in epilogue:
                start = max(barrier, self.free[ipu], updated if kind == "copy" else 0)
                self.free[ipu] = start + cycles
                if kind != "copy":
                    updated = max(updated, start + cycles)
                self.add(ipu, Event(kind, name, None, start, start + cycles, step))

    def spans(self, steps: int) -> list[tuple[int, int]]:
        """Each iteration's (first task start, last task end)."""
        spans: dict[tuple[int, int], tuple[int, int]] = {}
        for events in self.events.values():
            for e in events:
                if e.kind == "compute":
                    first, last = spans.get((e.step, e.micro_batch), (e.start, e.end))
                    spans[e.step, e.micro_batch] = (min(first, e.start), max(last, e.end))
        mbs = self.module.micro_batches
        return [spans.get((step, mb), (0, 0)) for step in range(steps) for mb in range(mbs)]


def _stash_bytes(module: _Module) -> dict[int, int]:
    """Per IPU, the peak bytes of call results waiting for a later call of the same
    micro-batch on the same IPU, replaying one step of the task order."""
    live: dict[int, int] = defaultdict(int)
    peak: dict[int, int] = defaultdict(int)
    waiting: dict[tuple[int, int, int], set[int]] = {}  # (k, result, mb) -> readers left
    for k, mb in module.tasks:
        call = module.calls[k]
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
                    live[call.ipu] -= module.calls[producer].result_bytes[result]
    return peak


def _check(module: _Module, streams: HostStreams, proportions: dict[int, float],
           epilogue: Epilogue) -> None:
    """Stream indices, proportions and epilogue entries a caller got wrong."""
    for what, entries, count in (("input", streams.inputs, len(module.arg_bytes)),
                                 ("output", streams.outputs, len(module.result_bytes))):
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
             epilogue: Epilogue = (), cost: Callable[..., OpCost] = op_cost) -> Timeline:
    """The per-IPU timeline of `steps` runs of @main's task order (see module docstring).

    `micro_batches`: runs of @main a step when it has no `ipu.tasks` (with tasks, the
    schedule's own count). `streams`: host I/O per micro-batch (None: none).
    `proportions`: available memory proportion per IPU (default 0.6). `io_tiles`: tiles
    per IPU kept for I/O, which overlaps compute when there are any. `epilogue`:
    (kind, name, ipu, cycles) of the work after each step's tasks. `cost`: `op_cost`, or
    a `CostMemo` shared with other analyses of the module.
    """
    if steps < 1:
        raise Error(f"steps must be at least 1, got {steps}", type="runtime")
    if micro_batches < 1:
        raise Error(f"micro_batches must be at least 1, got {micro_batches}", type="runtime")
    streams = streams or HostStreams()
    proportions = dict(proportions or {})
    machine.compute_tiles(io_tiles)
    mod = _Module(module, machine, micro_batches, proportions, io_tiles, cost)
    _check(mod, streams, proportions, epilogue)
    run = _Run(mod, streams, io_tiles > 0, steps)
    run.run(steps, epilogue)
    ipus = sorted({mod.calls[k].ipu for k, _ in mod.tasks})
    busy = {ipu: sum(e.end - e.start for e in run.events[ipu] if e.kind == "compute")
            for ipu in ipus}
    stash = _stash_bytes(mod)
    return Timeline(mod.schedule, mod.micro_batches, steps, dict(sorted(run.events.items())),
                    busy, {ipu: stash.get(ipu, 0) for ipu in ipus}, machine, streams,
                    run.counters, run.spans(steps))
