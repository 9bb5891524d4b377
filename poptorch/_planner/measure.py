"""Compiling one placement of a model and reading the machine model's figures of it.

Each compile works on a deep copy of the model (and of its optimizer, which then holds
the copy's parameters): wrapping a model for training hooks it and BeginBlock annotates
it, and planning must leave the user's model as it was. The figures come from the
public API only (`getTimeline()`, `getMemoryEstimate()`), so that they follow the
machine model whatever its rules: per IPU, the compute cycles of its tasks per
micro-batch (`Timeline.busy_cycles`), its per-step epilogue (the events of no
micro-batch: gradient all-reduce, optimizer update, weight copies) and its memory by
class; for the whole, the cycles of one step. A placement that does not fit is refused
by the compile as out of memory: `Figures.error` keeps that poptorch.OutOfMemoryError
(which IPUs, and their needs).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from poptorch._api import inferenceModel, trainingModel
from poptorch._frontend.annotations import BeginBlock
from poptorch.errors import OutOfMemoryError
from poptorch.options import Options


@dataclass
class Figures:
    """The machine model's figures of one compiled placement (or its refusal)."""

    step_cycles: float = 0.0  # one step: gradientAccumulation micro-batches in training
    cycles: dict[int, float] = field(default_factory=dict)  # per IPU, per micro-batch
    epilogue: dict[int, float] = field(default_factory=dict)  # per IPU, per step
    classes: dict[int, dict[str, int]] = field(default_factory=dict)  # per IPU
    memory: dict[int, int] = field(default_factory=dict)  # bytes per IPU
    available: int = 0  # bytes per IPU
    error: OutOfMemoryError | None = None  # the out-of-memory refusal

    @property
    def fits(self) -> bool:
        return self.error is None


def compile_placement(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
                      training: bool, options: Options, blocks: Sequence[tuple[str, int]],
                      args: tuple) -> Figures:
    """Compile a copy of `model` with BeginBlock(module, ipu_id=ipu) for each (submodule
    name, ipu) of `blocks`, for inputs `args`, and read its figures. Errors other than
    out of memory are raised."""
    model_copy, optimizer_copy = copy.deepcopy((model, optimizer))
    for name, ipu in blocks:
        BeginBlock(model_copy.get_submodule(name), ipu_id=ipu)
    wrapped = (trainingModel(model_copy, options, optimizer_copy) if training
               else inferenceModel(model_copy, options))
    try:
        wrapped.compile(*args)
    except OutOfMemoryError as error:
        return Figures(error=error)
    try:
        return _read(wrapped.getTimeline(), wrapped.getMemoryEstimate())
    finally:
        wrapped.destroy()


def _read(timeline, memory) -> Figures:
    runs = timeline.micro_batches * timeline.steps
    epilogue: dict[int, float] = {}
    for ipu, events in timeline.events.items():
        epilogue[ipu] = sum(e.end - e.start for e in events
                            if e.micro_batch is None) / timeline.steps
    return Figures(
        step_cycles=timeline.total_cycles / timeline.steps,
        cycles={ipu: busy / runs for ipu, busy in timeline.busy_cycles.items()},
        epilogue=epilogue,
        classes={ipu: dict(m.classes) for ipu, m in memory.ipus.items()},
        memory={ipu: sum(m.classes.values()) for ipu, m in memory.ipus.items()},
        available=min((m.available for m in memory.ipus.values()), default=0))
