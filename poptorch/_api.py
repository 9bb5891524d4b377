"""The model wrapping functions (spec 4.2) and `poptorch.load` (spec 4.10.2), which wraps
the model it restores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from poptorch._executor import persistence
from poptorch._executor.executor import PoplarExecutor
from poptorch._executor.training import TrainingExecutor
from poptorch.errors import Error
from poptorch.options import Options


def inferenceModel(model: torch.nn.Module, options: Options | None = None  # noqa: N802
                   ) -> PoplarExecutor:
    """Wrap `model` for inference on the IPU (spec 4.2.2). It compiles on the first call.

    The wrapper holds a shallow copy of `model` in eval mode: parameters and buffers are
    shared with `model`, primitive attributes such as `training` are not. `model` may be
    another wrapper (such as a loaded training model): its model is wrapped.
    """
    model = _user_model(model, "inferenceModel")
    return PoplarExecutor(model, options, training=False)


def trainingModel(model: torch.nn.Module, options: Options | None = None,  # noqa: N802
                  optimizer: torch.optim.Optimizer | None = None) -> TrainingExecutor:
    """Wrap `model` for training on the IPU (spec 4.2.1): each call runs forward, loss,
    backward and the optimizer step. The default optimizer is SGD(lr=0.01); the default
    output mode returns the final batch's outputs."""
    model = _user_model(model, "trainingModel")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise Error(f"trainingModel: optimizer must be a torch.optim.Optimizer (poptorch.optim "
                    f"or torch.optim) or None for SGD(lr=0.01), got {_named(optimizer)}",
                    type="api")
    if optimizer is None and next(iter(model.parameters()), None) is None:
        raise Error("trainingModel: the model has no parameters, so there is nothing to "
                    "train; use inferenceModel to run it", type="api")
    return TrainingExecutor(model, options, optimizer)


def _user_model(model: Any, wrapper: str) -> torch.nn.Module:
    """The torch.nn.Module to wrap: `model`, or the model of a wrapper (spec listing
    4.35)."""
    if isinstance(model, PoplarExecutor):
        return model._user_model
    if not isinstance(model, torch.nn.Module):
        raise Error(f"{wrapper}: model must be a torch.nn.Module (or a model wrapped by "
                    f"poptorch), got {_named(model)}", type="api")
    return model


def _named(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"a {type(value).__name__}"


def load(filename: str, edit_opts_fn: Callable[[Options], Any] | None = None
         ) -> PoplarExecutor:
    """Load a model written by compileAndExport (or save) with `export_model=True`: the
    Python model, its PopTorch wrapper with the weights and optimizer state it was saved
    with, and the executable (spec 4.10.2). `edit_opts_fn(options)` may change the
    run-time options (such as `useIpuId`); compile-time options are the file's.

    Restoring the Python model object unpickles it, which runs the code of the model's
    classes: load only files you trust, as with `pickle.load` or
    `torch.load(weights_only=False)`. The file's content hash is checked first, and the
    unpickler only rebuilds torch modules, optimizers, enums, dtypes and containers of
    modules already imported. The executable, weights and options are read as data
    (`loadExecutable` never unpickles anything).
    """
    restored = persistence.restore(filename, edit_opts_fn)
    try:
        return _wrap_restored(restored)
    except Error:
        raise
    except Exception as err:  # noqa: BLE001 - a restored object that does not work
        raise Error(f"{restored.path}: the restored model cannot be wrapped ({err!r})",
                    type="executable") from None


def _wrap_restored(restored: persistence.Restored) -> PoplarExecutor:
    """Wrap the restored model and load the executable (and optimizer state) into it."""
    if restored.training:
        executor = trainingModel(restored.model, restored.options, restored.optimizer)
    else:
        executor = inferenceModel(restored.model, restored.options)
    executor._load_file(restored.file, restored.path, restored.options, explicit=False)
    if restored.training:
        # the wrapper's optimizer, linked to the device state by loading the executable
        executor._optimizer.load_state_dict(
            persistence.optimizer_state(restored.file, restored.path))
    return executor
