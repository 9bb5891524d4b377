"""The `ipu` dialect (installed as `poptorch.dialects`) and the one way to make a context.

`make_context()` gives an MLIR context with multithreading disabled (Python verifiers
called from MLIR's multithreaded verifier can crash: llvm-project issue 215781), the
torch dialect registered and the ipu dialect loaded, so torch and ipu ops can sit side
by side in one module.
"""

from __future__ import annotations

import sys

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect
from torch_mlir.passmanager import PassManager

from . import (
    convolution,
    convolution_backward,
    creation,
    data_movement,
    elementwise,
    indexing,
    linear,
    optimizer,
    reduction,
    structure,
)
from .ipu import Ipu, ReplicaGroupAttr, StageAttr, replica_group, stage_attr

# MLIR's Python bindings import `torch_mlir.dialects.<namespace>` the first time they
# build an op view of a dialect, and retry that import for every op while it fails:
# ~30 us per ipu op wherever IR is walked. The ipu ops are registered by this package, so
# it is the ipu dialect's module.
sys.modules.setdefault("torch_mlir.dialects.ipu", sys.modules[__name__])

__all__ = [
    "Ipu",
    "ReplicaGroupAttr",
    "StageAttr",
    "convolution",
    "convolution_backward",
    "creation",
    "data_movement",
    "elementwise",
    "indexing",
    "linear",
    "make_context",
    "optimizer",
    "reduction",
    "replica_group",
    "stage_attr",
    "structure",
]


def make_context() -> ir.Context:
    """A new context holding the torch, torch_c and ipu dialects, safe for Python verifiers."""
    ctx = ir.Context()
    ctx.enable_multithreading(False)
    torch_dialect.register_dialect(ctx)
    with ctx, ir.Location.unknown():
        Ipu.load()
        # torch_c (TorchConversion), which the torch -> ipu conversion creates casts in, has
        # no Python registration hook: running a pass that depends on it loads it.
        PassManager.parse("builtin.module(torch-func-backend-type-conversion)").run(
            ir.Module.create().operation
        )
    return ctx
