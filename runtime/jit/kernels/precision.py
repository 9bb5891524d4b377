"""The Precision options at run time: helpers the program calls around tagged ops.

- `stochastic_rounding` (ops tagged `ipu.stochastic_rounding` by ipu-precision): the
  op's kernel runs on its f16 operands widened to f32, and the f32 result is rounded to
  f16 stochastically: to the upper f16 neighbour with probability (x - lower) /
  (upper - lower), else to the lower one, so that the rounding is unbiased on average
  (Poplar's stochastic rounding of float-to-half conversions and half arithmetic:
  poplar::setStochasticRounding, "Half-precision stochastic rounding" in the IPU
  Programmer's Guide). The draws come from the device's generator (`random.current`),
  seeded from Options.randomSeed.
- `fp_check` (modules tagged `ipu.floating_point_exceptions`): after each op, an inf or
  NaN in its floating results that its operands did not hold is the IPU's floating-point
  trap (overflow, invalid operation, divide by zero): a `poptorch.Error` naming the op
  and the user's line.
"""

from __future__ import annotations

import numpy as np

from poptorch.errors import Error
from poptorch.runtime.jit import random
from poptorch.runtime.jit.kernels.registry import helper


def round_stochastic(x: np.ndarray, generator: np.random.Generator) -> np.ndarray:
    """`x` (a float array) as f16, each element rounded up or down to an f16 neighbour
    with the probabilities that make the rounding exact on average. Values f16 holds
    exactly, infs, NaNs and values beyond f16's range round as to nearest."""
    wide = np.asarray(x, np.float64)
    nearest = wide.astype(np.float16)
    near = nearest.astype(np.float64)
    below = near > wide  # nearest is the upper neighbour: the other is below
    other = np.nextafter(nearest, np.where(below, -np.inf, np.inf).astype(np.float16))
    far = other.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        away = np.abs(wide - near) / np.abs(far - near)  # chance of the other neighbour
    pick = (generator.random(wide.shape) < away) & np.isfinite(near) & np.isfinite(far)
    return np.where(pick, other, nearest)


def _widened(value):
    if isinstance(value, np.ndarray) and value.dtype == np.float16:
        return value.astype(np.float32)
    if value is np.float16 or (isinstance(value, np.dtype) and value == np.float16):
        return np.float32
    return value


@helper("stochastic_rounding")
def stochastic_rounding(fn, *args, rounded: tuple[bool, ...], **kwargs):
    """`fn(*args, **kwargs)` computed in f32 (f16 operands and an f16 `dtype` widened),
    its results flagged in `rounded` (those of type f16) rounded to f16 stochastically."""
    result = fn(*map(_widened, args), **{k: _widened(v) for k, v in kwargs.items()})
    generator, _ = random.current()
    if not isinstance(result, tuple):
        return round_stochastic(result, generator) if rounded[0] else result
    return tuple(round_stochastic(r, generator) if f16 else r
                 for r, f16 in zip(result, rounded, strict=True))


@helper("fp_check")
def fp_check(operands, results, op: str, where: str):
    """Raise when `results` hold an inf or NaN and `operands` do not (the op made it)."""
    floats = [r for r in results if isinstance(r, np.ndarray)
              and np.issubdtype(r.dtype, np.floating)]
    if all(np.isfinite(r).all() for r in floats):
        return
    if not all(np.isfinite(a).all() for a in operands
               if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating)):
        return  # carried over from an earlier op's result or an input
    nan = any(np.isnan(r).any() for r in floats)
    kind = "invalid operation" if nan else "overflow"
    if op == "ipu.div" and not nan and len(operands) == 2 \
            and not np.all(np.asarray(operands[1])):
        kind = "divide by zero"
    raise Error(f"floating-point exception ({kind}): {op} produced "
                f"{'NaN' if nan else 'inf'} from finite operands; "
                "Precision.enableFloatingPointExceptions(True) traps it on the device: "
                "keep its operands in a range where it stays finite, or "
                "disable the option to carry inf/NaN in the results",
                type="runtime", location=where)
