"""The executable file format: a compiled program as data that cannot run code when read.

A file is

    MAGIC | u32 header length | header (JSON) | sections... | SHA-256 of all that precedes

The header names the format version, the poptorch-mlir, torch and torch-mlir versions,
the kind of file and its sections' names and sizes. Sections are UTF-8 MLIR text (the
lowered ipu module), JSON (metadata) and safetensors (tensors); an exported Python model
(`export_model=True`) is a pickle section that only `poptorch.load` reads (see
`_executor/persistence.py`). Reading checks, in order: the signature, the header, the format
version, the content hash, then the poptorch-mlir version (the spec asks for an exact
match); anything else is a `poptorch.Error` saying what is wrong with which file.
Writing goes to a temporary file in the same directory, renamed over the target, so a
reader never sees a partial file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import tempfile
from typing import Any

import numpy as np
import safetensors
import safetensors.torch
import torch
from torch.utils import _pytree as pytree
from torch_mlir import ir

from poptorch._compiler import driver
from poptorch._frontend import capture, joint
from poptorch._frontend.capture import dtype_name, dtype_named
from poptorch._version import __version__
from poptorch.dialects import make_context, torch_mlir_version
from poptorch.dialects.types import element_type_of
from poptorch.errors import Error
from poptorch.runtime.jit.program import compile_module

MAGIC = b"\x89POPTORCH-MLIR\r\n\x1a\n"
FORMAT_VERSION = 1
_LENGTH = struct.Struct("<I")
_DIGEST = hashlib.sha256().digest_size
_MAX_HEADER = 1 << 20


def versions() -> dict[str, str]:
    """The versions a file records and a cache key covers."""
    return dict(_versions())


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    return (("poptorch", __version__), ("torch", torch.__version__),
            ("torch_mlir", torch_mlir_version()))


def _error(path: str, message: str) -> Error:
    return Error(f"{path} {message}", type="executable")


# ---- the container ----------------------------------------------------------------------
def write(path: str, kind: str, sections: dict[str, bytes]) -> None:
    """Write a file of `kind` with these sections, atomically."""
    header = json.dumps({"format": FORMAT_VERSION, **versions(), "kind": kind,
                         "sections": [[name, len(data)] for name, data in sections.items()]},
                        sort_keys=True).encode()
    body = MAGIC + _LENGTH.pack(len(header)) + header + b"".join(sections.values())
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".poptorch-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body + hashlib.sha256(body).digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def read(path: str, kinds: tuple[str, ...]) -> tuple[str, dict[str, bytes]]:
    """The kind and sections of the file at `path`, or an Error saying why it is refused."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise Error(f"cannot read {path}: {err.strerror or err}", type="executable") from None
    return parse(data, path, kinds)


def parse(data: bytes, path: str, kinds: tuple[str, ...]) -> tuple[str, dict[str, bytes]]:
    """`read` on bytes already in memory; `path` names them in errors."""
    start = len(MAGIC) + _LENGTH.size
    if not data.startswith(MAGIC):
        raise _error(path, "is not a poptorch-mlir executable: it does not start with the "
                           "poptorch-mlir signature; give a file written by compileAndExport "
                           "or save")
    if len(data) < start + _DIGEST:
        raise _error(path, f"is truncated ({len(data)} bytes); export the model again")
    (length,) = _LENGTH.unpack_from(data, len(MAGIC))
    if length > min(_MAX_HEADER, len(data) - start - _DIGEST):
        raise _error(path, "is corrupt or truncated: its header runs past the end of the file")
    try:
        header = json.loads(data[start:start + length].decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _error(path, "is corrupt: its header is not valid JSON") from None
    if not isinstance(header, dict) or "format" not in header:
        raise _error(path, "is corrupt: its header does not name a format version")
    mine = versions()["poptorch"]
    if header["format"] != FORMAT_VERSION:
        raise _error(path, f"uses file format {header['format']!r} (written by poptorch-mlir "
                           f"{header.get('poptorch')!r}); this is poptorch-mlir {mine}, which "
                           f"reads format {FORMAT_VERSION}: compile and export the model again "
                           "with this version")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise _error(path, "is corrupt or truncated: its content hash does not match; export "
                           "the model again")
    if header.get("poptorch") != mine:
        raise _error(path, f"was written by poptorch-mlir {header.get('poptorch')!r}; this is "
                           f"poptorch-mlir {mine} and the versions must match exactly (spec "
                           "4.10.2): compile and export the model again with this version")
    if header.get("kind") not in kinds:
        raise _error(path, f"holds a {header.get('kind')!r}, not a "
                           f"{' or '.join(repr(k) for k in kinds)}")
    sections, offset = {}, start + length
    entries = header.get("sections")
    if not isinstance(entries, list):
        raise _error(path, "is corrupt: its header has no section table")
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], int) and entry[1] >= 0):
            raise _error(path, f"is corrupt: bad section entry {entry!r}")
        sections[entry[0]] = body[offset:offset + entry[1]]
        offset += entry[1]
    if offset != len(body):
        raise _error(path, "is corrupt: its sections do not add up to its size")
    return header["kind"], sections


# ---- section encodings ------------------------------------------------------------------
def tensors_to_bytes(tensors: dict[str, Any]) -> bytes:
    """safetensors bytes of torch tensors or NumPy arrays (contiguous copies)."""
    return safetensors.torch.save({name: (torch.from_numpy(np.ascontiguousarray(value))
                                          if isinstance(value, np.ndarray) else value)
                                   .detach().contiguous().clone()
                                   for name, value in tensors.items()})


def tensors_from_bytes(data: bytes, path: str, what: str) -> dict[str, torch.Tensor]:
    try:
        return safetensors.torch.load(data)
    except (safetensors.SafetensorError, ValueError, TypeError, OverflowError) as err:
        raise _error(path, f"is corrupt: its {what} are not valid safetensors ({err})") \
            from None


def json_from_bytes(data: bytes, path: str, what: str) -> Any:
    try:
        return json.loads(data.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _error(path, f"is corrupt: its {what} are not valid JSON") from None


def shape_meta(meta: list) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Input metadata ([shape, dtype name] pairs) as the executor keeps it."""
    return [(tuple(int(d) for d in shape), dtype_named(dtype)) for shape, dtype in meta]


# ---- compiled programs ------------------------------------------------------------------
def compiled_sections(compiled: driver.Compiled) -> dict[str, bytes]:
    """The module, metadata and constants sections of a compiled program."""
    captured = compiled.captured
    meta: dict[str, Any] = {
        "arguments": [[a.kind, a.name, a.persistent] for a in captured.arguments],
        "out_spec": pytree.treespec_dumps(captured.out_spec),
    }
    if isinstance(captured, joint.TrainingCaptured):
        meta.update(results=[list(r) for r in captured.results],
                    loss_shape=list(captured.loss_shape), loss_leaf=captured.loss_leaf)
    else:
        meta.update(mutated_buffers=captured.mutated_buffers,
                    mutated_inputs=captured.mutated_inputs,
                    constant_outputs=sorted(captured.constant_outputs.items()),
                    in_spec=pytree.treespec_dumps(captured.in_spec),
                    input_meta=[[list(s), dtype_name(d)] for s, d in captured.input_meta])
    return {"module": compiled.module_text.encode(),
            "program": json.dumps(meta).encode(),
            "constants": tensors_to_bytes(captured.constants)}


def compiled_from_sections(sections: dict[str, bytes], path: str, training: bool,
                           irdl_directory: str | None = None) -> driver.Compiled:
    """Rebuild a compiled program: parse and verify the module, JIT it, restore the
    metadata. Whatever is wrong is an Error naming `path`. `irdl_directory`: where the
    dialect's IRDL text is kept between processes (`make_context`)."""
    for name in ("module", "program", "constants"):
        if name not in sections:
            raise _error(path, f"is corrupt: it has no {name} section")
    meta = json_from_bytes(sections["program"], path, "program metadata")
    constants = tensors_from_bytes(sections["constants"], path, "constants")
    try:
        text = sections["module"].decode()
        arguments = [capture.Argument(str(kind), str(name), bool(persistent))
                     for kind, name, persistent in meta["arguments"]]
        out_spec = pytree.treespec_loads(meta["out_spec"])
        if training:
            captured = joint.TrainingCaptured(
                None, arguments, [(str(kind), _index(value) if kind == "input" else value)
                                  for kind, value in meta["results"]],
                tuple(int(d) for d in meta["loss_shape"]), out_spec, int(meta["loss_leaf"]),
                constants)
        else:
            captured = capture.Captured(
                None, arguments, constants, [str(n) for n in meta["mutated_buffers"]],
                pytree.treespec_loads(meta["in_spec"]), out_spec,
                shape_meta(meta["input_meta"]), [_index(i) for i in meta["mutated_inputs"]],
                {int(i): value for i, value in meta["constant_outputs"]})
    except Exception as err:  # noqa: BLE001 - any malformed metadata is a corrupt file
        raise _error(path, f"is corrupt: its program metadata is malformed ({err!r})") \
            from None
    context = _loading_context(irdl_directory)
    try:
        with context, ir.Location.unknown():
            module = ir.Module.parse(text)
            program = compile_module(module, key=text,
                                     weights=driver.weight_arguments(captured),
                                     persistent=not training)
            arity = len(program.result_ranks), len(_entry_inputs(module))
            updates = _updated_input_types(module, captured)
    except ir.MLIRError as err:
        raise _error(path, f"is corrupt: its ipu module does not parse or verify: {err}") \
            from None
    except Exception as err:  # noqa: BLE001 - a module the JIT cannot compile
        raise _error(path, f"is corrupt: its ipu module cannot be compiled ({err!r})") \
            from None
    problem = _inconsistency(captured, *arity) or updates
    if problem:
        raise _error(path, f"is corrupt: its program metadata does not match its module "
                           f"({problem})")
    return driver.Compiled(captured, program, text, {}, module, context)


_CONTEXT: list[ir.Context] = []


def _loading_context(irdl_directory: str | None) -> ir.Context:
    """One context for every loaded module: loading the dialects into a new context costs
    as much as parsing and compiling a whole module."""
    if not _CONTEXT:
        _CONTEXT.append(make_context(irdl_directory))
    return _CONTEXT[0]


def _index(value: Any) -> int:
    """An index from JSON: an int, not a bool or a float."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an index")
    return value


def _updated_input_types(module: ir.Module, captured: Any) -> str:
    """What is wrong with the results that update inputs in place (each has its input's
    type), or ""."""
    function = _main_type(module)
    inputs = {a.name: t for a, t in zip(captured.arguments, function.inputs, strict=False)
              if a.kind == "input"}
    if isinstance(captured, joint.TrainingCaptured):
        positions = [(p, index) for p, (kind, index) in enumerate(captured.results)
                     if kind == "input"]
    else:
        first = len(captured.mutated_buffers)
        positions = list(enumerate(captured.mutated_inputs, first))
    for position, index in positions:
        if position >= len(function.results) or str(index) not in inputs or \
                function.results[position] != inputs[str(index)]:
            return f"result {position} does not update input {index} in place"
    return ""


def _main_type(module: ir.Module) -> ir.FunctionType:
    """The function type of @main."""
    main = next(op for op in module.body.operations if op.operation.name == "func.func"
                and op.attributes["sym_name"].value == "main")
    return ir.FunctionType(main.attributes["function_type"].value)


def _entry_inputs(module: ir.Module) -> list[ir.Type]:
    """The argument types of @main."""
    return list(_main_type(module).inputs)


def _element_type(dtype: torch.dtype) -> str:
    if dtype == torch.bfloat16:
        return "bf16"
    return str(element_type_of(torch.empty(0, dtype=dtype).numpy().dtype))


def check_inputs(compiled: driver.Compiled, input_meta: list, path: str) -> None:
    """The inputs the executor will accept are the ones @main takes."""
    with compiled.context:
        types = _entry_inputs(compiled.module)
        expected = [ir.RankedTensorType(t) for t, a in zip(types, compiled.captured.arguments,
                                                           strict=True) if a.kind == "input"]
        given = [(list(shape), _element_type(dtype)) for shape, dtype in input_meta]
        wanted = [(list(t.shape), str(t.element_type)) for t in expected]
    if given != wanted:
        raise _error(path, f"is corrupt: its inputs {given} are not the ones its module takes "
                           f"{wanted}")


_ARGUMENT_KINDS = {False: {"parameter", "buffer", "constant", "input"},
                   True: {"parameter", "buffer", "constant", "input", "tangent"}}


def _inconsistency(captured: Any, results: int, arguments: int) -> str:
    """What is inconsistent between a program's metadata and its module, or ""."""
    training = isinstance(captured, joint.TrainingCaptured)
    kinds = [a.kind for a in captured.arguments]
    if len(kinds) != arguments:
        return f"{len(kinds)} arguments described, @main takes {arguments}"
    if not set(kinds) <= _ARGUMENT_KINDS[training]:
        return f"unknown argument kinds {sorted(set(kinds) - _ARGUMENT_KINDS[training])}"
    inputs = [a.name for a in captured.arguments if a.kind == "input"]
    if inputs != [str(i) for i in range(len(inputs))]:
        return f"inputs are not numbered 0..{len(inputs) - 1}"
    names = [a.name for a in captured.arguments if a.kind != "input"]
    if len(set(names)) != len(names):
        return "a weight is named twice"
    missing = {a.name for a in captured.arguments if a.kind == "constant"} - set(
        captured.constants)
    if missing:
        return f"constants {sorted(missing)} are missing"
    weights = {a.name for a in captured.arguments if a.kind in ("buffer", "parameter")}
    if not set(captured.mutated_buffers) <= weights:
        return "a mutated buffer is not a buffer or parameter argument"
    if not {str(i) for i in captured.mutated_inputs} <= set(inputs):
        return "an updated input is not an input argument"
    if training:
        result_kinds = {kind for kind, _ in captured.results}
        params = {a.name for a in captured.arguments if a.kind == "parameter"}
        if not result_kinds <= {"buffer", "input", "output", "grad"} \
                or "output" not in result_kinds:
            return "bad result kinds"
        if not set(captured.trainable) <= params or len(captured.results) != results:
            return "results do not match @main's"
        if not 0 <= captured.loss_leaf <= sum(k == "output" for k, _ in captured.results) - 1:
            return "the loss is not one of the outputs"
    elif len(captured.mutated_buffers) + len(captured.mutated_inputs) > results:
        return "more buffer and input updates than @main's results"
    return ""


# ---- tagged JSON: state dicts with tensors, tuples, dtypes and int keys -----------------
def encode(value: Any, tensors: dict[str, torch.Tensor], prefix: str) -> Any:
    """`value` as JSON data; its tensors go into `tensors` under keys from `prefix`."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, torch.Tensor):
        tensors[prefix] = value
        return {"$tensor": prefix}
    if isinstance(value, torch.dtype):
        return {"$dtype": dtype_name(value)}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, tensors, f"{prefix}.{i}") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode(v, tensors, f"{prefix}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {"$dict": [[encode(k, tensors, f"{prefix}.key"), encode(v, tensors,
                                                                        f"{prefix}.{k}")]
                          for k, v in value.items()]}
    raise TypeError(f"cannot store a {type(value).__name__} ({prefix})")


def decode(data: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The inverse of `encode`; ValueError for anything `encode` does not write."""
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, list):
        return [decode(v, tensors) for v in data]
    if isinstance(data, dict) and len(data) == 1:
        (tag, inner), = data.items()
        if tag == "$tensor" and isinstance(inner, str) and inner in tensors:
            return tensors[inner]
        if tag == "$dtype":
            return dtype_named(inner)
        if tag == "$tuple" and isinstance(inner, list):
            return tuple(decode(v, tensors) for v in inner)
        if tag == "$dict" and isinstance(inner, list) and all(
                isinstance(p, list) and len(p) == 2 for p in inner):
            pairs = [(decode(k, tensors), decode(v, tensors)) for k, v in inner]
            if not all(k is None or isinstance(k, bool | int | float | str) for k, _ in pairs):
                raise ValueError("a dict key is not a number or a string")
            return dict(pairs)
    raise ValueError(f"unexpected value {str(data)[:80]}")
