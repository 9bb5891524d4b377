"""Execution strategies (spec 4.4.2): Stage, Phase and the four ways to run them.

A strategy is a description: `pass_pipeline()` turns it into the options of the
multi-IPU passes (ipu-assign-stages, ipu-outline-stages, ipu-insert-copies,
ipu-schedule-phases, ipu-schedule), which do the partitioning and run the spec's checks
at compile time, so that a strategy behaves the same from Python and from `ipu-opt`.
"""

from __future__ import annotations

from typing import Any

from poptorch.enums import AutoStage, Liveness, PipelineSchedule
from poptorch.errors import Error
from poptorch.options.categories import check_bool, check_enum, check_int
from poptorch.options.popart import NONE, PIPELINE, RECOMPUTATION_TYPES, RECOMPUTE_ALL
from poptorch.passes import PassOptionError, get_pass
from poptorch.passes.registry import MAX_ID

# characters the pass options use as separators
_RESERVED = set("=,:/{} \t\n'\"")

_LIVENESS = {Liveness.AlwaysLive: "always-live", Liveness.OffChipAfterFwd: "off-chip-after-fwd",
             Liveness.OffChipAfterFwdNoOverlap: "off-chip-after-fwd-no-overlap",
             Liveness.OffChipAfterEachPhase: "off-chip-after-each-phase"}
_SCHEDULES = {PipelineSchedule.FillMainFlush: "gpipe",
              PipelineSchedule.OneForwardOneBackward: "1f1b"}


def _block_id(block_id: Any) -> str:
    text = str(block_id)
    bad = sorted(_RESERVED & set(text))
    if not text or bad:
        raise Error(f"block id {block_id!r} cannot name a Stage: it must be non-empty and "
                    f"without {' '.join(repr(c) for c in bad) or 'spaces'}; rename the Block",
                    type="options")
    return text


class Stage:
    """One or more blocks running on one IPU."""

    def __init__(self, *block_ids: str) -> None:
        if not block_ids:
            raise Error("Stage needs at least one block id", type="options")
        self._blocks = [_block_id(b) for b in block_ids]
        self._ipu: int | None = None

    @property
    def blocks(self) -> list[str]:
        """List of blocks this stage is made of."""
        return list(self._blocks)

    def ipu(self, ipu: int) -> Stage:
        """Set the IPU on which this stage will run (an id the compiler's passes take, up
        to MAX_ID; the device decides how many IPUs the model may use)."""
        self._ipu = check_int("Stage.ipu: ipu", ipu, 0, MAX_ID)
        return self

    def __repr__(self) -> str:
        return f"Stage({', '.join(map(repr, self._blocks))}, ipu={self._ipu})"


class Phase:
    """Stages that run in parallel in phased execution."""

    def __init__(self, *arg: str | Stage) -> None:
        if len(arg) == 1 and isinstance(arg[0], list | tuple):
            arg = tuple(arg[0])
        if arg and all(isinstance(a, Stage) for a in arg):
            self.stages = list(arg)
        elif arg and all(isinstance(a, str) for a in arg):
            self.stages = [Stage(*arg)]
        else:
            raise Error(f"Phase takes one or more Stages or one or more block ids, got "
                        f"{arg!r}", type="options")
        self._ipus: tuple[int, ...] | None = None

    def ipus(self, *ipus: int) -> Phase:
        """Assign one IPU to each stage of the phase (checked when the model compiles)."""
        self._ipus = tuple(check_int("Phase.ipus: ipus", ipu, 0, MAX_ID) for ipu in ipus)
        for stage, ipu in zip(self.stages, ipus, strict=False):
            stage.ipu(ipu)
        return self


class _Strategy:
    """Common part of the strategies made of stages: the stages and the stage lookup."""

    _pipelined = True
    _name = ""

    def __init__(self, *args: Any) -> None:
        if len(args) == 1 and isinstance(args[0], list | tuple):
            args = tuple(args[0])
        self._auto = AutoStage.SameAsIpu
        self._stages: list[Stage] = []
        if len(args) == 1 and isinstance(args[0], AutoStage):
            self._auto = args[0]
        else:
            for a in args:
                if isinstance(a, Stage):
                    self._stages.append(a)
                elif isinstance(a, str):
                    self._stages.append(Stage(a))
                else:
                    raise Error(f"{type(self).__name__} takes an AutoStage, block ids or "
                                f"Stages, got {a!r}", type="options")
        count = len(self._all_stages())
        if count > MAX_ID + 1:  # the passes number stages (and phases) up to MAX_ID
            raise Error(f"{type(self).__name__} takes at most {MAX_ID + 1} stages, got "
                        f"{count}", type="options")

    def stage(self, block_id: str) -> Stage:
        """Return the Stage the given block belongs to."""
        for stage in self._all_stages():
            if str(block_id) in stage.blocks:
                return stage
        raise Error(f"no Stage of this {type(self).__name__} holds block {block_id!r}",
                    type="options")

    def _all_stages(self) -> list[Stage]:
        return self._stages

    def _stage_map(self) -> str:
        items = []
        for n, stage in enumerate(self._stages):
            ipu = stage._ipu if stage._ipu is not None else n
            items += [f"{b}={n}:{ipu}" for b in stage.blocks]
        return ",".join(items)

    def _assign_options(self, auto_round: bool) -> dict[str, Any]:
        auto = "auto-increment" if self._auto == AutoStage.AutoIncrement else "same-as-ipu"
        return {"stages": self._stage_map(), "auto-stage": auto,
                "pipelined": self._pipelined, "auto-round-num-ipus": auto_round}

    def pass_pipeline(self, micro_batches: int, auto_round: bool,
                      recomputation: int | None = None) -> list[str]:
        """The multi-IPU pipeline steps for this strategy; `recomputation`: the PopART
        RecomputationType of `Options._Popart`'s autoRecomputation (None: not set)."""
        return [_step("ipu-assign-stages", self._assign_options(auto_round)),
                *self._recompute_steps(recomputation),
                _step("ipu-outline-stages", self._outline_options()),
                "ipu-insert-copies", *self._phase_steps(),
                _step("ipu-schedule", {"strategy": self._name, "micro-batches": micro_batches,
                                       **self._schedule_options()})]

    def _outline_options(self) -> dict[str, Any]:
        return {} if self._pipelined else {"pipelined": False}

    def _recompute_steps(self, recomputation: int | None) -> list[str]:
        if recomputation not in (None, NONE):
            raise Error(f"_Popart autoRecomputation {recomputation} "
                        f"(RecomputationType.{RECOMPUTATION_TYPES[recomputation]}) needs "
                        f"PipelinedExecution (the default strategy); {type(self).__name__} "
                        "does not recompute: use PipelinedExecution, or set "
                        "autoRecomputation to 0 (None)", type="options")
        return []

    def _phase_steps(self) -> list[str]:
        return []

    def _schedule_options(self) -> dict[str, Any]:
        return {}


class PipelinedExecution(_Strategy):
    """Pipeline the stages over their IPUs (the default strategy when blocks exist).

    Training runs as PopTorch's does: PopART's pipeline interleaves each stage's forward
    and backward micro-batches, so its stash holds a bounded number of them (at most
    2 (N - s) - 1 for stage s of N: PopART's StashOp::getStashSize, graphcore/popart
    willow/src/op/stash.cpp), PipelineSchedule.OneForwardOneBackward here; and
    PopTorch turns on pipeline recomputation when it pipelines (popart_compiler
    Compiler.cpp: autoRecomputation = RecomputationType::Pipeline), so
    recomputationCheckpoint takes effect without another option. Beyond PopTorch,
    `setSchedule(PipelineSchedule.FillMainFlush)` runs the forward of every micro-batch
    of an accumulation step before any backward (every micro-batch stashed at once)
    and `useRecomputation(False)` stashes instead of recomputing."""

    _name = "pipelined"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._schedule = PipelineSchedule.OneForwardOneBackward
        self._recompute = True

    def useRecomputation(self, enabled: bool = True) -> PipelinedExecution:  # noqa: N802
        """Beyond PopTorch's public API (PopART's pipeline recomputation, on by default as
        PopTorch sets it): backward stages recompute forward activations, from their stage
        inputs and the values marked with poptorch.recomputationCheckpoint, instead of
        stashing them; False stashes them."""
        self._recompute = check_bool("useRecomputation: enabled", enabled)
        return self

    @property
    def recomputation(self) -> bool:
        """Whether backward stages recompute forward activations (`useRecomputation`;
        True by default, as PopTorch sets it)."""
        return self._recompute

    @property
    def schedule(self) -> PipelineSchedule:
        """The pipeline schedule (`setSchedule`; OneForwardOneBackward by default)."""
        return self._schedule

    @property
    def stages(self) -> list[Stage]:
        """The Stages (or block ids, as one-block Stages) given to the constructor, in
        order: empty when the stages come from the blocks' IPUs (`auto_stage`)."""
        return list(self._stages)

    @property
    def auto_stage(self) -> AutoStage:
        """How blocks without an explicit Stage get their stage id (the constructor's
        AutoStage; SameAsIpu by default)."""
        return self._auto

    def _recompute_steps(self, recomputation: int | None) -> list[str]:
        """ipu-recompute as `useRecomputation` and `_Popart`'s autoRecomputation say: not
        set, as useRecomputation; 0 (None) stashes, replacing the Pipeline recomputation
        PopTorch sets when it pipelines, as in PopTorch; 3 (Pipeline) recomputes all but
        the fused last stage; 4 (RecomputeAll) every stage (`fused-stage`)."""
        if recomputation is None:
            return ["ipu-recompute"] if self._recompute else []
        if recomputation != NONE and not self._recompute:
            raise Error(f"_Popart autoRecomputation {recomputation} "
                        f"(RecomputationType.{RECOMPUTATION_TYPES[recomputation]}) asks for "
                        "recomputation, which PipelinedExecution.useRecomputation(False) turns "
                        "off: drop one of them", type="options")
        if recomputation == RECOMPUTE_ALL:
            return [_step("ipu-recompute", {"fused-stage": True})]
        return ["ipu-recompute"] if recomputation == PIPELINE else []

    def setSchedule(self, schedule: PipelineSchedule) -> PipelinedExecution:  # noqa: N802
        self._schedule = check_enum("setSchedule: schedule", schedule, PipelineSchedule)
        return self

    def _schedule_options(self) -> dict[str, Any]:
        return {"schedule": _SCHEDULES[self._schedule]}


class ShardedExecution(_Strategy):
    """Run the stages one after the other, one IPU at a time."""

    _pipelined = False
    _name = "sharded"


class _PhasedExecution(_Strategy):
    _pipelined = False
    _name = "phased"
    _parallel = False

    def __init__(self, *phases: Any) -> None:
        if len(phases) == 1 and isinstance(phases[0], list | tuple) and phases[0] \
                and isinstance(phases[0][0], Phase | list | tuple):
            phases = tuple(phases[0])
        self._phases = [p if isinstance(p, Phase) else Phase(*p) if isinstance(p, list | tuple)
                        else Phase(p) for p in phases]
        super().__init__()
        self._liveness = Liveness.AlwaysLive
        self._separate_backward = False

    def phase(self, phase: int) -> Phase:
        """Return the requested Phase."""
        if not isinstance(phase, int) or not 0 <= phase < len(self._phases):
            raise Error(f"phase({phase!r}): this strategy has {len(self._phases)} phases",
                        type="options")
        return self._phases[phase]

    def setTensorsLiveness(self, liveness: Liveness) -> _PhasedExecution:  # noqa: N802
        self._liveness = check_enum("setTensorsLiveness: liveness", liveness, Liveness)
        return self

    def useSeparateBackwardPhase(self, use: bool = True) -> _PhasedExecution:  # noqa: N802
        self._separate_backward = check_bool("useSeparateBackwardPhase: use", use)
        return self

    def _all_stages(self) -> list[Stage]:
        return [s for p in self._phases for s in p.stages]

    def _default_ipu(self, phase: int, index: int) -> int:
        return 2 * index + phase % 2 if self._parallel else index

    def _stage_map(self) -> str:
        items, number = [], 0
        for p, phase in enumerate(self._phases):
            for index, stage in enumerate(phase.stages):
                ipu = stage._ipu if stage._ipu is not None else self._default_ipu(p, index)
                items += [f"{b}={number}:{ipu}:{p}" for b in stage.blocks]
                number += 1
        return ",".join(items)

    def _assign_options(self, auto_round: bool) -> dict[str, Any]:
        ipus = ",".join(f"{p}={'/'.join(map(str, phase._ipus))}"
                        for p, phase in enumerate(self._phases) if phase._ipus is not None)
        return {**super()._assign_options(auto_round), "phase-ipus": ipus,
                "parallel-phased": self._parallel}

    def _outline_options(self) -> dict[str, Any]:
        return {"pipelined": False, "separate-backward": self._separate_backward}

    def _phase_steps(self) -> list[str]:
        return [_step("ipu-schedule-phases", {
            "liveness": _LIVENESS[self._liveness],
            "separate-backward-phase": self._separate_backward})]


class SerialPhasedExecution(_PhasedExecution):
    """All the phases run one after the other on one group of IPUs."""


class ParallelPhasedExecution(_PhasedExecution):
    """Phases alternate between two groups of IPUs: even phases on even IPUs, odd
    phases on odd IPUs."""

    _parallel = True


def _step(name: str, options: dict[str, Any]) -> str:
    """`name{options}` as the pass registry writes it (checking names, types and bounds:
    the strategies' own checks keep their values within them)."""
    values = {key.replace("-", "_"): value for key, value in options.items()}
    try:
        return name + get_pass(name)(**values).option_text()
    except PassOptionError as err:  # a bound no strategy check covers: still the user's
        raise Error(f"the execution strategy gives the compiler {err}", type="options") from None


def multi_ipu_steps(strategy: _Strategy | None, micro_batches: int, auto_round: bool,
                    recomputation: int | None = None) -> list[str]:
    """The pipeline steps for `strategy` (PipelinedExecution with AutoStage.SameAsIpu
    when none was set), with `_Popart`'s autoRecomputation `recomputation`."""
    return (strategy or PipelinedExecution()).pass_pipeline(micro_batches, auto_round,
                                                            recomputation)


def options_steps(options: Any, micro_batches: int) -> list[str]:
    """The multi-IPU steps a poptorch.Options asks for: its execution strategy, its
    autoRoundNumIPUs and its `_Popart` autoRecomputation."""
    return multi_ipu_steps(options.execution_strategy, micro_batches,
                           options.auto_round_num_ipus, options._Popart.auto_recomputation)
