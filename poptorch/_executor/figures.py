"""What the machine model reports about a compiled model: the options and the captured
program turned into the arguments of `runtime.machine`, `runtime.memory.estimate` and
`runtime.timeline.simulate`, and `MachineFigures`, the collaborator PoplarExecutor holds
for them (`executor._figures`: the machine, the last run's timeline, the profile report).

- Machine: `useOfflineIpuTarget(v)` selects `machine_for(v)` (1: GC2, 2: GC200, 21:
  GC200 with FP8); otherwise the GC200.
- Host streams: every user input is streamed from the host per micro-batch, every output
  the model returns and every input it updates in place (not the buffers it updates,
  not the gradients) back to it. The loss's tangent is a constant of the program, not a
  stream.
- Memory: weights, buffers and inputs from the captured arguments, optimizer state
  slots from the optimizer's state layout, `Options.TensorLocations`, the replication
  factor, gradient accumulation, the stash the timeline found, and each op's temporary
  bytes under its available memory proportion.
- A training step ends with the gradient all-reduce over replicas (a ring over the
  IPU-Links among the IPUs running the same stage in each replica, over GW-Links beyond
  an IPU-POD64; the replicas of every process of a distributed run, `Options.
  Distributed`; per IPU for the gradients of the weights it updates) and the
  optimizer's update of each weight on the
  IPU computing its gradient (ops not tied to one weight, such as a global gradient
  norm, on IPU 0); a weight read on several IPUs (a tied or reused weight) is updated
  once and then copied over the IPU-Links to the others.
- Replicated tensor sharding (`TensorLocations` of the optimizer state or the weights
  with `useReplicatedTensorSharding(True)`, replicas > 1, at least the RTS minimum of
  elements): the weight's gradient is reduce-scattered instead of all-reduced, each
  replica updates its 1/R shard (1/R of the update's cycles), then the updated shards
  are all-gathered (PopART's sharded weight update).
- Off chip (`useOnChipStorage(False)`): the optimizer state of a weight is loaded from
  Streaming Memory before its update and stored back after it ("remote_load" /
  "remote_store"), a shard of it under RTS; so is an off-chip weight. With
  `useIOTilesToLoad` / `useIOTilesToStore` of the optimizer location they run on the IO
  tiles (the timeline's "update_load" / "update_store").
"""

from __future__ import annotations

import math
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch_mlir import ir

from poptorch import _logging, profiling
from poptorch._compiler.driver import Compiled
from poptorch._executor import host_io
from poptorch._executor.replica_grouping import run_replicas
from poptorch.dialects.placement import symbol_table
from poptorch.errors import Error
from poptorch.options import Options
from poptorch.runtime.machine.cost import OpCost, op_cost
from poptorch.runtime.machine.memory import ArgInfo, Location, Locations, MemoryEstimate, estimate
from poptorch.runtime.machine.system import GC200, Machine, machine_for, value_bytes
from poptorch.runtime.machine.timeline import HostStreams, Timeline, simulate


def machine_of(options: Options) -> Machine:
    return machine_for(options.offline_ipu_version) if options.offline_ipu_version else GC200


def streams_of(captured: Any, training: bool, results: int) -> HostStreams:
    """The host streams of @main: (argument index, name) of the user inputs and (result
    index, name) of the outputs, then of the inputs' in-place updates (`input{i} update`);
    `results` is @main's number of results."""
    inputs = [(index, f"input{arg.name}") for index, arg in enumerate(captured.arguments)
              if arg.kind == "input"]
    kinds = [kind for kind, _ in results_of(captured, training)]
    kinds += ["output"] * (results - len(kinds))
    outputs = [(index, f"output{n}") for n, index in
               enumerate(i for i, kind in enumerate(kinds) if kind == "output")]
    updates = [(index, f"input{name} update") for index, (kind, name)
               in enumerate(results_of(captured, training)) if kind == "input"]
    return HostStreams(inputs, outputs + updates)


def results_of(captured: Any, training: bool) -> list[tuple[str, Any]]:
    """(kind, name) of @main's results, as `runtime.memory.estimate` takes them (in
    inference, the outputs after these)."""
    if training:
        return list(captured.results)
    return [*(("buffer", name) for name in captured.mutated_buffers),
            *(("input", index) for index in captured.mutated_inputs)]


def locations_of(options: Options) -> Locations:
    """`runtime.memory.Locations` of `Options.TensorLocations`."""
    locations = options.TensorLocations
    return Locations(_location(locations.weight_location),
                     _location(locations.activation_location),
                     _location(locations.optimizer_location),
                     _location(locations.accumulator_location))


def _location(settings: Any) -> Location:
    """`runtime.memory.Location` of a `poptorch.TensorLocationSettings` (or None)."""
    if settings is None:
        return Location()
    return Location(settings.on_chip, settings.use_replicated_tensor_sharding,
                    settings.min_elements_for_off_chip,
                    settings.min_elements_for_replicated_tensor_sharding)


def memory_of(module: ir.Module, machine: Machine, captured: Any, options: Options,
              training: bool, optimizer_slots: Mapping[str, float],
              stash_bytes: Mapping[int, int], cost: Callable[..., OpCost] = op_cost
              ) -> MemoryEstimate:
    """The per-IPU memory estimate of the compiled @main (`cost`: `op_cost` or a memo)."""
    trainable = set(captured.trainable) if training else set()
    args = [ArgInfo(a.name, a.kind, a.name in trainable, optimizer_slots.get(a.name, 0))
            for a in captured.arguments]
    locations = options.TensorLocations
    io_tiles = locations.num_io_tiles
    proportions = options.available_memory_proportion

    def temporary(op: ir.Operation, ipu: int) -> int:
        return cost(op, machine, proportions.get(ipu), io_tiles=io_tiles).temporary_bytes

    return estimate(
        module, machine, args, results=results_of(captured, training),
        replicas=run_replicas(options),
        accumulate=training and options.Training.gradient_accumulation > 1,
        stash_bytes=stash_bytes, io_tiles=io_tiles, temporary=temporary,
        locations=locations_of(options))


def optimizer_cycles(function: ir.Operation, names: Sequence[str],
                     machine: Machine) -> dict[str | None, int]:
    """Cycles of the optimizer step program per weight: an op whose first operand is
    weight i's argument updates weight i; the other ops are under None."""
    cycles: dict[str | None, int] = Counter()
    for op in function.regions[0].blocks[0].operations:
        first = op.operands[0] if len(op.operands) else None
        weight = (names[first.arg_number] if isinstance(first, ir.BlockArgument)
                  and first.arg_number < len(names) else None)
        cycles[weight] += op_cost(op, machine).cycles
    return dict(cycles)


def epilogue_of(module: ir.Module, captured: Any, memory: MemoryEstimate, machine: Machine,
                replicas: int, update: Mapping[str | None, int],
                locations: Locations | None = None,
                optimizer_slots: Mapping[str, float] | None = None
                ) -> list[tuple[str, str, int, int]]:
    """The work ending each training step, per IPU, in order: the gradients' all-reduce
    (or reduce-scatter under RTS), Streaming Memory loads, the update, stores, the
    all-gather of sharded weights, then the copies of the updated weights that other IPUs
    read too (see the module docstring)."""
    locations = locations or Locations()
    index = {arg.name: i for i, arg in enumerate(captured.arguments)}
    params = symbol_table(module.operation)["main"].regions[0].blocks[0].arguments
    stride = 1 + max(memory.ipus, default=0)  # IPUs of one replica
    reduced: Counter[int] = Counter()  # all-reduced bytes per IPU
    sharded: Counter[int] = Counter()  # reduce-scattered, then all-gathered
    update_cycles: Counter[int] = Counter({0: update.get(None, 0)})
    loads, stores, copies = [], [], []
    for name in captured.trainable:
        value = params[index[name]]
        size, elements = value_bytes(value), _elements(value)
        holders = memory.argument_ipus.get(index[name], [0])
        updater = memory.update_ipus.get(index[name], holders[0])
        shard = (locations.optimizer.sharded(elements, replicas)
                 or locations.weights.sharded(elements, replicas))
        (sharded if shard else reduced)[updater] += size
        share = math.ceil(size / replicas) if shard else size
        cycles = update.get(name, 0)
        update_cycles[updater] += math.ceil(cycles / replicas) if shard else cycles
        remote = []
        slots = (optimizer_slots or {}).get(name, 0)
        if slots and locations.optimizer.off_chip(elements):
            remote.append((f"{name} (optimizer state x{slots:g})", math.ceil(share * slots)))
        if locations.weights.off_chip(elements):
            remote.append((name, share))
        loads += [("remote_load", what, updater, machine.streaming_cycles(nbytes))
                  for what, nbytes in remote]
        stores += [("remote_store", what, updater, machine.streaming_cycles(nbytes))
                   for what, nbytes in remote]
        copies += [("copy", f"{name} (updated on IPU {updater})", ipu,
                    machine.copy_cycles(size, updater, ipu, stride))
                   for ipu in holders if ipu != updater]
    work = []
    if replicas > 1:
        work += [("all_reduce", "gradients", ipu,
                  machine.collective_cycles(size, replicas, stride))
                 for ipu, size in sorted(reduced.items())]
        work += [("reduce_scatter", "gradients", ipu,
                  machine.ring_cycles(size, replicas, stride, phases=1))
                 for ipu, size in sorted(sharded.items())]
    work += loads
    work += [("optimizer", "optimizer step", ipu, cycles)
             for ipu, cycles in sorted(update_cycles.items()) if cycles]
    work += stores
    if replicas > 1:
        work += [("all_gather", "weights", ipu,
                  machine.ring_cycles(size, replicas, stride, phases=1))
                 for ipu, size in sorted(sharded.items())]
    return work + copies


def _elements(value: ir.Value) -> int:
    return math.prod(ir.ShapedType(value.type).shape) if isinstance(
        value.type, ir.ShapedType) else 1


def timeline_of(module: ir.Module, machine: Machine, captured: Any, options: Options,
                training: bool, epilogue: Sequence[tuple[str, str, int, int]] = (),
                cost: Callable[..., OpCost] = op_cost) -> Timeline:
    """One call of the model on the machine model."""
    function_type = ir.TypeAttr(
        symbol_table(module.operation)["main"].attributes["function_type"]).value
    results = len(ir.FunctionType(function_type).results)
    return simulate(
        module, options.device_iterations if training else 1, machine,
        micro_batches=(options.Training.gradient_accumulation if training
                       else options.device_iterations),
        streams=host_io.overlapped(module, streams_of(captured, training, results), options,
                                   training),
        proportions=options.available_memory_proportion,
        io_tiles=options.TensorLocations.num_io_tiles, epilogue=epilogue, cost=cost,
        io_streaming=host_io.io_streaming(options))


class MachineFigures:
    """Runs the machine model on a compiled module and keeps what it reported: the
    machine the options select, the timeline of the last call (the spec's cycle count,
    latencies and perf counters read it) and the writer of the profile report.

    Given by the executor: the `driver.Compiled` program (whose `timeline` and `memory`
    it fills), the options, whether the model trains, and what training adds (the
    optimizer's state slots per weight, the work ending each step)."""

    def __init__(self) -> None:
        self.machine: Machine | None = None
        self.last_run: Timeline | None = None  # the timeline of the last call since compiling
        self.report: weakref.finalize | None = None  # rewrites the profile report at the end

    def estimate(self, compiled: Compiled, options: Options, training: bool,
                 optimizer_slots: Mapping[str, float]) -> None:
        """Estimate memory per IPU (`compiled.memory`) and a first timeline
        (`compiled.timeline`) on the machine model; refuse a model that does not fit."""
        self.last_run = None
        if self.report is not None:  # a report of the previous compilation
            self.report.detach()
            self.report = None
        self.machine = machine_of(options)
        with compiled.context:
            first = timeline_of(compiled.module, self.machine, compiled.captured, options,
                                training, cost=compiled.costs)
            compiled.memory = memory_of(
                compiled.module, self.machine, compiled.captured, options, training,
                optimizer_slots, first.stash_bytes, compiled.costs)
        compiled.timeline = first
        compiled.memory.check()

    def simulate(self, compiled: Compiled, options: Options, training: bool,
                 epilogue: Sequence[tuple[str, str, int, int]]) -> None:
        """The timeline of one call with the work ending each step (training's update)."""
        if epilogue:
            with compiled.context:
                compiled.timeline = timeline_of(
                    compiled.module, self.machine, compiled.captured, options, training,
                    epilogue, compiled.costs)

    def release(self) -> None:
        """Write the profile report a last time, then drop the figures (destroy)."""
        if self.report is not None:
            self.report()
        self.report = None
        self.last_run = None
        self.machine = None

    def last(self, what: str) -> Timeline:
        """The timeline of the last run (the same for every call of a compiled model)."""
        if self.last_run is None:
            raise Error(f"the model must run before its {what} is known; call it first",
                        type="executor")
        return self.last_run

    def ran(self, compiled: Compiled, options: Options, kind: str) -> None:
        """After a call: the cycle count log (logCycleCount) and, after the first run,
        the profile report (`kind`: "training" or "inference", its default name)."""
        first = self.last_run is None
        timeline = self.last_run = compiled.timeline
        if options.log_cycle_count:
            _logging.logger.debug("Total number of IPU cycles: %d", timeline.total_cycles)
        if first:
            self._write_profile(compiled, options, kind)

    def _write_profile(self, compiled: Compiled, options: Options, kind: str) -> None:
        """The report of `enableProfiling` / POPLAR_ENGINE_OPTIONS autoReport, written
        after the first run and again (with later tracepoints) when the executor is
        destroyed or the interpreter exits."""
        where = profiling.profile_settings(options.profile_dir, options.model_name, kind)
        if where is None:
            return
        directory, report_name = where
        timeline, memory = compiled.timeline.to_dict(), compiled.memory.to_dict()
        settings = options.toDict()

        def write() -> None:
            # start-up cost: the report's plotly takes about 50 ms to import
            from poptorch.runtime.machine.profile import write_report

            paths = write_report(directory, report_name, timeline, memory,
                                 profiling._recorder.events(), settings)
            _logging.logger.debug("profile report: %s", paths["html"])

        write()
        self.report = weakref.finalize(self, write)
