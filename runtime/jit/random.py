"""The device's random generator: what `ipu.random_uniform` and `ipu.random_normal` draw from.

Each executor owns a NumPy generator seeded from `Options.randomSeed` (or, without one,
from torch's seed), and installs it around its program runs with the replica count, so
that every replica draws its own numbers (a leading replica axis, like every value).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np

_state = threading.local()
_SEED_BITS = 63


@contextlib.contextmanager
def device_random(generator: np.random.Generator, replicas: int) -> Iterator[None]:
    """Make `generator` the one random kernels use in this block, for `replicas`."""
    previous = getattr(_state, "current", None)
    previous_seed = getattr(_state, "run_seed", None)
    _state.current = (generator, replicas)
    _state.run_seed = None
    try:
        yield
    finally:
        _state.current = previous
        _state.run_seed = previous_seed


def replayable(modifier: int) -> np.random.Generator:
    """A generator giving the same draws to every op of seed modifier `modifier` within
    this installation (a forward draw and its recomputation)."""
    generator, _ = current()
    if getattr(_state, "run_seed", None) is None:
        _state.run_seed = int(generator.integers(2 ** _SEED_BITS))
    return np.random.default_rng([_state.run_seed, modifier])


def current() -> tuple[np.random.Generator, int]:
    """The installed generator and replica count (a fixed-seed one outside any run)."""
    installed = getattr(_state, "current", None)
    return installed if installed is not None else (np.random.default_rng(0), 1)
