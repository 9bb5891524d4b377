"""ipu-schedule-phases: phased execution's streaming-memory traffic, by Liveness.

In SerialPhasedExecution and ParallelPhasedExecution (spec 4.4.2) the model runs one
phase at a time, and weights and activations move between the IPUs and streaming
memory around each phase. After ipu-outline-stages and ipu-insert-copies, the stage
calls carry `ipu.phase`; this pass:

- gives backward stages their phase, mirrored after the forward phases: with forward
  phases 0, 1, 2 the backward ones are 4, 3, 2, the last forward phase shared with the
  first backward one, or 6, 5, 4 with `separate-backward-phase`
  (useSeparateBackwardPhase; ipu-outline-stages must then keep the last forward and
  first backward stages apart, with its own `separate-backward` option);
- loads every function argument (weights and inputs live in streaming memory) onto the
  IPU of each phase that uses it: `"ipu.remote_load"(%arg) {ipu = i}`, once per phase
  and IPU;
- moves activations crossing phases according to `liveness` (poptorch.Liveness):
  `always-live` keeps them on chip (an `ipu.copy` between IPUs, as inserted before);
  `off-chip-after-each-phase` stores every one after its phase (`ipu.remote_store`)
  and loads it in the phase that uses it; `off-chip-after-fwd` and
  `off-chip-after-fwd-no-overlap` do so only for activations a backward phase uses
  (the latter tags the transfers `ipu.no_overlap`: they may not overlap compute).
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.ipu import i64
from poptorch.dialects.placement import functions, producer, symbol
from poptorch.dialects.structure import CopyOp, RemoteLoadOp, RemoteStoreOp

from .registry import Option, Pass, register
from .stages import StageCall, stage_calls

LIVENESS = ("always-live", "off-chip-after-fwd", "off-chip-after-fwd-no-overlap",
            "off-chip-after-each-phase")


@register
class SchedulePhases(Pass):
    argument = "ipu-schedule-phases"
    description = "Phased execution: backward phases and streaming-memory loads and stores"
    options = (
        Option("liveness", str, "always-live", f"Where activations live between phases: "
                                               f"{', '.join(LIVENESS)}"),
        Option("separate-backward-phase", bool, False,
               "Give the first backward phase its own phase (useSeparateBackwardPhase)"),
    )

    def run(self, module: ir.Operation) -> None:
        if self.liveness not in LIVENESS:
            raise self.error(module, f"liveness must be one of {', '.join(LIVENESS)}, got "
                                     f"'{self.liveness}'")
        self.callees = {symbol(f): f for f in functions(module)}
        for func in functions(module):
            calls = stage_calls(func)
            if not calls:
                continue
            missing = next((c for c in calls if c.phase is None), None)
            if missing is not None:
                raise self.error(missing.op, f"stage {missing.stage} has no ipu.phase; phased "
                                             "execution needs every stage in a Phase")
            self._backward_phases(calls)
            self._transfers(func, calls)

    def _backward_phases(self, calls: list[StageCall]) -> None:
        last = max(c.phase for c in calls if c.kind != "backward")
        shift = 2 if self.separate_backward_phase else 0
        for c in calls:
            if c.kind == "backward":
                c.phase = 2 * last + shift - c.phase
                c.op.attributes["ipu.phase"] = i64(c.phase)
                if c.name in self.callees:  # the stage function carries its phase too
                    self.callees[c.name].attributes["ipu.phase"] = i64(c.phase)

    def _transfers(self, func: ir.Operation, calls: list[StageCall]) -> None:
        args = set(func.regions[0].blocks[0].arguments)
        loads: dict[tuple[ir.Value, int, int], ir.Value] = {}
        stored: set[ir.Value] = set()
        for c in calls:
            for n, value in enumerate(c.op.operands):
                if value in args:
                    source, offchip = None, True
                else:
                    source, value = _producer_call(value, calls)
                    if source is None or source.phase == c.phase:
                        continue
                    offchip = self._offchip(source, c, value)
                    if not offchip:
                        continue
                    if value not in stored:
                        stored.add(value)
                        with ir.InsertionPoint(_after(source.op)), source.op.location:
                            self._placed(RemoteStoreOp(value, i64(source.ipu)), source)
                key = (value, c.phase, c.ipu)
                if key not in loads:
                    with ir.InsertionPoint(c.op), c.op.location:
                        loads[key] = self._placed(
                            RemoteLoadOp(value, i64(c.ipu), value.type), c).result
                c.op.operands[n] = loads[key]
        for op in reversed(list(func.regions[0].blocks[0].operations)):
            op = op.operation
            if op_class(op) is CopyOp and not list(op.results[0].uses):
                op.erase()

    def _offchip(self, source: StageCall, user: StageCall, value: ir.Value) -> bool:
        if self.liveness == "always-live":
            return False
        if self.liveness == "off-chip-after-each-phase":
            return True
        return not self._backward_value(source, value) and user.kind != "forward"

    def _backward_value(self, source: StageCall, value: ir.Value) -> bool:
        """Whether `value`, a result of `source`, is computed by the backward pass (in a
        fused forward_backward stage, by an op tagged ipu.backward)."""
        if source.kind != "forward_backward":
            return source.kind == "backward"
        callee = self.callees.get(source.name)
        if callee is None:
            return False
        ret = list(callee.regions[0].blocks[0].operations)[-1].operation
        source = producer(ret.operands[ir.OpResult(value).result_number])
        return source is not None and "ipu.backward" in source.attributes

    def _placed(self, transfer: ir.OpView, call: StageCall) -> ir.OpView:
        """`transfer` (to or from Streaming Memory) placed in `call`'s stage and phase."""
        attrs = transfer.operation.attributes
        for key in ("ipu.stage", "ipu.phase"):
            if key in call.op.attributes:
                attrs[key] = call.op.attributes[key]
        if self.liveness == "off-chip-after-fwd-no-overlap":
            attrs["ipu.no_overlap"] = ir.UnitAttr.get()
        return transfer


def _producer_call(value: ir.Value, calls: list[StageCall]
                   ) -> tuple[StageCall | None, ir.Value]:
    """The stage call computing `value` (looking through ipu.copy) and its own result.
    Compared with == (the pointer): wrappers of an op may differ once ops are inserted."""
    owner = producer(value)
    if owner is None:
        return None, value
    if op_class(owner) is CopyOp:
        return _producer_call(owner.operands[0], calls)
    return next((c for c in calls if c.op == owner), None), value


def _after(op: ir.Operation) -> ir.Operation:
    """The op following `op` in its block (to insert a store right after it)."""
    ops = [o.operation for o in op.block.operations]
    return ops[ops.index(op) + 1]
