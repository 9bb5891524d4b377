"""NumPy kernels of the creation family: constants and iota."""

from __future__ import annotations

import numpy as np

from . import kernel


@kernel("ipu.constant")
def constant(value):
    return value


def _iota_static(op):
    from poptorch.passes.conversion.common import numpy_dtype

    t = op.output.type
    return {"dim": op.attributes["dim"].value, "shape": tuple(t.shape),
            "dtype": numpy_dtype(t.element_type)}


@kernel("ipu.iota", static=_iota_static)
def iota(dim, shape, dtype):
    index = [1] * len(shape)
    index[dim] = shape[dim]
    return np.broadcast_to(np.arange(shape[dim], dtype=dtype).reshape(index), shape)
