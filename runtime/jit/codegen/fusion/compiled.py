"""Compiled kernels: the kernel module of a program's groups lowered by MLIR's passes
(`cache.LOWERING`) and compiled by MLIR's ExecutionEngine, or loaded from the shared
object an earlier process kept (`cache`), and each group's function called on NumPy
arrays through a `FusedKernel`, which gives every operand its leading (replica) axes.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import cffi
import numpy as np
from torch_mlir import execution_engine, ir, passmanager

from poptorch.errors import Error
from poptorch.runtime.jit.codegen.fusion.cache import (
    LOWERING,
    current_directory,
    library_path,
    write_index,
)
from poptorch.runtime.jit.codegen.fusion.emitters import EMITTERS, kernel_module
from poptorch.runtime.jit.codegen.fusion.group import DTYPES, Group, storage

_FFI = cffi.FFI()


class FusedKernel:
    """One group's compiled function, called on NumPy arrays: `outputs = kernel(*inputs)`.

    An input may have leading (replica) axes beyond its declared shape; inputs that have
    them share them, and the outputs get them. The function is MLIR's packed interface
    (one array of pointers to the arguments), called through cffi: it takes an array's
    address 5x faster than ctypes (0.5 against 2.4 us)."""

    def __init__(self, code, address: int, group: Group,
                 io: tuple[list, list] | None = None) -> None:
        """`io`: the function's inputs [(size, rank, dtype)] and outputs [(shape, dtype)]
        when they are not the group's values' (`Emitter.io`)."""
        self.code = code  # the engine or library holding the machine code: kept alive
        if io is None:
            io = ([(int(np.prod(v.type.shape, dtype=np.int64)), v.type.rank,
                    DTYPES[storage(v.type)]) for v in group.inputs],
                  [(tuple(v.type.shape), DTYPES[storage(v.type)]) for v in group.outputs])
        self.spec = io[0]
        self.shapes = [shape for shape, _ in io[1]]
        self.outputs = [dtype for _, dtype in io[1]]
        n_in, n_out = len(self.spec), len(self.outputs)
        self.pointers = _FFI.new("void *[]", n_in + n_out)
        # replicas, each input's step, each read's offset (arguments, so that kernels
        # that differ only in where they read, as an LSTM's steps, share one function)
        offsets = [item.start for item in group.reads]  # (not `elementwise.access`: a warm
        # compile skips the layout)
        self.integers = _FFI.new("int64_t[]", [1] + [0] * n_in + offsets)
        self.packed = _FFI.new("void *[]", [_FFI.addressof(self.pointers, i)
                                            for i in range(n_in + n_out)]
                               + [_FFI.addressof(self.integers, i)
                                  for i in range(1 + n_in + len(offsets))])
        self.call = _FFI.cast("void (*)(void **)", address)
        # each seen set of input shapes -> (the integers, the output shapes): its calls
        # take the fast path, which skips the general path's checks (an LSTM step's bias
        # adds, a 3 us kernel: 12.5 -> 8.7 us a call)
        self.plans: dict[tuple, tuple[list[int], list[tuple]]] = {}
        self.last: tuple | None = None  # the plan the integers hold

    def __call__(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        try:
            shapes = tuple([a.shape for a in arrays])
        except AttributeError:
            return self._general(arrays)
        plan = self.plans.get(shapes)
        if plan is None:
            return self._general(arrays)
        pointers = self.pointers
        for i, (a, (_, _, dtype)) in enumerate(zip(arrays, self.spec, strict=True)):
            if type(a) is not np.ndarray or a.dtype != dtype or not a.flags.c_contiguous:
                return self._general(arrays)
            pointers[i] = _FFI.from_buffer(a)
        if plan is not self.last:
            self.integers[0:len(plan[0])] = plan[0]
            self.last = plan
        n = len(arrays)
        results = []
        for shape, dtype in plan[1]:
            result = np.empty(shape, dtype)
            pointers[n] = _FFI.from_buffer(result)
            n += 1
            results.append(result)
        self.call(self.packed)
        return tuple(results)

    def _general(self, arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Any inputs (converted to C-contiguous arrays of the declared types); learns the
        plan of their shapes for the fast path when none needed converting."""
        lead: tuple[int, ...] = ()
        replicas = 1
        pointers, integers = self.pointers, self.integers
        kept = []
        for i, (a, (size, rank, dtype)) in enumerate(zip(arrays, self.spec, strict=True)):
            if type(a) is not np.ndarray or a.dtype != dtype or not a.flags.c_contiguous:
                a = np.ascontiguousarray(a, dtype)
                kept.append(a)  # alive until the call is done
            if a.size != size:
                extra = a.shape[: a.ndim - rank]
                if lead and extra != lead:
                    raise Error(f"a fused kernel's operands have leading axes {lead} and "
                                f"{extra}", type="runtime")
                lead, replicas = extra, a.size // size
                integers[i + 1] = size
            else:
                integers[i + 1] = 0
            pointers[i] = _FFI.from_buffer(a)
        results = tuple(np.empty(lead + shape, dtype)
                        for shape, dtype in zip(self.shapes, self.outputs, strict=True))
        if results[0].size == 0:
            return results
        n_in = len(arrays)
        for j, result in enumerate(results):
            pointers[n_in + j] = _FFI.from_buffer(result)
        integers[0] = replicas
        self.last = None
        if not kept:
            plan = (list(integers[0:1 + n_in]), [(r.shape, r.dtype) for r in results])
            self.plans[tuple(a.shape for a in arrays)] = self.last = plan
        self.call(self.packed)
        return results


@dataclass
class Kernels:
    """A program's compiled kernels: `ir` is the kernel module before lowering."""

    ir: str
    kernels: list[FusedKernel]


def _link(engine, path: str) -> None:
    """Write the engine's machine code as the shared object `path`, linked by the
    system's C compiler driver; nothing when there is none or linking fails (the next
    process compiles again)."""
    driver = shutil.which("cc")
    if driver is None:
        return
    # a cold compile runs before the executable cache stores its entry (and makes the
    # directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as scratch:
        obj, lib = os.path.join(scratch, "k.o"), os.path.join(scratch, "k.so")
        engine.dump_to_object_file(obj)
        done = subprocess.run([driver, "-shared", "-o", lib, obj], capture_output=True,
                              timeout=60)
        if done.returncode == 0:
            os.replace(lib, path)



def _load(path: str, groups: list[Group], numbers: list[int], text: str
          ) -> Kernels | None:
    """The kernels of `groups` from the shared object at `path`, or None when it is
    missing, damaged or foreign (then they are compiled again and it is replaced)."""
    if not os.path.exists(path):
        return None
    try:
        library = ctypes.CDLL(path)
        addresses = [ctypes.cast(library[f"_mlir_fused_{i}"], ctypes.c_void_p).value
                     for i in range(max(numbers) + 1)]
    except (OSError, AttributeError):
        return None
    return Kernels(text, [_kernel(library, addresses[number], group)
                          for group, number in zip(groups, numbers, strict=True)])



def compile_kernels(groups: list[Group], context: ir.Context, key: str | None = None,
                    functions: list[list[dict]] | None = None,
                    index: dict | None = None) -> Kernels:
    """Lower and compile the kernel module of `groups` with MLIR's ExecutionEngine, or
    load it from the executable cache directory (`kernel_directory`) when an earlier
    process kept it there.

    Kept there: the shared object `kernels-<digest of its IR>.so` and, when the caller
    gives `key` (text that determines the groups: the printed module they come from)
    and `functions` (`cache.groups_data` of each function's groups), an index entry
    `kernels-<digest of key>.json` (`cache.read_index`). A warm compile that took its groups
    from the `index` entry loads their kernels without generating their IR (an LSTM's
    16 kernels: 20-25 ms)."""
    directory = current_directory()
    if directory and index is not None and len(index["numbers"]) == len(groups):
        kernels = _load(os.path.join(directory, index["library"]), groups, index["numbers"],
                        index["ir"])
        if kernels is not None:
            return kernels
    text, numbers = kernel_module(groups)
    path = None
    kernels = None
    if directory:
        path = library_path(directory, text)
        kernels = _load(path, groups, numbers, text)
    if kernels is None:
        with context:
            module = ir.Module.parse(text)
            passmanager.PassManager.parse(LOWERING).run(module.operation)
            engine = execution_engine.ExecutionEngine(module, opt_level=3)
        addresses = [engine.raw_lookup(f"fused_{i}") for i in range(max(numbers) + 1)]
        if path:
            try:
                _link(engine, path)
            except (OSError, subprocess.SubprocessError):
                pass
        kernels = Kernels(text, [_kernel(engine, addresses[number], group)
                                 for group, number in zip(groups, numbers, strict=True)])
    if path and key is not None and functions is not None and os.path.exists(path):
        write_index(directory, key, os.path.basename(path), numbers, text, functions)
    return kernels


def _kernel(code, address: int, group: Group):
    """What the program calls for `group`: its FusedKernel, or what the group's emitter
    builds on it (`Emitter.call`)."""
    emitter = EMITTERS[group.kind]
    return emitter.call(FusedKernel(code, address, group, emitter.io(group)), group)
