"""The option categories of poptorch.Options (spec 11.1) and their shared machinery:
argument checks, freezing and printing.

Every category keeps its options as plain public attributes, validated and set by
PopTorch's camelCase methods, which return the category for chaining. As in PopTorch,
options are frozen once a DataLoader uses them or a model is wrapped with them
(changing any option then raises an Error). The wrapped model works on a copy
(`poptorch_model.options`) whose compile-time options are frozen once it compiles; its
run-time options may still change.
"""

from __future__ import annotations

import copy
import enum
import numbers
import os
from typing import Any, TypeVar

import torch

from poptorch._logging import logger
from poptorch.enums import HalfFloatCastingBehavior, MeanReductionStrategy, ReductionType
from poptorch.errors import Error

E = TypeVar("E", bound=enum.Enum)


INT64_MAX = 2**63 - 1


def shown(value: Any) -> str:
    """`repr(value)` for a message; an int too long to print is described by its size."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an int of {value.bit_length()} bits"
    try:
        return repr(value)
    except (ValueError, RecursionError):  # holds an int too long to print, or is too deep
        return f"a {type(value).__name__} too large to print"


def check_int(where: str, value: Any, minimum: int, maximum: int = INT64_MAX) -> int:
    """`value` as an int, or an Error if it is not an integer between `minimum` and
    `maximum` (by default the largest int64, as the IPU's option values are)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise Error(f"{where} must be an int >= {minimum}, got {shown(value)}", type="options")
    if value > maximum:
        raise Error(f"{where} must be an int <= {maximum}, got {shown(value)}", type="options")
    return int(value)


def check_bool(where: str, value: Any) -> bool:
    """`value`, or an Error if it is not True or False."""
    if not isinstance(value, bool):
        raise Error(f"{where} must be True or False, got {shown(value)}", type="options")
    return value


def check_str(where: str, value: Any) -> str:
    """`value` as a str (paths are accepted), or an Error."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise Error(f"{where} must be a str, got {shown(value)}", type="options")
    return value


def check_enum(where: str, value: Any, enum_type: type[E]) -> E:
    """`value`, or an Error if it is not a member of `enum_type`."""
    if not isinstance(value, enum_type):
        names = ", ".join(member.name for member in enum_type)
        raise Error(f"{where} must be a poptorch.{enum_type.__name__} ({names}), "
                    f"got {shown(value)}", type="options")
    return value


def env_flag(name: str) -> bool:
    """The value of a 0/1 environment variable (unset: False)."""
    raw = os.environ.get(name, "")
    if raw.strip().lower() not in ("", "0", "1", "false", "true"):
        raise Error(f"environment variable {name} must be 0 or 1, got {raw!r}", type="options")
    return raw.strip().lower() in ("1", "true")


FROZEN_BY_DATALOADER = "a DataLoader uses them"
FROZEN_BY_MODEL = "a model was wrapped with them (poptorch.inferenceModel or trainingModel)"


class OptionsGroup:
    """A set of options: public attributes are option values. `_frozen` locks them all
    (a DataLoader or a model wrapper uses them, `_frozen_by` says which); `_run_time`,
    set on a wrapped model's copy, names the only ones that may still change. `_prefix`
    qualifies the names in messages."""

    _frozen = False
    _frozen_by = FROZEN_BY_DATALOADER
    _run_time: frozenset[str] | None = None
    _prefix = ""

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            self._check_not_frozen(f"{self._prefix}{name}")
            if self._run_time is not None and name not in self._run_time:
                raise Error(f"cannot change compile-time option {self._prefix}{name}: a model "
                            "was compiled with these options; change a copy made with "
                            "options.clone() and wrap the model with it", type="options")
        super().__setattr__(name, value)

    def _check_not_frozen(self, name: str) -> None:
        """An Error if the options are frozen (PopTorch: "Can't modify frozen Options")."""
        if self._frozen:
            raise Error(f"cannot change option {name}: these options are frozen because "
                        f"{self._frozen_by}; change a copy made with options.clone() "
                        "instead", type="options")

    def _lock(self, frozen: bool, run_time: frozenset[str] | None, prefix: str,
              by: str | None = None) -> None:
        """Freeze all options (`frozen`, because of `by`), all but `run_time` (a set),
        or none."""
        self._frozen, self._run_time, self._prefix = frozen, run_time, prefix
        if by is not None:
            self._frozen_by = by

    def _values(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def toDict(self) -> dict[str, Any]:  # noqa: N802 - PopTorch's names
        """A deep copy of the option values, by attribute name."""
        return {k: v.toDict() if isinstance(v, OptionsGroup) else copy.deepcopy(v)
                for k, v in self._values().items()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({show_values(self._values())})"


def show_values(values: dict[str, Any]) -> str:
    """`name=value, ...` with enum members shown as `Type.Member`."""
    return ", ".join(f"{k}={type(v).__name__}.{v.name}" if isinstance(v, enum.Enum)
                     else f"{k}={v!r}" for k, v in values.items())


class _TrainingOptions(OptionsGroup):
    """Options specific to training (`Options.Training`); not for inference models."""

    _prefix = "Training."

    def __init__(self) -> None:
        self.gradient_accumulation = 1
        self.accumulation_and_replication_reduction_type = ReductionType.Mean
        self.mean_reduction_strategy: MeanReductionStrategy | None = None  # by optimizer
        self.automatic_loss_scaling = False
        self.convolution_dithering = False

    def gradientAccumulation(self, gradient_accumulation: int) -> _TrainingOptions:  # noqa: N802
        """Number of micro-batches to accumulate before each weight update."""
        self.gradient_accumulation = check_int(
            "gradientAccumulation: gradient_accumulation", gradient_accumulation, 1)
        return self

    def accumulationAndReplicationReductionType(  # noqa: N802
            self, reduction_type: ReductionType) -> _TrainingOptions:
        """Reduce accumulated and replicated gradients by their Mean (default) or Sum."""
        where = "accumulationAndReplicationReductionType: reduction_type"
        if check_enum(where, reduction_type, ReductionType) == ReductionType.NoReduction:
            raise Error(f"{where} must be poptorch.ReductionType.Mean or "
                        "poptorch.ReductionType.Sum, got ReductionType.NoReduction", type="options")
        self.accumulation_and_replication_reduction_type = reduction_type
        return self

    def setMeanAccumulationAndReplicationReductionStrategy(  # noqa: N802
            self, mean_reduction_strategy: MeanReductionStrategy) -> _TrainingOptions:
        """When a Mean reduction divides: Running, Post or PostAndLoss (deprecated)."""
        self.mean_reduction_strategy = check_enum(
            "setMeanAccumulationAndReplicationReductionStrategy: mean_reduction_strategy",
            mean_reduction_strategy, MeanReductionStrategy)
        return self

    @property
    def meanAccumulationAndReplicationReductionStrategy(  # noqa: N802 - PopTorch's name
            self) -> MeanReductionStrategy | None:
        """PopTorch's name of `mean_reduction_strategy`, to read or assign: None (the
        default) lets the optimizer choose (Running when its accum_type is float16, else
        Post)."""
        return self.mean_reduction_strategy

    @meanAccumulationAndReplicationReductionStrategy.setter
    def meanAccumulationAndReplicationReductionStrategy(  # noqa: N802
            self, mean_reduction_strategy: MeanReductionStrategy) -> None:
        self.setMeanAccumulationAndReplicationReductionStrategy(mean_reduction_strategy)

    def setAutomaticLossScaling(self, enabled: bool) -> _TrainingOptions:  # noqa: N802
        """Let the IPU choose a global loss scaling factor during training."""
        self.automatic_loss_scaling = check_bool("setAutomaticLossScaling: enabled", enabled)
        return self

    def setConvolutionDithering(self, enabled: bool) -> _TrainingOptions:  # noqa: N802
        """Lay out convolutions with different parameters from different tiles. Refused
        (True): the machine model plans a convolution's tiles from its shapes alone and
        charges every tile's work evenly (runtime/machine/cost.py), so there is no tile
        imbalance for dithering to spread; False (the default) is accepted."""
        if check_bool("setConvolutionDithering: enabled", enabled):
            raise Error("setConvolutionDithering(True) is not supported: the machine model "
                        "maps each convolution evenly over the tiles it uses and has no "
                        "per-convolution tile offset for dithering to change; leave it "
                        "False", type="options")
        self.convolution_dithering = enabled
        return self


class _PrecisionOptions(OptionsGroup):
    """Options about numerical precision (`Options.Precision`)."""

    _prefix = "Precision."

    def __init__(self) -> None:
        self.partials_type: torch.dtype | None = None  # None: the backend's default
        self.stochastic_rounding = False
        self.floating_point_exceptions = False
        self.half_float_casting = HalfFloatCastingBehavior.Default
        self.running_statistics_always_float = False

    def setPartialsType(self, dtype: torch.dtype) -> _PrecisionOptions:  # noqa: N802
        """Data type of matmul and convolution partials: torch.float or torch.half."""
        if dtype not in (torch.float, torch.half):
            raise Error(f"setPartialsType: dtype must be torch.float or torch.half, got "
                        f"{shown(dtype)}", type="options")
        self.partials_type = dtype
        return self

    def enableStochasticRounding(self, enabled: bool) -> _PrecisionOptions:  # noqa: N802
        """Round to half randomly so that the rounding is unbiased on average."""
        self.stochastic_rounding = check_bool("enableStochasticRounding: enabled", enabled)
        return self

    def enableFloatingPointExceptions(self, enabled: bool) -> _PrecisionOptions:  # noqa: N802
        """Raise on invalid floating point operations (inf - inf, x / 0, NaN compares...)."""
        self.floating_point_exceptions = check_bool(
            "enableFloatingPointExceptions: enabled", enabled)
        return self

    def halfFloatCasting(  # noqa: N802
            self, half_float_casting: HalfFloatCastingBehavior) -> _PrecisionOptions:
        """Casting of ops mixing float16 and float32 (deprecated in PopTorch)."""
        self.half_float_casting = check_enum("halfFloatCasting: half_float_casting",
                                             half_float_casting, HalfFloatCastingBehavior)
        return self

    def runningStatisticsAlwaysFloat(self, value: bool) -> _PrecisionOptions:  # noqa: N802
        """Keep batch-norm running statistics in float32 (deprecated in PopTorch)."""
        self.running_statistics_always_float = check_bool(
            "runningStatisticsAlwaysFloat: value", value)
        return self


class _JitOptions(OptionsGroup):
    """Options about capturing the model (`Options.Jit`)."""

    _prefix = "Jit."

    def __init__(self) -> None:
        self.trace_model = False

    def traceModel(self, trace_model: bool) -> _JitOptions:  # noqa: N802
        """DO NOT USE: about to be removed (spec 11). As in PopTorch 3, tracing with
        torch.jit.trace is gone: models are captured through the dispatcher (here
        torch.export), which False, the default, keeps; True is an Error."""
        check_bool("traceModel: trace_model", trace_model)
        logger.warning("[Deprecated] Do not call options.Jit.traceModel(): "
                       "options.Jit.traceModel(False) is now the default, and True is no "
                       "longer supported, therefore this function will be removed shortly")
        if trace_model:
            raise Error("options.Jit.traceModel(True) is no longer supported: PopTorch 3 "
                        "captures the model through the PyTorch dispatcher (torch.export "
                        "here) instead of torch.jit.trace; remove the call", type="options")
        self.trace_model = False
        return self


class TensorLocationSettings(OptionsGroup):
    """Where a class of tensors is stored; None means left to the compiler.

    >>> opts.TensorLocations.setActivationLocation(
    ...     poptorch.TensorLocationSettings().useOnChipStorage(False))
    """

    def __init__(self, **default_values: Any) -> None:
        self.on_chip: bool | None = None
        self.use_replicated_tensor_sharding: bool | None = None
        self.min_elements_for_off_chip: int | None = None
        self.min_elements_for_replicated_tensor_sharding: int | None = None
        self.use_io_tiles_to_load: bool | None = None
        self.use_io_tiles_to_store: bool | None = None
        for name, value in default_values.items():
            if name not in self._values():
                raise Error(f"TensorLocationSettings has no setting {name!r}; known settings: "
                            f"{', '.join(self._values())}", type="options")
            if value is not None:
                where = f"TensorLocationSettings: {name}"
                value = (check_int(where, value, 0) if name.startswith("min_elements")
                         else check_bool(where, value))
            setattr(self, name, value)

    def minElementsForOffChip(self, min_elements: int) -> TensorLocationSettings:  # noqa: N802
        """A minimum number of elements below which offloading won't be considered."""
        self.min_elements_for_off_chip = check_int(
            "minElementsForOffChip: min_elements", min_elements, 0)
        return self

    def minElementsForReplicatedTensorSharding(  # noqa: N802
            self, min_elements: int) -> TensorLocationSettings:
        """Only shard tensors with more than `min_elements` elements across replicas."""
        self.min_elements_for_replicated_tensor_sharding = check_int(
            "minElementsForReplicatedTensorSharding: min_elements", min_elements, 0)
        return self

    def useOnChipStorage(self, use: bool | None = True) -> TensorLocationSettings:  # noqa: N802
        """True: on-chip memory; False: off-chip (streaming) memory; None: undefined."""
        self.on_chip = None if use is None else check_bool("useOnChipStorage: use", use)
        return self

    def useReplicatedTensorSharding(self, use: bool = True) -> TensorLocationSettings:  # noqa: N802
        """Shard the tensors across replicas (for weights and optimiser state)."""
        self.use_replicated_tensor_sharding = check_bool("useReplicatedTensorSharding: use", use)
        return self

    def useIOTilesToLoad(self, use: bool = True) -> TensorLocationSettings:  # noqa: N802
        """Load the tensors through IO tiles (True) or compute tiles (False)."""
        self.use_io_tiles_to_load = check_bool("useIOTilesToLoad: use", use)
        return self

    def useIOTilesToStore(self, use: bool = True) -> TensorLocationSettings:  # noqa: N802
        """Store the tensors through IO tiles (True) or compute tiles (False)."""
        self.use_io_tiles_to_store = check_bool("useIOTilesToStore: use", use)
        return self


class _TensorLocationOptions(OptionsGroup):
    """Where tensors are stored (`Options.TensorLocations`)."""

    _prefix = "TensorLocations."

    def __init__(self) -> None:
        self.num_io_tiles = 0
        self.weight_location: TensorLocationSettings | None = None
        self.activation_location: TensorLocationSettings | None = None
        self.optimizer_location: TensorLocationSettings | None = None
        self.accumulator_location: TensorLocationSettings | None = None

    def numIOTiles(self, num_tiles: int) -> _TensorLocationOptions:  # noqa: N802
        """Number of tiles of each IPU used for IO rather than compute."""
        if (isinstance(num_tiles, bool) or not isinstance(num_tiles, numbers.Integral)
                or not 32 <= num_tiles <= 192 or num_tiles % 2):
            raise Error(f"numIOTiles: num_tiles must be an even number between 32 and 192, "
                        f"got {shown(num_tiles)}", type="options")
        self.num_io_tiles = int(num_tiles)
        return self

    def _location(self, method: str, location: Any) -> TensorLocationSettings:
        if not isinstance(location, TensorLocationSettings):
            raise Error(f"{method}: location must be a poptorch.TensorLocationSettings, got "
                        f"{shown(location)}", type="options")
        copied = copy.deepcopy(location)
        copied._lock(False, None, "")  # the copy of a frozen model's settings is not frozen
        return copied

    def setWeightLocation(self, location: TensorLocationSettings) -> _TensorLocationOptions:  # noqa: N802
        """Tensor location settings for weights."""
        self.weight_location = self._location("setWeightLocation", location)
        return self

    def setActivationLocation(  # noqa: N802
            self, location: TensorLocationSettings) -> _TensorLocationOptions:
        """Tensor location settings for activations."""
        self.activation_location = self._location("setActivationLocation", location)
        return self

    def setOptimizerLocation(  # noqa: N802
            self, location: TensorLocationSettings) -> _TensorLocationOptions:
        """Tensor location settings for optimiser state."""
        self.optimizer_location = self._location("setOptimizerLocation", location)
        return self

    def setAccumulatorLocation(  # noqa: N802
            self, location: TensorLocationSettings) -> _TensorLocationOptions:
        """Tensor location settings for gradient accumulators."""
        self.accumulator_location = self._location("setAccumulatorLocation", location)
        return self


class _DistributedOptions(OptionsGroup):
    """Distributed execution over several host processes (`Options.Distributed`).

    By default the process id and count come from OpenMPI's OMPI_COMM_WORLD_RANK and
    OMPI_COMM_WORLD_SIZE environment variables, or, when those are unset, from RANK and
    WORLD_SIZE, which torchrun and poptorch-run set (one process when neither is set).
    """

    _prefix = "Distributed."

    def __init__(self) -> None:
        self.num_processes = 1
        self.process_id = 0
        if "OMPI_COMM_WORLD_SIZE" not in os.environ and "WORLD_SIZE" in os.environ:
            self.setEnvVarNames("WORLD_SIZE", "RANK")  # torchrun's
        else:
            self.setEnvVarNames("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")

    def configureProcessId(self, process_id: int, num_processes: int  # noqa: N802
                           ) -> _DistributedOptions:
        """Set this process's id and the total number of processes."""
        num_processes = check_int("configureProcessId: num_processes", num_processes, 1)
        process_id = check_int("configureProcessId: process_id", process_id, 0)
        if process_id >= num_processes:
            raise Error(f"configureProcessId: process_id must be < num_processes "
                        f"({num_processes}), got {process_id}", type="options")
        self.num_processes, self.process_id = num_processes, process_id
        return self

    def setEnvVarNames(self, var_num_processes: str, var_process_id: str  # noqa: N802
                       ) -> _DistributedOptions:
        """Read the process count and id from these environment variables."""
        values = []
        for var, default in ((var_num_processes, "1"), (var_process_id, "0")):
            text = os.environ.get(check_str("setEnvVarNames: variable names", var), default)
            try:
                values.append(int(text))
            except ValueError:
                raise Error(f"environment variable {var} must be an integer, got {text!r}",
                            type="options") from None
        return self.configureProcessId(values[1], values[0])

    def disable(self) -> _DistributedOptions:
        """Ignore the environment and the options set: run as a single process."""
        return self.configureProcessId(0, 1)

    @property
    def numProcesses(self) -> int:  # noqa: N802
        """Total number of processes the execution is distributed over."""
        return self.num_processes

    @property
    def processId(self) -> int:  # noqa: N802
        """Id of the current process."""
        return self.process_id
