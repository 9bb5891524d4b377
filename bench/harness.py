"""Timing side by side: two callables measured in one process, in alternating blocks,
median of repeats; and the machine the figures come from.

Alternating puts both sides under the same conditions (CPU frequency, other load on the
machine). Calling them strictly one after the other does not: by default OpenBLAS's
worker threads spin for a while after each BLAS call (measured here: 110 ms of CPU on
the other threads after one 512x512 matmul) and torch's OpenMP workers do the same
(20 ms), so each side's spinning threads take the cores the other side needs. On this
2-core machine that made a torch MLP and a NumPy one 10x slower interleaved call by
call than alone. Turning either side's spinning off instead (OPENBLAS_THREAD_TIMEOUT=4,
or OMP_WAIT_POLICY=PASSIVE for torch) charges that side a thread wake-up in every call,
which a user's loop of calls does not pay: it made the machine model's LSTM 2.1x slower
(2.81 ms alone -> 5.92), and torch's 3.8x (1.51 -> 5.69). So each block starts after
SETTLE seconds of quiet, so that the other side's workers have gone idle, and its first
call (which wakes this side's workers) is not counted: each side runs as it does alone,
with its libraries' defaults, in a loop of calls. Where both sides are poptorch (the
replication section) nothing contends, and single calls alternate.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

# Seconds of timing per measurement (`run.py --quick` lowers it).
BUDGET = 1.5


# Seconds of quiet before each block: longer than either side's workers spin.
SETTLE = 0.2


def pair(first: Callable[[], object], second: Callable[[], object],
         budget: float | None = None, least: int = 8, most: int = 40, rounds: int = 8,
         settle: bool = True) -> tuple[float, float, int]:
    """Median seconds of one call of `first` and of `second` (`interleave` of the two).
    Returns (first, second, calls timed per side)."""
    (first_s, second_s), repeats = interleave([first, second], budget, least, most, rounds,
                                              settle)
    return first_s, second_s, repeats


def interleave(calls: list[Callable[[], object]], budget: float | None = None,
               least: int = 8, most: int = 40, rounds: int = 8,
               settle: bool = True) -> tuple[list[float], int]:
    """Median seconds of one call of each of `calls`, measured in `rounds` rounds of a
    block of each (the order rotated every round, reversed every other). A block waits
    SETTLE seconds, makes one uncounted call, then times its calls; together the blocks
    of a side time as many calls as fit in `budget` seconds, between `least` and `most`.
    `settle=False` (all sides are the same library, as replicated and unreplicated
    poptorch): single calls alternate, with no pause, which follows the machine's drift
    more closely. Returns (medians in the order of `calls`, calls timed per side)."""
    for _ in range(2):
        for call in calls:
            call()
    start = time.perf_counter()
    for call in calls:
        call()
    once = max(time.perf_counter() - start, 1e-6) / len(calls) * 2
    repeats = max(least, min(most, math.ceil((budget or BUDGET) / once)))
    if not settle:
        rounds = repeats
    per_block = math.ceil(repeats / rounds)
    times: list[list[float]] = [[] for _ in calls]
    sides = list(range(len(calls)))
    for index in range(rounds):
        order = sides[index % len(sides):] + sides[:index % len(sides)]
        for side in (order if index % 2 == 0 else order[::-1]):
            call = calls[side]
            if settle:
                time.sleep(SETTLE)
                call()
            for _ in range(per_block):
                start = time.perf_counter()
                call()
                times[side].append(time.perf_counter() - start)
    return [statistics.median(side) for side in times], per_block * rounds


def machine() -> dict[str, object]:
    """What the figures were measured on."""
    blas = [{k: v for k, v in pool.items() if k in ("internal_api", "version", "num_threads")}
            for pool in _threadpools()]
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "thread_pools": blas,
            # the machine's load when the run began (1, 5, 15 minutes): other work on the
            # cores slows both sides, torch's OpenMP barriers most
            "load_average": os.getloadavg(),
            "env": {k: os.environ.get(k) for k in
                    ("OPENBLAS_THREAD_TIMEOUT", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")}}


def _threadpools() -> list[dict]:
    from threadpoolctl import threadpool_info

    return threadpool_info()
