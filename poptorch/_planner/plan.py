"""`plan_pipeline` and `PipelinePlan`: automatic pipeline partitioning (beyond PopTorch).

Given a model, example inputs (those of one call of the wrapped model under `options`)
and a number of IPUs, the planner chooses where stages begin (`BeginBlock`) so that the
slowest stage, which sets the pipeline's step at many micro-batches, is as fast as the
machine model says it can be while every IPU's memory holds its stage. It measures
rather than guesses:

1. Segments (`segments`): the model between candidate boundaries, ordered by a CPU run.
2. Measurement (`measure`): one compile with every segment on its own IPU (a pipeline
   of as many stages, IPUs rounded up to a power of 2, enough micro-batches for it),
   read through `getTimeline()` and `getMemoryEstimate()`. With more replicas than the
   IPU-POD64 holds beside that many stages, the measurement runs one replica (the
   confirmation runs the user's).
3. Choice (`partition`): the dynamic programme over contiguous groups.
4. Confirmation: the chosen split and the even split compiled with the user's options;
   their simulated step and memory per IPU are the plan's figures, and the prediction's
   error is reported. A chosen split the compile refuses as out of memory is excluded and
   the choice made again.

Pipeline recomputation is PopTorch's default when it pipelines (on unless the options'
`PipelinedExecution(...).useRecomputation(False)` turns it off): by default
(`recompute=None`) the planner plans with the options' setting, as the user would run
it. `recompute=True` or `False` sets it for the plan (the options' line in `code()`
when it differs from theirs); `recompute="auto"` asks the planner to choose: stashing
(no second forward pass, so faster) where a split fits that way, recomputation where
only that fits. `offchip_optimizer=True` lets the planner move optimizer state to
Streaming Memory (streaming loads and stores: more work), which it does only when no
split fits on chip. With both asked it tries stashing, recomputation, off-chip state
with stashing, then both.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from poptorch import _logging
from poptorch._frontend.annotations import BeginBlock, begin_block_of
from poptorch._planner import measure, partition, segments
from poptorch._planner.partition import SegmentFigures, Split
from poptorch.enums import AutoStage, PipelineSchedule
from poptorch.errors import Error, OutOfMemoryError
from poptorch.options import Options, TensorLocationSettings
from poptorch.options.strategies import PipelinedExecution

MAX_IPUS = 64  # the simulated IPU-POD64 (`ipuHardwareIsAvailable`)
MAX_CONFIRMATIONS = 4  # compiles of chosen splits before giving up on the predictions
AUTO = "auto"  # recompute=: the planner chooses


@dataclass
class SplitFigures:
    """A split's stages and its figures: simulated by compiling it (`confirmed`), or,
    when the compile refused it as out of memory, the planner's prediction."""

    stages: list[list[str]]  # candidate module names per IPU
    step_cycles: float
    memory: list[int]  # bytes per IPU
    available: int  # bytes per IPU
    fits: bool
    predicted_step_cycles: float
    predicted_memory: list[int]
    confirmed: bool
    refusal: str | None = None  # the out-of-memory error of the compile
    refused_ipus: tuple[int, ...] = ()  # the IPUs that error found out of memory

    @property
    def prediction_error(self) -> float | None:
        """Simulated step / predicted step - 1 (None when not confirmed)."""
        if not self.confirmed or not self.predicted_step_cycles:
            return None
        return self.step_cycles / self.predicted_step_cycles - 1


@dataclass
class PipelinePlan(SplitFigures):
    """The planner's choice: `stages` per IPU, `step_cycles` and `memory` per IPU as the
    machine model simulates them, `fits`, the `even_split`'s figures (None on one IPU),
    `options` (a copy of the given ones with the plan's settings), `code()` and
    `apply(model)`."""

    starts: list[str | None] = field(default_factory=list)  # first candidate per IPU
    options: Options | None = None
    recompute: bool = False  # the plan's pipeline recomputation
    offchip_optimizer: bool = False  # the plan's optimizer state in Streaming Memory
    even_split: SplitFigures | None = None
    _option_lines: list[str] = field(default_factory=list)

    def report(self) -> str:
        """A table of the plan against the even split: stages, step, memory per IPU."""
        rows = [("plan", self)] + ([("even split", self.even_split)] if self.even_split else [])
        lines = []
        for label, split in rows:
            how = "simulated" if split.confirmed else "predicted, refused as out of memory"
            lines.append(f"{label}: step {split.step_cycles:,.0f} cycles ({how}), "
                         f"{'fits' if split.fits else 'does not fit'}")
            for ipu, (names, size) in enumerate(zip(split.stages, split.memory, strict=True)):
                first = f"{names[0]}..{names[-1]}" if len(names) > 1 else "".join(names)
                lines.append(f"  IPU {ipu}: {first or '(before the first candidate)'}, "
                             f"{size / 2**20:.1f} of {split.available / 2**20:.1f} MiB")
        return "\n".join(lines)

    def code(self) -> str:
        """The annotations and Options lines a user would write for this plan
        (`model` and `opts` being their model and options)."""
        lines = [f"{segments.expression(name)} = poptorch.BeginBlock("
                 f"{segments.expression(name)}, ipu_id={ipu})"
                 for ipu, name in enumerate(self.starts) if ipu and name is not None]
        return "\n".join(lines + self._option_lines)

    def apply(self, model: torch.nn.Module) -> torch.nn.Module:
        """Annotate `model` in place as `code()` does; wrap it with `plan.options`."""
        names = dict(model.named_modules())
        for ipu, name in enumerate(self.starts):
            if ipu and name is not None:
                if name not in names:
                    raise Error(f"PipelinePlan.apply: the model has no submodule {name!r}; "
                                "apply the plan to the model it was made for", type="planner")
                BeginBlock(names[name], ipu_id=ipu)
        return model


def _check_arguments(model, ipus, options, training, optimizer, recompute,
                     offchip_optimizer) -> None:
    if not isinstance(model, torch.nn.Module):
        raise Error(f"plan_pipeline: model must be a torch.nn.Module, got "
                    f"{type(model).__name__}", type="planner")
    if not isinstance(ipus, int) or isinstance(ipus, bool) or not 1 <= ipus <= MAX_IPUS:
        raise Error(f"plan_pipeline: ipus must be a number of IPUs from 1 to {MAX_IPUS}, "
                    f"got {ipus!r}", type="planner")
    if options is not None and not isinstance(options, Options):
        raise Error(f"plan_pipeline: options must be a poptorch.Options or None, got "
                    f"{type(options).__name__}", type="planner")
    for name, value in (("training", training), ("offchip_optimizer", offchip_optimizer)):
        if not isinstance(value, bool):
            raise Error(f"plan_pipeline: {name} must be True or False, got {value!r}",
                        type="planner")
    if not (recompute is None or isinstance(recompute, bool) or recompute == AUTO):
        raise Error(f"plan_pipeline: recompute must be None (the options' pipeline "
                    f"recomputation), True, False or {AUTO!r} (the planner chooses), got "
                    f"{recompute!r}", type="planner")
    if not training:
        for name, value in (("optimizer", optimizer is not None),
                            ("recompute", recompute is not None),
                            ("offchip_optimizer", offchip_optimizer)):
            if value:
                raise Error(f"plan_pipeline: {name} is for training, but training=False "
                            f"plans inference; leave {name} out or plan training",
                            type="planner")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise Error(f"plan_pipeline: optimizer must be a torch.optim.Optimizer or None for "
                    f"trainingModel's SGD(lr=0.01), got {type(optimizer).__name__}",
                    type="planner")
    annotated = [n for n, m in model.named_modules() if begin_block_of(m) is not None]
    if annotated:
        raise Error(f"plan_pipeline: the model already has a BeginBlock at "
                    f"{annotated[0] or 'the model'}; the planner chooses the blocks: remove "
                    "them with poptorch.removeBlocks(model) first", type="planner")


def _strategy(options: Options) -> tuple[PipelineSchedule, bool]:
    """The schedule and recomputation of the user's PipelinedExecution, or of the one a
    model with blocks runs when the options set none (PopTorch's: interleaved,
    recomputing)."""
    strategy = options.execution_strategy
    if strategy is None:
        strategy = PipelinedExecution(AutoStage.SameAsIpu)
        return strategy.schedule, strategy.recomputation
    if type(strategy) is not PipelinedExecution or strategy.stages or \
            strategy.auto_stage != AutoStage.SameAsIpu:
        raise Error("plan_pipeline: the options set an execution strategy with its own "
                    "stages; the planner chooses the stages of a PipelinedExecution: leave "
                    "setExecutionStrategy out, or set PipelinedExecution("
                    "poptorch.AutoStage.SameAsIpu) for its schedule or recomputation",
                    type="planner")
    return strategy.schedule, strategy.recomputation


class _Planner:
    """One planning run: the arguments, the segments and the options of each compile."""

    def __init__(self, model, args, ipus, options, training, optimizer) -> None:
        self.model, self.ipus, self.training, self.optimizer = model, ipus, training, optimizer
        self.options = options.clone() if options is not None else Options()
        self.schedule, self.user_recompute = _strategy(self.options)
        opts = self.options
        self.micro_batches = (opts.Training.gradient_accumulation if training
                              else opts.device_iterations)
        rows = opts.device_iterations * opts.replication_factor * (
            opts.Training.gradient_accumulation if training else 1)
        what = (f"deviceIterations {opts.device_iterations} x replicationFactor "
                f"{opts.replication_factor}" + (
                    f" x gradientAccumulation {opts.Training.gradient_accumulation}"
                    if training else ""))
        self.micro = segments.micro_batch(args, rows, what)
        self.segments: segments.Segments | None = None

    def check_micro_batches(self) -> None:
        """A pipeline of `ipus` stages needs that many micro-batches (twice less one in
        training), as ipu-schedule checks; said here in the planner's terms."""
        ipus, training = self.ipus, self.training
        if ipus > 1 and training and self.micro_batches < 2 * ipus - 1:
            raise Error(f"plan_pipeline: a training pipeline over {ipus} IPUs needs "
                        f"gradientAccumulation of at least {2 * ipus - 1} (its stages counting "
                        f"backward), the options have {self.micro_batches}; set "
                        f"options.Training.gradientAccumulation({2 * ipus - 1}) or more",
                        type="planner")
        if ipus > 1 and not training and self.micro_batches < ipus:
            raise Error(f"plan_pipeline: an inference pipeline over {ipus} IPUs needs "
                        f"deviceIterations of at least {ipus}, the options have "
                        f"{self.micro_batches}; set options.deviceIterations({ipus}) or more",
                        type="planner")

    def variant(self, recompute: bool, offchip: bool, stages: int,
                micro_batches: int | None = None) -> tuple[Options, list[str]]:
        """Options of a compile with `stages` pipeline stages, and the lines a user adds."""
        opts, lines = self.options.clone(), []
        if stages & (stages - 1) and not opts.auto_round_num_ipus:
            opts.autoRoundNumIPUs(True)
            lines.append("opts.autoRoundNumIPUs(True)")
        strategy = PipelinedExecution(AutoStage.SameAsIpu).setSchedule(self.schedule)
        opts.setExecutionStrategy(strategy.useRecomputation(recompute))
        if recompute != self.user_recompute:
            schedule = ("" if self.schedule == PipelinedExecution().schedule else
                        f".setSchedule(poptorch.PipelineSchedule.{self.schedule.name})")
            lines.append("opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch."
                         f"AutoStage.SameAsIpu){schedule}.useRecomputation("
                         f"{'' if recompute else 'False'}))")
        if offchip:
            opts.TensorLocations.setOptimizerLocation(
                TensorLocationSettings().useOnChipStorage(False))
            lines.append("opts.TensorLocations.setOptimizerLocation("
                         "poptorch.TensorLocationSettings().useOnChipStorage(False))")
        if micro_batches is not None:
            if self.training:
                opts.deviceIterations(1)
                opts.Training.gradientAccumulation(micro_batches)
            else:
                opts.deviceIterations(micro_batches)
            rounded = 1 << (stages - 1).bit_length()
            if rounded * opts.replication_factor > MAX_IPUS:
                opts.replicationFactor(1)
        return opts, lines

    def inputs(self, opts: Options) -> tuple:
        per_call = opts.device_iterations * opts.replication_factor * (
            opts.Training.gradient_accumulation if self.training else 1)
        return segments.repeated(self.micro, per_call)

    def compile(self, opts: Options, starts: Sequence[str | None]) -> measure.Figures:
        blocks = [(name, ipu) for ipu, name in enumerate(starts) if name is not None]
        return measure.compile_placement(self.model, self.optimizer, self.training, opts,
                                         blocks, self.inputs(opts))

    def measure(self, recompute: bool,
                offchip: bool) -> list[SegmentFigures] | OutOfMemoryError:
        """Every segment on its own IPU, in a pipeline of that many stages (the compile's
        refusal when a segment does not fit even on its own)."""
        n = self.segments.count
        need = 2 * n - 1 if self.training else n
        opts, _ = self.variant(recompute, offchip, n, max(self.micro_batches, need))
        figures = self.compile(opts, [self.segments.begins(i) for i in range(n)])
        if not figures.fits:
            return figures.error
        m = opts.Training.gradient_accumulation if self.training else opts.device_iterations
        self.available = figures.available
        result = []
        for i in range(n):
            classes = figures.classes.get(i, {})
            stash = classes.get(partition.STASH, 0)
            result.append(SegmentFigures(
                figures.cycles.get(i, 0.0), figures.epilogue.get(i, 0.0), classes,
                stash / partition.in_flight(self._schedule_name(), i, n, m) if stash else 0.0))
        return result

    def _schedule_name(self) -> str:
        return "1f1b" if self.schedule == PipelineSchedule.OneForwardOneBackward else "gpipe"

    def memory_of(self, figures: list[SegmentFigures]):
        stages, m = self.ipus, self.micro_batches

        def memory(first: int, end: int, stage: int) -> int:
            flight = partition.in_flight(self._schedule_name(), stage, stages, m) \
                if self.training else 0
            return sum(partition.stage_classes(figures, first, end, flight).values())
        return memory

    def predicted_step(self, figures: list[SegmentFigures], split: Split) -> float:
        """(m + p - 1) slots of the slowest stage, then the longest per-step epilogue."""
        ends = [*split.starts[1:], len(figures)]
        epilogue = max(sum(s.epilogue for s in figures[a:b])
                       for a, b in zip(split.starts, ends, strict=True))
        return (self.micro_batches + self.ipus - 1) * max(split.stage_cycles) + epilogue

    def stage_names(self, starts: Sequence[int]) -> list[list[str]]:
        ends = [*starts[1:], self.segments.count]
        return [[name for i in range(a, b) if (name := self.segments.begins(i)) is not None]
                for a, b in zip(starts, ends, strict=True)]

    def figures_of(self, opts: Options, figures: list[SegmentFigures],
                   split: Split) -> SplitFigures:
        """Compile a split and return its figures (the prediction where refused)."""
        starts = [self.segments.begins(s) for s in split.starts]
        compiled = self.compile(opts, starts)
        predicted = self.predicted_step(figures, split)
        common = {"stages": self.stage_names(split.starts), "available": self.available,
                  "predicted_step_cycles": predicted, "predicted_memory": list(split.memory)}
        if not compiled.fits:
            return SplitFigures(step_cycles=predicted, memory=list(split.memory), fits=False,
                                confirmed=False, refusal=compiled.error.message,
                                refused_ipus=compiled.error.ipus, **common)
        memory = [compiled.memory.get(ipu, 0) for ipu in range(self.ipus)]
        return SplitFigures(step_cycles=compiled.step_cycles, memory=memory,
                            fits=all(b <= compiled.available for b in memory), confirmed=True,
                            **common)


def _variants(recompute: bool | str, offchip: bool) -> list[tuple[bool, bool]]:
    """The (recomputation, off-chip optimizer state) settings to try, in order."""
    settings = (False, True) if recompute == AUTO else (recompute,)
    return [(r, o) for o in ((False, True) if offchip else (False,)) for r in settings]


def plan_pipeline(model: torch.nn.Module, *example_args, ipus: int,
                  options: Options | None = None, training: bool = True,
                  optimizer: torch.optim.Optimizer | None = None,
                  candidates: Sequence[str] | None = None,
                  recompute: bool | str | None = None,
                  offchip_optimizer: bool = False) -> PipelinePlan:
    """Choose the pipeline stages of `model` over `ipus` IPUs that minimise the simulated
    step time within each IPU's memory (beyond PopTorch). `example_args` are the inputs
    of one call of the wrapped model with `options`; `candidates` the submodule names a
    stage may begin at (default: the children of the model's ModuleLists). The model is
    left as it was: `plan.apply(model)` or `plan.code()` annotate it. `recompute`: None
    keeps the options' pipeline recomputation (PopTorch's default: on), True or False
    sets it, "auto" lets the planner choose; `offchip_optimizer=True` lets the planner
    move optimizer state off chip where nothing fits on chip."""
    _check_arguments(model, ipus, options, training, optimizer, recompute, offchip_optimizer)
    planner = _Planner(model, example_args, ipus, options, training, optimizer)
    if recompute is None:
        recompute = planner.user_recompute
    names = (segments.default_candidates(model) if candidates is None
             else segments.check_names(model, candidates))
    if not names:
        raise Error("plan_pipeline: the model has no torch.nn.ModuleList whose layers could "
                    "begin stages; name the submodules a stage may begin at with "
                    "candidates=['layer1', 'layer2', ...]", type="planner")
    probe = copy.deepcopy(model).eval()
    planner.segments = segments.order(probe, names, planner.micro)
    del probe
    if ipus > planner.segments.count:
        raise Error(f"plan_pipeline: {ipus} IPUs need {ipus} stages, but the model has only "
                    f"{planner.segments.count} segments between its candidate boundaries "
                    f"({', '.join(planner.segments.candidates)}); plan for at most "
                    f"{planner.segments.count} IPUs or give more candidates=",
                    type="planner")
    planner.check_micro_batches()
    if ipus == 1:
        return _single(planner)
    last, refusal = None, ""
    for rc, off in _variants(recompute, offchip_optimizer):
        figures = planner.measure(rc, off)
        if isinstance(figures, OutOfMemoryError):
            refusal = figures.message
            continue
        memory_of = planner.memory_of(figures)
        opts, lines = planner.variant(rc, off, ipus)
        chosen = _choose(planner, figures, memory_of, opts)
        if chosen is not None:
            return _plan(planner, *chosen, figures, opts, lines, rc, off)
        last = (figures, memory_of)
    allow = [text for flag, text in ((recompute is not False, f"recompute={AUTO!r}"),
                                     (offchip_optimizer, "offchip_optimizer=True")) if not flag]
    if last is None:
        raise Error(f"plan_pipeline: a segment of the model does not fit on one IPU even on "
                    f"its own ({refusal}); give finer candidates= boundaries"
                    + "".join(f", allow {a}" for a in allow), type="planner")
    figures, memory_of = last
    need, split = partition.smallest_need(figures, ipus, memory_of)
    starts = ", ".join(planner.segments.begins(s) or "the start" for s in split.starts)
    raise Error(f"plan_pipeline: no split of the model over {ipus} IPUs fits: the smallest "
                f"per-IPU need is about {need:,} bytes ({need / 2**20:.1f} MiB, with stages "
                f"beginning at {starts}) "
                f"but an IPU has {planner.available:,} bytes "
                f"({planner.available / 2**20:.1f} MiB); use more IPUs"
                + "".join(f", {a}" for a in allow) + " or lower precision (model.half())",
                type="planner")


def _choose(planner: _Planner, figures: list[SegmentFigures], memory_of,
            opts: Options) -> tuple[SplitFigures, Split] | None:
    """The fastest predicted split that its compile confirms fits: a split refused as out
    of memory is excluded and the choice made again. When the (upper-bound) predictions
    leave no split, the split needing least memory is compiled before giving up."""
    forbidden: set[tuple[int, int, int]] = set()
    least_tried = False
    for _ in range(MAX_CONFIRMATIONS):
        split = partition.partition(figures, planner.ipus, memory_of, planner.available,
                                    frozenset(forbidden))
        if split is None:
            if least_tried:
                return None
            least_tried = True
            split = partition.smallest_need(figures, planner.ipus, memory_of)[1]
        chosen = planner.figures_of(opts, figures, split)
        if chosen.fits:
            return chosen, split
        forbidden |= _refused_groups(chosen.refused_ipus, split, len(figures))
    return None


def _refused_groups(ipus: Sequence[int], split: Split, n: int) -> set[tuple[int, int, int]]:
    """The (first, end, stage) groups of a split to exclude after its compile was
    refused: those of the IPUs out of memory (stage j runs on IPU j), or every one when
    none of them holds a stage."""
    ends = [*split.starts[1:], n]
    groups = [(a, b, j) for j, (a, b) in enumerate(zip(split.starts, ends, strict=True))]
    return {groups[ipu] for ipu in ipus if ipu < len(groups)} or set(groups)


def _plan(planner: _Planner, chosen: SplitFigures, split: Split,
          figures: list[SegmentFigures], opts: Options, lines: list[str], recompute: bool,
          offchip: bool) -> PipelinePlan:
    """The plan: the chosen split, or the even split where its compile shows it fits and
    is faster (the predictions being bounds)."""
    n = planner.segments.count
    even = partition.split_of(figures, partition.even_starts(
        len(planner.segments.candidates), planner.ipus, planner.segments.prefix),
        planner.memory_of(figures))
    even_figures = (chosen if even.starts == split.starts
                    else planner.figures_of(opts, figures, even))
    if even_figures.fits and even_figures.step_cycles < chosen.step_cycles:
        chosen, split = even_figures, even
    plan = PipelinePlan(**vars(chosen), starts=[planner.segments.begins(s) for s in split.starts],
                        options=opts, recompute=recompute, offchip_optimizer=offchip,
                        even_split=even_figures, _option_lines=lines)
    _logging.logger.info(
        "plan_pipeline: %d segments over %d IPUs: stages begin at %s; step %.0f cycles "
        "(predicted %.0f, %+.1f%%), even split %.0f cycles%s", n, planner.ipus,
        plan.starts, plan.step_cycles, plan.predicted_step_cycles,
        100 * (plan.prediction_error or 0.0), even_figures.step_cycles,
        "" if even_figures.fits else " (does not fit)")
    return plan


def _single(planner: _Planner) -> PipelinePlan:
    """One IPU: the whole model, compiled to check that it fits."""
    opts = planner.options.clone()
    compiled = planner.compile(opts, [])
    stages = [list(planner.segments.candidates)]
    if not compiled.fits:
        raise Error(f"plan_pipeline: the model does not fit on one IPU "
                    f"({compiled.error.message}); plan for more IPUs", type="planner")
    memory = [compiled.memory.get(0, 0)]
    return PipelinePlan(stages=stages, step_cycles=compiled.step_cycles, memory=memory,
                        available=compiled.available, fits=True,
                        predicted_step_cycles=compiled.step_cycles, predicted_memory=memory,
                        confirmed=True, starts=[None], options=opts)
