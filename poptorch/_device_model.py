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
  IPU-Links, per IPU for the gradients of the weights it holds) and the optimizer's
  update of each weight on the IPU(s) holding it (ops not tied to one weight, such as
  a global gradient norm, on IPU 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from torch_mlir import ir

from poptorch.runtime.cost import op_cost
from poptorch.runtime.machine import GC200, Machine, machine_for, value_bytes
from poptorch.runtime.memory import ArgInfo, Location, Locations, MemoryEstimate, estimate
from poptorch.runtime.timeline import HostStreams, Timeline, simulate

from .options import Options


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
              stash_bytes: Mapping[int, int]) -> MemoryEstimate:
    """The per-IPU memory estimate of the compiled @main."""
    trainable = set(captured.trainable) if training else set()
    args = [ArgInfo(a.name, a.kind, a.name in trainable, optimizer_slots.get(a.name, 0))
            for a in captured.arguments]
    locations = options.TensorLocations
    io_tiles = locations.num_io_tiles
    proportions = options.available_memory_proportion

    def temporary(op: ir.Operation, ipu: int) -> int:
        return op_cost(op, machine, proportions.get(ipu), io_tiles=io_tiles).temporary_bytes

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
    """The work ending each training step, per IPU: all-reduce, then the update."""
    index = {arg.name: i for i, arg in enumerate(captured.arguments)}
    params = _main(module).regions[0].blocks[0].arguments
    grad_bytes: Counter[int] = Counter()
    update_cycles: Counter[int] = Counter({0: update.get(None, 0)})
    for name in captured.trainable:
        size = value_bytes(params[index[name]])
        for ipu in memory.argument_ipus.get(index[name], [0]):
            grad_bytes[ipu] += size
            update_cycles[ipu] += update.get(name, 0)
    work = []
    if replicas > 1:
        work += [("all_reduce", "gradients", ipu, machine.collective_cycles(size, replicas))
                 for ipu, size in sorted(grad_bytes.items())]
    work += [("optimizer", "optimizer step", ipu, cycles)
             for ipu, cycles in sorted(update_cycles.items()) if cycles]
    return work


def _main(module: ir.Module) -> ir.Operation:
    return next(op.operation for op in module.body.operations
                if "sym_name" in op.attributes
                and ir.StringAttr(op.attributes["sym_name"]).value == "main")


def timeline_of(module: ir.Module, machine: Machine, captured: Any, options: Options,
                training: bool, epilogue: Sequence[tuple[str, str, int, int]] = ()
                ) -> Timeline:
    """One call of the model on the machine model."""
    function_type = ir.TypeAttr(_main(module).attributes["function_type"]).value
    results = len(ir.FunctionType(function_type).results)
    return simulate(
        module, options.device_iterations if training else 1, machine,
        micro_batches=(options.Training.gradient_accumulation if training
                       else options.device_iterations),
        streams=streams_of(captured, training, results),
        proportions=options.available_memory_proportion,
        io_tiles=options.TensorLocations.num_io_tiles, epilogue=epilogue)

