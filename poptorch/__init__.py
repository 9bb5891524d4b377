"""poptorch-mlir: PopTorch's Python API backed by an MLIR compiler and an IPU machine model.

The compiler lives in `poptorch.dialects` (the ipu dialect), `poptorch.passes` (MLIR
passes and the pass registry) and `poptorch.runtime` (the machine model); the
`ipu-opt` driver is `poptorch.tools.ipu_opt`.

The user API is imported on first use (PEP 562 `__getattr__`), so that tools which only
need the compiler, such as `ipu-opt`, start without importing torch.
"""

import importlib

from .errors import Error, RecoverableError, UnrecoverableError

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "inferenceModel": "._api",
    "PoplarExecutor": "._executor",
    "isRunningOnIpu": "._frontend",
    "Options": ".options",
    "OutputMode": ".enums",
    "CommGroupType": ".enums",
    "Block": "._annotations",
    "nop": ".ops",
    "ipu_print_tensor": ".ops",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'poptorch' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["Error", "RecoverableError", "UnrecoverableError", "__version__", *_LAZY]
