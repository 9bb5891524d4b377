"""Precompilation (spec 4.10.2): compileAndExport, save, loadExecutable, poptorch.load and
the executable's random generator state (`rng_state`).

An executable file (format in `_executable`) holds the lowered ipu module and what the
executor needs to run it (input and output structure, options, replica groupings), the
weights by name and, in training, the optimizer's device state (safetensors), and the
device RNG state. With `export_model=True` it also holds the Python model object (and
the optimizer), which only `poptorch.load` reads (`_model_pickle`).

Loading applies only run-time options (spec: "all others will be ignored"): the
compile-time ones come from the file. `poptorch.load` starts from the machine's own
run-time options (so an executable compiled offline, with ConnectionType.Never, runs
where it is loaded) and lets `edit_opts_fn` change them; `loadExecutable` takes the
wrapper's. The wrapper's weights are the ones uploaded (PopTorch copies the host model's
weights to the device), so two wrappers of one model stay connected (spec listing 4.35).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils import _pytree as pytree

from poptorch import _logging
from poptorch._compiler import executable_file
from poptorch._executor import model_pickle
from poptorch._executor import replica_grouping as grouping
from poptorch._frontend import capture
from poptorch._frontend.capture import dtype_name
from poptorch.enums import CommGroupType, VariableRetrievalMode
from poptorch.errors import Error
from poptorch.options.categories import check_str

KIND = "executable"


def _json(sections: dict[str, bytes], name: str, path: str) -> Any:
    if name not in sections:
        raise Error(f"{path} is corrupt: it has no {name} section", type="executable")
    return executable_file.json_from_bytes(sections[name], path, name)


class _File(NamedTuple):
    """An executable file's sections, with its executor metadata and weights read."""

    sections: dict[str, bytes]
    meta: dict[str, Any]
    weights: dict[str, torch.Tensor]


def _open(path: str) -> _File:
    _, sections = executable_file.read(path, (KIND,))
    meta = _json(sections, "executor", path)
    if not isinstance(meta, dict) or meta.get("kind") not in ("training", "inference"):
        raise Error(f"{path} is corrupt: its executor metadata is malformed",
                    type="executable")
    weights = executable_file.tensors_from_bytes(sections.get("weights", b""), path, "weights")
    return _File(sections, meta, weights)


class Persistence:
    """Mixed into PoplarExecutor: writing and reading executable files."""

    # ---- the random generator -----------------------------------------------------------
    @property
    def rng_state(self) -> list[int]:
        """The device random generator's seed and state: [seed, state, increment,
        has_uint32, uinteger] of its PCG64 generator."""
        self._check_alive()
        if self._compiled is None:
            raise Error("the model has no random generator state before it is compiled; "
                        "call it or compile() first", type="executor")
        state = self._random.bit_generator.state
        return [self._seed, state["state"]["state"], state["state"]["inc"],
                state["has_uint32"], state["uinteger"]]

    @rng_state.setter
    def rng_state(self, value: list[int]) -> None:
        self._check_alive()
        if not (isinstance(value, list | tuple) and len(value) == 5 and all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**128
                for v in value) and value[3] in (0, 1) and value[4] < 2**32):
            raise Error(f"rng_state must be a list of 5 ints as rng_state returns it, got "
                        f"{value!r}", type="executor")
        if self._compiled is None:
            raise Error("compile the model before setting its rng_state", type="executor")
        seed, state, inc, has_uint32, uinteger = value
        generator = np.random.default_rng(seed)
        generator.bit_generator.state = {
            "bit_generator": "PCG64", "state": {"state": state, "inc": inc},
            "has_uint32": has_uint32, "uinteger": uinteger}
        self._seed, self._random = seed, generator

    # ---- writing --------------------------------------------------------------------------
    def compileAndExport(self, filename: str, *args, export_model: bool = True,  # noqa: N802
                         **kwargs) -> None:
        """Compile the model for these inputs (if it is not compiled yet) and save it to
        `filename` (see `save`)."""
        self._check_alive()
        if self._compiled is None:
            self.compile(*args, **kwargs)
        else:
            flat, spec = capture.flatten_inputs(args, kwargs)
            self._check_inputs([capture.narrow(v) for v in flat], spec)
        self.save(filename, export_model)

    def save(self, filename: str, export_model: bool = True,
             save_rng_state: bool = True) -> None:
        """Save the compiled model to `filename`: the executable, options, weights (and
        optimizer state), the RNG state if `save_rng_state`, and with `export_model` the
        Python model object for `poptorch.load` (which must then be picklable)."""
        self._check_alive()
        path = check_str("save: filename", filename)
        if self._compiled is None:
            raise Error("save: the model is not compiled; call it, compile() or "
                        "compileAndExport() first", type="executor")
        self.copyWeightsToHostIfNeeded()
        sections = executable_file.compiled_sections(self._compiled)
        weights = {arg.name: self._host_tensor(arg) for arg in self._weights()
                   if arg.kind != "constant"}
        sections["weights"] = executable_file.tensors_to_bytes(weights)
        sections["executor"] = json.dumps(self._executor_meta(save_rng_state)).encode()
        if self._training:
            tensors: dict[str, torch.Tensor] = {}
            state = executable_file.encode(self._optimizer.state_dict(), tensors, "optimizer")
            sections["optimizer"] = json.dumps(state).encode()
            sections["optimizer state"] = executable_file.tensors_to_bytes(tensors)
        if export_model:
            data, tensors = model_pickle.dumps(
                (self._user_model, self._optimizer if self._training else None))
            sections["model"] = data
            sections["model tensors"] = executable_file.tensors_to_bytes(
                {k: v for k, v in tensors.items() if k not in weights})
        executable_file.write(path, KIND, sections)
        _logging.logger.info("saved the %s model to %s", self._name(), path)

    def _executor_meta(self, save_rng_state: bool) -> dict[str, Any]:
        from poptorch.options.serialise import options_to_json

        return {
            "kind": "training" if self._training else "inference",
            "model": f"{type(self._model).__module__}.{type(self._model).__qualname__}",
            "options": options_to_json(self._options),
            "in_spec": pytree.treespec_dumps(self._in_spec),
            "input_meta": [[list(shape), dtype_name(dtype)]
                           for shape, dtype in self._input_meta],
            "groupings": {name: [kind.name, shards, mode.name] for name, (kind, shards, mode)
                          in self.per_replica_params.items()},
            "rng": self.rng_state if save_rng_state else None,
        }

    # ---- reading --------------------------------------------------------------------------
    def loadExecutable(self, filename: str) -> None:  # noqa: N802
        """Load an executable written by compileAndExport (or save) into this wrapper,
        whose model must have the weights it was compiled with (names, shapes, dtypes).
        Only the wrapper's run-time options apply; its compile-time ones are the file's."""
        self._check_alive()
        path = check_str("loadExecutable: filename", filename)
        self._load_file(_open(path), path, self._options, explicit=True)

    def _load_file(self, file: _File, path: str, requested: Any, explicit: bool) -> None:
        from poptorch.options import Options
        from poptorch.options.serialise import (
            apply_run_time,
            compile_time_differences,
            options_from_json,
        )

        if self._compiled is not None:
            raise Error(f"loadExecutable: this model is already compiled; wrap the model "
                        f"again to load {path}", type="executor")
        meta = file.meta
        kind = "training" if self._training else "inference"
        if meta["kind"] != kind:
            wrapper = "trainingModel" if meta["kind"] == "training" else "inferenceModel"
            raise Error(f"{path} holds a {meta['kind']} executable, but this is an {kind} "
                        f"model; wrap the model with poptorch.{wrapper} to load it",
                        type="executable")
        stored = options_from_json(meta.get("options"))
        ignored = compile_time_differences(stored, requested)
        if explicit:  # only what the user set differently from the defaults
            ignored = [n for n in ignored if n in compile_time_differences(Options(),
                                                                           requested)]
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
        compiled = executable_file.compiled_from_sections(file.sections, path, self._training)
        self._check_model(compiled, file.weights, path)
        executable_file.check_inputs(compiled, input_meta, path)
        self._options = stored
        self.per_replica_params = groupings
        self._groupings = grouping.resolve(self)
        _logging.configure(stored)
        try:
            self._install(compiled, in_spec, input_meta)
            if rng is not None:
                self.rng_state = rng
            self._simulate()
        except Exception as err:
            self._compiled = None
            if isinstance(err, Error):
                raise
            # a file can hold anything: what the checks above missed is still a refusal
            raise Error(f"{path} cannot be loaded: {err!r}", type="executable") from None
        self._connect()  # as after a compile: attach now, on the first run, or never

    def _check_model(self, compiled, weights: dict[str, torch.Tensor], path: str) -> None:
        """The wrapped model has every weight of the file, shaped as it was, and the
        program's weight arguments are the model's and the file's."""
        by_kind = {"parameter": dict(torch.nn.Module.named_parameters(self._model)),
                   "buffer": dict(torch.nn.Module.named_buffers(self._model))}
        host = {**by_kind["parameter"], **by_kind["buffer"]}
        for name, stored in sorted(weights.items()):
            what = f"{name} ({list(stored.shape)}, {dtype_name(stored.dtype)})"
            if name not in host:
                raise Error(f"{path} was compiled for a model with the weight {what}, which "
                            f"the wrapped {type(self._model).__name__} does not have; wrap "
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
                            f"{type(self._model).__name__} or the file's weights do not have",
                            type="executable")


def load(filename: str, edit_opts_fn=None):
    """Load a model written by compileAndExport (or save) with `export_model=True`: the
    Python model, its PopTorch wrapper with the weights and optimizer state it was saved
    with, and the executable (spec 4.10.2). `edit_opts_fn(options)` may change the
    run-time options (such as `useIpuId`); compile-time options are the file's.

    Restoring the Python model object unpickles it, which runs the code of the model's
    classes: load only files you trust, as with `pickle.load` or
    `torch.load(weights_only=False)`. The file's content hash is checked first, and the
    unpickler only rebuilds torch modules, optimizers, enums, dtypes and containers of
    modules already imported. The executable, weights and options are read as data
    (`loadExecutable` never unpickles anything).
    """
    from poptorch.options import Options
    from poptorch.options.serialise import apply_run_time, options_from_json

    path = check_str("load: filename", filename)
    file = _open(path)
    if "model" not in file.sections:
        raise Error(f"{path} was exported with export_model=False: it holds the executable "
                    "but not the model; re-create and wrap the model (poptorch.inferenceModel "
                    "or trainingModel), then call loadExecutable on the wrapper",
                    type="executable")
    options = options_from_json(file.meta.get("options"))
    apply_run_time(options, Options())  # the run-time options of this machine
    if edit_opts_fn is not None:
        edit_opts_fn(options)
    tensors = {**executable_file.tensors_from_bytes(file.sections.get("model tensors", b""), path,
                                                "model tensors"), **file.weights}
    model, optimizer = model_pickle.loads(file.sections["model"], tensors, path)
    try:
        return _wrap_loaded(model, optimizer, options, file, path)
    except Error:
        raise
    except Exception as err:  # noqa: BLE001 - a restored object that does not work
        raise Error(f"{path}: the restored model cannot be wrapped ({err!r})",
                    type="executable") from None


def _wrap_loaded(model, optimizer, options, file: _File, path: str):
    """Wrap the restored model and load the executable (and optimizer state) into it."""
    from poptorch._api import inferenceModel, trainingModel

    training = file.meta["kind"] == "training"
    if training:
        executor = trainingModel(model, options, optimizer)
    else:
        executor = inferenceModel(model, options)
    executor._load_file(file, path, options, explicit=False)
    if training:
        state = executable_file.tensors_from_bytes(file.sections.get("optimizer state", b""),
                                               path, "optimizer state")
        try:
            state_dict = executable_file.decode(_json(file.sections, "optimizer", path), state)
        except ValueError as err:
            raise Error(f"{path} is corrupt: its optimizer state is malformed ({err})",
                        type="executable") from None
        executor._optimizer.load_state_dict(state_dict)
    return executor
