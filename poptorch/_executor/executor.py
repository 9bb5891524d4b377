"""PoplarExecutor (spec 4.2.3, 11.4): a wrapped model running on the machine model.

Host weights are the wrapped model's own tensors (a shallow copy shares them); the
device holds NumPy copies, uploaded at compile time and again whenever a host tensor
changed (its identity or `_version`), which is PopTorch's implicit weight sync. A call
splits its inputs into deviceIterations x (replicas / input group size) micro-batches,
runs one vectorised program call per device iteration with replicas on a leading
axis, and returns outputs as `Options.outputMode` asks.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from poptorch import _logging
from poptorch._compiler import cache, driver
from poptorch._executor import replica_grouping as grouping
from poptorch._executor.device import DeviceAttachment
from poptorch._executor.figures import MachineFigures
from poptorch._executor.persistence import Persistence
from poptorch._frontend import capture
from poptorch._frontend.capture import dtype_name
from poptorch.enums import CommGroupType, OutputMode
from poptorch.errors import Error
from poptorch.options import Options, strategies
from poptorch.runtime.jit.codegen.fusion import kernel_directory
from poptorch.runtime.jit.program import Program
from poptorch.runtime.jit.random import device_random


def _shallow_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of the module tree sharing every parameter and buffer tensor."""
    clone = object.__new__(type(module))  # not copy.copy: parametrized modules refuse it
    clone.__dict__ = dict(module.__dict__)
    clone._parameters = dict(module._parameters)
    clone._buffers = dict(module._buffers)
    clone._modules = {name: None if child is None else _shallow_copy(child)
                      for name, child in module._modules.items()}
    return clone


@functools.lru_cache(maxsize=4096)
def _dotted(name: str) -> tuple[str, ...]:
    return tuple(name.split("."))


def _registered(model: torch.nn.Module, name: str, table: str) -> torch.Tensor | None:
    """The parameter or buffer `name` of `model` straight from the modules' tables (what
    get_parameter finds, without its checks: this runs for every weight every call), or
    None."""
    *path, leaf = _dotted(name)
    owner = model
    for part in path:
        owner = owner.__dict__["_modules"].get(part)
        if owner is None:
            return None
    return owner.__dict__[table].get(leaf)


def _narrowed(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with 64-bit parameters and buffers narrowed, for capture only.

    The IPU has no 64-bit types (see `capture.NARROWED`); weights are narrowed again
    when they are uploaded, so the copy is needed only to give the graph 32-bit types.
    """
    if not any(t.dtype in capture.NARROWED
               for t in [*model.parameters(), *model.buffers()]):
        return model
    clone = _shallow_copy(model)
    narrowed: dict[int, torch.Tensor] = {}  # a tied weight stays one tensor (`_tied`)
    for module in clone.modules():
        for name, param in module._parameters.items():
            if param is not None and param.dtype in capture.NARROWED:
                if id(param) not in narrowed:
                    narrowed[id(param)] = torch.nn.Parameter(
                        capture.narrow(param.detach()), param.requires_grad)
                module._parameters[name] = narrowed[id(param)]
        for name, buffer in module._buffers.items():
            if buffer is not None and buffer.dtype in capture.NARROWED:
                module._buffers[name] = narrowed.setdefault(id(buffer),
                                                            capture.narrow(buffer))
    return clone


def _freeze_tensor_attributes(model: torch.nn.Module) -> set[str]:
    """Turn plain tensor attributes (not parameters or buffers) into buffers.

    PopTorch freezes such tensors into the graph as constants (spec 4.8, the CounterModel
    "wrong way" example): in-place changes to them do not persist between calls.
    torch.export refuses to trace a mutated constant, so they become buffers of the
    (shallow-copied) model whose device updates are discarded. Returns their names.
    """
    frozen = set()
    for prefix, module in model.named_modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                delattr(module, name)
                module.register_buffer(name, value.detach().clone(), persistent=False)
                frozen.add(f"{prefix}.{name}" if prefix else name)
    return frozen


_NARROWED_NUMPY = {np.dtype(np.int64): np.int32, np.dtype(np.float64): np.float32}


class PoplarExecutor(DeviceAttachment, MachineFigures, Persistence):
    """A model wrapped by `inferenceModel` (or `trainingModel`, later)."""

    def __init__(self, model: torch.nn.Module, options: Options | None, training: bool) -> None:
        self._user_model = model
        self._model = _shallow_copy(model)
        self._options = options if options is not None else Options()
        self._training = training
        if not training:
            self._model.eval()
        self._frozen = _freeze_tensor_attributes(self._model)
        self._compiled: driver.Compiled | None = None
        # flat index -> value of the non-tensor inputs the program was compiled for
        self._in_constants: dict[int, Any] = {}
        self._device: dict[str, np.ndarray] = {}
        self._uploaded: dict[str, tuple[int, int]] = {}
        self._attached = False
        self._destroyed = False
        self._buffers_dirty = False
        # parameter name -> (CommGroupType, shards, VariableRetrievalMode), as PopTorch
        # names it; filled by `param.replicaGrouping(...)` (spec 4.4.3)
        self.per_replica_params: dict[str, tuple] = {}
        self._groupings: dict[str, grouping.ReplicaGrouping] = {}
        for name, param in torch.nn.Module.named_parameters(self._model):
            grouping.attach(self, name, param)

    # ---- properties of the spec -----------------------------------------------------
    @property
    def model(self) -> torch.nn.Module:
        """The wrapped (shallow-copied) model."""
        return self._model

    @property
    def options(self) -> Options:
        return self._options

    def isCompiled(self) -> bool:  # noqa: N802 - PopTorch's names
        return self._compiled is not None

    def isAttachedToDevice(self) -> bool:  # noqa: N802
        return self._attached

    def __getattr__(self, name: str) -> Any:
        # Model attributes read through the executor, as PopTorch allows.
        # A parameter read this way is the device's latest, and groups on this executor
        # (`pt_m.W.replicaGrouping`) even when another wrapper of the module attached
        # the method last.
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._model, name)
        if isinstance(value, torch.nn.Parameter) and not self._destroyed:
            self.copyWeightsToHostIfNeeded()
            grouping.attach(self, name, value)
        return value

    # ---- compilation ------------------------------------------------------------------
    def _check_alive(self) -> None:
        if self._destroyed:
            raise Error("this model was destroyed; wrap the model again to use it",
                        type="executor")

    def _name(self) -> str:
        """The model's name: `Options.modelName`, else "training" or "inference"."""
        return self._options.model_name or ("training" if self._training else "inference")

    def _accumulation(self) -> int:
        """Micro-batches per replica and device iteration (gradient accumulation)."""
        return 1

    def _steps(self) -> int:
        """Program runs per call: device iterations x accumulated micro-batches."""
        return self._options.device_iterations * self._accumulation()

    def _split(self, flat: list[Any]) -> tuple[list[Any], int]:
        """Micro-batch examples of the flat inputs and the number of slices per call."""
        opts = self._options
        groups = opts.replication_factor // opts.input_group_size
        slices = self._steps() * groups
        micro = []
        for index, value in enumerate(flat):
            if not isinstance(value, torch.Tensor) or slices == 1:
                micro.append(value)
                continue
            if value.dim() == 0 or value.shape[0] % slices:
                size = "a scalar" if value.dim() == 0 else f"a batch of {value.shape[0]}"
                accumulation = (f" x gradientAccumulation({self._accumulation()})"
                                if self._training else "")
                raise Error(
                    f"input {index} has {size}, which is not a multiple of "
                    f"deviceIterations({opts.device_iterations}) x replicationFactor"
                    f"({opts.replication_factor}) / input group size ({opts.input_group_size})"
                    f"{accumulation} = {slices}; give a batch of a multiple of {slices}",
                    type="executor")
            micro.append(value[: value.shape[0] // slices])
        return micro, slices

    def compile(self, *args, **kwargs) -> None:
        """Capture and compile the model for inputs like `args` / `kwargs`, without running."""
        self._check_alive()
        self._compile(capture.flatten_inputs(args, kwargs), args, kwargs)

    def _compile(self, flat_and_spec, args, kwargs) -> None:
        opts = self._options
        if opts.replication_factor % opts.input_group_size:
            raise Error(f"inputReplicaGrouping size {opts.input_group_size} is not a factor of "
                        f"replicationFactor({opts.replication_factor})", type="options")
        if opts.output_mode == OutputMode.EveryN and self._steps() % opts.output_return_period:
            raise Error(f"OutputMode.EveryN with a period of {opts.output_return_period} needs "
                        f"the {self._steps()} batches of a call to be a multiple of it",
                        type="options")
        self._groupings = grouping.resolve(self)
        flat, spec = flat_and_spec
        flat = [capture.narrow(v) for v in flat]
        micro, _ = self._split(flat)
        m_args, m_kwargs = pytree.tree_unflatten(micro, spec)
        model = grouping.per_replica_model(self._model, self._groupings)
        micro_batches = self._accumulation() if self._training else opts.device_iterations
        multi_ipu = strategies.multi_ipu_steps(opts.execution_strategy, micro_batches,
                                                opts.auto_round_num_ipus)
        _logging.configure(opts)
        start = time.perf_counter()
        # compiled kernels are kept in, and loaded from, the executable cache too
        cache_dir = opts.executable_cache_dir
        with kernel_directory(cache_dir):
            key = cache.key_of(self, model, m_args, m_kwargs) if cache_dir else None
            keyed_at = time.perf_counter()
            compiled = cache.load(cache_dir, key, self._training) if key else None
            cache_timings = {"fingerprint": keyed_at - start} if key else {}
            if compiled:
                compiled.timings = {**cache_timings, "cache read": time.perf_counter() - keyed_at}
            # capture, import, the pipeline's steps, the JIT and the machine model
            total = 2 if compiled else 4 + len(driver.PIPELINE) + len(multi_ipu)
            progress = _logging.CompileProgress(opts.show_compilation_progress_bar, total)
            try:
                if compiled is None:
                    progress.start("capture")
                    capture_start = time.perf_counter()
                    captured = self._capture(_narrowed(model), m_args, m_kwargs)
                    captured_at = time.perf_counter()
                    progress.done()
                    compiled = driver.compile_captured(
                        captured, opts.ir_dump_dir, opts.module_namescope, tuple(multi_ipu),
                        progress=progress, log_dir=opts.log_dir)
                    compiled.timings = {**cache_timings, "capture": captured_at - capture_start,
                                        **compiled.timings}
                    if key:
                        cache.store(cache_dir, key, compiled, self._training)
                else:
                    progress.start("executable cache")
                    progress.done()
                installing = time.perf_counter()
                self._install(compiled, spec, [(tuple(t.shape), t.dtype) for t in micro
                                               if isinstance(t, torch.Tensor)], progress)
                # non-tensor inputs (use_cache=False) are constants of the compiled program
                self._in_constants = {i: v for i, v in enumerate(micro)
                                      if not isinstance(v, torch.Tensor)}
            finally:
                progress.close()
        self._simulate()
        # memory estimate, weight upload, extra programs and the simulated timeline
        compiled.timings["install"] = time.perf_counter() - installing
        _logging.logger.info("compiled the %s model in %.2f s", self._name(),
                             time.perf_counter() - start)
        self._connect()

    def _install(self, compiled: driver.Compiled, in_spec, input_meta: list,
                 progress: _logging.CompileProgress | None = None) -> None:
        """Make `compiled` this executor's program (freshly compiled, from the cache or
        from a file): check that it fits in memory, freeze the compile-time options, upload
        the weights and build the extra programs. Attaching is `_connect`'s."""
        opts = self._options
        self._compiled = compiled
        try:
            if progress:
                progress.start("machine model")
            self._estimate_memory()
            if progress:
                progress.done()
        except Error:
            self._compiled = None
            raise
        opts._freeze(compile_time_only=True)  # run-time options may still change
        self._in_spec = in_spec
        self._input_meta = input_meta
        self._device.clear()
        self._uploaded.clear()
        self._upload_weights()
        self._seed = opts.random_seed if opts.random_seed is not None else torch.initial_seed()
        self._random = np.random.default_rng(self._seed)
        self._compile_extra()

    def _capture(self, model: torch.nn.Module, args: tuple, kwargs: dict):
        return capture.capture(model, args, kwargs)

    def _compile_extra(self) -> None:
        """Programs beyond the model's own (the optimizer's, in training)."""

    # ---- weights ------------------------------------------------------------------------
    def _host_tensor(self, arg: capture.Argument) -> torch.Tensor:
        if arg.kind in ("parameter", "buffer"):
            parameter = arg.kind == "parameter"
            tensor = _registered(self._model, arg.name, "_parameters" if parameter
                                 else "_buffers")
            if tensor is not None:
                return tensor
            # torch's lookup, for its error when there is no such weight
            return self._model.get_parameter(arg.name) if parameter \
                else self._model.get_buffer(arg.name)
        return self._compiled.captured.constants[arg.name]

    def _weights(self) -> list[capture.Argument]:
        return [a for a in self._compiled.captured.arguments
                if a.kind in ("parameter", "buffer", "constant")]

    @staticmethod
    def _device_array(tensor: torch.Tensor) -> np.ndarray:
        return capture.narrow(tensor.detach()).cpu().numpy().copy()

    def _upload(self, name: str, tensor: torch.Tensor) -> None:
        """Put a host weight on the device; a replica-grouped one as (replicas, ...)."""
        array = self._device_array(tensor)
        if name in self._groupings:
            array = grouping.to_replicas(array, self._groupings[name])
        self._device[name] = array
        self._uploaded[name] = (id(tensor), tensor._version)

    def _per_group(self, name: str, value: np.ndarray) -> np.ndarray:
        """A device value of weight `name` with one entry per replica group ((groups,
        ...), the groups' first replicas) if it is grouped; else unchanged."""
        if name in self._groupings:
            return value[self._groupings[name].first_replicas()]
        return value

    def _to_replicas(self, name: str, value: np.ndarray) -> np.ndarray:
        """The inverse of `_per_group`: each replica gets its group's entry."""
        if name in self._groupings:
            return value[self._groupings[name].group_of()]
        return value

    def _grouped_to_host(self) -> None:
        """Write the replica-grouped parameters into the host model, as their
        VariableRetrievalMode asks: OnePerGroup writes (groups, ...), in place;
        AllReplicas replaces the parameter's data by (replicas, ...), one value per
        replica (uploading such a tensor again gives each group its first replica's)."""
        for name, group in self._groupings.items():
            host = self._model.get_parameter(name)
            value = torch.from_numpy(grouping.to_host(self._device[name], group))
            value = value.to(host.dtype)
            if value.shape == host.shape:
                host.copy_(value)
            else:
                host.data = value
            self._uploaded[name] = (id(host), host._version)

    def copyWeightsToDevice(self) -> None:  # noqa: N802
        """Upload every weight and buffer from the host model (to an attached model)."""
        self._check_alive()
        if self._compiled is None:
            return
        if not self._attached:
            raise Error("copyWeightsToDevice: the model is not attached to a device; call "
                        "attachToDevice() first (attaching uploads the host's weights)",
                        type="executor")
        self._check_recoverable()
        self._upload_weights()

    def _upload_weights(self) -> None:
        for arg in self._weights():
            self._upload(arg.name, self._host_tensor(arg))
        self._buffers_dirty = False

    def _sync_host_changes(self) -> None:
        """Implicit sync: re-upload host weights changed since the last upload."""
        for arg in self._weights():
            tensor = self._host_tensor(arg)
            if self._uploaded.get(arg.name) != (id(tensor), tensor._version):
                self._upload(arg.name, tensor)

    def copyWeightsToHost(self) -> None:  # noqa: N802
        """Write the device's weights and buffers back into the host model (replica-
        grouped parameters as `_grouped_to_host` describes). Nothing to do when detached:
        detaching copied them."""
        self._check_alive()
        if self._compiled is None or not self._attached:
            return
        with torch.no_grad():
            self._grouped_to_host()
            for name in self._compiled.captured.mutated_buffers:
                value = self._device[name]
                host = self._model.get_buffer(name)
                if value.ndim > host.dim():  # per-replica buffers: replica 0's
                    value = value[0]
                host.copy_(torch.from_numpy(np.array(value)))
                self._uploaded[name] = (id(host), host._version)
        self._buffers_dirty = False

    def copyWeightsToHostIfNeeded(self) -> bool:  # noqa: N802
        """Copy device weights to the host if the device changed them; True if it did."""
        self._check_alive()
        if self._buffers_dirty:
            self.copyWeightsToHost()
            return True
        return False

    def load_state_dict(self, state_dict: dict, strict: bool = True):
        """Load into the host model, then upload to the device if attached (else
        attaching will)."""
        self._check_alive()
        result = self._model.load_state_dict(state_dict, strict)
        if self._attached:
            self.copyWeightsToDevice()
        return result

    def getTensorNames(self) -> list[str]:  # noqa: N802
        """Names of the model's device tensors: weights, buffers, then inputs."""
        self._check_alive()
        if self._compiled is None:
            raise Error("the model must be compiled before its tensors have names",
                        type="executor")
        return [a.name if a.kind != "input" else f"input{a.name}"
                for a in self._compiled.captured.arguments]

    # ---- device (attach, detach and destroy: `_device.DeviceAttachment`) ---------------
    def _release(self) -> None:
        """destroy(): drop the compiled program (its MLIR module and context), the device
        arrays and the machine model's figures."""
        self._release_figures()
        self._compiled = None
        self._device.clear()
        self._uploaded.clear()
        self._random = None

    # ---- running ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        self._check_alive()
        flat, spec = capture.flatten_inputs(args, kwargs)
        flat = [capture.narrow(v) for v in flat]
        if self._compiled is None:
            self._compile((flat, spec), args, kwargs)
        if not self._attached:  # OnDemand, or detached: attach (Never refuses)
            self.attachToDevice()
        self._check_recoverable()
        self._check_inputs(flat, spec)
        self._before_run()
        result = self._run_on_device(flat)
        self._after_run()
        return result

    def _before_run(self) -> None:
        """Inference: pick up host-side weight changes (and a trainer's new weights)."""
        from poptorch._executor.training import sync_trainers_to_host

        sync_trainers_to_host(self._user_model)
        self._sync_host_changes()

    def _check_inputs(self, flat: list[Any], spec) -> None:
        if spec != self._in_spec:
            raise Error(f"the inputs' structure changed since compilation: expected "
                        f"{self._in_spec}, got {spec}", type="executor")
        micro, _ = self._split(flat)
        for index, value in self._in_constants.items():
            if type(micro[index]) is not type(value) or micro[index] != value:
                path = pytree.keystr(pytree.tree_flatten_with_path(
                    pytree.tree_unflatten(micro, spec))[0][index][0])
                raise Error(
                    f"input {path} was {value!r} when the model was compiled and is "
                    f"{micro[index]!r} now; non-tensor inputs are constants of the compiled "
                    "program: wrap the model again to run it with another value",
                    type="executor")
        tensors = [t for t in micro if isinstance(t, torch.Tensor)]
        for index, (tensor, (shape, dtype)) in enumerate(zip(tensors, self._input_meta,
                                                             strict=True)):
            if tuple(tensor.shape) != shape or tensor.dtype != dtype:
                raise Error(
                    f"input {index} changed since compilation: expected a micro-batch of "
                    f"shape {list(shape)} and dtype {dtype_name(dtype)}, got shape "
                    f"{list(tensor.shape)} and dtype {dtype_name(tensor.dtype)}; wrap the "
                    "model again to compile it for the new inputs", type="executor")

    def _replica_slices(self) -> np.ndarray:
        """For each replica, which of the R / group-size input slices it reads."""
        opts = self._options
        replicas, size = opts.replication_factor, opts.input_group_size
        groups = replicas // size
        r = np.arange(replicas)
        if opts.input_group_type == CommGroupType.Orthogonal:
            return r % groups
        return r // size

    def _inputs(self, flat: list[Any]) -> list[Any]:
        """Inputs as (steps, replicas, micro-batch, ...) arrays, replicas that share an
        input group reading the same slice."""
        steps = self._steps()
        slices = self._replica_slices()
        groups = self._options.replication_factor // self._options.input_group_size
        inputs = []
        for value in flat:
            array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
            if isinstance(array, np.ndarray):
                array = array.reshape((steps, groups, -1) + array.shape[1:]) \
                    if array.ndim else array.reshape(1, 1)
                if array.shape[1] != len(slices) or self._options.input_group_size != 1:
                    array = array[:, slices]  # a copy, so not when each replica has its own
            inputs.append(array)
        return inputs

    def _step(self, inputs: list[Any], step: int, extra: dict[str, Any] | None = None
              ) -> list[np.ndarray]:
        """Run the program on micro-batch `step`; store buffer updates; return the other
        results, each with its replica axis."""
        self._fail_if_struck(step)
        compiled = self._compiled
        captured = compiled.captured
        extra = extra or {}
        args = [inputs[int(a.name)][step] if a.kind == "input"
                else extra[a.kind] if a.kind in extra else self._device[a.name]
                for a in captured.arguments]
        replicas = self._options.replication_factor
        # IEEE results as the device gives them (inf, nan), without NumPy's warnings;
        # floating-point exceptions are an option of their own (Precision).
        program = self._main_program()
        with device_random(self._random, replicas), np.errstate(all="ignore"):
            results = program.run(*args)
        n_mut = len(captured.mutated_buffers)
        for name, value in zip(captured.mutated_buffers, results[:n_mut], strict=True):
            if name in self._frozen:
                continue
            value = np.asarray(value)
            if self._options.broadcast_buffers and value.ndim > self._device[name].ndim:
                value = value[0]  # broadcast replica 0's buffers to every replica
            self._device[name] = value
            self._buffers_dirty = True
        ranks = program.result_ranks[n_mut:]
        return [r if n_mut + i in program.summed  # reduced over replicas already
                else self._per_replica(np.asarray(r), rank, replicas)
                for i, (r, rank) in enumerate(zip(results[n_mut:], ranks, strict=True))]

    def _main_program(self) -> Program:
        """The program `_step` runs (training's may sum gradients over replicas)."""
        return self._compiled.program

    def _run(self, flat: list[Any]):
        inputs = self._inputs(flat)
        per_step = [self._step(inputs, d) for d in range(self._steps())]
        outputs = [self._combine([it[i] for it in per_step])
                   for i in range(len(per_step[0]))] if per_step else []
        return pytree.tree_unflatten(outputs, self._compiled.captured.out_spec)

    @staticmethod
    def _per_replica(value: np.ndarray, rank: int, replicas: int) -> np.ndarray:
        """Give an output its replica axis (outputs not computed from inputs have none)."""
        if value.ndim > rank:
            return value
        return np.broadcast_to(value, (replicas,) + value.shape)

    def _combine(self, iterations: list[np.ndarray]) -> torch.Tensor:
        """Apply the output mode to one output's per-iteration (replicas, ...) arrays."""
        opts = self._options
        default = OutputMode.Final if self._training else OutputMode.All
        mode = default if opts.output_mode == OutputMode.Default else opts.output_mode
        if mode == OutputMode.Final:
            chosen = iterations[-1:]
        elif mode == OutputMode.EveryN:
            chosen = iterations[opts.output_return_period - 1:: opts.output_return_period]
        elif mode == OutputMode.Sum:
            chosen = [np.sum(np.stack(iterations), axis=0, dtype=iterations[0].dtype)]
        else:
            chosen = iterations
        stacked = np.stack(chosen)  # (iterations, replicas, ...)
        if stacked.shape[0] * stacked.shape[1] == 1:
            result = stacked[0, 0]
        elif stacked.ndim == 2:  # scalar outputs: one value per iteration and replica
            result = stacked.reshape(-1)
        else:
            result = stacked.reshape((-1,) + stacked.shape[3:])
        result = np.ascontiguousarray(result).reshape(np.shape(result))  # keeps 0-d shapes
        if result.dtype in _NARROWED_NUMPY:  # the IPU has no 64-bit types
            result = result.astype(_NARROWED_NUMPY[result.dtype])
        return torch.from_numpy(result)
