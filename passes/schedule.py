"""ipu-schedule: the order in which stages run on micro-batches, per execution strategy.

Works on a function whose stages are outlined (ipu-outline-stages) and writes the
schedule onto it as attributes that the machine model executes and times:

- `ipu.schedule = "gpipe" | "1f1b" | "sharded" | "phased"`, `ipu.micro_batches = m`;
- `ipu.tasks = array<i64: k, mb, ...>`: the global order of (stage call k, micro-batch
  mb) pairs, k counting the stage calls of the function in program order; each IPU runs
  its tasks in this order, a task starting once its operands are computed (and copied);
- `ipu.in_flight = array<i64: ...>`: per IPU, the most micro-batches started and not
  finished on it at once, which is what its activation stash must hold.

Strategies (spec 4.4.2): PipelinedExecution runs stage k on micro-batch mb in time slot
mb + k (ramp-up, main, ramp-down). In training the backward stages follow: `gpipe`
(the default, fill / main / flush) runs the forward of all m micro-batches of an
accumulation step before the backward of any, so every micro-batch is in flight at
once; `1f1b` runs each backward as soon as the pipeline allows, interleaving one
forward and one backward, with at most P micro-batches in flight. ShardedExecution and
the phased strategies run one micro-batch at a time through the stages in order.

Checks from the spec: a pipeline needs deviceIterations (inference) or
gradientAccumulation (training) to be at least its number of stages (2N - 1 counting
backward for N forward stages). Ours: with stages, at most MAX_MICRO_BATCHES.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.ipu import i64
from poptorch.dialects.placement import functions

from .registry import Option, Pass, register
from .stages import StageCall, stage_calls

# The schedule materialises one task per (stage call, micro-batch) and takes time and
# memory in proportion (measured: 4 stages, 10^5 micro-batches 1.6 s and 230 MB; 10^6
# 15 s and 1.3 GB; 10^20 never finished). 65536 keeps the worst real pipeline (about 32
# stage calls in training) to about 10 s; PopTorch's own examples use at most a few
# thousand. The pass refuses more (and fewer than 1) before scheduling anything, and only
# for a function it schedules: a model without stages takes any deviceIterations or
# gradientAccumulation, as in PopTorch, since nothing is materialised per micro-batch.
MAX_MICRO_BATCHES = 65536

STRATEGIES = ("pipelined", "sharded", "phased")
SCHEDULES = ("gpipe", "1f1b")


@register
class Schedule(Pass):
    argument = "ipu-schedule"
    description = "Order the stages' work on micro-batches (pipeline, sharded or phased)"
    options = (
        Option("strategy", str, "pipelined", "pipelined, sharded or phased"),
        Option("schedule", str, "gpipe", "Pipelined training: gpipe (fill/main/flush) or "
                                          "1f1b (interleaved)"),
        Option("micro-batches", int, 1, "Micro-batches per schedule: deviceIterations in "
                                        "inference, gradientAccumulation in training "
                                        f"(1 to {MAX_MICRO_BATCHES} with stages)"),
    )

    def run(self, module: ir.Operation) -> None:
        for func in functions(module):
            calls = stage_calls(func)
            if calls:
                self._schedule(func, calls)

    def _schedule(self, func: ir.Operation, calls: list[StageCall]) -> None:
        if self.strategy not in STRATEGIES:
            raise self.error(func, f"strategy must be one of {', '.join(STRATEGIES)}, got "
                                   f"'{self.strategy}'")
        if self.schedule not in SCHEDULES:
            raise self.error(func, f"schedule must be gpipe or 1f1b, got '{self.schedule}'")
        m = self.micro_batches
        if m < 1:
            raise self.error(func, f"micro-batches must be at least 1, got {m}")
        if m > MAX_MICRO_BATCHES:
            raise self.error(func, _too_many(calls, m))
        if self.strategy == "pipelined":
            self._check_depth(func, calls, m)
            tasks = self._pipeline(calls, m)
            name = self.schedule if any(c.kind != "forward" for c in calls) else "gpipe"
        else:
            tasks = [(c.index, mb) for mb in range(m) for c in calls]
            name = self.strategy
        func.attributes["ipu.schedule"] = ir.StringAttr.get(name)
        func.attributes["ipu.micro_batches"] = i64(m)
        func.attributes["ipu.tasks"] = ir.DenseI64ArrayAttr.get(
            [v for task in tasks for v in task])
        func.attributes["ipu.in_flight"] = ir.DenseI64ArrayAttr.get(_in_flight(calls, tasks))

    def _check_depth(self, func: ir.Operation, calls: list[StageCall], m: int) -> None:
        stages = len({c.stage for c in calls})
        training = any(c.kind != "forward" for c in calls)
        if training:
            forward = len({c.stage for c in calls if c.kind != "backward"})
            if m < stages:
                raise self.error(
                    func, f"gradientAccumulation ({m}) must be at least the number of pipeline "
                          f"stages counting backward, 2N-1 = {stages} for N = {forward} "
                          f"forward stages; set Options.Training.gradientAccumulation({stages}) "
                          "or more")
        elif m < stages:
            raise self.error(
                func, f"deviceIterations ({m}) must be at least the number of pipeline stages "
                      f"({stages}) in inference; set Options.deviceIterations({stages}) or more")

    def _pipeline(self, calls: list[StageCall], m: int) -> list[tuple[int, int]]:
        """(call, micro-batch) pairs sorted by time slot, then pipeline position."""
        positions = {stage: k for k, stage in enumerate(sorted({c.stage for c in calls}))}
        forward = len({c.stage for c in calls if c.kind != "backward"})
        slots = []
        for c in calls:
            k = positions[c.stage]
            for mb in range(m):
                if c.kind == "backward" and self.schedule == "gpipe":
                    slot = (m + forward - 1) + mb + (k - forward)  # after every forward
                else:
                    slot = mb + k
                slots.append((slot, k, c.index, mb))
        return [(index, mb) for _, _, index, mb in sorted(slots)]


def _too_many(calls: list[StageCall], m: int) -> str:
    """The error for more than MAX_MICRO_BATCHES micro-batches, named as the user set them."""
    if any(c.kind != "forward" for c in calls):
        name, setter = "gradientAccumulation", "Options.Training.gradientAccumulation"
    else:
        name, setter = "deviceIterations", "Options.deviceIterations"
    return (f"{name} ({m}) must be at most {MAX_MICRO_BATCHES} for a model split into stages: "
            f"the schedule orders every micro-batch of every stage; set "
            f"{setter}({MAX_MICRO_BATCHES}) or less")


def _in_flight(calls: list[StageCall], tasks: list[tuple[int, int]]) -> list[int]:
    """Per IPU, the most micro-batches begun and not finished on it at one time."""
    ipus = max(c.ipu for c in calls) + 1
    last: dict[tuple[int, int], int] = {}  # (ipu, mb) -> position of its last task
    for position, (k, mb) in enumerate(tasks):
        last[(calls[k].ipu, mb)] = position
    open_: list[set[int]] = [set() for _ in range(ipus)]
    peak = [0] * ipus
    for position, (k, mb) in enumerate(tasks):
        ipu = calls[k].ipu
        open_[ipu].add(mb)
        peak[ipu] = max(peak[ipu], len(open_[ipu]))
        if last[(ipu, mb)] == position:
            open_[ipu].discard(mb)
    return peak
