"""poptorch-mlir: PopTorch's Python API backed by an MLIR compiler and an IPU machine model.

The compiler lives in `poptorch.dialects` (the ipu dialect), `poptorch.passes` (MLIR
passes and the pass registry) and `poptorch.runtime` (the machine model); the
`ipu-opt` driver is `poptorch.tools.ipu_opt`.
"""

from .errors import Error, RecoverableError, UnrecoverableError

__version__ = "0.1.0"

__all__ = ["Error", "RecoverableError", "UnrecoverableError", "__version__"]
