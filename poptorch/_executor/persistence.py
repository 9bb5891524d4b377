"""Precompilation (spec 4.10.2): what compileAndExport, save, loadExecutable and
poptorch.load write and read, as functions given what they need (no executor).

An executable file (format in `_compiler/executable_file.py`) holds the lowered ipu module
and what the executor needs to run it (input and output structure, options, replica
groupings), the weights by name and, in training, the optimizer's device state
(safetensors), and the device RNG state. With `export_model=True` it also holds the
Python model object (and the optimizer), which only `poptorch.load` reads
(`model_pickle.py`).

Loading applies only run-time options (spec: "all others will be ignored"): the
compile-time ones come from the file. `poptorch.load` starts from the machine's own
run-time options (so an executable compiled offline, with ConnectionType.Never, runs
where it is loaded) and lets `edit_opts_fn` change them; `loadExecutable` takes the
wrapper's. The wrapper's weights are the ones uploaded (PopTorch copies the host model's
weights to the device), so two wrappers of one model stay connected (spec listing 4.35).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils import _pytree as pytree

from poptorch import _logging
from poptorch._compiler import executable_file
from poptorch._compiler.driver import Compiled
from poptorch._executor import model_pickle
from poptorch._frontend.capture import dtype_name
from poptorch.enums import CommGroupType, VariableRetrievalMode
from poptorch.errors import Error
from poptorch.options import Options
from poptorch.options.categories import check_str
from poptorch.options.serialise import (
    apply_run_time,
    compile_time_differences,
    options_from_json,
    options_to_json,
)

KIND = "executable"

Groupings = dict[str, tuple[CommGroupType, int, VariableRetrievalMode]]


def _json(sections: dict[str, bytes], name: str, path: str) -> Any:
    if name not in sections:
        raise Error(f"{path} is corrupt: it has no {name} section", type="executable")
    return executable_file.json_from_bytes(sections[name], path, name)


class ExecutableFile(NamedTuple):
    """An executable file's sections, with its executor metadata and weights read."""

    sections: dict[str, bytes]
    meta: dict[str, Any]
    weights: dict[str, torch.Tensor]


def open_file(path: str) -> ExecutableFile:
    """Read and check the executable file at `path`."""
    _, sections = executable_file.read(path, (KIND,))
    meta = _json(sections, "executor", path)
    if not isinstance(meta, dict) or meta.get("kind") not in ("training", "inference"):
        raise Error(f"{path} is corrupt: its executor metadata is malformed",
                    type="executable")
    weights = executable_file.tensors_from_bytes(sections.get("weights", b""), path, "weights")
    return ExecutableFile(sections, meta, weights)


# ---- the random generator ------------------------------------------------------------------
def rng_state_of(seed: int, generator: np.random.Generator) -> list[int]:
    """[seed, state, increment, has_uint32, uinteger] of a PCG64 generator."""
    state = generator.bit_generator.state
    return [seed, state["state"]["state"], state["state"]["inc"],
            state["has_uint32"], state["uinteger"]]


def generator_of(value: Any) -> tuple[int, np.random.Generator]:
    """The seed and generator of an `rng_state` value (checked)."""
    if not (isinstance(value, list | tuple) and len(value) == 5 and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**128
            for v in value) and value[3] in (0, 1) and value[4] < 2**32):
        raise Error(f"rng_state must be a list of 5 ints as rng_state returns it, got "
                    f"{value!r}", type="executor")
    seed, state, inc, has_uint32, uinteger = value
    generator = np.random.default_rng(seed)
    generator.bit_generator.state = {
        "bit_generator": "PCG64", "state": {"state": state, "inc": inc},
        "has_uint32": has_uint32, "uinteger": uinteger}
    return seed, generator


# ---- writing -------------------------------------------------------------------------------
def executor_meta(training: bool, model: torch.nn.Module, options: Options,
                  in_spec: pytree.TreeSpec, input_meta: list[tuple[tuple[int, ...], torch.dtype]],
                  groupings: Groupings, rng: list[int] | None) -> dict[str, Any]:
    """The executor section: what a wrapper needs besides the program to run it."""
    return {
        "kind": "training" if training else "inference",
        "model": f"{type(model).__module__}.{type(model).__qualname__}",
        "options": options_to_json(options),
        "in_spec": pytree.treespec_dumps(in_spec),
        "input_meta": [[list(shape), dtype_name(dtype)] for shape, dtype in input_meta],
        "groupings": {name: [kind.name, shards, mode.name]
                      for name, (kind, shards, mode) in groupings.items()},
        "rng": rng,
    }


def write(path: str, compiled: Compiled, weights: dict[str, torch.Tensor],
          meta: dict[str, Any], optimizer: torch.optim.Optimizer | None,
          exported: Any = None) -> None:
    """Write the executable file: the program, `weights`, the executor `meta`, the
    optimizer's state (training) and, unless `exported` is None, that Python object
    (the user's model and optimizer) for `poptorch.load`."""
    sections = executable_file.compiled_sections(compiled)
    sections["weights"] = executable_file.tensors_to_bytes(weights)
    sections["executor"] = json.dumps(meta).encode()
    if optimizer is not None:
        tensors: dict[str, torch.Tensor] = {}
        state = executable_file.encode(optimizer.state_dict(), tensors, "optimizer")
        sections["optimizer"] = json.dumps(state).encode()
        sections["optimizer state"] = executable_file.tensors_to_bytes(tensors)
    if exported is not None:
        data, tensors = model_pickle.dumps(exported)
        sections["model"] = data
        sections["model tensors"] = executable_file.tensors_to_bytes(
            {k: v for k, v in tensors.items() if k not in weights})
    executable_file.write(path, KIND, sections)


# ---- reading -------------------------------------------------------------------------------
@dataclass
class Loaded:
    """What an executable file gives a wrapper: its program, options (the file's
    compile-time ones with the requested run-time ones), input structure, replica
    groupings and RNG state."""

    compiled: Compiled
    options: Options
    in_spec: pytree.TreeSpec
    input_meta: list[tuple[tuple[int, ...], torch.dtype]]
    groupings: Groupings
    rng: list[int] | None


def read(file: ExecutableFile, path: str, requested: Options, explicit: bool,
         training: bool, model: torch.nn.Module) -> Loaded:
    """Check that `file` is for this kind of wrapper and for `model`, and read it.
    `explicit`: the options were the user's (loadExecutable), so compile-time options
    they set differently from the defaults and from the file's are warned about."""
    meta = file.meta
    kind = "training" if training else "inference"
    if meta["kind"] != kind:
        wrapper = "trainingModel" if meta["kind"] == "training" else "inferenceModel"
        raise Error(f"{path} holds a {meta['kind']} executable, but this is an {kind} "
                    f"model; wrap the model with poptorch.{wrapper} to load it",
                    type="executable")
    stored = options_from_json(meta.get("options"))
    ignored = compile_time_differences(stored, requested)
    if explicit:  # only what the user set differently from the defaults
        ignored = [n for n in ignored if n in compile_time_differences(Options(), requested)]
    if ignored:
        _logging.logger.warning(
            "%s: compile-time options of the wrapper differ from the executable's and "
            "are ignored: %s", path, ", ".join(ignored))
    apply_run_time(stored, requested)
    try:
        in_spec = pytree.treespec_loads(meta["in_spec"])
        input_meta = executable_file.shape_meta(meta["input_meta"])
        groupings = {str(name): (CommGroupType[kind_], int(shards),
                                 VariableRetrievalMode[mode])
                     for name, (kind_, shards, mode) in meta["groupings"].items()}
        rng = meta["rng"]
    except Exception as err:  # noqa: BLE001 - any malformed metadata is a corrupt file
        raise Error(f"{path} is corrupt: its executor metadata is malformed ({err!r})",
                    type="executable") from None
    compiled = executable_file.compiled_from_sections(file.sections, path, training)
    check_model(model, compiled, file.weights, path)
    executable_file.check_inputs(compiled, input_meta, path)
    return Loaded(compiled, stored, in_spec, input_meta, groupings, rng)


def check_model(model: torch.nn.Module, compiled: Compiled,
                weights: dict[str, torch.Tensor], path: str) -> None:
    """The wrapped model has every weight of the file, shaped as it was, and the
    program's weight arguments are the model's and the file's."""
    by_kind = {"parameter": dict(torch.nn.Module.named_parameters(model)),
               "buffer": dict(torch.nn.Module.named_buffers(model))}
    host = {**by_kind["parameter"], **by_kind["buffer"]}
    for name, stored in sorted(weights.items()):
        what = f"{name} ({list(stored.shape)}, {dtype_name(stored.dtype)})"
        if name not in host:
            raise Error(f"{path} was compiled for a model with the weight {what}, which "
                        f"the wrapped {type(model).__name__} does not have; wrap "
                        "the model the executable was compiled from", type="executable")
        tensor = host[name]
        if tensor.shape != stored.shape or tensor.dtype != stored.dtype:
            raise Error(f"{path} was compiled for a model with the weight {what}, but the "
                        f"wrapped model's is {list(tensor.shape)}, "
                        f"{dtype_name(tensor.dtype)}; wrap the model the "
                        "executable was compiled from", type="executable")
    for arg in compiled.captured.arguments:
        if arg.kind in by_kind and (arg.name not in by_kind[arg.kind]
                                    or arg.name not in weights):
            raise Error(f"{path} is corrupt or for another model: its program reads the "
                        f"{arg.kind} {arg.name}, which the wrapped "
                        f"{type(model).__name__} or the file's weights do not have",
                        type="executable")


class Restored(NamedTuple):
    """An exported file's Python model and optimizer, with the options to wrap them."""

    file: ExecutableFile
    path: str
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer | None
    options: Options

    @property
    def training(self) -> bool:
        return self.file.meta["kind"] == "training"


def restore(filename: str, edit_opts_fn: Callable[[Options], Any] | None) -> Restored:
    """Read a file written with `export_model=True` and unpickle its model (for
    `poptorch.load`): the options are the file's with this machine's run-time ones,
    edited by `edit_opts_fn`."""
    path = check_str("load: filename", filename)
    file = open_file(path)
    if "model" not in file.sections:
        raise Error(f"{path} was exported with export_model=False: it holds the executable "
                    "but not the model; re-create and wrap the model (poptorch.inferenceModel "
                    "or trainingModel), then call loadExecutable on the wrapper",
                    type="executable")
    options = options_from_json(file.meta.get("options"))
    apply_run_time(options, Options())  # the run-time options of this machine
    if edit_opts_fn is not None:
        edit_opts_fn(options)
    tensors = {**executable_file.tensors_from_bytes(file.sections.get("model tensors", b""),
                                                    path, "model tensors"), **file.weights}
    model, optimizer = model_pickle.loads(file.sections["model"], tensors, path)
    return Restored(file, path, model, optimizer, options)


def optimizer_state(file: ExecutableFile, path: str) -> dict[str, Any]:
    """The optimizer's state_dict saved in a training executable."""
    state = executable_file.tensors_from_bytes(file.sections.get("optimizer state", b""),
                                               path, "optimizer state")
    try:
        return executable_file.decode(_json(file.sections, "optimizer", path), state)
    except ValueError as err:
        raise Error(f"{path} is corrupt: its optimizer state is malformed ({err})",
                    type="executable") from None
