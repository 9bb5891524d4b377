"""The timeline's results: `Event`s per IPU, the host streams (`HostStreams`), the
spec's perf counters and latencies (`Timeline`). How they are made: the `timeline`
module docstring.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from poptorch.runtime.machine.system import GC200, Machine


@dataclass(frozen=True)
class Event:
    """One interval on one IPU. `name` is the stage function computing (compute), storing
    (remote_store) or receiving (copy, remote_load) the data, the stream's name (host_load,
    host_store) or the epilogue work's. Copies and loads use the links, not the tiles: they
    may overlap compute events of the same IPU, as do transfers on the IO tiles
    (`tiles` = "io"). `micro_batch` is None for per-step work;
    `breakdown` splits a compute event into compute / exchange / sync cycles."""

    kind: str
    name: str
    micro_batch: int | None
    start: int
    end: int
    step: int = 0
    stage: int | None = None
    phase: int | None = None
    stream: int | None = None
    tiles: str | None = None  # a host or streaming transfer's tiles: "compute" or "io"
    breakdown: dict[str, int] | None = None


@dataclass(frozen=True)
class HostStreams:
    """Host I/O per micro-batch: (@main argument index, name) of each streamed input and
    (@main result index, name) of each streamed output, in stream order; `overlapped`:
    the overlap mode of the streams whose transfers run on the IO tiles, by name
    ("overlap_accumulation_loop" or "overlap_device_iteration_loop", @main's
    `ipu.overlap` argument and result attributes)."""

    inputs: list[tuple[int, str]] = field(default_factory=list)
    outputs: list[tuple[int, str]] = field(default_factory=list)
    overlapped: dict[str, str] = field(default_factory=dict)


COUNTERS = ("input", "input_complete", "output", "output_complete")


@dataclass
class Timeline:
    """The simulated execution: events per IPU, in cycles from the start of the run."""

    schedule: str
    micro_batches: int
    steps: int
    events: dict[int, list[Event]]
    busy_cycles: dict[int, int]  # compute cycles per IPU used by a task
    stash_bytes: dict[int, int]  # peak stashed activations per IPU used by a task
    machine: Machine = field(default=GC200, repr=False)
    streams: HostStreams = field(default_factory=HostStreams)
    # cycles per counter, per stream, per iteration; and each iteration's compute span
    counters: dict[str, list[list[int]]] = field(default_factory=dict, repr=False)
    spans: list[tuple[int, int]] = field(default_factory=list, repr=False)

    @property
    def iterations(self) -> int:
        return self.steps * self.micro_batches

    @property
    def total_cycles(self) -> int:
        return max((e.end for events in self.events.values() for e in events), default=0)

    @property
    def idle_fraction(self) -> float:
        """1 - compute cycles / (total cycles x IPUs used)."""
        total = self.total_cycles * len(self.busy_cycles)
        return 1.0 - sum(self.busy_cycles.values()) / total if total else 0.0

    @property
    def total_seconds(self) -> float:
        return self.total_cycles / self.machine.tileClockFrequency

    def perf_counters(self) -> dict[str, list[list[float]]]:
        """The spec's getPerfCounters: per counter, per stream, per iteration, seconds."""
        clock = self.machine.tileClockFrequency
        return {key: [[c / clock for c in stream] for stream in self.counters.get(key, [])]
                for key in COUNTERS}

    def latencies(self) -> dict[str, tuple[float, float, float]]:
        """(min, max, average) seconds over iterations of the spec's getLatency ('latency'),
        getComputeLatency ('compute'), getHostIpuLatency ('host_ipu') and
        getIpuHostLatency ('ipu_host'); see the module docstring without streams."""
        values: dict[str, list[int]] = {"latency": [], "compute": [], "host_ipu": [],
                                        "ipu_host": []}
        c = {key: self.counters.get(key, []) for key in COUNTERS}
        for it, (first, last) in enumerate(self.spans):
            requested = min((s[it] for s in c["input"]), default=first)
            loaded = max((s[it] for s in c["input_complete"]), default=requested)
            available = [s[it] for s in c["output"]] or [last]
            written = max((s[it] for s in c["output_complete"]), default=max(available))
            values["latency"].append(written - requested)
            values["compute"].append(max(available) - loaded)
            values["host_ipu"].append(loaded - requested)
            values["ipu_host"].append(written - min(available))
        clock = self.machine.tileClockFrequency
        return {key: (min(v) / clock, max(v) / clock, sum(v) / len(v) / clock) if v
                else (0.0, 0.0, 0.0) for key, v in values.items()}

    def to_dict(self) -> dict:
        """Plain data for the API and the profile report (IPU keys as strings, for JSON)."""
        return {
            "schedule": self.schedule,
            "micro_batches": self.micro_batches,
            "steps": self.steps,
            "iterations": self.iterations,
            "total_cycles": self.total_cycles,
            "total_seconds": self.total_seconds,
            "idle_fraction": self.idle_fraction,
            "clock_hz": self.machine.tileClockFrequency,
            "ipu_version": self.machine.version,
            "streams": {"inputs": [name for _, name in self.streams.inputs],
                        "outputs": [name for _, name in self.streams.outputs]},
            "perf_counters": self.perf_counters(),
            "latencies": self.latencies(),
            "ipus": {
                str(ipu): {
                    "busy_cycles": self.busy_cycles.get(ipu, 0),
                    "stash_bytes": self.stash_bytes.get(ipu, 0),
                    "events": [asdict(e) for e in events],
                }
                for ipu, events in sorted(self.events.items())
            },
        }
