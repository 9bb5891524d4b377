"""PoplarExecutor (spec 4.2.3, 11.4): a wrapped model running on the machine model.

Host weights are the wrapped model's own tensors (a shallow copy shares them); the
device holds NumPy copies (`weights.DeviceWeights`), uploaded at compile time and again
whenever a host tensor changed (its identity or `_version`), which is PopTorch's
implicit weight sync. A call splits its inputs into deviceIterations x (replicas /
input group size) micro-batches, runs one vectorised program call per device iteration
with replicas on a leading axis, and returns outputs as `Options.outputMode` asks.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from poptorch import _logging, profiling
from poptorch._compiler import cache, driver
from poptorch._executor import batches, input_check, input_updates, persistence, trainers, user_api
from poptorch._executor import replica_grouping as grouping
from poptorch._executor.device import DeviceLease
from poptorch._executor.distributed import Processes, process_generator, start_processes
from poptorch._executor.figures import MachineFigures
from poptorch._executor.host_io import finish, prepare, traced
from poptorch._executor.model_copy import (
    freeze_tensor_attributes,
    host_tensor,
    narrowed,
    shallow_copy,
)
from poptorch._executor.weights import DeviceWeights
from poptorch._frontend import capture, model_code
from poptorch.enums import ConnectionType
from poptorch.errors import Error
from poptorch.options import Options, precision, strategies
from poptorch.options.categories import check_str
from poptorch.runtime.jit.codegen.fusion import kernel_directory
from poptorch.runtime.jit.program import Program
from poptorch.runtime.jit.random import device_random
from poptorch.runtime.machine.memory import MemoryEstimate
from poptorch.runtime.machine.timeline import Timeline


class PoplarExecutor(user_api.ExecutorExtras):
    """A model wrapped by `inferenceModel` (`TrainingExecutor` for `trainingModel`).

    Its state is here; it holds three collaborators with their own: `_device`, the
    `DeviceLease` of the device it is attached to (and the fault of a failed call),
    `_device_weights`, the `DeviceWeights` (the device's copies of the weights and
    buffers), and `_figures`, the `MachineFigures` of the machine model. Executable files
    are read and written by the functions of `persistence`.
    """

    def __init__(self, model: torch.nn.Module, options: Options | None, training: bool) -> None:
        self._user_model = model
        self._model = shallow_copy(model)
        self._options = Options._for_model(options, training)
        self._training = training
        if not training:
            self._model.eval()
        self._frozen = freeze_tensor_attributes(self._model)
        # trainers.host_version of the user model when the weights were last uploaded
        self._host_version = 0
        self._optimizer: torch.optim.Optimizer | None = None  # training's
        self._compiled: driver.Compiled | None = None
        # the inputs' structure, and the micro-batch shape and dtype of each tensor input
        self._in_spec: pytree.TreeSpec | None = None
        self._input_meta: list[tuple[tuple[int, ...], torch.dtype]] = []
        # flat index -> value of the non-tensor inputs the program was compiled for
        self._in_constants: dict[int, Any] = {}
        self._destroyed = False
        self._seed: int | None = None  # the device random generator's seed and state
        self._random: np.random.Generator | None = None
        self._device, self._device_weights = DeviceLease(), DeviceWeights()
        self._processes: Processes | None = None  # Options.Distributed's
        self._figures = MachineFigures()
        self._anchors = user_api.Anchors()  # Options.anchorTensor's values
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
        return self._device.attached

    def __getattr__(self, name: str) -> Any:
        # Model attributes read through the executor, as PopTorch allows. Whatever is
        # read this way (a parameter, a submodule, `named_parameters`, `state_dict`, a
        # method of the user's module) sees the device's latest weights, and a parameter
        # groups on this executor (`pt_m.W.replicaGrouping`) even when another wrapper of
        # the module attached the method last.
        if name.startswith("_"):
            raise AttributeError(name)
        if not self._destroyed:
            self.copyWeightsToHostIfNeeded()
        value = getattr(self._model, name)
        if isinstance(value, torch.nn.Parameter) and not self._destroyed:
            grouping.attach(self, name, value)
        return value

    # ---- compilation ------------------------------------------------------------------
    def _check_alive(self) -> None:
        if self._destroyed:
            raise Error("Model has been destroyed (destroy()): wrap the model again to use it",
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
        return batches.split(flat, self._options, self._steps(),
                             self._accumulation() if self._training else None)

    def compile(self, *args, **kwargs) -> None:
        """Capture and compile the model for inputs like `args` / `kwargs`, without running."""
        self._check_alive()
        self._compile(capture.flatten_inputs(args, kwargs), args, kwargs)

    def _compile(self, flat_and_spec, args, kwargs) -> None:
        input_check.check_call(self._model, args, kwargs, *flat_and_spec)
        user_api.run_hooks(pre=True)  # registerPreCompileHook's
        opts = self._options
        batches.check_options(opts, self._steps())
        self._groupings = grouping.resolve(self)
        flat, spec = flat_and_spec
        flat = [capture.narrow(v) for v in flat]
        micro, _ = self._split(flat)
        m_args, m_kwargs = pytree.tree_unflatten(micro, spec)
        model = grouping.per_replica_model(self._model, self._groupings)
        micro_batches = self._accumulation() if self._training else opts.device_iterations
        multi_ipu = [precision.pipeline_step(opts), *strategies.options_steps(opts, micro_batches)]
        _logging.configure(opts)
        start = time.perf_counter()
        # compiled kernels are kept in, and loaded from, the executable cache too
        cache_dir = opts.executable_cache_dir
        with kernel_directory(cache_dir), model_code.excluding(opts.source_location_excludes):
            key, compiled, cache_timings = cache.lookup(
                cache_dir, self._training, opts, self._groupings, model, m_args, m_kwargs)
            # capture, import, the pipeline's steps, the JIT and the machine model
            total = 2 if compiled else 4 + len(driver.PIPELINE) + len(multi_ipu)
            progress = profiling.TracedProgress(opts.show_compilation_progress_bar, total)
            try:
                if compiled is None:
                    progress.start("capture")
                    capture_start = time.perf_counter()
                    with user_api.forward_keeps_buffers(model):
                        captured = self._capture(narrowed(model), m_args, m_kwargs)
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
        user_api.run_hooks(pre=False)  # registerPostCompileHook's

    def _install(self, compiled: driver.Compiled, in_spec, input_meta: list,
                 progress: _logging.CompileProgress | None = None) -> None:
        """Make `compiled` this executor's program (freshly compiled, from the cache or
        from a file): check that it fits in memory, freeze the compile-time options, upload
        the weights and build the extra programs. Attaching is `_connect`'s."""
        opts = self._options
        self._compiled = compiled
        try:
            self._check_buffers_and_anchors(compiled.captured)
            if progress:
                progress.start("machine model")
            self._figures.estimate(compiled, opts, self._training, self._optimizer_slots())
            if progress:
                progress.done()
        except Error:
            self._compiled = None
            raise
        opts._freeze(compile_time_only=True)  # run-time options may still change
        self._in_spec, self._input_meta = in_spec, input_meta
        self._processes = start_processes(self)  # process 0's weights, with several
        self._device_weights.clear()
        self._upload_weights()
        self._seed = opts.random_seed if opts.random_seed is not None else torch.initial_seed()
        self._random = process_generator(self._seed, self._processes)
        self._compile_extra()

    def _capture(self, model: torch.nn.Module, args: tuple, kwargs: dict):
        return capture.capture(model, args, kwargs)

    def _compile_extra(self) -> None:
        """Programs beyond the model's own (the optimizer's, in training)."""

    def _optimizer_slots(self) -> dict[str, int]:
        """Optimizer state tensors per weight (none in inference)."""
        return {}

    def _step_end(self) -> list[tuple[str, str, int, int]]:
        """The machine model's work after each step's micro-batches (training's update)."""
        return []

    def _simulate(self) -> None:
        """The machine model's timeline of one call, with the work ending each step."""
        self._figures.simulate(self._compiled, self._options, self._training,
                               self._step_end())

    # ---- weights ------------------------------------------------------------------------
    def _host_tensor(self, arg: capture.Argument) -> torch.Tensor:
        return host_tensor(self._model, arg, self._compiled.captured.constants)

    def _weights(self) -> list[capture.Argument]:
        return [a for a in self._compiled.captured.arguments
                if a.kind in ("parameter", "buffer", "constant")]

    def _host_weights(self):
        """(name, host tensor) of each weight, buffer and tensor constant."""
        return ((arg.name, self._host_tensor(arg)) for arg in self._weights())

    def copyWeightsToDevice(self) -> None:  # noqa: N802
        """Upload every weight and buffer from the host model (to an attached model)."""
        self._check_alive()
        if self._compiled is None:
            return
        if not self._device.attached:
            raise Error("copyWeightsToDevice: the model is not attached to a device; call "
                        "attachToDevice() first (attaching uploads the host's weights)",
                        type="executor")
        self._device.check_recoverable()
        self._upload_weights()

    def _upload_weights(self) -> None:
        self._device_weights.upload(self._host_weights(), self._groupings)
        self._host_version = trainers.host_version(self._user_model)

    def copyWeightsToHost(self) -> None:  # noqa: N802
        """Write the device's weights and buffers back into the host model (replica-
        grouped parameters as `write_to_host` describes). Nothing to do when detached:
        detaching copied them."""
        self._check_alive()
        if self._compiled is None or not self._device.attached:
            return
        self._device_weights.write_to_host(self._model, self._groupings, self._written_back())
        if self._training:  # an inferenceModel of the same model re-uploads
            trainers.wrote_to_host(self._user_model)

    def _written_back(self):
        """(name, host tensor) of what copyWeightsToHost writes beyond the replica-grouped
        parameters: inference's buffers and parameters updated in place."""
        mutated = set(self._compiled.captured.mutated_buffers)
        return ((arg.name, self._host_tensor(arg)) for arg in self._weights()
                if arg.name in mutated and arg.name not in self._groupings)

    def copyWeightsToHostIfNeeded(self) -> bool:  # noqa: N802
        """Copy device weights to the host if the device changed them; True if it did."""
        self._check_alive()
        if self._compiled is not None and self._device_weights.dirty:
            self.copyWeightsToHost()
            return True
        return False

    def load_state_dict(self, state_dict: dict, strict: bool = True):
        """Load into the host model, then upload to the device if attached (else
        attaching will)."""
        self._check_alive()
        result = self._model.load_state_dict(state_dict, strict)
        if self._device.attached:
            self.copyWeightsToDevice()
        return result

    def getTensorNames(self) -> list[str]:  # noqa: N802
        """Names of the model's device tensors: weights, buffers, then inputs."""
        self._check_alive()
        if self._compiled is None:
            raise Error("the model must be compiled before its tensors have names",
                        type="executor")
        return self._tensor_names(self._compiled.captured)  # with training's Gradient___

    # ---- the device (`DeviceLease`) ----------------------------------------------------
    def _model_ipus(self) -> int:
        """IPUs one replica of the compiled model reserves (a power of 2)."""
        used = max(self._compiled.memory.ipus) + 1
        return 1 << (used - 1).bit_length()

    def _attach(self) -> None:
        self._device.attach(self._options, self._model_ipus(), self._name())

    def _connect(self) -> None:
        """After compiling: attach now with ConnectionType.Always, else on the first run."""
        if self._options.connection_type == ConnectionType.Always and not self._device.attached:
            self._attach()

    def attachToDevice(self) -> None:  # noqa: N802 - PopTorch's names
        """Hold a device (useIpuId's, or a free one of the model's size) and upload the
        host's weights; the optimizer state stays as it was."""
        self._check_alive()
        if self._compiled is None:
            raise Error("cannot attach a model that is not compiled", type="executor")
        if self._device.attached:
            raise Error("the model is already attached to a device", type="executor")
        self._attach()
        self._upload_weights()

    def detachFromDevice(self) -> None:  # noqa: N802
        """Copy the device's newer weights to the host and release the IPUs; the next
        call (or attachToDevice) attaches again. Recovers from a RecoverableError."""
        self._check_alive()
        if not self._device.attached:
            raise Error("the model is not attached to a device", type="executor")
        self.copyWeightsToHostIfNeeded()
        self._device.release()

    def destroy(self) -> None:
        """Release the IPUs, the compiled program (its MLIR module and context), the device
        state, the machine model's figures and (training) the optimizer's programs, state
        and link; a trainer's newer weights go to the host first, as PopTorch does. Using
        the model afterwards is an error; destroying it again does nothing."""
        if self._destroyed:
            return
        if self._compiled is not None:
            self.copyWeightsToHostIfNeeded()
        self._device.close()
        self._release()
        self._destroyed = True

    def _release(self) -> None:
        """destroy(): drop the compiled program (its MLIR module and context), the device
        arrays and the machine model's figures."""
        self._figures.release()
        self._compiled = None
        self._device_weights.clear()
        self._random = None

    def _snapshot(self) -> dict[str, Any]:
        """The device state a call changes: the device weights (`DeviceWeights.snapshot`)
        and the random generator's state."""
        return {"weights": self._device_weights.snapshot(),
                "random": self._random.bit_generator.state}

    def _restore(self, saved: dict[str, Any]) -> None:
        self._device_weights.restore(saved["weights"])
        self._random.bit_generator.state = saved["random"]

    # ---- running ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        self._check_alive()
        flat, spec = capture.flatten_inputs(args, kwargs)
        flat = [capture.narrow(v) for v in flat]
        if self._compiled is None:
            self._compile((flat, spec), args, kwargs)
        if not self._device.attached:  # OnDemand, or detached: attach (Never refuses)
            self.attachToDevice()
        self._device.check_recoverable()
        self._check_inputs(flat, spec)
        self._before_run()
        # one call; if it fails mid-run the device state is put back as it was before
        result, updates = self._device.run(self._steps(), self._name(),
                                           traced(self._run, flat), self._snapshot,
                                           self._restore)
        input_updates.write_back(flat, self._compiled.captured.mutated_inputs, updates)
        self._figures.ran(self._compiled, self._options,
                          "training" if self._training else "inference")
        self._anchors.finish(self._options, self._training)
        return user_api.guard_outputs(result)

    def _before_run(self) -> None:
        """Inference: a trainingModel of the same model's newer weights go to the host,
        then here; other host changes only by copyWeightsToDevice (spec 4.2.3)."""
        trainers.sync_trainers_to_host(self._user_model)
        if trainers.host_version(self._user_model) != self._host_version:
            self._upload_weights()

    def _check_inputs(self, flat: list[Any], spec: pytree.TreeSpec) -> None:
        """A call's inputs are like those the program was compiled for (arguments matched
        by name, dicts by key: `flat` is put in place into the compiled order). The dtypes
        the user gave (torch.int64 for an input the device holds as int32) are kept from
        the first call checked, for errors in the user's terms."""
        self._given_dtypes = batches.check_inputs(
            flat, spec, self._in_spec, self._in_constants, self._input_meta,
            getattr(self, "_given_dtypes", None), self._model,
            batches.call_slices(self._options, self._steps()))

    def _step(self, inputs: list[Any], step: int, extra: dict[str, Any] | None = None
              ) -> list[np.ndarray]:
        """Run the program on micro-batch `step`; store buffer updates; return the other
        results (updated inputs first), each with its replica axis."""
        self._device.fail_if_struck(step, self._name())
        compiled = self._compiled
        captured = compiled.captured
        extra = extra or {}
        arrays = self._device_weights.local_arrays(self._groupings)
        args = [inputs[int(a.name)][step] if a.kind == "input"
                else extra[a.kind] if a.kind in extra else arrays[a.name]
                for a in captured.arguments]
        replicas = self._options.replication_factor
        # IEEE results as the device gives them (inf, nan), without NumPy's warnings;
        # floating-point exceptions are an option of their own (Precision).
        program = self._main_program()
        with device_random(self._random, replicas), np.errstate(all="ignore"), \
                profiling.host_phase("run"):
            results = program.run(*args)
        n_mut = len(captured.mutated_buffers)
        self._device_weights.store_buffers(
            zip(captured.mutated_buffers, results[:n_mut], strict=True), self._frozen,
            self._options.broadcast_buffers)
        self._record_anchors(captured.arguments, args)
        ranks = program.result_ranks[n_mut:]
        return [r if n_mut + i in program.summed  # reduced over replicas already
                else batches.per_replica(np.asarray(r), rank, replicas)
                for i, (r, rank) in enumerate(zip(results[n_mut:], ranks, strict=True))]

    def _main_program(self) -> Program:
        """The program `_step` runs (training's may sum gradients over replicas)."""
        return self._compiled.program

    def _run(self, flat: list[Any]) -> tuple[Any, list[np.ndarray]]:
        """The call's outputs and the new values of the inputs it updates in place."""
        inputs = prepare(flat, self._options, self._steps(), self._seed)
        per_step = [self._step(inputs, d) for d in range(self._steps())]
        outputs, updates = finish(per_step, self._options, flat,
                                  self._compiled.captured.mutated_inputs, False)
        return self._compiled.captured.outputs(outputs), updates

    # ---- the machine model's figures (`MachineFigures`) ----------------------------------
    def _compiled_for(self, what: str) -> driver.Compiled:
        self._check_alive()
        if self._compiled is None:
            raise Error(f"the model must be compiled before it has {what}", type="executor")
        return self._compiled

    def getTimeline(self) -> Timeline:  # noqa: N802 - beyond PopTorch, named in its style
        """The machine model's simulated timeline of one call: per-IPU events (compute,
        IPU-Link copies, streaming-memory and host transfers, the step's all-reduce and
        optimizer update), total cycles, idle fraction, stash bytes, perf counters and
        latencies (`poptorch.runtime.machine.timeline.Timeline`; `.to_dict()` for JSON)."""
        return self._compiled_for("a timeline").timeline

    def getMemoryEstimate(self) -> MemoryEstimate:  # noqa: N802 - beyond PopTorch
        """The machine model's memory estimate: bytes per IPU by tensor class (weights,
        activations, stash, optimizer state, gradients, temporary, code, io), per tile,
        the largest tensors (`poptorch.runtime.machine.memory.MemoryEstimate`)."""
        return self._compiled_for("a memory estimate").memory

    def _last_run(self, what: str) -> Timeline:
        self._check_alive()
        return self._figures.last(what)

    def cycleCount(self) -> int:  # noqa: N802
        """Cycles the (first replica's) IPUs ran in the last call, on the machine model."""
        return self._last_run("cycle count").total_cycles

    def getLatency(self) -> tuple[float, float, float]:  # noqa: N802
        """Round-trip latency of the last call's iterations (seconds): first input
        requested to last output written back; (minimum, maximum, average)."""
        return self._last_run("latency").latencies()["latency"]

    def getComputeLatency(self) -> tuple[float, float, float]:  # noqa: N802
        """Last input transferred to last output available, per iteration of the last
        call (seconds): (minimum, maximum, average)."""
        return self._last_run("compute latency").latencies()["compute"]

    def getHostIpuLatency(self) -> tuple[float, float, float]:  # noqa: N802
        """First input requested to last input transferred, per iteration of the last
        call (seconds): (minimum, maximum, average)."""
        return self._last_run("host-IPU latency").latencies()["host_ipu"]

    def getIpuHostLatency(self) -> tuple[float, float, float]:  # noqa: N802
        """First output available to last output written back, per iteration of the last
        call (seconds): (minimum, maximum, average)."""
        return self._last_run("IPU-host latency").latencies()["ipu_host"]

    def getPerfCounters(self) -> dict[str, list[list[float]]]:  # noqa: N802
        """'input', 'input_complete', 'output', 'output_complete': per input (output)
        tensor, the time in seconds of each iteration of the last call."""
        return self._last_run("perf counters").perf_counters()

    # ---- executable files (`persistence`) -------------------------------------------------
    @property
    def rng_state(self) -> list[int]:
        """The device random generator's seed and state: [seed, state, increment,
        has_uint32, uinteger] of its PCG64 generator."""
        self._check_alive()
        if self._compiled is None:
            raise Error("the model has no random generator state before it is compiled; "
                        "call it or compile() first", type="executor")
        return persistence.rng_state_of(self._seed, self._random)

    @rng_state.setter
    def rng_state(self, value: list[int]) -> None:
        self._check_alive()
        seed, generator = persistence.generator_of(value)
        if self._compiled is None:
            raise Error("compile the model before setting its rng_state", type="executor")
        self._seed, self._random = seed, generator

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
        weights = {arg.name: self._host_tensor(arg) for arg in self._weights()
                   if arg.kind != "constant"}
        meta = persistence.executor_meta(
            self._training, self._model, self._options, self._in_spec, self._input_meta,
            self.per_replica_params, self.rng_state if save_rng_state else None)
        persistence.write(path, self._compiled, weights, meta, self._optimizer,
                          (self._user_model, self._optimizer) if export_model else None)
        _logging.logger.info("saved the %s model to %s", self._name(), path)

    def loadExecutable(self, filename: str) -> None:  # noqa: N802
        """Load an executable written by compileAndExport (or save) into this wrapper,
        whose model must have the weights it was compiled with (names, shapes, dtypes).
        Only the wrapper's run-time options apply; its compile-time ones are the file's."""
        self._check_alive()
        path = check_str("loadExecutable: filename", filename)
        self._load_file(persistence.open_file(path), path, self._options, explicit=True)

    def _load_file(self, file: persistence.ExecutableFile, path: str, requested: Options,
                   explicit: bool) -> None:
        """Install the executable of `file` (loadExecutable, and `poptorch.load` on the
        wrapper it makes); `requested` gives the run-time options."""
        if self._compiled is not None:
            raise Error(f"loadExecutable: this model is already compiled; wrap the model "
                        f"again to load {path}", type="executor")
        loaded = persistence.read(file, path, requested, explicit, self._training, self._model)
        self._options = loaded.options
        self.per_replica_params = loaded.groupings
        self._groupings = grouping.resolve(self)
        _logging.configure(loaded.options)
        try:
            self._install(loaded.compiled, loaded.in_spec, loaded.input_meta)
            if loaded.rng is not None:
                self.rng_state = loaded.rng
            self._simulate()
        except Exception as err:
            self._compiled = None
            if isinstance(err, Error):
                raise
            # a file can hold anything: what the checks above missed is still a refusal
            raise Error(f"{path} cannot be loaded: {err!r}", type="executable") from None
        self._connect()  # as after a compile: attach now, on the first run, or never
