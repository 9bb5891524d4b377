"""Per-IPU memory estimate of a compiled module, and the out-of-memory check.

`estimate(module, machine, args, ...)` reads the module the multi-IPU passes leave (stage
functions called from @main with `#ipu.stage<S, I>`, optionally `ipu.phase`; `ipu.copy`
between IPUs; `ipu.remote_load` from Streaming Memory) or, without blocks, @main alone
on IPU 0, and counts bytes per IPU by tensor class:

- weights: parameters, buffers and constants (lifted ones and `ipu.constant`s) read on
  the IPU; an argument read by stages on several IPUs counts on each (a tied or reused
  weight: each IPU holds a copy, which the IPU updating it sends after the optimizer
  step, `MemoryEstimate.update_ipus`).
- activations: a liveness walk over each stage function's ops (@main's for one IPU):
  a value lives from its op to its last use; values received from another IPU
  (`ipu.copy`) or from Streaming Memory live from the start of the function. What an
  op's results are is its `op_memory.MEMORY_RULES` entry: views (`ipu.reshape`,
  `permute`, `broadcast`, `slice`, `concat`) allocate nothing and keep their sources
  alive: PopTorch lowers them to Poplar tensor views (`reshape`,
  `dimShuffle`, `broadcast`, `slice`, `poplar::concat`; graphcore/poptorch,
  poptorch_compiler/lower_to_poplar/ops/Reshapes.cpp and TensorOps.cpp). An IPU runs
  its stages one at a time.
- recomputation: the values ops cloned by ipu-recompute (`ipu.recomputed`) make in a
  backward stage, alive only there; the stash then holds only the stage's inputs and
  checkpoints (the timeline's figure).
- stash: activations kept between a forward stage and its backward stage, as the
  timeline measured them (`Timeline.stash_bytes`): a stage's results and the inputs it
  received from another IPU that its backward stage reads again (`tasks`).
- optimizer: `optimizer_slots` times each trainable weight's bytes (its state in units
  of the weight's size: fp32 moments of an fp16 weight count 2 each), on the IPU
  updating it: the one computing the gradient @main returns for it.
- gradients: without gradient accumulation, the gradients @main returns (`results`
  kinds "grad"), alive from the op computing them to the end of the step (the optimizer
  runs after the program; a later stage on the same IPU still holds them); with it, one
  accumulator per trainable weight, always live, on the IPU updating it, while each
  micro-batch's gradient is an activation.
- temporary: `temporary(op, ipu)` of the op running (the cost model's scratch memory,
  injected: the slabs it receives and its partial sums).
- code: vertex code and state (see `code_bytes`; an assumption, not a measured figure).
- io: the host inputs (arguments of kind "input" or "tangent") landing on the IPU.

Mutated buffers @main returns ("buffer" results) are written in place: not activations.

Tensor locations (`Locations`, the plain mirror of `Options.TensorLocations`) follow
PopART's `TensorLocationSettings`: a class stored off chip (`on_chip=False`) moves each
of its tensors of at least `min_elements_off_chip` elements (PopART's default 2) to
Streaming Memory, where it counts as `off_chip`; on chip remains the buffer the largest
of them is loaded into around its use (one at a time). Replicated tensor sharding
(`replicated_sharding`, replicas > 1, at least `min_elements_rts` elements, PopART's
default 8192; sessionoptions.hpp of graphcore/popart) stores 1/replicas of a weight or
of optimizer state per replica; a sharded weight is gathered into a full-size buffer to
be used (the largest one counts), a sharded optimizer state is updated as a shard.
Activation locations apply to the stash: off chip, it leaves the IPU (whatever its
tensors' sizes: the timeline gives one total) and the stashed values a stage reads count
in its liveness walk as values loaded at its start.

Phased execution: weights and inputs @main streams in with `ipu.remote_load {ipu}` live
in Streaming Memory and count on chip, with their optimizer state and accumulators, only
in the phases that load them. An IPU's figures are those of its fullest phase; code,
`ipu.constant`s and weights read directly are there in every phase.

What an IPU needs is the largest sum, over the moments of its program, of what is alive
at once: at each op of each function it runs (in each phase), the always-live tensors
(weights, constants, optimizer state, accumulators, stash, code, io) plus the values the
walk finds alive there plus that op's temporary (`_Estimator.moments`). `IpuMemory`'s
classes are the breakdown at that fullest moment (they sum to its total); `peaks` keeps
each class's own largest figure. Summing those peaks instead, as the estimate once did,
counts a large scratch and a large set of activations that are never alive together.

Where the parts live: `memory_estimate` (the inputs and results, the out-of-memory
error), `op_memory` (the per-op rules and the code bytes), `liveness` (one function's
walk); this module reads the module's structure and places every tensor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.placement import int_attribute, placement, symbol_table
from poptorch.dialects.structure import CopyOp, RemoteLoadOp
from poptorch.errors import Error
from poptorch.runtime.machine.liveness import Peak, function_ops, liveness
from poptorch.runtime.machine.memory_estimate import (
    CLASSES,
    ArgInfo,
    IpuMemory,
    Location,
    Locations,
    MemoryEstimate,
    Tensor,
)
from poptorch.runtime.machine.op_memory import code_bytes, on_tile, tiles_of
from poptorch.runtime.machine.system import Machine, value_bytes

__all__ = ["ArgInfo", "IpuMemory", "Location", "Locations", "MemoryEstimate", "Tensor",
           "estimate"]

LARGEST = 5  # tensors named per IPU
DEFAULT_LOCATIONS = Locations()  # every class on chip, no sharding


def _elements(value: ir.Value) -> int:
    return math.prod(ir.ShapedType(value.type).shape) if isinstance(
        value.type, ir.ShapedType) else 1


@dataclass
class _Record:
    """A tensor of a class on an IPU, in one phase or (`phase` None) in all."""

    ipu: int
    phase: int | None
    cls: str
    name: str
    on_chip: int
    off_chip: int = 0


@dataclass
class _Unit:
    """A function run on an IPU: a stage call, or @main without stages. `positions` are
    its ops in walk order (`function_ops`, the positions of `peak.curve`); `ops` those
    running code or allocating (no `func.return`, no `func.call`); `carried` the bytes
    of gradients that earlier units on the IPU returned, still alive while it runs."""

    ipu: int
    phase: int | None
    ops: list[ir.Operation]
    peak: Peak
    positions: list[ir.Operation]
    carried: int = 0


@dataclass
class _Moment:
    """The fullest moment of an IPU: its phase, bytes by class, the on-chip records, the
    unit running and its position, and the op whose temporary counts then."""

    total: int
    phase: int | None
    classes: dict[str, int]
    records: list[_Record]
    unit: _Unit | None
    position: int | None
    scratch_op: ir.Operation | None


class _Estimator:
    """Reads @main, places every tensor and sums them per IPU (module docstring)."""

    def __init__(self, module: ir.Module, machine: Machine, args: Sequence[ArgInfo],
                 results: Sequence[tuple[str, object]], replicas: int, accumulate: bool,
                 locations: Locations, io_tiles: int) -> None:
        if replicas < 1:
            raise Error(f"replicas must be at least 1, got {replicas}", type="runtime")
        self.replicas, self.accumulate, self.locations = replicas, accumulate, locations
        self.tiles, self.per_tile = machine.compute_tiles(io_tiles), machine.memoryBytesPerTile
        self.available = self.tiles * self.per_tile
        self.functions = symbol_table(module.operation)
        if "main" not in self.functions:
            raise Error("the module has no func.func @main to estimate", type="runtime")
        self.main = self.functions["main"]
        self.params = list(self.main.regions[0].blocks[0].arguments)
        if len(args) != len(self.params):
            raise Error(f"@main has {len(self.params)} arguments but {len(args)} ArgInfo "
                        "were given; describe every argument, in order", type="runtime")
        for index, info in enumerate(args):
            if info.kind not in ("parameter", "buffer", "constant", "input", "tangent"):
                raise Error(f"argument {index} ({info.name}) has the unknown kind "
                            f"'{info.kind}'", type="runtime")
        self.args = list(args)
        self.results = [(kind, str(name)) for kind, name in results]
        self.records: list[_Record] = []
        self.buffers: dict[tuple[int, str], tuple[int, str]] = {}  # (ipu, class) -> largest
        self.units: list[_Unit] = []
        self.uses: dict[int, set[tuple[int, int | None, bool]]] = {}
        self.updaters: dict[int, int] = {}  # `MemoryEstimate.update_ipus`

    # ---- the module's structure ------------------------------------------------------
    @staticmethod
    def where(call: ir.Operation) -> tuple[int, int | None]:
        return placement(call)[1], int_attribute(call, "ipu.phase")

    def returned(self, call: ir.Operation | None) -> dict[int, tuple[str, str]]:
        """(kind, name) of the values `call` returns that @main returns, by result number
        (@main's own results when `call` is None)."""
        found = {}
        for j, value in enumerate(function_ops(self.main)[-1].operands):
            kind = self.results[j] if j < len(self.results) else ("output", str(j))
            if call is None:
                found[j] = kind
            elif isinstance(value, ir.OpResult) and value.owner.operation == call:
                found[value.result_number] = kind
        return found

    @staticmethod
    def excluded(kinds: Mapping[int, tuple[str, str]]) -> set[int]:
        return {k for k, (kind, _) in kinds.items() if kind == "buffer"}

    def source(self, value: ir.Value, ipu: int) -> tuple[str, object]:
        """Where a stage call's operand comes from: ("arg", (index, streamed)),
        ("received", from where) or ("stash", None)."""
        if not isinstance(value, ir.OpResult):
            return "arg", (value.arg_number, False)
        owner = value.owner.operation
        if op_class(owner) is CopyOp:
            return "received", f"copied from IPU {int_attribute(owner, 'src_ipu')}"
        if op_class(owner) is RemoteLoadOp:
            inner = owner.operands[0]
            if not isinstance(inner, ir.OpResult):
                return "arg", (inner.arg_number, True)
            return "received", "loaded from Streaming Memory"
        if owner.name == "func.call" and "ipu.stage" in owner.attributes:
            src = self.where(owner)[0]
            return ("stash", None) if src == ipu else ("received", f"from IPU {src}")
        return "received", f"from {owner.name}"

    def read(self) -> None:
        """Units (functions run per IPU), argument uses, gradients and the IPUs updating
        the weights."""
        calls = [op for op in function_ops(self.main)
                 if op.name == "func.call" and "ipu.stage" in op.attributes]
        self.updaters = self.gradient_ipus(bool(calls))
        if not calls:
            kinds = self.returned(None)
            for index, arg in enumerate(self.params):
                if any(use.owner.name != "func.return" for use in arg.uses):
                    self.uses.setdefault(index, set()).add((0, None, False))
            self.unit(0, None, self.main, {}, kinds)
        for call in calls:
            ipu, phase = self.where(call)
            received: dict[int, str] = {}
            for k, operand in enumerate(call.operands):
                kind, info = self.source(operand, ipu)
                if kind == "arg":
                    index, streamed = info
                    self.uses.setdefault(index, set()).add(
                        (ipu, phase if streamed else None, streamed))
                elif kind == "received":
                    received[k] = info
                elif self.locations.activations.on_chip is False:  # stash off chip
                    received[k] = "restored from Streaming Memory"
            name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            if name not in self.functions:
                raise Error(f"@main calls @{name}, which the module does not define",
                            type="runtime")
            self.unit(ipu, phase, self.functions[name], received, self.returned(call))

    def gradient_ipus(self, staged: bool) -> dict[int, int]:
        """Trainable argument index -> the IPU computing the gradient @main returns for
        it: the stage call's (or the `ipu.copy`'s destination), IPU 0 without stages."""
        index = {info.name: k for k, info in enumerate(self.args) if info.trainable}
        found = {}
        for value, (kind, name) in zip(function_ops(self.main)[-1].operands, self.results,
                                       strict=False):
            if kind != "grad" or name not in index:
                continue
            owner = value.owner.operation if isinstance(value, ir.OpResult) else None
            if not staged:
                found[index[name]] = 0
            elif owner is not None and op_class(owner) is CopyOp:
                found[index[name]] = int_attribute(owner, "dst_ipu")
            elif owner is not None and owner.name == "func.call" and "ipu.stage" in \
                    owner.attributes:
                found[index[name]] = placement(owner)[1]
        return found

    def unit(self, ipu: int, phase: int | None, func: ir.Operation,
             received: dict[int, str], kinds: dict[int, tuple[str, str]]) -> None:
        positions = function_ops(func)
        ops = [op for op in positions if op.name not in ("func.return", "func.call")]
        grads = {k for k, (kind, _) in kinds.items() if kind == "grad"}
        returned = {} if self.accumulate else dict.fromkeys(grads, "gradients")
        peak = liveness(func, received, self.excluded(kinds), returned, self.tiles,
                        grads if self.accumulate else frozenset())
        carried = sum(u.peak.curve.get("gradients", [0])[-1] for u in self.units
                      if u.ipu == ipu and u.phase == phase and u.positions)
        self.units.append(_Unit(ipu, phase, ops, peak, positions, carried))
    # ---- weights, optimizer state, accumulators, inputs, stash ----------------------
    def place_arguments(self) -> None:
        loc = self.locations
        accumulators = Location(loc.accumulators.on_chip, None,
                                loc.accumulators.min_elements_off_chip)  # no RTS
        for index, places in sorted(self.uses.items()):
            info, value = self.args[index], self.params[index]
            size, n = value_bytes(value), _elements(value)
            # a weight held on several IPUs has its state on the one updating it
            updater = self.updaters.get(index)
            if updater not in {ipu for ipu, _, _ in places}:
                updater = None
            for ipu, phase, streamed in sorted(places, key=lambda p: (p[0], p[1] or 0)):
                if info.kind in ("input", "tangent"):
                    self.records.append(_Record(ipu, phase, "io", f"input {info.name}", size))
                    continue
                self.stored(ipu, phase, streamed, "weights", info.name, size, n,
                            loc.weights, gather=True)
                if updater is not None and ipu != updater:
                    continue
                if info.trainable and info.optimizer_slots:
                    self.stored(ipu, phase, streamed, "optimizer",
                                f"{info.name} (optimizer state x{info.optimizer_slots:g})",
                                math.ceil(size * info.optimizer_slots), n, loc.optimizer,
                                gather=False)
                if info.trainable and self.accumulate:
                    self.stored(ipu, phase, streamed, "gradients", f"{info.name} (accumulator)",
                                size, n, accumulators, gather=False)

    def stored(self, ipu: int, phase: int | None, streamed: bool, cls: str, name: str,
               size: int, elements: int, location: Location, gather: bool) -> None:
        """Record a weight-like tensor where its location and sharding put it."""
        sharded = location.sharded(elements, self.replicas)
        stored = math.ceil(size / self.replicas) if sharded else size
        if streamed:  # phased execution: on chip in its phase, in Streaming Memory always
            self.records.append(_Record(ipu, phase, cls, name, size, stored))
        elif location.off_chip(elements):
            self.records.append(_Record(ipu, None, cls, name, 0, stored))
            self.buffer(ipu, cls, f"{name} (loaded from Streaming Memory)",
                        size if gather else stored)
        else:
            self.records.append(_Record(ipu, None, cls, name, stored))
            if sharded and gather:
                self.buffer(ipu, cls, f"{name} (gathered from replicas)", size)

    def buffer(self, ipu: int, cls: str, name: str, size: int) -> None:
        """Off-chip and sharded tensors of a class share the buffer of the largest."""
        if size > self.buffers.get((ipu, cls), (0, ""))[0]:
            self.buffers[ipu, cls] = (size, name)

    def place_stash(self, stash_bytes: Mapping[int, int]) -> None:
        for ipu, size in sorted(stash_bytes.items()):
            if not size:
                continue
            name = f"stashed activations (IPU {ipu})"
            off = self.locations.activations.on_chip is False
            self.records.append(_Record(ipu, None, "stash", name, 0 if off else size,
                                        size if off else 0))

    # ---- per IPU ------------------------------------------------------------------------
    def moments(self, ipu: int, units: list[_Unit], code: int, constants: int,
                temporary: Callable[[ir.Operation, int], int], peaks: dict[str, int]
                ) -> _Moment:
        """The fullest moment of `ipu` over its phases, units and their positions: what
        is always alive there (its records, code, constants) plus what the unit running
        has alive (its curve, the gradients earlier units returned) plus the temporary of
        the op running. `peaks` gathers each class's largest figure on the way."""
        best = None
        for phase in sorted({u.phase for u in units}, key=lambda p: -1 if p is None else p):
            records = [r for r in self.records
                       if r.ipu == ipu and r.phase in (None, phase) and r.on_chip]
            static = dict.fromkeys(CLASSES, 0)
            for r in records:
                static[r.cls] += r.on_chip
            static["weights"] += constants
            static["code"] = code
            for unit in (u for u in units if u.phase == phase):
                for position, op in [(None, None)] + list(enumerate(unit.positions)):
                    classes = dict(static)
                    classes["gradients"] += unit.carried
                    scratch = 0
                    if position is not None:
                        for cls, size in unit.peak.at(position).items():
                            classes[cls] += size
                        if op.name not in ("func.return", "func.call"):
                            scratch = temporary(op, ipu)
                    classes["temporary"] = scratch
                    for cls, size in classes.items():
                        peaks[cls] = max(peaks.get(cls, 0), size)
                    total = sum(classes.values())
                    if best is None or total > best.total:
                        best = _Moment(total, phase, classes, records, unit, position,
                                       op if scratch else None)
        return best

    def ipu_memory(self, ipu: int, temporary: Callable[[ir.Operation, int], int]) -> IpuMemory:
        units = [u for u in self.units if u.ipu == ipu]
        code, code_first = code_bytes([op for u in units for op in u.ops], self.tiles)
        constants = [t for u in units for t in u.peak.tensors("weights", "constants")]
        peaks: dict[str, int] = {}
        best = self.moments(ipu, units, code, sum(size for size, _, _ in constants),
                            temporary, peaks)
        tensors = [(r.on_chip, r.cls, lambda r=r: r.name) for r in best.records]
        tensors += constants
        if best.position is not None:
            peak = best.unit.peak
            tensors += [(size, cls, peak.name(value, origin))
                        for size, value, origin, cls in peak.live_at(best.position)]
        first = code_first + sum(on_tile(size, self.tiles) for size, _, _ in tensors)
        scratch_op = best.scratch_op
        if scratch_op is not None:
            spread = max((value_bytes(v) for v in [*scratch_op.operands, *scratch_op.results]),
                         default=0)
            first += math.ceil(best.classes["temporary"] / tiles_of(spread, self.tiles))
        largest = sorted(tensors, key=lambda t: -t[0])[:LARGEST]
        off = {r.name: r.off_chip for r in self.records if r.ipu == ipu and r.off_chip}
        moment = ""
        if best.position is not None:
            op = best.unit.positions[best.position]
            result = op.results[0] if len(op.results) else None
            moment = (best.unit.peak.name(result, "")() if result is not None
                      else f"{op.name} in @{best.unit.peak.function}")
        return IpuMemory(self.available, best.classes,
                         [Tensor(name(), cls, size) for size, cls, name in largest],
                         sum(off.values()), math.ceil(best.total / self.tiles), first,
                         best.phase, {c: peaks.get(c, 0) for c in CLASSES}, moment)

    def estimate(self, stash_bytes: Mapping[int, int],
                 temporary: Callable[[ir.Operation, int], int]) -> MemoryEstimate:
        self.read()
        self.place_arguments()
        self.place_stash(stash_bytes)
        for (ipu, cls), (size, name) in sorted(self.buffers.items()):
            self.records.append(_Record(ipu, None, cls, name, size))
        ipus = {ipu: self.ipu_memory(ipu, temporary)
                for ipu in sorted({u.ipu for u in self.units})}
        off_chip = {r.name: r.off_chip for r in self.records if r.off_chip}
        return MemoryEstimate(ipus, sum(off_chip.values()), self.tiles, self.per_tile,
                              {index: sorted({ipu for ipu, _, _ in places})
                               for index, places in sorted(self.uses.items())},
                              dict(sorted(self.updaters.items())))


def estimate(module: ir.Module, machine: Machine, args: Sequence[ArgInfo], *,
             results: Sequence[tuple[str, object]] = (), replicas: int = 1,
             accumulate: bool = False, stash_bytes: Mapping[int, int] | None = None,
             locations: Locations = DEFAULT_LOCATIONS, io_tiles: int = 0,
             temporary: Callable[[ir.Operation, int], int] = lambda op, ipu: 0
             ) -> MemoryEstimate:
    """The memory each IPU of `machine` needs to run `module` (see the module docstring).

    `args` describe @main's arguments in order; `results` gives (kind, name) for @main's
    results in order ("output", "grad" or "buffer"; as `TrainingCaptured.results`),
    missing ones being outputs; `replicas` is the replication factor; `accumulate` says
    that gradients are accumulated over micro-batches; `stash_bytes` is
    `Timeline.stash_bytes`; `io_tiles` are taken from every IPU's compute tiles (their
    memory holds streams); `temporary(op, ipu)` is the cost model's scratch bytes of an op.
    """
    estimator = _Estimator(module, machine, args, results, replicas, accumulate, locations,
                           io_tiles)
    return estimator.estimate(stash_bytes or {}, temporary)
