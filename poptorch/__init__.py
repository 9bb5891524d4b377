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
    "trainingModel": "._api",
    "PoplarExecutor": "._executor",
    "isRunningOnIpu": "._frontend",
    "Options": ".options",
    "TensorLocationSettings": ".options",
    "DataLoader": ".data",
    **{name: ".enums" for name in (
        "OutputMode", "CommGroupType", "DataLoaderMode", "VariableRetrievalMode",
        "SharingStrategy", "ConnectionType", "SyncPattern", "ReductionType",
        "MeanReductionStrategy", "HalfFloatCastingBehavior", "OverlapMode",
        "MatMulSerializationMode", "Liveness", "AutoStage", "MultiConvPlanType",
        "PipelineSchedule")},
    **{name: "._strategies" for name in (
        "Stage", "Phase", "PipelinedExecution", "ShardedExecution", "SerialPhasedExecution",
        "ParallelPhasedExecution")},
    "Block": "._annotations",
    "BeginBlock": "._annotations",
    "placeLayers": "._annotations",
    "BlockFunction": "._annotations",
    "removeBlocks": "._annotations",
    "NameScope": "._annotations",
    "nop": ".ops",
    "identity_loss": ".ops",
    "ipu_print_tensor": ".ops",
    "recomputationCheckpoint": ".ops",
    "set_available_memory": ".ops",
    "ipuHardwareIsAvailable": "._hardware",
    "ipuHardwareVersion": "._hardware",
    "setLogLevel": "._logging",
    "load": "._persistence",
}


# submodules the spec names directly (poptorch.enums.CommGroupType, ...)
_SUBMODULES = ("enums", "options", "ops", "data", "optim", "profiling")


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'poptorch' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["Error", "RecoverableError", "UnrecoverableError", "__version__", *_LAZY]
