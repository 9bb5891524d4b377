"""Batch normalisation PopTorch refuses: a cumulative moving average.

A `_BatchNorm` with `momentum=None` that trains and tracks running statistics averages
them cumulatively: its forward computes the factor as `1.0 / float(num_batches_tracked)`,
a Python number read from a device tensor, which an IPU program cannot give (nor can
PopTorch, whose batch-norm lowering takes the momentum as a constant:
popart_canonicalization/NormalizationOps.cpp). Refused before capture, by module name,
with what to do, rather than as the `aten._local_scalar_dense` the read becomes.
"""

from __future__ import annotations

import contextlib

import torch

from poptorch.errors import Error


@contextlib.contextmanager
def constant_momentum(model: torch.nn.Module):
    """While capturing `model`: a poptorch.Error for a training BatchNorm whose running
    statistics are a cumulative average (momentum=None)."""
    for name, module in model.named_modules():
        if (isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.training
                and module.track_running_stats and module.momentum is None):
            raise Error(f"{type(module).__name__} '{name or type(model).__name__}' has "
                        "momentum=None (a cumulative moving average of its running "
                        "statistics, which reads num_batches_tracked as a Python number): "
                        "it is not supported, as in PopTorch; give it a constant momentum "
                        "(for example momentum=0.1)", type="capture")
    yield
