"""The `ipu` dialect (installed as `poptorch.dialects`) and the one way to make a context.

`make_context()` gives an MLIR context with multithreading disabled (Python verifiers
called from MLIR's multithreaded verifier can crash: llvm-project issue 215781), the
torch dialect registered and the ipu dialect loaded, so torch and ipu ops can sit side
by side in one module.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import pathlib
import sys
import tempfile

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect
from torch_mlir.passmanager import PassManager

from . import (
    convolution,
    convolution_backward,
    creation,
    ctc,
    custom,
    data_movement,
    elementwise,
    indexing,
    linear,
    matmul_serialization,
    optimizer,
    reduction,
    slicing,
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
    "custom",
    "ctc",
    "data_movement",
    "elementwise",
    "indexing",
    "keep_irdl",
    "linear",
    "make_context",
    "matmul_serialization",
    "op_class",
    "optimizer",
    "reduction",
    "replica_group",
    "slicing",
    "stage_attr",
    "structure",
    "torch_mlir_version",
]


_OP_CLASSES: dict[str, type] = {}


def op_class(op: ir.Operation | ir.OpView | str) -> type | None:
    """The class of an ipu op (given the op or its name, "ipu.relu"), None for an op of
    another dialect. Tables of the passes, the JIT and the machine model are keyed by
    these classes; this look-up by name is cheaper than building the op's view."""
    name = op if isinstance(op, str) else op.name
    found = _OP_CLASSES.get(name)
    if found is None and len(_OP_CLASSES) != len(Ipu.operations):
        _OP_CLASSES.clear()
        _OP_CLASSES.update((cls.OPERATION_NAME, cls) for cls in Ipu.operations)
        found = _OP_CLASSES.get(name)
    return found


@functools.cache
def torch_mlir_version() -> str:
    """torch-mlir's version, read from its package metadata once per process (0.7-1.7 ms
    a read): what the IRDL text, compiled kernels and executables depend on."""
    return importlib.metadata.version("torch-mlir")


@functools.cache
def _sources_digest() -> str:
    """What the emitted IRDL text depends on: this package's sources and torch-mlir."""
    digest = hashlib.sha256(torch_mlir_version().encode())
    for path in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _irdl_file(directory: str) -> str:
    return os.path.join(directory, f"ipu-dialect-{_sources_digest()[:16]}.irdl.mlir")


def _read_irdl(directory: str) -> bool:
    """Seed `Ipu` with the IRDL text kept in `directory` for these dialect sources; False
    if there is none. The file's first line is the digest of the rest: a missing,
    unreadable or damaged file only means emitting the text again."""
    try:
        head, _, text = pathlib.Path(_irdl_file(directory)).read_text(
            encoding="utf-8").partition("\n")
    except (OSError, UnicodeDecodeError):
        return False
    if head != _digest_line(text):
        return False
    Ipu.use_irdl_text(text)
    return True


def _digest_line(text: str) -> str:
    return f"// sha256 {hashlib.sha256(text.encode()).hexdigest()}"


def keep_irdl(directory: str, replace: bool = False) -> None:
    """Keep this process's IRDL text of the ipu dialect in `directory` (see
    `make_context`), atomically, unless a file is there; failing to write loses nothing."""
    path = _irdl_file(directory)
    text = Ipu.irdl_text()
    if text is None or (os.path.exists(path) and not replace):
        return
    try:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".ipu-dialect-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_digest_line(text) + "\n" + text)
        os.replace(temporary, path)
    except OSError:
        pass


def make_context(irdl_directory: str | None = None) -> ir.Context:
    """A new context holding the torch, torch_c and ipu dialects, safe for Python verifiers.

    `irdl_directory` (an executable cache directory) keeps the ipu dialect's IRDL text
    between processes: a new process parses it there instead of emitting it from the op
    classes, which was a fifth of a warm-cache compile (on the development VM, 19 ms of
    a transformer layer's 91). A file that is damaged, or does not load, is replaced.
    """
    if irdl_directory is None or Ipu.irdl_text() is not None:
        return _new_context()
    if _read_irdl(irdl_directory):
        try:
            return _new_context()
        except ir.MLIRError:
            Ipu.use_irdl_text(None)
    context = _new_context()
    keep_irdl(irdl_directory, replace=True)
    return context


# Loaded when a context is made: the dialects our Python code builds ops in (irdl for the
# ipu dialect's definition; ipu itself is loaded by `Ipu.load`, torch by its registration,
# torch_c below). Parsing and passes load any other registered dialect when they need it;
# loading all of them took 6-7.5 ms of a fresh process's first context, these 1.2-1.6.
_LOADED = ["builtin", "func", "arith", "tensor", "irdl"]


def _new_context() -> ir.Context:
    ctx = ir.Context(load_on_create_dialects=[])
    for name in _LOADED:  # (`Context.dialects[name]` would import its Python module too)
        ctx.get_dialect_descriptor(name)
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
