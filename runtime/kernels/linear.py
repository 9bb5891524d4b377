"""NumPy kernels of the linear-algebra family."""

from __future__ import annotations

import numpy as np

from . import align, broadcast_ranks, kernel


@kernel("ipu.matmul", static=broadcast_ranks, fresh=True)
def matmul(lhs, rhs, ranks=None, out_rank=None):
    lhs, rhs = align((lhs, rhs), ranks, out_rank)
    if lhs.dtype == np.float16:  # accumulate in float32, as the IPU's AMP does
        return np.matmul(lhs.astype(np.float32), rhs.astype(np.float32)).astype(np.float16)
    return np.matmul(lhs, rhs)
