"""The model wrapping functions (spec 4.2)."""

import torch

from poptorch._executor.executor import PoplarExecutor
from poptorch.options import Options


def inferenceModel(model: torch.nn.Module, options: Options | None = None  # noqa: N802
                   ) -> PoplarExecutor:
    """Wrap `model` for inference on the IPU (spec 4.2.2). It compiles on the first call.

    The wrapper holds a shallow copy of `model` in eval mode: parameters and buffers are
    shared with `model`, primitive attributes such as `training` are not. `model` may be
    another wrapper (such as a loaded training model): its model is wrapped.
    """
    if isinstance(model, PoplarExecutor):  # spec listing 4.35: a wrapper's model
        model = model._user_model
    return PoplarExecutor(model, options, training=False)


def trainingModel(model: torch.nn.Module, options: Options | None = None,  # noqa: N802
                  optimizer: torch.optim.Optimizer | None = None):
    """Wrap `model` for training on the IPU (spec 4.2.1): each call runs forward, loss,
    backward and the optimizer step. The default optimizer is SGD(lr=0.01); the default
    output mode returns the final batch's outputs."""
    from poptorch._executor.training import TrainingExecutor

    if isinstance(model, PoplarExecutor):
        model = model._user_model
    return TrainingExecutor(model, options, optimizer)
