"""What the options are: the method that sets each option attribute (PopTorch's name for
it, also used to set it from stored data), which options are run-time options (they do
not change the compiled program, so they apply to a loaded executable, spec 4.10.2),
the option groups, and freezing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from poptorch.enums import OutputMode
from poptorch.errors import Error
from poptorch.options.categories import OptionsGroup, shown
from poptorch.options.config_file import CATEGORIES
from poptorch.options.popart import set_all

# options that do not change the compiled program (dotted names for categories): where to
# run (device, connection, IPU Model), what to log and where, caching and IR dumps, the
# buffers copyNamedBuffersToDevice uploads
RUN_TIME_OPTIONS = frozenset({
    "ipu_id", "connection_type", "use_ipu_model", "log_cycle_count", "profile_dir",
    "model_name", "log_dir", "max_repeat_logs", "show_compilation_progress_bar",
    "executable_cache_dir", "ir_dump_dir", "relax_optimizer_attributes_checks",
    "updatable_named_buffers"})

# the method setting each option, per group; options set together share a method
METHODS: dict[str, dict[str, str]] = {
    "": {"device_iterations": "deviceIterations", "replication_factor": "replicationFactor",
         "input_group_size": "inputReplicaGrouping", "input_group_type": "inputReplicaGrouping",
         "output_mode": "outputMode", "output_return_period": "outputMode",
         "anchored_tensors": "anchorTensor", "random_seed": "randomSeed",
         "broadcast_buffers": "broadcastBuffers", "use_ipu_model": "useIpuModel",
         "ipu_id": "useIpuId", "offline_ipu_version": "useOfflineIpuTarget",
         "connection_type": "connectionType", "sync_pattern": "syncPattern",
         "auto_round_num_ipus": "autoRoundNumIPUs", "execution_strategy": "setExecutionStrategy",
         "available_memory_proportion": "setAvailableMemoryProportion",
         "executable_cache_dir": "enableExecutableCaching", "profile_dir": "enableProfiling",
         "log_dir": "logDir", "model_name": "modelName", "log_cycle_count": "logCycleCount",
         "show_compilation_progress_bar": "showCompilationProgressBar",
         "max_repeat_logs": "maxRepeatLogs", "source_location_excludes": "sourceLocationExcludes",
         "module_namescope": "disableModuleNamescope",
         "relax_optimizer_attributes_checks": "relaxOptimizerAttributesChecks",
         "stable_norm": "enableStableNorm", "synthetic_data": "enableSyntheticData",
         "ir_dump_dir": "dumpIR", "updatable_named_buffers": "updatableNamedBuffers"},
    "Training.": {
        "gradient_accumulation": "gradientAccumulation",
        "accumulation_and_replication_reduction_type": "accumulationAndReplicationReductionType",
        "mean_reduction_strategy": "setMeanAccumulationAndReplicationReductionStrategy",
        "automatic_loss_scaling": "setAutomaticLossScaling",
        "convolution_dithering": "setConvolutionDithering"},
    "Precision.": {
        "partials_type": "setPartialsType", "stochastic_rounding": "enableStochasticRounding",
        "floating_point_exceptions": "enableFloatingPointExceptions",
        "half_float_casting": "halfFloatCasting",
        "running_statistics_always_float": "runningStatisticsAlwaysFloat"},
    "TensorLocations.": {
        "num_io_tiles": "numIOTiles", "weight_location": "setWeightLocation",
        "activation_location": "setActivationLocation",
        "optimizer_location": "setOptimizerLocation",
        "accumulator_location": "setAccumulatorLocation"},
    "Distributed.": {"num_processes": "configureProcessId", "process_id": "configureProcessId"},
    "Jit.": {"trace_model": "traceModel"},
    "_Popart.": {"options": "set"},
}


def brief(value: Any) -> str:
    """`shown(value)` cut to 80 characters, for messages about untrusted data."""
    text = shown(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _set_anchors(options: Any, anchors: Any) -> None:
    if not isinstance(anchors, dict):
        raise Error(f"anchorTensor: expected a dict of anchors, got {brief(anchors)}",
                    type="options")
    for short_name, anchor in anchors.items():
        if not (isinstance(anchor, dict) and all(isinstance(k, str) for k in anchor)):
            raise Error(f"anchorTensor: anchor {brief(short_name)} must be a dict of "
                        f"anchorTensor's arguments, got {brief(anchor)}", type="options")
        options.anchorTensor(short_name, **anchor)


def _ipu_keys(proportions: Any) -> Any:
    if not isinstance(proportions, dict):
        return proportions  # the method refuses it
    return {f"IPU{key}": value for key, value in proportions.items()}


# how to call the methods that do not take the option's value as their one argument
CALLS: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "inputReplicaGrouping": lambda o, v: o.inputReplicaGrouping(
        v["input_group_size"], v["input_group_type"]),
    "outputMode": lambda o, v: o.outputMode(v["output_mode"], v["output_return_period"] if
                                            v["output_mode"] is OutputMode.EveryN else None),
    "anchorTensor": lambda o, v: _set_anchors(o, v["anchored_tensors"]),
    "setAvailableMemoryProportion": lambda o, v: o.setAvailableMemoryProportion(
        _ipu_keys(v["available_memory_proportion"])),
    "disableModuleNamescope": lambda o, v: o.disableModuleNamescope(),
    "configureProcessId": lambda o, v: o.configureProcessId(v["process_id"], v["num_processes"]),
    "set": set_all,  # _Popart.set, each stored entry
}


def option_groups(options: Any) -> list[tuple[str, OptionsGroup]]:
    """(name prefix, group) for the options, their categories and the
    TensorLocationSettings the categories hold."""
    groups: list[tuple[str, OptionsGroup]] = [("", options)]
    for name in CATEGORIES:
        category = getattr(options, name)
        groups.append((f"{name}.", category))
        groups += [(f"{name}.{key}.", value) for key, value in category._values().items()
                   if isinstance(value, OptionsGroup)]
    return groups


def freeze(options: Any, frozen: bool, compile_time_only: bool, by: str | None) -> None:
    """Options._freeze: lock all options (because of `by`), the compile-time ones, or
    none."""
    for prefix, group in option_groups(options):
        if not frozen:
            group._lock(False, None, prefix)
        elif compile_time_only:
            run_time = frozenset(name[len(prefix):] for name in RUN_TIME_OPTIONS
                                 if name.startswith(prefix) and "." not in name[len(prefix):])
            group._lock(group._frozen, run_time, prefix)
        elif not group._frozen:  # the first freezing says why
            group._lock(True, group._run_time, prefix, by)
