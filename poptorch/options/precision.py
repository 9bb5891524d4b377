"""The Precision options (and enableStableNorm) as the `ipu-precision` pipeline step.

The compiler runs the step before the execution strategy's: it tags the ops the options
change (passes/precision.py), which the JIT's kernels and the machine model's cost
rules read. Every Precision option reaches the IR here or is refused here (`check`).
"""

from __future__ import annotations

import torch

from poptorch.options.options import Options


def pipeline_step(options: Options) -> str:
    """`ipu-precision{...}` for `options`."""
    precision = options.Precision
    partials = {None: "", torch.float32: "float", torch.float16: "half"}[precision.partials_type]
    values = {"partials-type": partials,
              "stable-norm": str(options.stable_norm).lower(),
              "stochastic-rounding": str(precision.stochastic_rounding).lower(),
              "floating-point-exceptions": str(precision.floating_point_exceptions).lower()}
    return "ipu-precision{" + " ".join(f"{k}={v}" for k, v in values.items() if v) + "}"
