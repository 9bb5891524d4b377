"""What the fidelity harness shares: the published figure a configuration is checked
against (`Published`), loading the configuration modules (`load`, `Config`), and
compiling one and reading the machine model's figures through the public API
(`measure`, `Measured`).

A configuration module (bench/fidelity/configs/<name>.py) defines:

- NAME: a short title ("ResNet-50 v1.5 training, IPU-POD16");
- PUBLISHED: a `Published`, the figure measured on hardware and its source;
- SAMPLES_PER_STEP: the samples one call of the compiled model processes (micro-batch
  x replicas x gradient accumulation x device iterations, the leading dimension of
  the inputs `build` returns);
- build(layers=None) -> (poptorch model, uncompiled; example_args): the model wrapped
  as its users wrote it (options, optimizer, blocks), with random weights. `layers`
  asks for a smaller model for a quick run (None: the published configuration).
- optionally QUICK_LAYERS (the `layers` of `make fidelity QUICK=1`), REASON (what
  explains the difference between the simulated and the published figure) and
  SAMPLES_PER_ROW (samples one row of the inputs holds, e.g. sequences per pack: the
  inputs' leading dimension is then SAMPLES_PER_STEP / SAMPLES_PER_ROW).

The models are built in cnn.py (ResNet-50) and bert.py (BERT-Large), one builder per
model: a configuration of either is its data (a `cnn.Training` or `bert.Setup`, the
published figure from `mlperf_published`, NAME, REASON) and a `build` that calls it.

Figures after `compile()`, without running: `getTimeline()` is the timeline of one
call (PoplarExecutor._compile simulates it, training's optimizer epilogue included);
a run only copies it to the figures `cycleCount()` and `getLatency()` read
(`MachineFigures.ran`), so a run would add nothing but time. Simulated throughput =
SAMPLES_PER_STEP / the timeline's total seconds (replicas run side by side: the
timeline is the first replica's IPUs).

Memory: `compile()` refuses a model that does not fit with a poptorch.OutOfMemoryError,
raised by `MemoryEstimate.check` after the estimate is made. The
harness records that error instead of letting it end the compile (`deferred_memory_
check`), so a refused configuration still gets its simulated figure and its per-IPU
estimate from `getMemoryEstimate()`; the verdict is the error `compile()` raises.
Any other error ends the run (non-zero exit).
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import torch

import poptorch
from poptorch.runtime.machine.memory import MemoryEstimate

CONFIGS = Path(__file__).resolve().parent / "configs"
MIB = 2**20


@dataclass(frozen=True)
class Published:
    """A figure measured on IPU hardware, with where it was published."""

    figure: float | None  # e.g. 27204.0; None: not found in the reachable sources
    unit: str  # e.g. "images/s", "sequences/s"
    source: str  # URL or document, and the table / log it comes from
    measures: str  # what it measures: system, SDK, framework, batch, how derived
    ran: bool = True  # the configuration ran on that hardware (so it must fit)


@dataclass
class Config:
    """A loaded configuration module (see the module docstring)."""

    key: str  # the module's file name without .py
    module: ModuleType

    def _get(self, attr: str, default: object = None) -> object:
        value = getattr(self.module, attr, None)
        return default if value is None else value

    @property
    def name(self) -> str:
        return self.module.NAME

    @property
    def published(self) -> Published | None:
        return self._get("PUBLISHED")

    @property
    def reason(self) -> str:
        return self._get("REASON", "")

    @property
    def quick_layers(self) -> int | None:
        return self._get("QUICK_LAYERS")


def load(names: list[str] | None = None) -> list[Config]:
    """The configuration modules of configs/ (all, or those named), in name order."""
    paths = sorted(p for p in CONFIGS.glob("*.py") if not p.name.startswith("_"))
    known = {p.stem for p in paths}
    unknown = sorted(set(names or ()) - known)
    if unknown:
        raise SystemExit(f"no configuration {', '.join(unknown)} in {CONFIGS}; there are "
                         f"{', '.join(sorted(known))}")
    configs = []
    for path in paths:
        if names and path.stem not in names:
            continue
        spec = importlib.util.spec_from_file_location(f"fidelity_config_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for attr in ("NAME", "SAMPLES_PER_STEP", "build"):
            if not hasattr(module, attr):
                raise SystemExit(f"{path}: a configuration module defines {attr} (see "
                                 "bench/fidelity/common.py)")
        configs.append(Config(path.stem, module))
    return configs


@contextlib.contextmanager
def deferred_memory_check() -> Iterator[list[poptorch.OutOfMemoryError]]:
    """Within: `MemoryEstimate.check` records its out-of-memory error in the yielded list
    instead of raising it; any other error still raises."""
    original = MemoryEstimate.check
    refused: list[poptorch.OutOfMemoryError] = []

    def check(estimate: MemoryEstimate) -> None:
        try:
            original(estimate)
        except poptorch.OutOfMemoryError as error:
            refused.append(error)

    MemoryEstimate.check = check
    try:
        yield refused
    finally:
        MemoryEstimate.check = original


@dataclass
class Measured:
    """One configuration's figures on the machine model."""

    samples_per_s: float
    seconds_per_call: float
    cycles: int
    ipus: int  # IPUs per replica
    compile_s: float
    refused: str | None  # the out-of-memory error compile() raises, or None: it fits
    memory: dict[int, tuple[int, int]] = field(default_factory=dict)  # IPU -> (need, have)
    classes: dict[int, dict[str, int]] = field(default_factory=dict)  # IPU -> class -> bytes
    shares: dict[str, float] = field(default_factory=dict)  # where the time goes


def _samples(args: tuple, expected: int, per_row: int) -> int:
    """SAMPLES_PER_STEP, checked against the example inputs' leading dimension."""
    leading = {a.shape[0] for a in args if isinstance(a, torch.Tensor) and a.dim()}
    if leading != {expected // per_row} or expected % per_row:
        raise SystemExit(f"SAMPLES_PER_STEP is {expected} ({per_row} a row) but the example "
                         f"inputs' leading dimensions are {sorted(leading)}: one call must "
                         "process SAMPLES_PER_STEP samples")
    return expected


def shares(timeline) -> dict[str, float]:
    """Share of one call's time per kind of work on the IPU that finishes last (events
    of different kinds may overlap, so shares need not add up to 1); a compute event's
    exchange and sync cycles are split out of "compute"."""
    total = timeline.total_cycles
    if not total:
        return {}
    last = max(timeline.events, key=lambda ipu: max((e.end for e in timeline.events[ipu]),
                                                   default=0))
    cycles: dict[str, int] = {}
    for event in timeline.events[last]:
        duration = event.end - event.start
        if event.kind == "compute" and event.breakdown:
            for part, value in event.breakdown.items():
                cycles[part] = cycles.get(part, 0) + value
        else:
            cycles[event.kind] = cycles.get(event.kind, 0) + duration
    return {kind: value / total for kind, value in
            sorted(cycles.items(), key=lambda item: -item[1])}


def measure(config: Config, layers: int | None = None) -> Measured:
    """Build and compile `config` (compile only) and read its figures."""
    model, args = config.module.build(layers) if layers is not None \
        else config.module.build()
    samples = _samples(tuple(args), config.module.SAMPLES_PER_STEP,
                       getattr(config.module, "SAMPLES_PER_ROW", 1))
    start = time.perf_counter()
    with deferred_memory_check() as refused:
        model.compile(*args)
    compile_s = time.perf_counter() - start
    timeline = model.getTimeline()
    estimate = model.getMemoryEstimate()
    measured = Measured(
        samples_per_s=samples / timeline.total_seconds,
        seconds_per_call=timeline.total_seconds, cycles=timeline.total_cycles,
        ipus=len(estimate.ipus), compile_s=compile_s,
        refused=str(refused[0]) if refused else None,
        memory={ipu: (m.total, m.available) for ipu, m in sorted(estimate.ipus.items())},
        classes={ipu: dict(m.classes) for ipu, m in sorted(estimate.ipus.items())},
        shares=shares(timeline))
    model.destroy()
    return measured
