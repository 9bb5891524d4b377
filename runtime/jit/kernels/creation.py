"""NumPy kernels of the creation family: constants and iota."""

from __future__ import annotations

import numpy as np

from poptorch.dialects.creation import ConstantOp, IotaOp, RandomUniformOp
from poptorch.dialects.types import numpy_dtype
from poptorch.runtime.jit.kernels.registry import kernel
from poptorch.runtime.jit.random import current


@kernel(ConstantOp)
def constant(value):
    return value


def _iota_static(op):
    t = op.output.type
    return {"dim": op.attributes["dim"].value, "shape": tuple(t.shape),
            "dtype": numpy_dtype(t.element_type)}


@kernel(IotaOp, static=_iota_static)
def iota(dim, shape, dtype):
    index = [1] * len(shape)
    index[dim] = shape[dim]
    return np.broadcast_to(np.arange(shape[dim], dtype=dtype).reshape(index), shape)


def _uniform_static(op):
    t = op.output.type
    return {"low": op.attributes["low"].value, "high": op.attributes["high"].value,
            "shape": tuple(t.shape), "dtype": numpy_dtype(t.element_type)}


@kernel(RandomUniformOp, static=_uniform_static)
def random_uniform(low, high, shape, dtype):
    """Uniform samples, one set per replica when there are several."""
    generator, replicas = current()
    lead = (replicas,) if replicas > 1 else ()
    return generator.uniform(low, high, lead + shape).astype(dtype)
