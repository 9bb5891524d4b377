"""poptorch.Options (spec 11.1): how a model is compiled and executed.

General options are plain attributes of `Options`, set through PopTorch's camelCase
methods (which validate their arguments, raise `poptorch.Error` on bad values and
return the options for chaining); the categories are the properties `Training`,
`Precision`, `TensorLocations`, `Distributed` and `Jit`. POPTORCH_IPU_MODEL,
POPTORCH_CACHE_DIR and POPTORCH_DUMP_IR initialise the matching defaults.
"""

from __future__ import annotations

import copy
import numbers
import os
import re
from typing import Any

from poptorch._logging import logger as log
from poptorch.enums import CommGroupType, ConnectionType, OutputMode, SyncPattern
from poptorch.errors import Error
from poptorch.options.categories import (
    FROZEN_BY_DATALOADER,
    FROZEN_BY_MODEL,
    OptionsGroup,
    TensorLocationSettings,
    _DistributedOptions,
    _JitOptions,
    _PrecisionOptions,
    _TensorLocationOptions,
    _TrainingOptions,
    check_bool,
    check_enum,
    check_int,
    check_str,
    env_flag,
    show_values,
    shown,
)
from poptorch.options.config_file import CATEGORIES as _CATEGORIES
from poptorch.options.config_file import load_config
from poptorch.options.encoding import STRATEGIES, options_text
from poptorch.options.popart import _PopartOptions
from poptorch.options.schema import freeze
from poptorch.options.strategies import PipelinedExecution, ShardedExecution, _Strategy
from poptorch.runtime.machine.system import DEVICE_COUNT

__all__ = ["Options", "TensorLocationSettings"]

class Options(OptionsGroup):
    """Set of all options controlling how a model is compiled and executed.

    >>> opts = poptorch.Options()
    >>> opts.deviceIterations(10)
    >>> opts.Training.gradientAccumulation(4)
    """

    def __init__(self) -> None:
        self._training = _TrainingOptions()
        self._precision = _PrecisionOptions()
        self._tensor_locations = _TensorLocationOptions()
        self._distributed = _DistributedOptions()
        self._jit = _JitOptions()
        self._popart = _PopartOptions()
        self.device_iterations = 1
        self.replication_factor = 1
        self.input_group_size = 1
        self.input_group_type = CommGroupType.Consecutive
        self.output_mode = OutputMode.Default
        self.output_return_period = 1
        self.anchored_tensors: dict[str, dict[str, Any]] = {}
        self.random_seed: int | None = None
        self.broadcast_buffers = True
        self.use_ipu_model = env_flag("POPTORCH_IPU_MODEL")
        self.ipu_id: int | None = None
        self.offline_ipu_version: int | None = None
        self.connection_type = ConnectionType.Always
        self.sync_pattern = SyncPattern.Full
        self.auto_round_num_ipus = False
        self.execution_strategy: Any = None  # None: PipelinedExecution(AutoStage.SameAsIpu)
        self.available_memory_proportion: dict[int, float] = {}
        self.executable_cache_dir: str | None = os.environ.get("POPTORCH_CACHE_DIR") or None
        self.profile_dir: str | None = None  # None: profiling disabled
        self.log_dir: str | None = None  # None: current directory, no log file
        self.model_name: str | None = None  # None: "inference" or "training"
        self.log_cycle_count = False
        self.show_compilation_progress_bar = True
        self.max_repeat_logs: int | None = 4
        self.source_location_excludes: list[str] = ["/torch/", "/poptorch/"]
        self.module_namescope = True
        self.relax_optimizer_attributes_checks = False
        self.stable_norm = False
        self.synthetic_data = False
        self.ir_dump_dir: str | None = os.environ.get("POPTORCH_DUMP_IR") or None
        self.updatable_named_buffers: list[str] | None = None  # None: no buffer named

    @property
    def Training(self) -> _TrainingOptions:  # noqa: N802 - PopTorch's names
        """Options specific to training."""
        return self._training

    @property
    def Precision(self) -> _PrecisionOptions:  # noqa: N802
        """Options about numerical precision."""
        return self._precision

    @property
    def TensorLocations(self) -> _TensorLocationOptions:  # noqa: N802
        """Options about where tensors are stored."""
        return self._tensor_locations

    @property
    def Distributed(self) -> _DistributedOptions:  # noqa: N802
        """Options about running over several host processes."""
        return self._distributed

    @property
    def Jit(self) -> _JitOptions:  # noqa: N802
        """Options about capturing the model."""
        return self._jit

    @property
    def _Popart(self) -> _PopartOptions:  # noqa: N802 - PopTorch's name
        """PopART session options (PopTorch's `_Popart`; options/popart.py)."""
        return self._popart

    def deviceIterations(self, device_iterations: int) -> Options:  # noqa: N802
        """Number of iterations the device runs over the data per call (default 1)."""
        self.device_iterations = check_int("deviceIterations: device_iterations",
                                           device_iterations, 1)
        return self

    def replicationFactor(self, replication_factor: int) -> Options:  # noqa: N802
        """Number of times to replicate the model (default 1)."""
        factor = check_int("replicationFactor: replication_factor", replication_factor, 1)
        if factor % self.input_group_size:
            raise Error(f"replicationFactor: replication_factor ({factor}) must be a multiple "
                        f"of the input replica group size ({self.input_group_size}); change "
                        "the group size with inputReplicaGrouping() first", type="options")
        self.replication_factor = factor
        return self

    def inputReplicaGrouping(self, input_group_size: int,  # noqa: N802
                             input_group_type: CommGroupType) -> Options:
        """Split the input batches between groups of `input_group_size` replicas."""
        size = check_int("inputReplicaGrouping: input_group_size", input_group_size, 1)
        where = "inputReplicaGrouping: input_group_type"
        if check_enum(where, input_group_type, CommGroupType) == CommGroupType.All:
            raise Error(f"{where} cannot be poptorch.CommGroupType.All; use Consecutive, "
                        "Orthogonal or NoGrouping", type="options")
        if self.replication_factor % size:
            raise Error(f"inputReplicaGrouping: input_group_size ({size}) must be a factor of "
                        f"replicationFactor ({self.replication_factor}); call "
                        "replicationFactor() first", type="options")
        self.input_group_size, self.input_group_type = size, input_group_type
        return self

    def broadcastBuffers(self, broadcast_buffers: bool = True) -> Options:  # noqa: N802
        """Broadcast buffers to all replicas (False: each replica keeps its own)."""
        self.broadcast_buffers = check_bool("broadcastBuffers: broadcast_buffers",
                                            broadcast_buffers)
        return self

    def updatableNamedBuffers(self, buffers: list[str]) -> Options:  # noqa: N802
        """The model's buffers (by name) that copyNamedBuffersToDevice() uploads, without
        the other weights (PopTorch 3.x). A run-time setting here: the program is the same."""
        self._check_not_frozen("updatableNamedBuffers")
        if not isinstance(buffers, list | tuple) or not all(isinstance(b, str) for b in buffers):
            raise Error(f"updatableNamedBuffers: buffers must be a list of buffer names "
                        f"(str), got {buffers!r}"[:200], type="options")
        self.updatable_named_buffers = list(buffers)
        return self

    def outputMode(self, output_mode: OutputMode,  # noqa: N802
                   output_return_period: int | None = None) -> Options:
        """Which results to return: All, Sum, Final, EveryN (with a period) or Default."""
        mode = check_enum("outputMode: output_mode", output_mode, OutputMode)
        period = 1
        if mode == OutputMode.EveryN:
            period = check_int("outputMode: output_return_period (needed by OutputMode.EveryN)",
                               output_return_period, 1)
        elif output_return_period is not None:
            log.info("output_return_period ignored with output mode %s", mode.name)
        self.output_mode, self.output_return_period = mode, period
        return self

    def defaultOutputMode(self) -> bool:  # noqa: N802
        """Whether the output mode is still OutputMode.Default."""
        return self.output_mode == OutputMode.Default

    def anchorTensor(self, short_name: str, long_name: str,  # noqa: N802
                     output_mode: OutputMode | None = None,
                     output_return_period: int = 1) -> Options:
        """Anchor the tensor `long_name` so it can be retrieved as `short_name`."""
        check_str("anchorTensor: short_name", short_name)
        check_str("anchorTensor: long_name", long_name)
        if output_mode is not None:
            check_enum("anchorTensor: output_mode", output_mode, OutputMode)
        period = 1
        if output_mode == OutputMode.EveryN:
            period = check_int("anchorTensor: output_return_period", output_return_period, 1)
        anchor = {"long_name": long_name, "output_mode": output_mode,
                  "output_return_period": period}
        self.anchored_tensors = {**self.anchored_tensors, short_name: anchor}
        return self

    def useIpuModel(self, use_model: bool) -> Options:  # noqa: N802
        """Use the IPU Model (True) or IPU hardware; overrides POPTORCH_IPU_MODEL.

        PopTorch's IPU Model is an "ipu2" (Mk2) model of 1472 tiles per IPU (its
        popart_compiler getNumTilesPerIpu), which is what the machine model simulates
        in both cases (runtime/machine/system.py), so the figures do not change; as
        PopTorch's, the IPU Model refuses logCycleCount (no hardware cycle counter) and
        an offline target."""
        if check_bool("useIpuModel: use_model", use_model) and self.offline_ipu_version:
            raise Error("useIpuModel: the IPU Model cannot be used with an offline IPU target; "
                        "do not call useOfflineIpuTarget()", type="options")
        self.use_ipu_model = use_model
        return self

    def useIpuId(self, ipu_id: int) -> Options:  # noqa: N802
        """Use the IPU device with this ID (as `gc-info -l` shows them): on the simulated
        IPU-POD64, 0-63 are single IPUs, then devices of 2 (64-95), 4 (96-111), 8
        (112-119), 16 (120-123), 32 (124-125) and 64 IPUs (126). Its IPU count must be the
        compiled model's IPUs x replicationFactor, which attaching checks."""
        ipu_id = check_int("useIpuId: ipu_id", ipu_id, 0)
        if ipu_id >= DEVICE_COUNT:
            raise Error(f"useIpuId: ipu_id must be a device ID of the simulated IPU-POD64, "
                        f"0 to {DEVICE_COUNT - 1}, got {ipu_id}: 0-63 are single IPUs, 64-95 "
                        "devices of 2 IPUs, 96-111 of 4, 112-119 of 8, 120-123 of 16, "
                        "124-125 of 32 and 126 all 64 (as gc-info -l numbers them)",
                        type="options")
        self.ipu_id = ipu_id
        return self

    def useOfflineIpuTarget(self, ipu_version: int = 2) -> Options:  # noqa: N802
        """Compile for an offline IPU target (1: Mk1, 2: Mk2, 21: Mk2 with FP8)."""
        if check_int("useOfflineIpuTarget: ipu_version", ipu_version, 1) not in (1, 2, 21):
            raise Error(f"useOfflineIpuTarget: ipu_version must be 1, 2 or 21, got "
                        f"{shown(ipu_version)}", type="options")
        if self.use_ipu_model:
            raise Error("useOfflineIpuTarget: an offline IPU target cannot use the IPU Model; "
                        "call useIpuModel(False) or unset POPTORCH_IPU_MODEL", type="options")
        self.offline_ipu_version, self.connection_type = ipu_version, ConnectionType.Never
        return self

    def connectionType(self, connection_type: ConnectionType) -> Options:  # noqa: N802
        """When to attach to the IPU: Always, OnDemand or Never."""
        self.connection_type = check_enum("connectionType: connection_type", connection_type,
                                          ConnectionType)
        return self

    def syncPattern(self, sync_pattern: SyncPattern) -> Options:  # noqa: N802
        """Synchronisation in multi-IPU systems: Full, SinglePipeline or ReplicaAndLadder.
        Only Full, the default, is supported: the machine model's timeline
        (runtime/machine/scheduler.py) has no sync groups, per IPU or per replica group,
        that would let some IPUs do host IO while others compute."""
        pattern = check_enum("syncPattern: sync_pattern", sync_pattern, SyncPattern)
        if pattern != SyncPattern.Full:
            raise Error(f"syncPattern(SyncPattern.{pattern.name}) is not supported: the "
                        "machine model has no sync groups that would let IPUs communicate "
                        "with the host independently; use SyncPattern.Full (the default)",
                        type="options")
        self.sync_pattern = pattern
        return self

    def autoRoundNumIPUs(self, auto_round_num_ipus: bool = True) -> Options:  # noqa: N802
        """Round the number of IPUs up to a power of 2 instead of raising an error."""
        self.auto_round_num_ipus = check_bool("autoRoundNumIPUs: auto_round_num_ipus",
                                              auto_round_num_ipus)
        return self

    def randomSeed(self, random_seed: int) -> Options:  # noqa: N802
        """Seed of the IPU's random number generator."""
        self.random_seed = check_int("randomSeed: random_seed", random_seed, 0, 2**64 - 1)
        return self

    def setExecutionStrategy(self, strategy: Any) -> Options:  # noqa: N802
        """Partition the graph with this execution strategy."""
        if not isinstance(strategy, _Strategy):
            raise Error(f"setExecutionStrategy: strategy must be an instance of "
                        f"poptorch.{', poptorch.'.join(STRATEGIES)}, got {shown(strategy)}",
                        type="options")
        self.execution_strategy = strategy
        return self

    def setAvailableMemoryProportion(  # noqa: N802
            self, available_memory_proportion: dict[str, float]) -> Options:
        """Temporary memory available per IPU, as {"IPU0": 0.5, ...} with values in [0, 1]."""
        where = "setAvailableMemoryProportion"
        if not isinstance(available_memory_proportion, dict):
            raise Error(f'{where}: expected a dict such as {{"IPU0": 0.5}}, got '
                        f"{shown(available_memory_proportion)}", type="options")
        proportions = {}
        for key, value in available_memory_proportion.items():
            if not (isinstance(key, str) and re.fullmatch("IPU[0-9]{1,9}", key)):
                raise Error(f'{where}: keys must be "IPU<n>" such as "IPU0", got {shown(key)}',
                            type="options")
            if (isinstance(value, bool) or not isinstance(value, numbers.Real)
                    or not 0 <= value <= 1):
                raise Error(f"{where}: the proportion for {key} must be a number between 0 and "
                            f"1, got {shown(value)}", type="options")
            proportions[int(key[3:])] = float(value)
        self.available_memory_proportion = proportions
        return self

    def enableExecutableCaching(self, path: str | None) -> Options:  # noqa: N802
        """Cache executables in the directory `path`; None disables caching."""
        self.executable_cache_dir = (None if path is None
                                     else check_str("enableExecutableCaching: path", path))
        return self

    def showCompilationProgressBar(self, show: bool = True) -> Options:  # noqa: N802
        """Show a progress bar while the model compiles (shown by default)."""
        self.show_compilation_progress_bar = check_bool("showCompilationProgressBar: show", show)
        return self

    def disableModuleNamescope(self) -> Options:  # noqa: N802
        """Do not prefix operator names with the names of their modules."""
        self.module_namescope = False
        return self

    def enableStableNorm(self, enabled: bool) -> Options:  # noqa: N802
        """Use the slower but more accurate version of norm operators."""
        self.stable_norm = check_bool("enableStableNorm: enabled", enabled)
        return self

    def enableSyntheticData(self, enabled: bool) -> Options:  # noqa: N802
        """Disable host IO and generate random input data on the IPU instead."""
        self.synthetic_data = check_bool("enableSyntheticData: enabled", enabled)
        return self

    def relaxOptimizerAttributesChecks(self, relax: bool = True) -> Options:  # noqa: N802
        """Report unexpected optimizer attributes as debug messages instead of warnings."""
        self.relax_optimizer_attributes_checks = check_bool(
            "relaxOptimizerAttributesChecks: relax", relax)
        return self

    def enableProfiling(self, profile_dir: str | None = None) -> Options:  # noqa: N802
        """Write profiling reports into `profile_dir` (default: current directory)."""
        self.profile_dir = "." if profile_dir is None else check_str(
            "enableProfiling: profile_dir", profile_dir)
        return self

    def logDir(self, log_dir: str) -> Options:  # noqa: N802
        """Directory where PopTorch saves log files: the log (`poptorch.log`) and the
        reproducers of failed compilation steps (default: none written; reproducers go to
        the system's temporary directory)."""
        self.log_dir = check_str("logDir: log_dir", log_dir)
        return self

    def modelName(self, name: str) -> Options:  # noqa: N802
        """Name of the model (subdirectory of profiling reports)."""
        self.model_name = check_str("modelName: name", name)
        return self

    def logCycleCount(self, log_cycle_count: bool) -> Options:  # noqa: N802
        """Log the IPU cycles used by the main graph (shown at POPTORCH_LOG_LEVEL=DEBUG)."""
        self.log_cycle_count = check_bool("logCycleCount: log_cycle_count", log_cycle_count)
        return self

    def maxRepeatLogs(self, max_lines: int | None) -> Options:  # noqa: N802
        """Suppress a repeated log message after `max_lines` lines (None: never)."""
        self.max_repeat_logs = (None if max_lines is None
                                else check_int("maxRepeatLogs: max_lines", max_lines, 1))
        return self

    def sourceLocationExcludes(self, excludes: list[str]) -> Options:  # noqa: N802
        """Replace the frames ignored when tracing IR back to user code."""
        if isinstance(excludes, str) or not isinstance(excludes, list | tuple):
            raise Error(f"sourceLocationExcludes: excludes must be a list of str, got "
                        f"{shown(excludes)}", type="options")
        self.source_location_excludes = [check_str("sourceLocationExcludes: excludes", e)
                                         for e in excludes]
        return self

    def appendToLocationExcludes(self, *excludes: str) -> Options:  # noqa: N802
        """Add frames to ignore when tracing IR back to user code."""
        self.source_location_excludes = self.source_location_excludes + [
            check_str("appendToLocationExcludes: excludes", e) for e in excludes]
        return self

    def dumpIR(self, directory: str | None) -> Options:  # noqa: N802
        """Write the IR after capture, conversion and every pass into `directory`
        (poptorch-mlir's own option; POPTORCH_DUMP_IR=directory does the same)."""
        self.ir_dump_dir = None if directory is None else check_str("dumpIR: directory", directory)
        return self

    def loadFromFile(self, filepath: str) -> Options:  # noqa: N802
        """Apply a config file: one option call per line without the `options.` prefix,
        such as `deviceIterations(4)` or `Training.gradientAccumulation(2)`; blank lines
        and `#` comments are skipped. Arguments must be literals, poptorch enum values
        or torch dtypes; nothing in the file is evaluated as code. A line that is not such
        a call, or that the option refuses, is an Error located at `path:line`."""
        load_config(self, check_str("loadFromFile: filepath", filepath))
        return self

    def clone(self) -> Options:
        """An unfrozen deep copy of these options."""
        copied = copy.deepcopy(self)
        copied._freeze(False)
        return copied

    def _freeze(self, frozen: bool = True, compile_time_only: bool = False,
                by: str = FROZEN_BY_DATALOADER) -> None:
        """Lock all the options (`by` a DataLoader or a model wrapper relying on them),
        only the compile-time ones (`compile_time_only`: a model's own copy), or none
        (`frozen=False`)."""
        freeze(self, frozen, compile_time_only, by)

    @staticmethod
    def _for_model(options: Options | None, training: bool) -> Options:
        """The options a model wrapper works on (`poptorch_model.options`), as PopTorch
        makes them: `options` are frozen (changing them later is an Error) and copied, and
        OutputMode.Default resolves to Final for training and All for inference. The
        wrapper freezes the copy's compile-time options when it compiles (its run-time
        ones may still change)."""
        if options is None:
            copied = Options()
        elif not isinstance(options, Options):
            raise Error(f"options must be a poptorch.Options, got {shown(options)}",
                        type="options")
        else:
            options._freeze(by=FROZEN_BY_MODEL)
            copied = options.clone()
        if not training and copied.Training.gradient_accumulation != 1:
            _refuse_accumulation(copied)
        if copied.use_ipu_model and copied.log_cycle_count:  # PopTorch's errorOnCycleLogging
            raise Error("Cycle count logging is only supported on actual IPU hardware: "
                        "call logCycleCount(False) or useIpuModel(False)", type="options")
        if copied.defaultOutputMode():
            copied.outputMode(OutputMode.Final if training else OutputMode.All)
        return copied

    def toDict(self) -> dict[str, Any]:  # noqa: N802
        """All option values: general ones by attribute name, then one dict per category."""
        return {**super().toDict(), **{name: getattr(self, name).toDict() for name in _CATEGORIES}}

    def __str__(self) -> str:
        """One `name = value` line per option, category options as `Category.name`."""
        return options_text(self)

    def __repr__(self) -> str:
        categories = ", ".join(f"{name}={getattr(self, name)!r}" for name in _CATEGORIES)
        return f"Options({show_values(self._values())}, {categories})"


def _refuse_accumulation(options: Options) -> None:
    """PopTorch's error for an inference model given Training.gradientAccumulation(n > 1)
    (its `_poplar_executor.py`): inference has no gradients to accumulate, and a pipeline
    is fed by deviceIterations instead."""
    message = ("You must set poptorch.Options().Training.gradientAccumulation to 1 or leave "
               "it as its default value (1) when running a poptorch.inferenceModel().")
    strategy = options.execution_strategy
    if strategy is None or (isinstance(strategy, PipelinedExecution)
                            and not isinstance(strategy, ShardedExecution)):
        message += (" Use poptorch.Options().deviceIterations to process a sufficient "
                    "number of batches each run for pipelined execution instead.")
    raise Error(message, type="options")
