"""The on-disk kernel cache: compiled kernel modules kept as shared objects in the
executable cache directory (`kernel_directory`), and an index entry per module that
holds its groups (`groups_data`) and their kernels, so that a warm compile neither finds
groups nor writes IR.

Keys: a shared object is named by a digest of its IR and of what compiled code depends
on besides (`_host`: torch-mlir's LLVM and the host CPU; `LOWERING`, `PASSTHROUGH`); an
index entry by a digest of the module's text, the same, and the JIT's code (`generator`:
every file of `poptorch.runtime.jit`), so that an entry holds only for the code that wrote it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import glob
import hashlib
import json
import os
import platform
import re
import sys
import tempfile

from torch_mlir import ir, passmanager

from poptorch.dialects import torch_mlir_version
from poptorch.runtime.jit.codegen.fusion.group import Group, Kind, Read

# The pass pipeline that lowers a kernel module to the LLVM dialect (compiled code
# depends on it: the cache's keys hash it).
LOWERING = ("builtin.module(convert-scf-to-cf, convert-math-to-llvm, convert-arith-to-llvm,"
            " convert-cf-to-llvm, convert-func-to-llvm, reconcile-unrealized-casts)")

# LLVM function attributes given to every lowered kernel function (`lower`; the keys hash
# them too): vectors as wide as the host's. On an AVX-512 host LLVM otherwise prefers 256
# bits. Elementwise results are bit for bit the same; folds marked `reassoc` (fused
# reductions, direct convolutions' dot products) sum in another order (a CNN training
# step's outputs moved by 6.6e-7). CPU time a call against 256 bits, one thread, the
# same process, medians of interleaved blocks: bench LSTM inference 2.60 -> 2.48 ms at
# batch 32, 15.6 -> 14.7 ms at 256; its training step 5.84 -> 5.67 ms at 32; the CNN's
# inference 4.42 -> 4.16 ms and training step 17.9 -> 16.8 ms at 32.
PASSTHROUGH = '[["prefer-vector-width", "512"]]'


def lower(module: ir.Module) -> None:
    """Lower the kernel module `module` to the LLVM dialect in place (`LOWERING`) and
    give its functions `PASSTHROUGH`."""
    passmanager.PassManager.parse(LOWERING).run(module.operation)
    attributes = ir.Attribute.parse(PASSTHROUGH)
    for op in module.body.operations:
        if op.operation.name == "llvm.func":
            op.operation.attributes["passthrough"] = attributes


# The executable cache directory of the compile in progress, if any: compiled kernel
# modules are kept there as shared objects, so that a warm compile loads them.
_DIRECTORY: contextvars.ContextVar[str | None] = contextvars.ContextVar("kernels", default=None)


@contextlib.contextmanager
def kernel_directory(directory: str | None):
    """Keep and load compiled kernel modules in `directory` within this block."""
    token = _DIRECTORY.set(directory)
    try:
        yield
    finally:
        _DIRECTORY.reset(token)


@functools.cache
def _host() -> str:
    """What compiled code depends on besides its IR: the LLVM in torch-mlir (its version)
    and the host CPU it targeted (the ExecutionEngine compiles for the host's features)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        cpu = ""
    return f"{torch_mlir_version()} {platform.machine()} {cpu}"


def current_directory() -> str | None:
    """The directory of `kernel_directory` in force, if any."""
    return _DIRECTORY.get()


@functools.cache
def generator() -> str:
    """A digest of the JIT's code (every .py file of `poptorch.runtime.jit`: the grouping,
    the emitters, the kernels and the constants they use): an index entry
    (`read_index`) holds only for the code that wrote it."""
    jit = os.path.dirname(os.path.abspath(sys.modules["poptorch.runtime.jit"].__file__))
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(jit, "**", "*.py"), recursive=True)):
        digest.update(os.path.relpath(path, jit).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def library_path(directory: str, text: str) -> str:
    """Where the shared object of the kernel module `text` is kept in `directory`."""
    digest = hashlib.sha256(f"{_host()}\n{LOWERING}\n{PASSTHROUGH}\n{text}".encode())
    return os.path.join(directory, f"kernels-{digest.hexdigest()[:32]}.so")


def _index_path(directory: str, key: str) -> str:
    digest = hashlib.sha256(f"{_host()}\n{LOWERING}\n{PASSTHROUGH}\n{generator()}\n{key}".encode())
    return os.path.join(directory, f"kernels-{digest.hexdigest()[:32]}.json")


def read_index(key: str) -> dict | None:
    """The index entry an earlier compile of the module `key` kept in the executable
    cache directory (`compiled.compile_kernels`), or None. It is JSON: the shared
    object's name, each group's function number, the kernel IR and the groups themselves
    (`groups_data`), found by SHA-256 over the module's text and the code that found
    the groups and wrote their IR (`generator`)."""
    directory = _DIRECTORY.get()
    if not directory:
        return None
    try:
        with open(_index_path(directory, key), encoding="utf-8") as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    if not (isinstance(entry, dict) and isinstance(entry.get("library"), str)
            and re.fullmatch(r"kernels-[0-9a-f]{32}\.so", entry["library"])
            and isinstance(entry.get("ir"), str) and isinstance(entry.get("numbers"), list)
            and all(type(n) is int and n >= 0 for n in entry["numbers"])
            and isinstance(entry.get("functions"), list)):
        return None
    return entry


def groups_data(groups: list[Group], block: ir.Block) -> list[dict]:
    """`groups` of `block` as JSON data: ops by their place in the block, values as
    [op, result] or [-1, argument]. Layouts are left out (derived when asked)."""
    index = {op.operation: i for i, op in enumerate(block.operations)}

    def ref(value: ir.Value) -> list[int]:
        if isinstance(value.owner, ir.Block):
            return [-1, value.arg_number]
        return [index[value.owner.operation], value.result_number]

    def read(value: ir.Value, offset: tuple, view: tuple) -> list:
        return [ref(value), list(offset), list(view)]

    return [{"shape": list(g.shape), "ops": [index[op] for op in g.ops],
             "absorbed": [index[op] for op in g.absorbed],
             "inputs": [ref(v) for v in g.inputs], "reads": [read(*r.key) for r in g.reads],
             "outputs": [ref(v) for v in g.outputs], "reduced": list(g.reduced),
             "kind": g.kind.value,
             "concat": None if g.concat is None else ref(g.concat),
             "targets": [[ref(v), offset] for v, offset in g.targets.items()],
             "paths": [[read(*key), [read(*r) for r in reads]]
                       for key, reads in g.paths.items()]}
            for g in groups]


def groups_from(data: list[dict], block: ir.Block) -> list[Group]:
    """The inverse of `groups_data` on the same block; ValueError, KeyError, TypeError or
    IndexError when the data does not fit it. (The data is only ever what `groups_data`
    wrote for this module's text, so its numbers are not checked one by one.)"""
    ops = [op.operation for op in block.operations]
    arguments = list(block.arguments)

    def at(items, i: int):
        if not 0 <= i < len(items):
            raise IndexError(i)
        return items[i]

    def value(ref: list) -> ir.Value:
        op, number = ref
        return at(arguments, number) if op == -1 else at(at(ops, op).results, number)

    def read(item: list) -> tuple:
        where, offset, view = item
        return value(where), tuple(offset), tuple(view)

    groups = []
    for g in data:
        group = Group(tuple(g["shape"]), [at(ops, i) for i in g["ops"]],
                      [at(ops, i) for i in g["absorbed"]], [value(r) for r in g["inputs"]],
                      [Read(*read(r)) for r in g["reads"]], [value(r) for r in g["outputs"]],
                      reduced=tuple(g["reduced"]), kind=Kind(g["kind"]))
        group.paths = {read(key): [read(r) for r in reads] for key, reads in g["paths"]}
        if g["concat"] is not None:
            group.concat = value(g["concat"])
            group.targets = {value(r): int(offset) for r, offset in g["targets"]}
        if not group.ops or not group.outputs:
            raise ValueError("a group without ops or results")
        groups.append(group)
    return groups


def write_index(directory: str, key: str, library: str, numbers: list[int], text: str,
                 functions: list[list[dict]]) -> None:
    """Write the index entry of module `key` atomically (a reader never sees a part)."""
    path = _index_path(directory, key)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".kernels-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"library": library, "numbers": numbers, "ir": text,
                       "functions": functions}, f)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)

