"""poptorch-mlir: PopTorch's Python API backed by an MLIR compiler and an IPU machine model.

The compiler lives in `poptorch.dialects` (the ipu dialect), `poptorch.passes` (MLIR
passes and the pass registry) and `poptorch.runtime` (the machine model); the
`ipu-opt` driver is `poptorch.tools.ipu_opt`.

The user API is imported on first use (PEP 562 `__getattr__`), so that tools which only
need the compiler, such as `ipu-opt`, start without importing torch.
"""

import importlib

from poptorch._version import __version__
from poptorch.errors import Error, RecoverableError, UnrecoverableError

# public name -> module that defines it
_LAZY = {
    "inferenceModel": "poptorch._api",
    "trainingModel": "poptorch._api",
    "PoplarExecutor": "poptorch._executor.executor",
    "isRunningOnIpu": "poptorch._frontend.capture",
    "Options": "poptorch.options",
    "TensorLocationSettings": "poptorch.options",
    "DataLoader": "poptorch.data",
    "AsynchronousDataAccessor": "poptorch.data",
    **{name: "poptorch.enums" for name in (
        "OutputMode", "CommGroupType", "DataLoaderMode", "VariableRetrievalMode",
        "SharingStrategy", "ConnectionType", "SyncPattern", "ReductionType",
        "MeanReductionStrategy", "HalfFloatCastingBehavior", "OverlapMode",
        "MatMulSerializationMode", "Liveness", "AutoStage", "MultiConvPlanType",
        "PipelineSchedule")},
    **{name: "poptorch.options.strategies" for name in (
        "Stage", "Phase", "PipelinedExecution", "ShardedExecution", "SerialPhasedExecution",
        "ParallelPhasedExecution")},
    "Block": "poptorch._frontend.annotations",
    "BeginBlock": "poptorch._frontend.annotations",
    "placeLayers": "poptorch._frontend.annotations",
    "BlockFunction": "poptorch._frontend.annotations",
    "removeBlocks": "poptorch._frontend.annotations",
    "NameScope": "poptorch._frontend.annotations",
    "nop": "poptorch.ops",
    "identity_loss": "poptorch.ops",
    "ipu_print_tensor": "poptorch.ops",
    "recomputationCheckpoint": "poptorch.ops",
    "set_available_memory": "poptorch.ops",
    "for_loop": "poptorch._ops.control_flow",
    "cond": "poptorch._ops.control_flow",
    "set_overlap_for_input": "poptorch._ops.overlap",
    "set_overlap_for_output": "poptorch._ops.overlap",
    "dynamic_slice": "poptorch._ops.slicing",
    "dynamic_update": "poptorch._ops.slicing",
    "serializedMatMul": "poptorch._ops.matmul",
    "ctc_beam_search_decoder": "poptorch._ops.ctc_decoder",
    "MultiConv": "poptorch._ops.multiconv",
    "ipuHardwareIsAvailable": "poptorch._executor.hardware",
    "ipuHardwareVersion": "poptorch._executor.hardware",
    "setLogLevel": "poptorch._logging",
    "load": "poptorch._api",
    "registerPreCompileHook": "poptorch._executor.user_api",
    "registerPostCompileHook": "poptorch._executor.user_api",
    "module_repr": "poptorch._executor.user_api",
    "ICustomArgParser": "poptorch._frontend.arg_parsers",
    "registerCustomArgParser": "poptorch._frontend.arg_parsers",
    "custom_op": "poptorch._ops.custom_op",
    "register_custom_op": "poptorch._ops.custom_op",
    "CustomOpCost": "poptorch._ops.custom_op",
    "CPU": "poptorch._ops.host_call",
    "plan_pipeline": "poptorch._planner",
    "PipelinePlan": "poptorch._planner",
    "OutOfMemoryError": "poptorch.errors",
}


# submodules the spec names directly (poptorch.enums.CommGroupType, ...)
_SUBMODULES = ("enums", "options", "ops", "data", "optim", "profiling", "distributed")


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'poptorch' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["Error", "RecoverableError", "UnrecoverableError", "__version__", *_LAZY]
