"""Timing side by side: two callables measured in one process, interleaved, median of
repeats; and the machine the figures come from.

Interleaving puts both sides under the same conditions (CPU frequency, other load on the
machine, cache state). It also exposes a real cost of running NumPy next to PyTorch in
one process: by default OpenBLAS's worker threads spin for a while after each BLAS call
(2^28 cycles, OPENBLAS_THREAD_TIMEOUT's default of 28), and torch's OpenMP workers do the
same, so each side's spinning threads take the cores the other side needs. On this
2-core machine that made both a torch MLP and a NumPy one 10x slower when interleaved
than alone. `bench/run.py` therefore sets OPENBLAS_THREAD_TIMEOUT (before NumPy loads)
unless the caller set it; torch keeps its defaults.
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


def pair(first: Callable[[], object], second: Callable[[], object],
         budget: float | None = None, least: int = 7, most: int = 41
         ) -> tuple[float, float, int]:
    """Median seconds of `first` and `second`, called alternately (each pair in swapped
    order every other time) after two warm-up calls each; as many pairs as fit in
    `budget` seconds, between `least` and `most`. Returns (first, second, pairs)."""
    for _ in range(2):
        first()
        second()
    start = time.perf_counter()
    first()
    second()
    once = max(time.perf_counter() - start, 1e-6)
    repeats = max(least, min(most, math.ceil((budget or BUDGET) / once)))
    times: tuple[list[float], list[float]] = ([], [])
    for index in range(repeats):
        order = (0, 1) if index % 2 == 0 else (1, 0)
        for side in order:
            fn = (first, second)[side]
            start = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1]), repeats


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
            "env": {k: os.environ.get(k) for k in
                    ("OPENBLAS_THREAD_TIMEOUT", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")}}


def _threadpools() -> list[dict]:
    from threadpoolctl import threadpool_info

    return threadpool_info()
