"""The memory estimate's inputs and results: the description of @main's arguments
(`ArgInfo`), tensor locations (`Location`, `Locations`, the plain mirror of
`Options.TensorLocations`), and per IPU the bytes by class and the largest tensors
(`IpuMemory`, `MemoryEstimate`, whose `check()` raises the out-of-memory error).

How the figures are made: the `memory` module docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from poptorch.errors import OutOfMemoryError

CLASSES = ("weights", "activations", "stash", "optimizer", "gradients", "temporary", "code",
           "io", "recomputation")
# PopART's TensorLocationSettings defaults (graphcore/popart, sessionoptions.hpp).
MIN_ELEMENTS_OFF_CHIP = 2
MIN_ELEMENTS_RTS = 8192


@dataclass(frozen=True)
class ArgInfo:
    """One argument of @main, in order."""

    name: str  # "fc1.weight", "0" (an input), ...
    kind: str  # "parameter" | "buffer" | "constant" | "input" | "tangent"
    trainable: bool = False
    # the optimizer state in units of the weight's bytes: SGD 0, momentum 1, Adam 2 in
    # the weight's dtype; Adam's fp32 moments of an fp16 weight 4
    optimizer_slots: float = 0


@dataclass(frozen=True)
class Location:
    """Plain mirror of poptorch.TensorLocationSettings (None: the compiler's default)."""

    on_chip: bool | None = None
    replicated_sharding: bool | None = None
    min_elements_off_chip: int | None = None
    min_elements_rts: int | None = None

    def off_chip(self, elements: int) -> bool:
        minimum = MIN_ELEMENTS_OFF_CHIP if self.min_elements_off_chip is None \
            else self.min_elements_off_chip
        return self.on_chip is False and elements >= minimum

    def sharded(self, elements: int, replicas: int) -> bool:
        minimum = MIN_ELEMENTS_RTS if self.min_elements_rts is None else self.min_elements_rts
        return bool(self.replicated_sharding) and replicas > 1 and elements >= minimum


@dataclass(frozen=True)
class Locations:
    """Options.TensorLocations: one Location per class of tensors."""

    weights: Location = Location()
    activations: Location = Location()
    optimizer: Location = Location()
    accumulators: Location = Location()


@dataclass(frozen=True)
class Tensor:
    """A named tensor in on-chip memory."""

    name: str
    cls: str
    bytes: int


@dataclass
class IpuMemory:
    """One IPU's estimate: `classes` are the bytes by class at its fullest moment (their
    sum, `total`, is what the IPU needs); `peaks` each class's own largest figure, which
    may fall at another moment. With phased execution, the figures of its fullest
    `phase`."""

    available: int
    classes: dict[str, int]
    largest: list[Tensor]
    off_chip: int  # bytes this IPU keeps in Streaming Memory
    per_tile_mean: int
    per_tile_max: int  # the fullest compute tile (tile 0, linear mapping)
    phase: int | None = None
    peaks: dict[str, int] = field(default_factory=dict)
    moment: str = ""  # the op running at the fullest moment ("ipu.matmul %4 in @main")

    @property
    def total(self) -> int:
        return sum(self.classes.values())


@dataclass
class MemoryEstimate:
    """Memory per IPU; `check()` raises the out-of-memory error."""

    ipus: dict[int, IpuMemory]
    off_chip_bytes: int  # Streaming Memory in use, each tensor once
    tiles: int  # compute tiles per IPU (IO tiles excluded)
    memory_bytes_per_tile: int
    argument_ipus: dict[int, list[int]] = field(default_factory=dict)  # @main arg -> IPUs
    # trainable @main arg -> the IPU computing the gradient @main returns for it, which
    # holds its optimizer state and updates it (known when the gradient comes from a
    # stage call, or from @main itself on IPU 0)
    update_ipus: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain data for the profile report (IPU keys as strings, for JSON)."""
        return {
            "off_chip_bytes": self.off_chip_bytes, "tiles": self.tiles,
            "memory_bytes_per_tile": self.memory_bytes_per_tile,
            "ipus": {str(ipu): {
                "available": m.available, "total": m.total, "phase": m.phase,
                "classes": dict(m.classes), "peaks": dict(m.peaks), "moment": m.moment,
                "off_chip": m.off_chip,
                "per_tile": {"mean": m.per_tile_mean, "max": m.per_tile_max},
                "largest": [{"name": t.name, "class": t.cls, "bytes": t.bytes}
                            for t in m.largest]}
                for ipu, m in sorted(self.ipus.items())},
        }

    def check(self) -> None:
        """Raise poptorch.OutOfMemoryError (type "out_of_memory", with each IPU's need,
        capacity and class breakdown) if an IPU needs more than it has."""
        over = [ipu for ipu, m in sorted(self.ipus.items()) if m.total > m.available]
        if not over:
            return
        ipu, m = over[0], self.ipus[over[0]]
        classes = ", ".join(f"{c} {b:,}" for c, b in m.classes.items() if b)
        when = f" at its fullest moment ({m.moment})" if m.moment else ""
        tensors = "; ".join(f"{t.name} ({t.cls}, {t.bytes:,} bytes)" for t in m.largest)
        others = (f" (IPU{'s' if len(over) > 2 else ''} "
                  f"{', '.join(map(str, over[1:]))} also out of memory)" if len(over) > 1
                  else "")
        raise OutOfMemoryError(
            f"out of memory on IPU {ipu}: the model needs {m.total:,} bytes ({_mib(m.total)}) "
            f"but the IPU has {m.available:,} bytes ({_mib(m.available)}) on its compute "
            f"tiles{others}; by class{when}: {classes}; largest tensors: {tensors}. To fit, split "
            "the model over more IPUs with poptorch.BeginBlock or a "
            "poptorch.PipelinedExecution, move tensors to Streaming Memory with "
            "Options.TensorLocations (TensorLocationSettings().useOnChipStorage(False)), "
            "shard weights and optimizer state over replicas with TensorLocationSettings()"
            ".useReplicatedTensorSharding(True), or use lower precision (model.half())",
            needed={i: self.ipus[i].total for i in over},
            available={i: self.ipus[i].available for i in over},
            classes={i: dict(self.ipus[i].classes) for i in over})


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB"
