"""Per-IPU timeline of a multi-IPU module: list scheduling of its stage tasks in the order
the schedule pass wrote.

Input contract (what the multi-IPU passes produce): `func.func @main` calls stage
functions with `func.call @fn(...) {ipu.stage = #ipu.stage<S, I>}` (stage S on IPU I,
optionally `ipu.phase = P`); values cross IPUs through `"ipu.copy"(%v) {src_ipu, dst_ipu}`
and go through Streaming Memory with `"ipu.remote_load"(%v) {ipu}` /
`"ipu.remote_store"(%v) {ipu}`. `@main` carries `ipu.schedule` ("gpipe", "1f1b",
"sharded", "phased"), `ipu.micro_batches = m` and `ipu.tasks = array<i64: k0, mb0, k1,
mb1, ...>`: the global order of tasks, task (k, mb) being the k-th `func.call` of @main
(program order) run on micro-batch mb. Without `ipu.tasks` the whole of @main is one
task on IPU 0 per step.

Simulation, per step (`steps` device iterations back to back), task by task in order:
a task starts when its IPU is free and every operand is ready: the producing task of
the same micro-batch has finished and any `ipu.copy` (bytes / IPU-Link bandwidth) or
`ipu.remote_load` (bytes / Streaming Memory bandwidth) on the way has arrived; a load
or copy of data no task produces (weights, inputs) starts when the receiving IPU is
free. It lasts the sum of `op_cycles` of the stage function's ops. An
`ipu.remote_store` occupies its IPU as soon as its producers have finished.
@main's arguments (host data) and its other ops (host ops, calls without `ipu.stage`)
cost nothing here; host I/O joins with issue 6.
Barriers: a step starts when the previous one has ended (the pipeline fills and drains
every step, as PopART's does around each weight update); "sharded" runs one task at a
time; "phased" starts a phase (a change of `ipu.phase` in the order) when everything
before it has ended.

`stash_bytes` replays one step's order: per IPU, the peak bytes of task results kept
for a later task of the same micro-batch on the same IPU (activations stashed between
a forward stage and its backward stage), so a GPipe order needs more than 1F1B.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

from torch_mlir import ir

from poptorch.errors import Error

from .machine import GC200, Machine, op_cycles, value_bytes


@dataclass(frozen=True)
class Event:
    """One interval on one IPU. `name` is the stage function computing (compute), storing
    (remote_store) or receiving (copy, remote_load) the data. Copies and loads use the
    links, not the tiles: they may overlap compute events of the same IPU."""

    kind: str
    name: str
    micro_batch: int
    start: int
    end: int
    step: int = 0


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

    def to_dict(self) -> dict:
        """Plain data for the API and the profile report (IPU keys as strings, for JSON)."""
        return {
            "schedule": self.schedule,
            "micro_batches": self.micro_batches,
            "steps": self.steps,
            "total_cycles": self.total_cycles,
            "total_seconds": self.total_seconds,
            "idle_fraction": self.idle_fraction,
            "clock_hz": self.machine.tileClockFrequency,
            "ipus": {
                str(ipu): {
                    "busy_cycles": self.busy_cycles.get(ipu, 0),
                    "stash_bytes": self.stash_bytes.get(ipu, 0),
                    "events": [asdict(e) for e in events],
                }
                for ipu, events in sorted(self.events.items())
            },
        }


Source = tuple[int, int] | None  # (node, result number) of an operand; None: @main argument


@dataclass
class _Node:
    """An op of @main: a stage call, a transfer, or anything else (passes readiness on)."""

    kind: str  # "call" | "copy" | "remote_load" | "remote_store" | "other"
    inputs: list[Source]
    ipu: int = 0  # the call's IPU, the copy's destination, the load's or store's IPU
    cycles: int = 0  # the call's compute, the transfer's time
    name: str = ""  # a call's callee
    call: int = -1  # a call's index k among the calls of @main
    phase: int | None = None  # a call's ipu.phase
    result_bytes: list[int] = field(default_factory=list)
    stash_users: list[set[int]] = field(default_factory=list)  # per result: calls k reading it
    stash_inputs: set[tuple[int, int]] = field(default_factory=set)  # (k, result) it reads


def _int(attr: ir.Attribute) -> int:
    return ir.IntegerAttr(attr).value


class _Module:
    """What the simulation reads from the module, in plain Python."""

    def __init__(self, module: ir.Module, machine: Machine) -> None:
        self.machine = machine
        self.functions = {ir.StringAttr(op.attributes["sym_name"]).value: op
                          for op in module.body.operations if "sym_name" in op.attributes}
        if "main" not in self.functions:
            raise Error("the module has no func.func @main to simulate", type="runtime")
        self.main = self.functions["main"]
        self.costs: dict[str, int] = {}
        attrs = self.main.attributes
        self.schedule = (ir.StringAttr(attrs["ipu.schedule"]).value
                         if "ipu.schedule" in attrs else "single")
        flat = list(ir.DenseI64ArrayAttr(attrs["ipu.tasks"])) if "ipu.tasks" in attrs else None
        self.tasks = None if flat is None else list(zip(flat[::2], flat[1::2], strict=True))
        self.micro_batches = (_int(attrs["ipu.micro_batches"]) if "ipu.micro_batches" in attrs
                              else 1 + max((mb for _, mb in self.tasks or []), default=0))
        self.nodes: list[_Node] = []
        self.calls: list[_Node] = []  # the k-th stage call of @main
        self.stores: list[_Node] = []
        self._read_main()
        if self.tasks is not None:
            self._check_tasks()

    def function_cycles(self, name: str) -> int:
        """Compute cycles of one call of @name: its ops and the functions it calls."""
        if name not in self.costs:
            if name not in self.functions:
                raise Error(f"@main calls @{name}, which the module does not define",
                            type="runtime")
            self.costs[name] = sum(self.op_cycles(op) for op in
                                   self.functions[name].regions[0].blocks[0].operations)
        return self.costs[name]

    def op_cycles(self, op: ir.OpView) -> int:
        if op.operation.name == "func.call":
            return self.function_cycles(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        return op_cycles(op, self.machine)

    def _read_main(self) -> None:
        index: dict[ir.Operation, int] = {}
        for op in self.main.regions[0].blocks[0].operations:
            name = op.operation.name
            inputs: list[Source] = [
                (index[v.owner.operation], ir.OpResult(v).result_number)
                if isinstance(v, ir.OpResult) else None for v in op.operands]
            if name == "func.call" and "ipu.stage" in op.attributes:
                callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                node = _Node("call", inputs, _int(op.attributes["ipu.stage"].ipu),
                             self.function_cycles(callee), callee, len(self.calls),
                             (_int(op.attributes["ipu.phase"]) if "ipu.phase" in op.attributes
                              else None),
                             [value_bytes(r) for r in op.results],
                             [set() for _ in op.results])
                self.calls.append(node)
            elif name == "ipu.copy":
                node = _Node("copy", inputs, _int(op.attributes["dst_ipu"]),
                             self.machine.link_cycles(value_bytes(op.operands[0])))
            elif name in ("ipu.remote_load", "ipu.remote_store"):
                node = _Node(name.removeprefix("ipu."), inputs, _int(op.attributes["ipu"]),
                             self.machine.streaming_cycles(value_bytes(op.operands[0])))
                if node.kind == "remote_store":
                    self.stores.append(node)
            else:
                node = _Node("other", inputs)
            index[op.operation] = len(self.nodes)
            self.nodes.append(node)
        for call in self.calls:
            for source in call.inputs:
                for producer, result in self._direct_producers(source):
                    if producer.ipu == call.ipu:
                        producer.stash_users[result].add(call.call)
                        call.stash_inputs.add((producer.call, result))

    def _direct_producers(self, source: Source) -> list[tuple[_Node, int]]:
        """The call results feeding `source` through no copy or Streaming Memory."""
        if source is None:
            return []
        node = self.nodes[source[0]]
        if node.kind == "call":
            return [(node, source[1])]
        if node.kind == "other":
            return [p for s in node.inputs for p in self._direct_producers(s)]
        return []

    def producers(self, source: Source) -> set[int]:
        """The calls (k) whose results reach `source` by any path."""
        if source is None:
            return set()
        node = self.nodes[source[0]]
        if node.kind == "call":
            return {node.call}
        return set().union(*(self.producers(s) for s in node.inputs))

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


class _Run:
    """List scheduling of the task order, step after step."""

    def __init__(self, module: _Module) -> None:
        self.module = module
        self.free: dict[int, int] = defaultdict(int)  # IPU -> cycle it is free from
        self.events: dict[int, list[Event]] = defaultdict(list)
        self.finish: dict[tuple[int, int, int], int] = {}  # (step, k, mb) -> end
        self.ready_at: dict[tuple[int, int, int], int | None] = {}  # (node, step, mb)
        self.stored: dict[tuple[int, int, int], int] = defaultdict(int)  # producers done
        self.store_producers = [module.producers(s.inputs[0]) for s in module.stores]
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
        if source is None:
            return None
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

    def task(self, step: int, k: int, mb: int) -> None:
        call = self.module.calls[k]
        inputs = [self.ready(s, step, mb, call.name) for s in call.inputs]
        start = max([self.idle_from(call.ipu), *(t for t in inputs if t is not None)])
        self.free[call.ipu] = end = start + call.cycles
        self.add(call.ipu, Event("compute", call.name, mb, start, end, step))
        self.finish[step, k, mb] = end
        for s, producers in enumerate(self.store_producers):
            if k in producers:
                self.stored[s, step, mb] += 1
                if self.stored[s, step, mb] == len(producers):
                    self.store(s, step, mb, call.name)

    def store(self, s: int, step: int, mb: int, name: str) -> None:
        node = self.module.stores[s]
        ready = self.ready(node.inputs[0], step, mb, name)
        start = max(self.idle_from(node.ipu), ready or 0)
        self.free[node.ipu] = end = start + node.cycles
        self.add(node.ipu, Event("remote_store", name, mb, start, end, step))

    def run(self, steps: int) -> None:
        """Each step starts when the previous one has ended; "sharded" runs one task at a
        time, "phased" starts a phase when the tasks before it have ended."""
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
                    for s, producers in enumerate(self.store_producers):
                        if not producers:
                            self.store(s, step, mb, "main")
                self.task(step, k, mb)


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


def simulate(module: ir.Module, steps: int = 1, machine: Machine = GC200) -> Timeline:
    """The per-IPU timeline of `steps` runs of @main's task order (see module docstring)."""
    if steps < 1:
        raise Error(f"steps must be at least 1, got {steps}", type="runtime")
    mod = _Module(module, machine)
    if mod.tasks is None:
        cycles = sum(mod.op_cycles(op) for op in mod.main.regions[0].blocks[0].operations)
        events = [Event("compute", "main", 0, step * cycles, (step + 1) * cycles, step)
                  for step in range(steps)]
        return Timeline(mod.schedule, mod.micro_batches, steps, {0: events},
                        {0: steps * cycles}, {0: 0}, machine)
    run = _Run(mod)
    run.run(steps)
    ipus = sorted({mod.calls[k].ipu for k, _ in mod.tasks})
    busy = {ipu: sum(e.end - e.start for e in run.events[ipu] if e.kind == "compute")
            for ipu in ipus}
    stash = _stash_bytes(mod)
    return Timeline(mod.schedule, mod.micro_batches, steps, dict(sorted(run.events.items())),
                    busy, {ipu: stash.get(ipu, 0) for ipu in ipus}, machine)
