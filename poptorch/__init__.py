"""poptorch-mlir: PopTorch's Python API backed by an MLIR compiler and an IPU machine model.

The compiler lives in `poptorch.dialects` (the ipu dialect), `poptorch.passes` (MLIR
passes and the pass registry) and `poptorch.runtime` (the machine model); the
`ipu-opt` driver is `poptorch.tools.ipu_opt`.
"""

import torch

from ._executor import PoplarExecutor
from ._frontend import isRunningOnIpu
from .enums import CommGroupType, OutputMode
from .errors import Error, RecoverableError, UnrecoverableError
from .options import Options

__version__ = "0.1.0"


def inferenceModel(model: torch.nn.Module, options: Options | None = None  # noqa: N802
                   ) -> PoplarExecutor:
    """Wrap `model` for inference on the IPU (spec 4.2.2). It compiles on the first call."""
    return PoplarExecutor(model, options, training=False)


__all__ = [
    "CommGroupType",
    "Error",
    "Options",
    "OutputMode",
    "PoplarExecutor",
    "RecoverableError",
    "UnrecoverableError",
    "__version__",
    "inferenceModel",
    "isRunningOnIpu",
]
