"""Choosing contiguous stages from measured segments: the planner's dynamic programme.

A segment is what runs from one candidate boundary to the next (the first also holds
what comes before the first candidate, the last what comes after the last one: the
embeddings, the head, the loss). `SegmentFigures` are what the measurement compile read
for each segment on its own IPU: cycles per micro-batch (forward and backward in
training), the per-step epilogue (optimizer update) and the memory estimate's bytes by
class. A stage is a contiguous run of segments on one IPU.

A stage's predicted memory is an upper bound of what the memory estimate will say of
it: `temporary` is one op's scratch at a time, so the stage's is the largest of its
segments'; `stash` is per micro-batch in flight, rescaled from the measurement's
pipeline position to the stage's (`in_flight`); every other class (weights, optimizer
state, gradients, code, io, activations and any class this module does not know) adds
up over its segments. Sums bound from above where segments share (code: one codelet per
distinct op; activations: the peaks of consecutive segments do not coincide), which is
why the chosen split is compiled to confirm it. A stage's predicted time per
micro-batch is the sum of its segments' cycles; copies between stages are left to the
confirmation.

`partition` minimises the slowest stage's time (the pipeline's step is (m + p - 1)
slots of the slowest stage at m micro-batches), then the fullest IPU's memory, over
the splits whose every stage fits; `smallest_need` is the least fullest-IPU memory over
all splits, which the no-fit error reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

PEAK_CLASSES = ("temporary",)  # one op's scratch at a time: the largest
STASH = "stash"  # per micro-batch in flight: rescaled to the stage's position


@dataclass(frozen=True)
class SegmentFigures:
    """What the measurement read for one segment on its own IPU."""

    cycles: float  # compute cycles per micro-batch (forward + backward in training)
    epilogue: float  # per-step work on the IPU (optimizer update, all-reduce), cycles
    classes: dict[str, int] = field(default_factory=dict)  # memory bytes by class
    stash_per_micro_batch: float = 0.0


def in_flight(schedule: str, stage: int, stages: int, micro_batches: int) -> int:
    """Micro-batches forward stage `stage` of `stages` keeps stashed at once in training:
    every one in "gpipe" (all forwards before any backward), 2(stages - stage) - 1 in
    "1f1b" (its forward and its backward are that many slots apart), at most all."""
    if schedule == "1f1b":
        return min(micro_batches, 2 * (stages - stage) - 1)
    return micro_batches


def stage_classes(segments: Sequence[SegmentFigures], first: int, end: int,
                  stash_micro_batches: int) -> dict[str, int]:
    """Predicted bytes by class of a stage made of segments [first, end)."""
    classes: dict[str, int] = {}
    for segment in segments[first:end]:
        for cls, size in segment.classes.items():
            if cls == STASH:
                continue
            classes[cls] = (max(classes.get(cls, 0), size) if cls in PEAK_CLASSES
                            else classes.get(cls, 0) + size)
    stash = sum(s.stash_per_micro_batch for s in segments[first:end]) * stash_micro_batches
    if stash or any(STASH in s.classes for s in segments[first:end]):
        classes[STASH] = math.ceil(stash)
    return classes


@dataclass(frozen=True)
class Split:
    """Stage boundaries (`starts[j]`: the first segment of stage j) and predictions."""

    starts: tuple[int, ...]
    stage_cycles: tuple[float, ...]  # per micro-batch
    memory: tuple[int, ...]  # bytes per IPU


def split_of(segments: Sequence[SegmentFigures], starts: Sequence[int],
             memory_of: Callable[[int, int, int], int]) -> Split:
    """The predictions for given stage starts (`memory_of(first, end, stage)`)."""
    ends = [*starts[1:], len(segments)]
    cycles = tuple(sum(s.cycles for s in segments[a:b]) for a, b in zip(starts, ends, strict=True))
    memory = tuple(memory_of(a, b, j) for j, (a, b) in enumerate(zip(starts, ends, strict=True)))
    return Split(tuple(starts), cycles, memory)


def partition(segments: Sequence[SegmentFigures], stages: int,
              memory_of: Callable[[int, int, int], int], available: int,
              forbidden: frozenset[tuple[int, int, int]] = frozenset()) -> Split | None:
    """The split of `segments` into `stages` contiguous non-empty stages with the
    slowest stage as fast as possible (then the fullest IPU as empty as possible) whose
    every stage fits in `available` bytes, or None. `memory_of(first, end, stage)` is
    the predicted bytes of segments [first, end) as stage `stage`; `forbidden` holds
    (first, end, stage) groups a confirmation found out of memory."""
    n = len(segments)
    prefix = [0.0]
    for s in segments:
        prefix.append(prefix[-1] + s.cycles)
    # best[j][i]: (slowest stage, fullest IPU, start of the last stage) for segments [0, i)
    # in stages 0..j-1
    best: list[dict[int, tuple[float, int, int]]] = [{0: (0.0, 0, -1)}]
    for j in range(stages):
        row: dict[int, tuple[float, int, int]] = {}
        for end in range(j + 1, n - (stages - j - 1) + 1):
            for first, (slowest, fullest, _) in best[j].items():
                if first >= end or (first, end, j) in forbidden:
                    continue
                need = memory_of(first, end, j)
                if need > available:
                    continue
                value = (max(slowest, prefix[end] - prefix[first]), max(fullest, need), first)
                if end not in row or value[:2] < row[end][:2]:
                    row[end] = value
        best.append(row)
    if n not in best[stages]:
        return None
    starts, end = [], n
    for j in range(stages, 0, -1):
        first = best[j][end][2]
        starts.append(first)
        end = first
    return split_of(segments, starts[::-1], memory_of)


def smallest_need(segments: Sequence[SegmentFigures], stages: int,
                  memory_of: Callable[[int, int, int], int]) -> tuple[int, Split]:
    """The least fullest-IPU memory over every split into `stages` stages, and a split
    that has it."""
    n = len(segments)
    best: list[dict[int, tuple[int, int]]] = [{0: (0, -1)}]
    for j in range(stages):
        row: dict[int, tuple[int, int]] = {}
        for end in range(j + 1, n - (stages - j - 1) + 1):
            for first, (fullest, _) in best[j].items():
                if first < end:
                    value = (max(fullest, memory_of(first, end, j)), first)
                    if end not in row or value[0] < row[end][0]:
                        row[end] = value
        best.append(row)
    starts, end = [], n
    for j in range(stages, 0, -1):
        first = best[j][end][1]
        starts.append(first)
        end = first
    split = split_of(segments, starts[::-1], memory_of)
    return best[stages][n][0], split


def even_starts(candidates: int, stages: int, prefix: bool) -> list[int]:
    """Segment starts of the even split: the candidates dealt out in order, the first
    stages taking one more when they do not divide evenly (as `placeLayers` with equal
    counts); with a `prefix` segment (what comes before the first candidate), it joins
    the first stage."""
    counts = [candidates // stages + (1 if j < candidates % stages else 0)
              for j in range(stages)]
    offset = 1 if prefix else 0
    starts, first = [0], 0
    for count in counts[:-1]:
        first += count
        starts.append(first + offset)
    return starts
