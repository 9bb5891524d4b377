"""PopTorch's enumerations (spec 11.x)."""

import enum


class OutputMode(enum.IntEnum):
    """Which results a call returns when it runs several iterations (spec 5.7)."""

    All = 0  # noqa: N815 - PopTorch's names
    Sum = 1
    Final = 2
    EveryN = 3
    Default = 4


class CommGroupType(enum.IntEnum):
    """How replicas are grouped for collectives and grouped variables."""

    All = 0
    Consecutive = 1
    Orthogonal = 2
    NoGrouping = 3
