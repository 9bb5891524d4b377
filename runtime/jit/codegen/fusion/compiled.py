"""Compiled kernels: the kernel module of a program's groups lowered by MLIR's passes
(`cache.lower`) and compiled by MLIR's ExecutionEngine, or loaded from the shared
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
import torch
from torch_mlir import execution_engine, ir

from poptorch.errors import Error
from poptorch.runtime.jit.codegen.fusion.cache import (
    current_directory,
    library_path,
    lower,
    write_index,
)
from poptorch.runtime.jit.codegen.fusion.emitters import EMITTERS, kernel_module
from poptorch.runtime.jit.codegen.fusion.group import DTYPES, Group, storage
from poptorch.runtime.jit.codegen.fusion.threads import (
    ALIGN,
    CHUNKS,
    POOL,
    SPLIT_MIN_ELEMENTS,
    bounds,
)

_FFI = cffi.FFI()


class _Chunk:
    """The argument arrays of one more chunk's call (`FusedKernel._parallel`)."""

    def __init__(self, n_pointers: int, n_integers: int) -> None:
        self.pointers = _FFI.new("void *[]", n_pointers)
        self.integers = _FFI.new("int64_t[]", n_integers)
        self.packed = _FFI.new("void *[]", [_FFI.addressof(self.pointers, i)
                                            for i in range(n_pointers)]
                               + [_FFI.addressof(self.integers, i)
                                  for i in range(n_integers)])


class FusedKernel:
    """One group's compiled function, called on NumPy arrays: `outputs = kernel(*inputs)`.

    An input may have leading (replica) axes beyond its declared shape; inputs that have
    them share them, and the outputs get them. The function is MLIR's packed interface
    (one array of pointers to the arguments), called through cffi: it takes an array's
    address 5x faster than ctypes (0.5 against 2.4 us).

    The function's last two arguments are a range [lo, hi) of its outer parallel loop
    over replicas x `outer` iterations; a call that reads and writes at least
    `threads.SPLIT_MIN_ELEMENTS` elements is cut into ranges that torch's threads take
    as each is free (`threads.POOL`). The last `private` outputs are scratch: each
    thread has its own."""

    def __init__(self, code, address: int, group: Group,
                 io: tuple[list, list] | None = None, split: tuple[int, int] = (1, 0)
                 ) -> None:
        """`io`: the function's inputs [(size, rank, dtype)] and outputs [(shape, dtype)]
        when they are not the group's values (`Emitter.io`); `split`: (outer, private)."""
        self.code = code  # the engine or library holding the machine code: kept alive
        if io is None:
            io = ([(int(np.prod(v.type.shape, dtype=np.int64)), v.type.rank,
                    DTYPES[storage(v.type)]) for v in group.inputs],
                  [(tuple(v.type.shape), DTYPES[storage(v.type)]) for v in group.outputs])
        self.spec = io[0]
        self.shapes = [shape for shape, _ in io[1]]
        self.outputs = [dtype for _, dtype in io[1]]
        self.outer, self.private = split
        n_in, n_out = len(self.spec), len(self.outputs)
        # replicas, each input's step, each read's offset (arguments, so that kernels
        # that differ only in where they read, as an LSTM's steps, share one function),
        # then the range of the outer loop
        offsets = [item.start for item in group.reads]  # (not `elementwise.access`: a warm
        # compile skips the layout)
        self.n_integers = 1 + n_in + len(offsets) + 2
        first = _Chunk(n_in + n_out, self.n_integers)
        self.pointers, self.integers, self.packed = first.pointers, first.integers, \
            first.packed
        self.integers[0:self.n_integers] = [1] + [0] * n_in + offsets + [0, self.outer]
        self.chunks = [first]
        self.call = _FFI.cast("void (*)(void **)", address)
        # each seen set of input shapes -> (the integers, the output shapes, the elements
        # its calls read and write when they are split, else 0): its calls take the fast
        # path, which skips the general path's checks (an LSTM step's bias adds, a 3 us
        # kernel: 12.5 -> 8.7 us a call)
        self.plans: dict[tuple, tuple[list[int], list[tuple], int]] = {}
        self.cuts: list[int] = []  # the chunks' bounds of the split call in progress
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
            self.integers[0:self.n_integers] = plan[0]
            self.last = plan
        n = len(arrays)
        results = []
        for shape, dtype in plan[1]:
            result = np.empty(shape, dtype)
            pointers[n] = _FFI.from_buffer(result)
            n += 1
            results.append(result)
        if plan[2]:
            self._parallel(results, plan[2])
        else:
            self.call(self.packed)
        return tuple(results)

    def _general(self, arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Any inputs (converted to C-contiguous arrays of the declared types); learns the
        plan of their shapes for the fast path when none needed converting."""
        lead: tuple[int, ...] = ()
        replicas = 1
        pointers, integers = self.pointers, self.integers
        kept = []
        moved = 0
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
            moved += a.size
        results = tuple(np.empty(lead + shape, dtype)
                        for shape, dtype in zip(self.shapes, self.outputs, strict=True))
        if results[0].size == 0:
            return results
        n_in = len(arrays)
        for j, result in enumerate(results):
            pointers[n_in + j] = _FFI.from_buffer(result)
        integers[0] = replicas
        integers[self.n_integers - 2] = 0
        integers[self.n_integers - 1] = replicas * self.outer
        moved += sum(r.size for r in results[:len(results) - self.private])
        split = moved if moved >= SPLIT_MIN_ELEMENTS and replicas * self.outer > 1 else 0
        self.last = None
        if not kept:
            plan = (list(integers[0:self.n_integers]), [(r.shape, r.dtype) for r in results],
                    split)
            self.plans[tuple(a.shape for a in arrays)] = self.last = plan
        if split:
            self._parallel(list(results), split)
        else:
            self.call(self.packed)
        return results

    def _parallel(self, results: list[np.ndarray], moved: int) -> None:
        """Call the function on ranges of its outer loop on several threads (the first
        chunk's arrays hold the call's pointers and integers; the call reads and writes
        `moved` elements); each thread has its own argument arrays and private
        outputs."""
        units = int(self.integers[self.n_integers - 1])
        threads = min(torch.get_num_threads(), units)
        if threads < 2:
            self.call(self.packed)
            return
        chunks = min(units, threads * (CHUNKS if moved >= CHUNKS * SPLIT_MIN_ELEMENTS else 1))
        self.cuts = bounds(units, chunks, ALIGN if units // chunks >= 16 * ALIGN else 1)
        shared = len(self.spec) + len(results) - self.private
        scratch = []
        while len(self.chunks) < threads:
            self.chunks.append(_Chunk(shared + self.private, self.n_integers))
        first = self.chunks[0]
        for k in range(1, threads):
            chunk = self.chunks[k]
            chunk.pointers[0:shared] = first.pointers[0:shared]
            for j in range(self.private):
                own = np.empty_like(results[len(results) - self.private + j])
                scratch.append(own)
                chunk.pointers[shared + j] = _FFI.from_buffer(own)
            chunk.integers[0:self.n_integers] = first.integers[0:self.n_integers]
        self.last = None  # the first chunk's range is not the plan's
        POOL.run(self._run, chunks, threads)

    def _run(self, chunk: int, thread: int) -> None:
        """Chunk `chunk` of the call on thread `thread`'s arrays."""
        arrays = self.chunks[thread]
        arrays.integers[self.n_integers - 2] = self.cuts[chunk]
        arrays.integers[self.n_integers - 1] = self.cuts[chunk + 1]
        self.call(arrays.packed)


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
            lower(module)
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
    return emitter.call(FusedKernel(code, address, group, emitter.io(group),
                                    emitter.split(group)), group)
