"""Executable caching (spec 4.10.1): `enableExecutableCaching(dir)` / POPTORCH_CACHE_DIR.

A cache entry is a compiled program in the executable file format (`executable_file.py`),
named by a SHA-256 key over everything the capture and the compiler read:

- the model: its classes and the code of every function its forward can reach (user
  code by bytecode, constants, defaults, closures and the globals it names; torch's and
  poptorch's own code by name, since their versions are in the key), the values of its
  attributes and of tensors it holds as constants, and the names, shapes, dtypes and
  requires_grad of its parameters and buffers (weights are program arguments, so their
  values are not part of the program);
- the inputs' structure, shapes and dtypes (and the values of non-tensor inputs);
- the compile-time options, the execution kind (inference or training), torch's default
  dtype, and the poptorch-mlir, torch and torch-mlir versions.

Hashing what the capture reads, rather than the captured graph as PopTorch does, lets a
hit skip the capture too, which is most of a compile. A model whose state cannot be
seen (objects without a Python `__dict__`, more than `_MAX_NODES` values) is compiled
without the cache, which the log says. Entries are written atomically (temporary file,
then rename); an entry that cannot be read is compiled again and replaced, not trusted.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import importlib
import json
import os
import re
import sys
import sysconfig
import time
import types
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from poptorch._compiler import driver, executable_file
from poptorch._logging import logger
from poptorch.dialects import keep_irdl
from poptorch.errors import Error
from poptorch.options import Options
from poptorch.options.serialise import apply_run_time, options_to_json

_MAX_NODES = 200_000
_MAX_DEPTH = 200
# code under these directories is hashed by name (its version is in the key): the
# interpreter's, every site-packages directory on the path (a venv's own, and those a
# venv with system site packages or a .pth file adds), and our own packages
_LIBRARY_DIRS = tuple(
    {os.path.realpath(sysconfig.get_paths()[name]) + os.sep
     for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    | {os.path.realpath(entry) + os.sep for entry in sys.path
       if os.path.basename(os.path.normpath(entry)) in ("site-packages", "dist-packages")}
    | {os.path.realpath(os.path.dirname(importlib.import_module(package).__file__)) + os.sep
       for package in ("torch", "numpy", "poptorch", "poptorch.runtime", "poptorch.passes",
                       "poptorch.dialects")})
_ATOMS = (type(None), bool, int, float, complex, str, bytes)
_TORCH_ATOMS = (torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format)


class Opaque(Exception):
    """The model holds state the fingerprint cannot see."""


@functools.lru_cache(maxsize=4096)  # a model's classes share a few files; realpath is slow
def _is_library_file(filename: str | None) -> bool:
    if not filename or filename.startswith("<"):
        return False
    return os.path.realpath(filename).startswith(_LIBRARY_DIRS)


def _is_library_module(name: str) -> bool:
    root = name.partition(".")[0]
    if root in sys.builtin_module_names or root in sys.stdlib_module_names:
        return True
    module = sys.modules.get(name)
    return _is_library_file(getattr(module, "__file__", None))


class Fingerprint:
    """A running SHA-256 over values, with shared and cyclic references hashed once."""

    def __init__(self, weights: tuple[torch.Tensor, ...] = ()) -> None:
        # the model's parameters and buffers: uploaded to the device, not part of the
        # program, so only their metadata counts wherever they are held (nn.LSTM keeps
        # them in `_flat_weights` and weakly in `_flat_weight_refs`)
        self._weights = {id(t) for t in weights}
        self._hash = hashlib.sha256()
        self._seen: dict[int, int] = {}
        self._alive: list[Any] = []  # keeps ids unique while hashing
        self._nodes = 0

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def add(self, tag: str, *parts: Any) -> None:
        for part in (tag, *parts):
            data = part if isinstance(part, bytes) else repr(part).encode()
            self._hash.update(len(data).to_bytes(8, "little") + data)

    def tensor_meta(self, tensor: torch.Tensor | None) -> None:
        if tensor is None:
            self.add("none")
        else:
            self.add("weight", tensor.dtype, tuple(tensor.shape), tensor.requires_grad)

    def value(self, value: Any, depth: int = 0) -> None:
        self._nodes += 1
        if self._nodes > _MAX_NODES or depth > _MAX_DEPTH:
            raise Opaque(f"it holds more than {_MAX_NODES} values or nests deeper than "
                         f"{_MAX_DEPTH}")
        if isinstance(value, _ATOMS) or isinstance(value, _TORCH_ATOMS):
            self.add(type(value).__name__, value)
            return
        if isinstance(value, enum.Enum):
            self.add("enum", type(value).__module__, type(value).__qualname__, value.name)
            return
        if isinstance(value, types.ModuleType):
            self.add("module", value.__name__)
            return
        if isinstance(value, type):
            self._class(value, depth + 1)
            return
        if self._first_visit(value):
            self._compound(value, depth + 1)

    def _first_visit(self, value: Any) -> bool:
        """True the first time; later, hash a back reference (shared or cyclic values)."""
        if id(value) in self._seen:
            self.add("ref", self._seen[id(value)])
            return False
        self._seen[id(value)] = len(self._seen)
        self._alive.append(value)
        return True

    def _compound(self, value: Any, depth: int) -> None:
        if isinstance(value, torch.Tensor) and id(value) in self._weights:
            self.tensor_meta(value)
        elif isinstance(value, torch.Tensor):
            self.add("tensor", value.dtype, tuple(value.shape), value.requires_grad,
                     hashlib.sha256(_tensor_bytes(value)).digest())
        elif isinstance(value, np.ndarray | np.generic):
            array = np.ascontiguousarray(value)
            if array.dtype.hasobject:
                raise Opaque("it holds a NumPy array of Python objects")
            self.add("ndarray", array.dtype.str, array.shape,
                     hashlib.sha256(array.tobytes()).digest())
        elif isinstance(value, tuple | list):
            self.add(type(value).__name__, len(value))
            for item in value:
                self.value(item, depth)
        elif isinstance(value, dict | types.MappingProxyType):
            self.add(type(value).__name__, len(value))
            for key, item in value.items():
                self.value(key, depth)
                self.value(item, depth)
        elif isinstance(value, set | frozenset):
            items = sorted(repr(v) for v in value if isinstance(v, _ATOMS))
            if len(items) != len(value):
                raise Opaque("it holds a set of non-primitive values")
            self.add(type(value).__name__, items)
        elif isinstance(value, torch.nn.Module):
            self._module(value, depth)
        elif type(value) is weakref.ref:
            self.add("weakref")
            self.value(value(), depth)  # the referent, or None once it is gone
        elif isinstance(value, types.FunctionType):
            self._function(value, depth)
        elif isinstance(value, types.MethodType):
            self.add("method")
            self.value(value.__func__, depth)
            self.value(value.__self__, depth)
        elif isinstance(value, re.Pattern):
            self.add("pattern", value.pattern, value.flags)
        elif isinstance(value, types.UnionType | types.GenericAlias):
            # type annotations (`int | None`, `list[str]`), as transformers' configs hold
            self.add(type(value).__name__)
            self.value(getattr(value, "__origin__", None), depth)
            self.value(value.__args__, depth)
        elif isinstance(value, functools.partial):
            self.add("partial")
            for part in (value.func, value.args, value.keywords):
                self.value(part, depth)
        elif isinstance(value, staticmethod | classmethod):
            self.add(type(value).__name__)
            self.value(value.__func__, depth)
        elif isinstance(value, property):
            self.add("property")
            for part in (value.fget, value.fset, value.fdel):
                self.value(part, depth)
        elif isinstance(value, types.BuiltinFunctionType | types.WrapperDescriptorType
                        | types.MethodDescriptorType | types.MethodWrapperType
                        | types.GetSetDescriptorType | types.MemberDescriptorType):
            self.add("builtin", getattr(value, "__module__", None), value.__qualname__)
        elif hasattr(value, "__dict__") or hasattr(type(value), "__slots__"):
            self._class(type(value), depth)
            self.value(dict(getattr(value, "__dict__", {})), depth)
            for slot in getattr(type(value), "__slots__", ()):
                self.value(getattr(value, slot, None), depth)
        else:
            raise Opaque(f"it holds a {type(value).__module__}.{type(value).__qualname__}, "
                         "whose state is not visible to Python")

    def _module(self, module: torch.nn.Module, depth: int) -> None:
        self._class(type(module), depth)
        for key, item in vars(module).items():
            self.add("attr", key)
            if key in ("_parameters", "_buffers"):
                for name, tensor in item.items():
                    self.add(name)
                    self.tensor_meta(tensor)
            else:
                self.value(item, depth)

    def _class(self, cls: type, depth: int) -> None:
        if _is_library_module(cls.__module__):
            self.add("class", cls.__module__, cls.__qualname__)
            return
        if not self._first_visit(cls):
            return
        self.add("user class", cls.__module__, cls.__qualname__)
        for base in cls.__bases__:
            self._class(base, depth + 1)
        for key, item in vars(cls).items():
            if key not in ("__dict__", "__weakref__", "__doc__", "__module__"):
                self.add("member", key)
                self.value(item, depth + 1)

    def _function(self, function: types.FunctionType, depth: int) -> None:
        code = function.__code__
        if _is_library_file(code.co_filename):
            self.add("function", function.__module__, function.__qualname__)
            return
        self._code(code, function.__globals__, depth)
        self.value(function.__defaults__, depth)
        self.value(function.__kwdefaults__, depth)
        for cell in function.__closure__ or ():
            try:
                self.value(cell.cell_contents, depth)
            except ValueError:  # an empty cell
                self.add("empty cell")

    def _code(self, code: types.CodeType, namespace: dict[str, Any], depth: int) -> None:
        self.add("code", code.co_name, code.co_code, code.co_names, code.co_varnames,
                 code.co_freevars, code.co_cellvars)
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                self._code(constant, namespace, depth + 1)
            else:
                self.value(constant, depth + 1)
        for name in code.co_names:  # the globals it reads; attribute names too (harmless)
            if name not in namespace:
                continue
            value = namespace[name]
            self.add("global", name)
            self.value(value, depth + 1)
            if isinstance(value, types.ModuleType) and not _is_library_module(value.__name__):
                for attribute in code.co_names:  # `config.scale` in a user module
                    if attribute in vars(value):
                        self.add("module attr", attribute)
                        self.value(vars(value)[attribute], depth + 1)


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    """The bytes of `tensor`'s elements in row-major order, whatever its shape (0-dim
    too), strides, or conjugate/negative bits; Opaque when they cannot be read (sparse,
    quantized, meta tensors, ...)."""
    try:
        flat = torch.empty(tensor.numel(), dtype=tensor.dtype)
        flat.copy_(tensor.detach().cpu().reshape(-1))
        return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as err:
        first_line = (str(err).splitlines() or [""])[0]
        raise Opaque(f"it holds a {tensor.dtype} tensor whose data cannot be read "
                     f"({type(err).__name__}: {first_line})") from None


def key_of(training: bool, options: Options, groupings: Mapping[str, Any],
           model: torch.nn.Module, args: tuple, kwargs: dict) -> str | None:
    """The cache key of compiling `model` for these (micro-batch) inputs, with these
    options and replica groupings, for training or inference; None when the model cannot
    be fingerprinted (the reason is logged)."""
    fp = Fingerprint((*model.parameters(), *model.buffers()))
    fp.add("versions", sorted(executable_file.versions().items()), executable_file.FORMAT_VERSION)
    fp.add("kind", "training" if training else "inference", torch.get_default_dtype())
    compile_time = options.clone()  # run-time options do not change the program
    apply_run_time(compile_time, Options())
    fp.add("options", json.dumps(options_to_json(compile_time), sort_keys=True))
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    fp.add("inputs", str(spec))
    try:
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                fp.tensor_meta(leaf)
            else:
                fp.value(leaf)
        fp.value(groupings)
        fp.value(model)
    except Opaque as reason:
        logger.info("executable cache not used: the model cannot be fingerprinted (%s)",
                    reason)
        return None
    return fp.hexdigest()


def lookup(directory: str | None, training: bool, options: Options,
           groupings: Mapping[str, Any], model: torch.nn.Module, args: tuple, kwargs: dict
           ) -> tuple[str | None, driver.Compiled | None, dict[str, float]]:
    """With a cache `directory`: the key of this compilation (`key_of`), its cached
    program or None, and the time the fingerprint (and the read) took; without one,
    (None, None, {})."""
    start = time.perf_counter()
    key = key_of(training, options, groupings, model, args, kwargs) if directory else None
    keyed_at = time.perf_counter()
    compiled = load(directory, key, training) if key else None
    timings = {"fingerprint": keyed_at - start} if key else {}
    if compiled:
        compiled.timings = {**timings, "cache read": time.perf_counter() - keyed_at}
    return key, compiled, timings


def _path(directory: str, key: str) -> str:
    return os.path.join(directory, f"{key}.popexe")


def load(directory: str, key: str, training: bool) -> driver.Compiled | None:
    """The cached program for `key`, or None (no entry, or an unusable one)."""
    path = _path(directory, key)
    if not os.path.exists(path):
        logger.debug("executable cache miss: %s", path)
        return None
    try:
        _, sections = executable_file.read(path, ("cache entry",))
        compiled = executable_file.compiled_from_sections(sections, path, training, directory)
    except Error as err:
        logger.warning("executable cache entry %s is unusable (%s); compiling the model "
                       "again", path, err.message)
        return None
    logger.info("executable cache hit: %s", path)
    return compiled


def store(directory: str, key: str, compiled: driver.Compiled, training: bool) -> None:
    """Write the entry for `key` atomically; a failure to write only loses the cache."""
    path = _path(directory, key)
    try:
        executable_file.write(path, "cache entry", executable_file.compiled_sections(compiled))
    except (OSError, TypeError, ValueError) as err:
        logger.warning("could not write the executable cache entry %s: %s", path, err)
        return
    keep_irdl(directory)  # for the next process's loading context
    logger.debug("executable cache entry written: %s", path)
