"""The model wrapping functions (spec 4.2)."""

import torch

from ._executor import PoplarExecutor
from .options import Options


def inferenceModel(model: torch.nn.Module, options: Options | None = None  # noqa: N802
                   ) -> PoplarExecutor:
    """Wrap `model` for inference on the IPU (spec 4.2.2). It compiles on the first call.

    The wrapper holds a shallow copy of `model` in eval mode: parameters and buffers are
    shared with `model`, primitive attributes such as `training` are not.
    """
    return PoplarExecutor(model, options, training=False)
