"""What the machine model reports about a compiled model: the options and the captured
program turned into the arguments of `runtime.machine`, `runtime.memory.estimate` and
`runtime.timeline.simulate`.

- Machine: `useOfflineIpuTarget(v)` selects `machine_for(v)` (1: GC2, 2: GC200, 21:
  GC200 with FP8); otherwise the GC200.
- Host streams: every user input is streamed from the host per micro-batch, every output
  the model returns (not the buffers it updates, not the gradients) back to it. The
  loss's tangent is a constant of the program, not a stream.
- Memory: weights, buffers and inputs from the captured arguments, optimizer state
  slots from the optimizer's state layout, `Options.TensorLocations`, the replication
  factor, gradient accumulation, the stash the timeline found, and each op's temporary
  bytes under its available memory proportion.
- A training step ends with the gradient all-reduce over replicas (a ring over the
  IPU-Links, per IPU for the gradients of the weights it updates) and the optimizer's
  update of each weight on the IPU computing its gradient (ops not tied to one weight,
  such as a global gradient norm, on IPU 0); a weight read on several IPUs (a tied or
  reused weight) is updated once and then copied over the IPU-Links to the others.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch_mlir import ir

from poptorch import _logging
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
    index, name) of the outputs; `results` is @main's number of results."""
    inputs = [(index, f"input{arg.name}") for index, arg in enumerate(captured.arguments)
              if arg.kind == "input"]
    if training:
        kinds = [kind for kind, _ in captured.results]
    else:
        n_mut = len(captured.mutated_buffers)
        kinds = ["buffer"] * n_mut + ["output"] * (results - n_mut)
    outputs = [(index, f"output{n}") for n, index in
               enumerate(i for i, kind in enumerate(kinds) if kind == "output")]
    return HostStreams(inputs, outputs)


def results_of(captured: Any, training: bool) -> list[tuple[str, Any]]:
    """(kind, name) of @main's results, as `runtime.memory.estimate` takes them."""
    if training:
        return list(captured.results)
    return [("buffer", name) for name in captured.mutated_buffers]


def _location(settings: Any) -> Location:
    """`runtime.memory.Location` of a `poptorch.TensorLocationSettings` (or None)."""
    if settings is None:
        return Location()
    return Location(settings.on_chip, settings.use_replicated_tensor_sharding,
                    settings.min_elements_for_off_chip,
                    settings.min_elements_for_replicated_tensor_sharding)


def memory_of(module: ir.Module, machine: Machine, captured: Any, options: Options,
              training: bool, optimizer_slots: Mapping[str, int],
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
        replicas=options.replication_factor,
        accumulate=training and options.Training.gradient_accumulation > 1,
        stash_bytes=stash_bytes, io_tiles=io_tiles, temporary=temporary,
        locations=Locations(_location(locations.weight_location),
                            _location(locations.activation_location),
                            _location(locations.optimizer_location),
                            _location(locations.accumulator_location)))


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
                replicas: int, update: Mapping[str | None, int]
                ) -> list[tuple[str, str, int, int]]:
    """The work ending each training step, per IPU: all-reduce, the update, then the
    copies of the updated weights that other IPUs read too."""
    index = {arg.name: i for i, arg in enumerate(captured.arguments)}
    params = symbol_table(module.operation)["main"].regions[0].blocks[0].arguments
    grad_bytes: Counter[int] = Counter()
    update_cycles: Counter[int] = Counter({0: update.get(None, 0)})
    copies = []
    for name in captured.trainable:
        size = value_bytes(params[index[name]])
        holders = memory.argument_ipus.get(index[name], [0])
        updater = memory.update_ipus.get(index[name], holders[0])
        grad_bytes[updater] += size
        update_cycles[updater] += update.get(name, 0)
        copies += [("copy", f"{name} (updated on IPU {updater})", ipu,
                    machine.link_cycles(size)) for ipu in holders if ipu != updater]
    work = []
    if replicas > 1:
        work += [("all_reduce", "gradients", ipu, machine.collective_cycles(size, replicas))
                 for ipu, size in sorted(grad_bytes.items())]
    work += [("optimizer", "optimizer step", ipu, cycles)
             for ipu, cycles in sorted(update_cycles.items()) if cycles]
    return work + copies


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
        streams=streams_of(captured, training, results),
        proportions=options.available_memory_proportion,
        io_tiles=options.TensorLocations.num_io_tiles, epilogue=epilogue, cost=cost)


class MachineFigures:
    """PoplarExecutor's part that runs the machine model on the compiled module and
    reports its figures (the spec's cycle count, latencies and perf counters, the
    profile report, and beyond PopTorch the timeline and the memory estimate)."""

    _last_run: Timeline | None = None  # the timeline of the last call since compiling
    _finalizer: weakref.finalize | None = None  # rewrites the profile report at the end

    def _optimizer_slots(self) -> dict[str, int]:
        """Optimizer state tensors per weight (none in inference)."""
        return {}

    def _estimate_memory(self) -> None:
        """Estimate memory per IPU on the machine model and refuse a model that does not
        fit, before its weights are uploaded."""
        compiled, opts = self._compiled, self._options
        self._last_run = None
        if self._finalizer is not None:  # a report of the previous compilation
            self._finalizer.detach()
            self._finalizer = None
        self._machine = machine_of(opts)
        with compiled.context:
            first = timeline_of(compiled.module, self._machine, compiled.captured, opts,
                                self._training, cost=compiled.costs)
            compiled.memory = memory_of(
                compiled.module, self._machine, compiled.captured, opts, self._training,
                self._optimizer_slots(), first.stash_bytes, compiled.costs)
        compiled.timeline = first
        compiled.memory.check()

    def _release_figures(self) -> None:
        """Write the profile report a last time, then drop the figures (destroy)."""
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = None
        self._last_run = None
        self.__dict__.pop("_machine", None)

    def _step_end(self) -> list[tuple[str, str, int, int]]:
        """The machine model's work after each step's micro-batches (training's update)."""
        return []

    def _simulate(self) -> None:
        """The machine model's timeline of one call, with the work ending each step."""
        compiled = self._compiled
        epilogue = self._step_end()
        if epilogue:
            with compiled.context:
                compiled.timeline = timeline_of(
                    compiled.module, self._machine, compiled.captured, self._options,
                    self._training, epilogue, compiled.costs)

    def getTimeline(self) -> Timeline:  # noqa: N802 - beyond PopTorch, named in its style
        """The machine model's simulated timeline of one call: per-IPU events (compute,
        IPU-Link copies, streaming-memory and host transfers, the step's all-reduce and
        optimizer update), total cycles, idle fraction, stash bytes, perf counters and
        latencies (`poptorch.runtime.machine.timeline.Timeline`; `.to_dict()` for JSON)."""
        self._check_alive()
        if self._compiled is None:
            raise Error("the model must be compiled before it has a timeline",
                        type="executor")
        return self._compiled.timeline

    def getMemoryEstimate(self) -> MemoryEstimate:  # noqa: N802 - beyond PopTorch
        """The machine model's memory estimate: bytes per IPU by tensor class (weights,
        activations, stash, optimizer state, gradients, temporary, code, io), per tile,
        the largest tensors (`poptorch.runtime.machine.memory.MemoryEstimate`)."""
        self._check_alive()
        if self._compiled is None:
            raise Error("the model must be compiled before it has a memory estimate",
                        type="executor")
        return self._compiled.memory

    def _last(self, what: str) -> Timeline:
        """The timeline of the last run (the same for every call of a compiled model)."""
        self._check_alive()
        if self._compiled is None or self._last_run is None:
            raise Error(f"the model must run before its {what} is known; call it first",
                        type="executor")
        return self._last_run

    def cycleCount(self) -> int:  # noqa: N802
        """Cycles the (first replica's) IPUs ran in the last call, on the machine model."""
        return self._last("cycle count").total_cycles

    def getLatency(self) -> tuple[float, float, float]:  # noqa: N802
        """Round-trip latency of the last call's iterations (seconds): first input
        requested to last output written back; (minimum, maximum, average)."""
        return self._last("latency").latencies()["latency"]

    def getComputeLatency(self) -> tuple[float, float, float]:  # noqa: N802
        """Last input transferred to last output available, per iteration of the last
        call (seconds): (minimum, maximum, average)."""
        return self._last("compute latency").latencies()["compute"]

    def getHostIpuLatency(self) -> tuple[float, float, float]:  # noqa: N802
        """First input requested to last input transferred, per iteration of the last
        call (seconds): (minimum, maximum, average)."""
        return self._last("host-IPU latency").latencies()["host_ipu"]

    def getIpuHostLatency(self) -> tuple[float, float, float]:  # noqa: N802
        """First output available to last output written back, per iteration of the last
        call (seconds): (minimum, maximum, average)."""
        return self._last("IPU-host latency").latencies()["ipu_host"]

    def getPerfCounters(self) -> dict[str, list[list[float]]]:  # noqa: N802
        """'input', 'input_complete', 'output', 'output_complete': per input (output)
        tensor, the time in seconds of each iteration of the last call."""
        return self._last("perf counters").perf_counters()

    def _after_run(self) -> None:
        """Cycle count log (logCycleCount) and, after the first run, the profile report."""
        first = self._last_run is None
        timeline = self._last_run = self._compiled.timeline
        if self._options.log_cycle_count:
            _logging.logger.debug("Total number of IPU cycles: %d", timeline.total_cycles)
        if first:
            self._write_profile()

    def _write_profile(self) -> None:
        """The report of `enableProfiling` / POPLAR_ENGINE_OPTIONS autoReport, written
        after the first run and again (with later tracepoints) when the executor is
        destroyed or the interpreter exits."""
        from poptorch import profiling

        opts = self._options
        where = profiling.profile_settings(opts.profile_dir, opts.model_name,
                                           "training" if self._training else "inference")
        if where is None or self._compiled is None:
            return
        directory, name = where
        timeline, memory = self._compiled.timeline.to_dict(), self._compiled.memory.to_dict()
        options = opts.toDict()

        def write() -> None:
            from poptorch.runtime.machine.profile import write_report

            paths = write_report(directory, name, timeline, memory,
                                 profiling._recorder.events(), options)
            _logging.logger.debug("profile report: %s", paths["html"])

        write()
        self._finalizer = weakref.finalize(self, write)
