"""NumPy kernels of the creation family: constants, iota and random draws."""

from __future__ import annotations

import numpy as np

from poptorch.dialects.creation import ConstantOp, IotaOp, RandomNormalOp, RandomUniformOp
from poptorch.dialects.types import numpy_dtype
from poptorch.runtime.jit.kernels.registry import kernel
from poptorch.runtime.jit.random import current, replayable


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


def _draw_static(op, names):
    t = op.output.type
    modifier = (op.attributes["ipu.seed_modifier"].value
                if "ipu.seed_modifier" in op.attributes else None)
    return {**{name: op.attributes[name].value for name in names},
            "shape": tuple(t.shape), "dtype": numpy_dtype(t.element_type),
            "modifier": modifier}


def _draws(shape, modifier):
    """The generator to draw from and the shape of its draws: one set per replica when
    there are several (a leading replica axis). A draw with a seed modifier (one
    ipu-recompute repeats) takes the replayable generator of that modifier."""
    generator, replicas = current()
    if modifier is not None:
        generator = replayable(modifier)
    return generator, ((replicas,) if replicas > 1 else ()) + shape


@kernel(RandomUniformOp, static=lambda op: _draw_static(op, ("low", "high")), fresh=True)
def random_uniform(low, high, shape, dtype, modifier=None):
    """Uniform samples in [low, high): drawn in float64, and kept below `high` where the
    narrowing to `dtype` rounds up to it (torch.rand never gives 1)."""
    generator, shape = _draws(shape, modifier)
    values = generator.uniform(low, high, shape).astype(dtype)
    if high > low:
        kind = np.dtype(dtype).type
        np.minimum(values, np.nextafter(kind(high), kind(low)), out=values)
    return values


@kernel(RandomNormalOp, static=lambda op: _draw_static(op, ("mean", "std")), fresh=True)
def random_normal(mean, std, shape, dtype, modifier=None):
    """Normal samples: standard ones drawn in float64, scaled and shifted."""
    generator, shape = _draws(shape, modifier)
    return (generator.standard_normal(shape) * std + mean).astype(dtype)
