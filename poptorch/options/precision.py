"""The Precision options (and enableStableNorm) as the `ipu-precision` pipeline step.

The compiler runs the step before the execution strategy's: it tags the ops the options
change (passes/precision.py), which the JIT's kernels and the machine model's cost
rules read. Every Precision option reaches the IR here or is refused here (`check`).
"""

from __future__ import annotations

import torch

from poptorch.enums import HalfFloatCastingBehavior
from poptorch.errors import Error
from poptorch.options.options import Options


def check(options: Options) -> None:
    """Refuse the Precision values the spec removed (11-api-reference: halfFloatCasting and
    runningStatisticsAlwaysFloat, "DO NOT USE: about to be removed"; PopTorch keeps only
    HalfUpcastToFloat and False, PyTorch's behaviour, which is what runs here)."""
    precision = options.Precision
    if precision.half_float_casting == HalfFloatCastingBehavior.FloatDowncastToHalf:
        raise Error("Precision.halfFloatCasting(FloatDowncastToHalf) is not supported: "
                    "PopTorch follows PyTorch's type promotion (an op mixing float16 and "
                    "float32 tensors computes in float32; float32 weights of a layer on a "
                    "float16 input become float16, spec 4.7); cast the float32 tensors to "
                    "float16 in the model, or use HalfUpcastToFloat (the default)",
                    type="options")
    if precision.running_statistics_always_float:
        raise Error("Precision.runningStatisticsAlwaysFloat(True) is not supported: the "
                    "batch-norm running statistics keep their buffers' dtype, as in "
                    "PyTorch; to keep them in float32 in a float16 model, keep the "
                    "batch-norm layer in float32 (model.half(); model.bn.float())",
                    type="options")


def pipeline_step(options: Options) -> str:
    """`ipu-precision{...}` for `options`, once they pass `check`."""
    check(options)
    precision = options.Precision
    partials = {None: "", torch.float32: "float", torch.float16: "half"}[precision.partials_type]
    values = {"partials-type": partials,
              "stable-norm": str(options.stable_norm).lower(),
              "stochastic-rounding": str(precision.stochastic_rounding).lower(),
              "floating-point-exceptions": str(precision.floating_point_exceptions).lower()}
    return "ipu-precision{" + " ".join(f"{k}={v}" for k, v in values.items() if v) + "}"
