"""poptorch.Options (spec 11.1): defaults, setters, validation and copies (config files:
test_options_file.py; JSON, freezing and str: test_options_json.py)."""

import pytest
import torch

from poptorch.enums import (
    CommGroupType,
    ConnectionType,
    HalfFloatCastingBehavior,
    MeanReductionStrategy,
    OutputMode,
    ReductionType,
    SyncPattern,
)
from poptorch.errors import Error
from poptorch.options import Options, TensorLocationSettings
from poptorch.options.strategies import PipelinedExecution

ENV_VARS = ("POPTORCH_IPU_MODEL", "POPTORCH_CACHE_DIR", "POPTORCH_DUMP_IR",
            "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "RANK")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


class MyStrategy(PipelinedExecution):
    """A user's strategy subclass (setExecutionStrategy checks with isinstance)."""


def test_defaults():
    opts = Options()
    assert (opts.device_iterations, opts.replication_factor) == (1, 1)
    assert (opts.output_mode, opts.output_return_period) == (OutputMode.Default, 1)
    assert (opts.input_group_size, opts.input_group_type) == (1, CommGroupType.Consecutive)
    assert opts.random_seed is None and opts.ir_dump_dir is None
    assert opts.broadcast_buffers is True and opts.use_ipu_model is False
    assert opts.connection_type == ConnectionType.Always and opts.sync_pattern == SyncPattern.Full
    assert opts.executable_cache_dir is None and opts.log_dir is None
    assert opts.defaultOutputMode()
    assert opts.Training.gradient_accumulation == 1
    assert opts.Training.accumulation_and_replication_reduction_type == ReductionType.Mean
    assert opts.Precision.half_float_casting == HalfFloatCastingBehavior.Default
    assert opts.TensorLocations.num_io_tiles == 0 and opts.Jit.trace_model is False
    assert (opts.Distributed.numProcesses, opts.Distributed.processId) == (1, 0)


def test_environment_variables_initialise_defaults(monkeypatch):
    monkeypatch.setenv("POPTORCH_IPU_MODEL", "1")
    monkeypatch.setenv("POPTORCH_CACHE_DIR", "/tmp/cache")
    monkeypatch.setenv("POPTORCH_DUMP_IR", "/tmp/ir")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    opts = Options()
    assert opts.use_ipu_model and opts.executable_cache_dir == "/tmp/cache"
    assert opts.ir_dump_dir == "/tmp/ir"
    assert (opts.Distributed.numProcesses, opts.Distributed.processId) == (4, 2)
    assert opts.useIpuModel(False).use_ipu_model is False  # the setter wins over the variable
    monkeypatch.setenv("MY_SIZE", "3")
    assert opts.Distributed.setEnvVarNames("MY_SIZE", "MY_RANK").num_processes == 3
    assert opts.Distributed.process_id == 0
    monkeypatch.setenv("POPTORCH_IPU_MODEL", "0")
    assert Options().use_ipu_model is False


def test_torchrun_environment_sets_the_process(monkeypatch):
    # torchrun's (and poptorch-run's) RANK and WORLD_SIZE, when OpenMPI's are unset
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "1")
    assert (Options().Distributed.numProcesses, Options().Distributed.processId) == (3, 1)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")  # OpenMPI's first, as PopTorch reads
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    assert (Options().Distributed.numProcesses, Options().Distributed.processId) == (4, 2)
    assert Options().Distributed.disable().numProcesses == 1


@pytest.mark.parametrize("var, value, message", [
    ("POPTORCH_IPU_MODEL", "yes", "environment variable POPTORCH_IPU_MODEL must be 0 or 1, got "
                                  "'yes'"),
    ("OMPI_COMM_WORLD_SIZE", "four", "environment variable OMPI_COMM_WORLD_SIZE must be an "
                                     "integer, got 'four'"),
    ("OMPI_COMM_WORLD_RANK", "5", "configureProcessId: process_id must be < num_processes (1), "
                                  "got 5"),
])
def test_bad_environment_variables(monkeypatch, var, value, message):
    monkeypatch.setenv(var, value)
    with pytest.raises(Error) as info:
        Options()
    assert str(info.value) == message


SETTERS = [
    # (category or "", method, args, attribute, stored value)
    ("", "deviceIterations", (5,), "device_iterations", 5),
    ("", "replicationFactor", (4,), "replication_factor", 4),
    ("", "broadcastBuffers", (False,), "broadcast_buffers", False),
    ("", "broadcastBuffers", (), "broadcast_buffers", True),
    ("", "outputMode", (OutputMode.All,), "output_mode", OutputMode.All),
    ("", "outputMode", (OutputMode.EveryN, 3), "output_return_period", 3),
    ("", "outputMode", (OutputMode.Sum, 3), "output_return_period", 1),
    ("", "randomSeed", (42,), "random_seed", 42),
    ("", "useIpuModel", (True,), "use_ipu_model", True),
    ("", "useIpuId", (3,), "ipu_id", 3),
    ("", "useOfflineIpuTarget", (21,), "offline_ipu_version", 21),
    ("", "useOfflineIpuTarget", (), "connection_type", ConnectionType.Never),
    ("", "connectionType", (ConnectionType.OnDemand,), "connection_type",
     ConnectionType.OnDemand),
    ("", "syncPattern", (SyncPattern.Full,), "sync_pattern", SyncPattern.Full),
    ("", "autoRoundNumIPUs", (), "auto_round_num_ipus", True),
    ("", "setAvailableMemoryProportion", ({"IPU0": 0.5, "IPU1": 1},),
     "available_memory_proportion", {0: 0.5, 1: 1.0}),
    ("", "setExecutionStrategy", (MyStrategy,), "execution_strategy", MyStrategy),
    ("", "enableExecutableCaching", ("/tmp/cache",), "executable_cache_dir", "/tmp/cache"),
    ("", "enableExecutableCaching", (None,), "executable_cache_dir", None),
    ("", "showCompilationProgressBar", (False,), "show_compilation_progress_bar", False),
    ("", "disableModuleNamescope", (), "module_namescope", False),
    ("", "enableStableNorm", (True,), "stable_norm", True),
    ("", "enableSyntheticData", (True,), "synthetic_data", True),
    ("", "relaxOptimizerAttributesChecks", (), "relax_optimizer_attributes_checks", True),
    ("", "enableProfiling", (), "profile_dir", "."),
    ("", "enableProfiling", ("reports",), "profile_dir", "reports"),
    ("", "logDir", ("logs",), "log_dir", "logs"),
    ("", "modelName", ("resnet",), "model_name", "resnet"),
    ("", "logCycleCount", (True,), "log_cycle_count", True),
    ("", "maxRepeatLogs", (10,), "max_repeat_logs", 10),
    ("", "maxRepeatLogs", (None,), "max_repeat_logs", None),
    ("", "sourceLocationExcludes", (["a", "b"],), "source_location_excludes", ["a", "b"]),
    ("", "appendToLocationExcludes", ("x", "y"), "source_location_excludes",
     ["/torch/", "/poptorch/", "x", "y"]),
    ("", "dumpIR", ("ir",), "ir_dump_dir", "ir"),
    ("", "anchorTensor", ("g", "Gradient___w", OutputMode.EveryN, 2), "anchored_tensors",
     {"g": {"long_name": "Gradient___w", "output_mode": OutputMode.EveryN,
            "output_return_period": 2}}),
    ("", "anchorTensor", ("g", "w", None, 5), "anchored_tensors",
     {"g": {"long_name": "w", "output_mode": None, "output_return_period": 1}}),
    ("Training", "gradientAccumulation", (4,), "gradient_accumulation", 4),
    ("Training", "accumulationAndReplicationReductionType", (ReductionType.Sum,),
     "accumulation_and_replication_reduction_type", ReductionType.Sum),
    ("Training", "setMeanAccumulationAndReplicationReductionStrategy",
     (MeanReductionStrategy.Running,), "mean_reduction_strategy", MeanReductionStrategy.Running),
    ("Training", "setAutomaticLossScaling", (True,), "automatic_loss_scaling", True),
    ("Training", "setConvolutionDithering", (False,), "convolution_dithering", False),
    ("Precision", "setPartialsType", (torch.half,), "partials_type", torch.half),
    ("Precision", "enableStochasticRounding", (True,), "stochastic_rounding", True),
    ("Precision", "enableFloatingPointExceptions", (True,), "floating_point_exceptions", True),
    ("Precision", "halfFloatCasting", (HalfFloatCastingBehavior.HalfUpcastToFloat,),
     "half_float_casting", HalfFloatCastingBehavior.HalfUpcastToFloat),
    ("Precision", "runningStatisticsAlwaysFloat", (True,), "running_statistics_always_float", True),
    ("Jit", "traceModel", (False,), "trace_model", False),
    ("TensorLocations", "numIOTiles", (64,), "num_io_tiles", 64),
    ("Distributed", "configureProcessId", (1, 4), "process_id", 1),
    ("Distributed", "configureProcessId", (1, 4), "numProcesses", 4),
    ("Distributed", "disable", (), "num_processes", 1),
]


@pytest.mark.parametrize("category, method, args, attribute, expected", SETTERS,
                         ids=[f"{c}.{m}{a}" for c, m, a, _, _ in SETTERS])
def test_setter_stores_and_chains(category, method, args, attribute, expected):
    opts = Options()
    target = getattr(opts, category) if category else opts
    if args and args[0] is MyStrategy:
        args = (MyStrategy(),)
        expected = args[0]
    assert getattr(target, method)(*args) is target
    assert getattr(target, attribute) == expected


def test_input_replica_grouping():
    opts = Options().replicationFactor(8).inputReplicaGrouping(2, CommGroupType.Orthogonal)
    assert (opts.input_group_size, opts.input_group_type) == (2, CommGroupType.Orthogonal)
    assert opts.replicationFactor(4).replication_factor == 4  # still a multiple of 2


def test_tensor_locations_store_copies():
    opts = Options()
    settings = TensorLocationSettings().useOnChipStorage(False).minElementsForOffChip(128)
    locations = opts.TensorLocations
    for method, attribute in [("setWeightLocation", "weight_location"),
                              ("setActivationLocation", "activation_location"),
                              ("setOptimizerLocation", "optimizer_location"),
                              ("setAccumulatorLocation", "accumulator_location")]:
        assert getattr(locations, method)(settings) is locations
        assert getattr(locations, attribute).toDict() == settings.toDict()
    settings.useOnChipStorage(True)
    assert opts.TensorLocations.weight_location.on_chip is False


@pytest.mark.parametrize("method, args, attribute, expected", [
    ("useOnChipStorage", (), "on_chip", True),
    ("useOnChipStorage", (None,), "on_chip", None),
    ("useReplicatedTensorSharding", (), "use_replicated_tensor_sharding", True),
    ("minElementsForOffChip", (100,), "min_elements_for_off_chip", 100),
    ("minElementsForReplicatedTensorSharding", (7,),
     "min_elements_for_replicated_tensor_sharding", 7),
    ("useIOTilesToLoad", (False,), "use_io_tiles_to_load", False),
    ("useIOTilesToStore", (), "use_io_tiles_to_store", True),
])
def test_tensor_location_settings(method, args, attribute, expected):
    settings = TensorLocationSettings()
    assert getattr(settings, attribute) is None
    assert getattr(settings, method)(*args) is settings
    assert getattr(settings, attribute) == expected
    assert TensorLocationSettings(**{attribute: expected}).toDict()[attribute] == expected


def grouped(size, kind=CommGroupType.Consecutive):
    """(preparation, failing call) for inputReplicaGrouping with 4 replicas."""
    return lambda o: o.replicationFactor(4), lambda o: o.inputReplicaGrouping(size, kind)


ERRORS = [
    (lambda o: o.deviceIterations(0),
     "deviceIterations: device_iterations must be an int >= 1, got 0"),
    (lambda o: o.deviceIterations(2.0),
     "deviceIterations: device_iterations must be an int >= 1, got 2.0"),
    (lambda o: o.deviceIterations(True),
     "deviceIterations: device_iterations must be an int >= 1, got True"),
    (lambda o: o.replicationFactor("2"),
     "replicationFactor: replication_factor must be an int >= 1, got '2'"),
    (grouped(0), "inputReplicaGrouping: input_group_size must be an int >= 1, got 0"),
    (grouped(2, CommGroupType.All), "inputReplicaGrouping: input_group_type cannot be "
     "poptorch.CommGroupType.All; use Consecutive, Orthogonal or NoGrouping"),
    (grouped(2, 1), "inputReplicaGrouping: input_group_type must be a poptorch.CommGroupType "
     "(All, Consecutive, Orthogonal, NoGrouping), got 1"),
    (grouped(3), "inputReplicaGrouping: input_group_size (3) must be a factor of "
     "replicationFactor (4); call replicationFactor() first"),
    (lambda o: o.inputReplicaGrouping(2, CommGroupType.Consecutive),
     "inputReplicaGrouping: input_group_size (2) must be a factor of replicationFactor (1); "
     "call replicationFactor() first"),
    ((lambda o: o.replicationFactor(4).inputReplicaGrouping(2, CommGroupType.Consecutive),
      lambda o: o.replicationFactor(3)),
     "replicationFactor: replication_factor (3) must be a multiple of the input replica group "
     "size (2); change the group size with inputReplicaGrouping() first"),
    (lambda o: o.broadcastBuffers(1), "broadcastBuffers: broadcast_buffers must be True or False, "
     "got 1"),
    (lambda o: o.outputMode(3), "outputMode: output_mode must be a poptorch.OutputMode (All, Sum, "
     "Final, EveryN, Default), got 3"),
    (lambda o: o.outputMode(OutputMode.EveryN), "outputMode: output_return_period (needed by "
     "OutputMode.EveryN) must be an int >= 1, got None"),
    (lambda o: o.outputMode(OutputMode.EveryN, 0), "outputMode: output_return_period (needed by "
     "OutputMode.EveryN) must be an int >= 1, got 0"),
    (lambda o: o.anchorTensor(1, "w"), "anchorTensor: short_name must be a str, got 1"),
    (lambda o: o.anchorTensor("g", "w", "All"), "anchorTensor: output_mode must be a "
     "poptorch.OutputMode (All, Sum, Final, EveryN, Default), got 'All'"),
    (lambda o: o.anchorTensor("g", "w", OutputMode.EveryN, 0),
     "anchorTensor: output_return_period must be an int >= 1, got 0"),
    (lambda o: o.randomSeed(-1), "randomSeed: random_seed must be an int >= 0, got -1"),
    (lambda o: o.randomSeed(2**64),
     "randomSeed: random_seed must be an int <= 18446744073709551615, got 18446744073709551616"),
    (lambda o: o.deviceIterations(2**63),
     "deviceIterations: device_iterations must be an int <= 9223372036854775807, got "
     "9223372036854775808"),
    (lambda o: o.replicationFactor(16**2000),
     "replicationFactor: replication_factor must be an int <= 9223372036854775807, got an int "
     "of 8001 bits"),
    (lambda o: o.TensorLocations.numIOTiles(-(16**2000)),
     "numIOTiles: num_tiles must be an even number between 32 and 192, got an int of 8001 bits"),
    (lambda o: o.setAvailableMemoryProportion({"IPU0": [16**4000]}),
     "setAvailableMemoryProportion: the proportion for IPU0 must be a number between 0 and 1, "
     "got a list too large to print"),
    (lambda o: o.setAvailableMemoryProportion({"IPU\u00b2": 0.5}),
     "setAvailableMemoryProportion: keys must be \"IPU<n>\" such as \"IPU0\", got 'IPU\u00b2'"),
    (lambda o: o.useIpuModel("yes"), "useIpuModel: use_model must be True or False, got 'yes'"),
    (lambda o: o.useIpuId(-1), "useIpuId: ipu_id must be an int >= 0, got -1"),
    (lambda o: o.useOfflineIpuTarget(3),
     "useOfflineIpuTarget: ipu_version must be 1, 2 or 21, got 3"),
    ((lambda o: o.useIpuModel(True), lambda o: o.useOfflineIpuTarget()),
     "useOfflineIpuTarget: an offline IPU target cannot use the IPU Model; call "
     "useIpuModel(False) or unset POPTORCH_IPU_MODEL"),
    ((lambda o: o.useOfflineIpuTarget(), lambda o: o.useIpuModel(True)),
     "useIpuModel: the IPU Model cannot be used with an offline IPU target; do not call "
     "useOfflineIpuTarget()"),
    (lambda o: o.connectionType("Always"), "connectionType: connection_type must be a "
     "poptorch.ConnectionType (Always, OnDemand, Never), got 'Always'"),
    (lambda o: o.syncPattern(0), "syncPattern: sync_pattern must be a poptorch.SyncPattern (Full, "
     "SinglePipeline, ReplicaAndLadder), got 0"),
    (lambda o: o.autoRoundNumIPUs(None),
     "autoRoundNumIPUs: auto_round_num_ipus must be True or False, got None"),
    (lambda o: o.setAvailableMemoryProportion([("IPU0", 0.5)]), "setAvailableMemoryProportion: "
     "expected a dict such as {\"IPU0\": 0.5}, got [('IPU0', 0.5)]"),
    (lambda o: o.setAvailableMemoryProportion({"ipu0": 0.5}), "setAvailableMemoryProportion: "
     "keys must be \"IPU<n>\" such as \"IPU0\", got 'ipu0'"),
    (lambda o: o.setAvailableMemoryProportion({"IPU1": 1.5}), "setAvailableMemoryProportion: "
     "the proportion for IPU1 must be a number between 0 and 1, got 1.5"),
    (lambda o: o.setExecutionStrategy("pipelined"), "setExecutionStrategy: strategy must be an "
     "instance of poptorch.PipelinedExecution, poptorch.ShardedExecution, "
     "poptorch.SerialPhasedExecution, poptorch.ParallelPhasedExecution, got 'pipelined'"),
    (lambda o: o.maxRepeatLogs(0), "maxRepeatLogs: max_lines must be an int >= 1, got 0"),
    (lambda o: o.sourceLocationExcludes("torch"),
     "sourceLocationExcludes: excludes must be a list of str, got 'torch'"),
    (lambda o: o.sourceLocationExcludes([1]),
     "sourceLocationExcludes: excludes must be a str, got 1"),
    (lambda o: o.appendToLocationExcludes(None),
     "appendToLocationExcludes: excludes must be a str, got None"),
    (lambda o: o.loadFromFile(None), "loadFromFile: filepath must be a str, got None"),
    (lambda o: o.Training.gradientAccumulation(0),
     "gradientAccumulation: gradient_accumulation must be an int >= 1, got 0"),
    (lambda o: o.Training.accumulationAndReplicationReductionType(ReductionType.NoReduction),
     "accumulationAndReplicationReductionType: reduction_type must be "
     "poptorch.ReductionType.Mean or poptorch.ReductionType.Sum, got ReductionType.NoReduction"),
    (lambda o: o.Training.accumulationAndReplicationReductionType("Mean"),
     "accumulationAndReplicationReductionType: reduction_type must be a poptorch.ReductionType "
     "(Sum, Mean, NoReduction), got 'Mean'"),
    (lambda o: o.Training.setMeanAccumulationAndReplicationReductionStrategy(ReductionType.Mean),
     "setMeanAccumulationAndReplicationReductionStrategy: mean_reduction_strategy must be a "
     "poptorch.MeanReductionStrategy (Running, Post, PostAndLoss), got <ReductionType.Mean: 1>"),
    (lambda o: o.Precision.setPartialsType(torch.int32),
     "setPartialsType: dtype must be torch.float or torch.half, got torch.int32"),
    (lambda o: o.Precision.halfFloatCasting(0), "halfFloatCasting: half_float_casting must be a "
     "poptorch.HalfFloatCastingBehavior (FloatDowncastToHalf, HalfUpcastToFloat, Default), "
     "got 0"),
    (lambda o: o.TensorLocations.numIOTiles(16),
     "numIOTiles: num_tiles must be an even number between 32 and 192, got 16"),
    (lambda o: o.TensorLocations.numIOTiles(33),
     "numIOTiles: num_tiles must be an even number between 32 and 192, got 33"),
    (lambda o: o.TensorLocations.numIOTiles(194),
     "numIOTiles: num_tiles must be an even number between 32 and 192, got 194"),
    (lambda o: o.TensorLocations.setWeightLocation({"on_chip": False}),
     "setWeightLocation: location must be a poptorch.TensorLocationSettings, got "
     "{'on_chip': False}"),
    (lambda o: o.TensorLocations.setAccumulatorLocation(None),
     "setAccumulatorLocation: location must be a poptorch.TensorLocationSettings, got None"),
    (lambda o: o.Distributed.configureProcessId(2, 2),
     "configureProcessId: process_id must be < num_processes (2), got 2"),
    (lambda o: o.Distributed.configureProcessId(0, 0),
     "configureProcessId: num_processes must be an int >= 1, got 0"),
    (lambda o: o.Distributed.configureProcessId(-1, 2),
     "configureProcessId: process_id must be an int >= 0, got -1"),
    (lambda o: o.Distributed.setEnvVarNames(None, "RANK"),
     "setEnvVarNames: variable names must be a str, got None"),
    (lambda o: TensorLocationSettings().minElementsForOffChip(-1),
     "minElementsForOffChip: min_elements must be an int >= 0, got -1"),
    (lambda o: TensorLocationSettings().minElementsForReplicatedTensorSharding("8"),
     "minElementsForReplicatedTensorSharding: min_elements must be an int >= 0, got '8'"),
    (lambda o: TensorLocationSettings(on_chip=1),
     "TensorLocationSettings: on_chip must be True or False, got 1"),
    (lambda o: TensorLocationSettings(onChip=True), "TensorLocationSettings has no setting "
     "'onChip'; known settings: on_chip, use_replicated_tensor_sharding, "
     "min_elements_for_off_chip, min_elements_for_replicated_tensor_sharding, "
     "use_io_tiles_to_load, use_io_tiles_to_store"),
]


@pytest.mark.parametrize("call, message", ERRORS, ids=[m.split(":")[0] for _, m in ERRORS])
def test_validation_errors(call, message):
    """`call` is the failing call, or a (preparation, failing call) pair."""
    opts = Options()
    if isinstance(call, tuple):
        call[0](opts)
        call = call[1]
    before = opts.toDict()
    with pytest.raises(Error) as info:
        call(opts)
    assert str(info.value) == message
    assert info.value.type == "options"
    assert opts.toDict() == before  # the failing call changed nothing


TYPED_PARAMETERS = [
    # (target, method, parameter, bad value, expected type), target "" being the options
    ("", "showCompilationProgressBar", "show", "no", "True or False"),
    ("", "enableStableNorm", "enabled", 1, "True or False"),
    ("", "enableSyntheticData", "enabled", 1, "True or False"),
    ("", "relaxOptimizerAttributesChecks", "relax", 1, "True or False"),
    ("", "logCycleCount", "log_cycle_count", 1, "True or False"),
    ("Training", "setAutomaticLossScaling", "enabled", None, "True or False"),
    ("Training", "setConvolutionDithering", "enabled", 0, "True or False"),
    ("Precision", "enableStochasticRounding", "enabled", 1, "True or False"),
    ("Precision", "enableFloatingPointExceptions", "enabled", 1, "True or False"),
    ("Precision", "runningStatisticsAlwaysFloat", "value", 1, "True or False"),
    ("Jit", "traceModel", "trace_model", 0, "True or False"),
    ("settings", "useOnChipStorage", "use", 1, "True or False"),
    ("settings", "useReplicatedTensorSharding", "use", None, "True or False"),
    ("settings", "useIOTilesToLoad", "use", 1, "True or False"),
    ("settings", "useIOTilesToStore", "use", 1, "True or False"),
    ("", "enableExecutableCaching", "path", 1, "a str"),
    ("", "enableProfiling", "profile_dir", 1, "a str"),
    ("", "logDir", "log_dir", None, "a str"),
    ("", "modelName", "name", 3, "a str"),
    ("", "dumpIR", "directory", 1, "a str"),
]


@pytest.mark.parametrize("target, method, parameter, value, expected", TYPED_PARAMETERS,
                         ids=[row[1] for row in TYPED_PARAMETERS])
def test_setters_check_argument_types(target, method, parameter, value, expected):
    opts = Options()
    if target:
        target = TensorLocationSettings() if target == "settings" else getattr(opts, target)
    else:
        target = opts
    before = target.toDict()
    with pytest.raises(Error) as info:
        getattr(target, method)(value)
    assert str(info.value) == f"{method}: {parameter} must be {expected}, got {value!r}"
    assert target.toDict() == before


def configured() -> Options:
    opts = Options().deviceIterations(2).replicationFactor(4).anchorTensor("g", "w")
    opts.Training.gradientAccumulation(3)
    opts.TensorLocations.setWeightLocation(TensorLocationSettings().useOnChipStorage(False))
    return opts


def test_clone_is_independent():
    opts = configured()
    copy = opts.clone()
    assert copy.toDict() == opts.toDict() and copy is not opts
    copy.deviceIterations(7).anchorTensor("h", "v").appendToLocationExcludes("x")
    copy.Training.gradientAccumulation(9)
    copy.TensorLocations.weight_location.useOnChipStorage(True)
    copy.Distributed.configureProcessId(1, 2)
    assert opts.device_iterations == 2 and list(opts.anchored_tensors) == ["g"]
    assert opts.source_location_excludes == ["/torch/", "/poptorch/"]
    assert opts.Training.gradient_accumulation == 3
    assert opts.TensorLocations.weight_location.on_chip is False
    assert opts.Distributed.numProcesses == 1


def test_mean_reduction_strategy_under_poptorchs_attribute_name():
    # PopTorch names the option Training.meanAccumulationAndReplicationReductionStrategy
    # (set by setMeanAccumulationAndReplicationReductionStrategy, spec 11.1): reading and
    # assigning it works on our mean_reduction_strategy, with the same checks
    training = Options().Training
    assert training.meanAccumulationAndReplicationReductionStrategy is None  # by optimizer
    training.setMeanAccumulationAndReplicationReductionStrategy(MeanReductionStrategy.Running)
    assert training.meanAccumulationAndReplicationReductionStrategy == \
        MeanReductionStrategy.Running
    training.meanAccumulationAndReplicationReductionStrategy = MeanReductionStrategy.Post
    assert training.mean_reduction_strategy == MeanReductionStrategy.Post
    assert training.toDict()["mean_reduction_strategy"] == MeanReductionStrategy.Post
    assert "meanAccumulationAndReplicationReductionStrategy" not in training.toDict()
    with pytest.raises(Error, match="^setMeanAccumulationAndReplicationReductionStrategy: "
                                    "mean_reduction_strategy must be a poptorch"):
        training.meanAccumulationAndReplicationReductionStrategy = "Running"
    frozen = Options()
    frozen._freeze()
    with pytest.raises(Error, match="^cannot change option Training.meanAccumulationAnd"
                                    "ReplicationReductionStrategy: these options are frozen"):
        frozen.Training.meanAccumulationAndReplicationReductionStrategy = \
            MeanReductionStrategy.Post
