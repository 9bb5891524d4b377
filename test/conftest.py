"""pytest configuration shared by every tier: under pytest-xdist (`make test` runs one
worker per core) each worker computes on one thread, torch's and the BLAS's alike, so
that workers do not oversubscribe the cores (on 2 cores, two workers with two spinning
threads each ran small models' ops 5-10x slower)."""

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    _LIMITS = threadpool_limits(1)  # kept: the limits hold while it lives
