"""Options as data: the JSON document of executable files (options_to_json and
options_from_json), run-time and compile-time options (spec 4.10.2)."""

import json

import pytest
import torch

from poptorch.enums import (
    AutoStage,
    CommGroupType,
    ConnectionType,
    HalfFloatCastingBehavior,
    Liveness,
    MeanReductionStrategy,
    OutputMode,
    PipelineSchedule,
    ReductionType,
    SyncPattern,
)
from poptorch.errors import Error
from poptorch.options import Options, TensorLocationSettings
from poptorch.options.schema import METHODS
from poptorch.options.serialise import (
    RUN_TIME_OPTIONS,
    apply_run_time,
    compile_time_differences,
    options_from_json,
    options_to_json,
)
from poptorch.options.strategies import (
    ParallelPhasedExecution,
    Phase,
    PipelinedExecution,
    SerialPhasedExecution,
    ShardedExecution,
    Stage,
)

Settings = TensorLocationSettings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in ("POPTORCH_IPU_MODEL", "POPTORCH_CACHE_DIR", "POPTORCH_DUMP_IR",
                "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)


def phased(cls):
    strategy = cls(Phase(Stage("a").ipu(0), Stage("b")), Phase("c", "d"), Phase(Stage("e")))
    strategy.phase(0).ipus(2, 3)
    strategy.phase(0).stages[0].ipu(5)  # after the phase's IPUs: the stage's own wins
    return strategy.setTensorsLiveness(Liveness.OffChipAfterEachPhase).useSeparateBackwardPhase()


STRATEGIES = {
    "pipelined": lambda: PipelinedExecution(Stage("a", "b").ipu(1), Stage("c")).setSchedule(
        PipelineSchedule.OneForwardOneBackward).useRecomputation(),
    "pipelined-auto": lambda: PipelinedExecution(AutoStage.AutoIncrement),
    "sharded": lambda: ShardedExecution("a", Stage("b").ipu(0)),
    "serial-phased": lambda: phased(SerialPhasedExecution),
    "parallel-phased": lambda: phased(ParallelPhasedExecution),
}


def every_option_changed(strategy=None) -> Options:
    """Options with every option but use_ipu_model (exclusive with an offline target)
    changed from its default."""
    opts = Options().deviceIterations(3).replicationFactor(4)
    opts.inputReplicaGrouping(2, CommGroupType.Orthogonal).outputMode(OutputMode.EveryN, 2)
    opts.anchorTensor("g", "Gradient___w", OutputMode.All).anchorTensor("h", "w")
    opts.randomSeed(2**64 - 1).broadcastBuffers(False).useIpuId(5).useOfflineIpuTarget(21)
    opts.connectionType(ConnectionType.OnDemand).syncPattern(SyncPattern.Full)
    opts.autoRoundNumIPUs().setExecutionStrategy(strategy or STRATEGIES["pipelined"]())
    opts.setAvailableMemoryProportion({"IPU0": 0.5, "IPU3": 1}).enableExecutableCaching("c")
    opts.enableProfiling("p").logDir("l").modelName("m").logCycleCount(True)
    opts.showCompilationProgressBar(False).maxRepeatLogs(None).sourceLocationExcludes(["x"])
    opts.disableModuleNamescope().relaxOptimizerAttributesChecks().enableStableNorm(True)
    opts.enableSyntheticData(True).dumpIR("ir").updatableNamedBuffers(["inner.b"])
    opts.Training.gradientAccumulation(4).accumulationAndReplicationReductionType(
        ReductionType.Sum).setMeanAccumulationAndReplicationReductionStrategy(
        MeanReductionStrategy.Post).setAutomaticLossScaling(True).setConvolutionDithering(False)
    opts.Precision.setPartialsType(torch.half).enableStochasticRounding(True)
    opts.Precision.enableFloatingPointExceptions(True).runningStatisticsAlwaysFloat(True)
    opts.Precision.halfFloatCasting(HalfFloatCastingBehavior.HalfUpcastToFloat)
    locations = opts.TensorLocations.numIOTiles(64)
    locations.setWeightLocation(Settings().useOnChipStorage(False).minElementsForOffChip(10))
    locations.setActivationLocation(Settings(on_chip=True, use_io_tiles_to_load=True))
    locations.setOptimizerLocation(
        Settings().useReplicatedTensorSharding().minElementsForReplicatedTensorSharding(3))
    locations.setAccumulatorLocation(Settings().useIOTilesToStore(False))
    opts.Distributed.configureProcessId(1, 2)
    opts.Jit.traceModel(False)
    opts._Popart.set("autoRecomputation", 4)
    return opts


def flat(document):
    """{dotted option name: encoded value} of a document."""
    values = document["values"]
    result = {k: v for k, v in values.items() if not k[0].isupper() and k != "_Popart"}
    for category in ("Training", "Precision", "TensorLocations", "Distributed", "Jit",
                     "_Popart"):
        result.update({f"{category}.{k}": v for k, v in values[category].items()})
    return result


def round_trip(opts):
    document = options_to_json(opts)
    text = json.dumps(document)
    loaded = options_from_json(json.loads(text))
    assert json.dumps(options_to_json(loaded)) == text  # exact, True is not 1, 1 is not 1.0
    return loaded


def test_round_trip_of_default_options():
    loaded = round_trip(Options())
    assert loaded.toDict() == Options().toDict()
    assert round_trip(Options().useIpuModel(True)).use_ipu_model is True


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_round_trip_with_every_option_changed(strategy):
    opts = every_option_changed(STRATEGIES[strategy]())
    changed = {name for name, value in flat(options_to_json(opts)).items()
               if value != flat(options_to_json(Options()))[name]}
    # options whose only accepted value is their default (the others are refused)
    only_default = {"sync_pattern", "Training.convolution_dithering", "Jit.trace_model"}
    assert changed == set(flat(options_to_json(Options()))) - {"use_ipu_model", *only_default}
    loaded = round_trip(opts)
    expected, actual = opts.toDict(), loaded.toDict()
    assert expected.pop("execution_strategy") is not actual.pop("execution_strategy")
    assert actual == expected
    assert (loaded.execution_strategy.pass_pipeline(4, True)
            == opts.execution_strategy.pass_pipeline(4, True))


def test_every_option_has_a_method_and_run_time_options_exist():
    opts = Options()
    for prefix, methods in METHODS.items():
        group = opts if not prefix else getattr(opts, prefix[:-1])
        assert set(methods) == set(group._values())
        assert all(callable(getattr(group, method)) for method in methods.values())
    names = set(flat(options_to_json(opts)))
    assert RUN_TIME_OPTIONS <= names and len(RUN_TIME_OPTIONS) == 13


def test_unstorable_values_are_refused():
    class MyStrategy(PipelinedExecution):
        pass

    opts = Options().setExecutionStrategy(MyStrategy())
    with pytest.raises(Error) as info:
        options_to_json(opts)
    assert str(info.value).startswith("options_to_json: option execution_strategy holds <")
    assert str(info.value).endswith(
        "which cannot be stored: only numbers, str, None, lists, tuples, dicts, poptorch "
        "enums, torch dtypes, TensorLocationSettings and poptorch.PipelinedExecution, "
        "poptorch.ShardedExecution, poptorch.SerialPhasedExecution, "
        "poptorch.ParallelPhasedExecution")
    opts = Options()
    opts.Training.gradient_accumulation = 2**70
    with pytest.raises(Error) as info:
        options_to_json(opts)
    assert str(info.value) == ("options_to_json: option Training.gradient_accumulation holds "
                               "1180591620717411303424, more than an option's 64 bits")


def deep(levels):
    value = 1
    for _ in range(levels):
        value = [value]
    return value


def values(document):
    return document["values"]


def strategy_of(document):
    return document["values"]["execution_strategy"]["strategy"]


def weight_settings(document):
    return document["values"]["TensorLocations"]["weight_location"]["tensor_location"]


HOLDS = "with the other options of this document"
REFUSALS = [
    # (change of a valid document, or a replacement document; message)
    (lambda d: [], "options document must be a JSON object, got []"),
    (lambda d: d.update(extra=1), "options document: unknown entry 'extra'"),
    (lambda d: d.__delitem__("values"), "options document: missing entry 'values'"),
    (lambda d: {**d, 1: 2}, "options document: unknown entry 1"),
    (lambda d: d.update(format="x"), "options document: format must be 'poptorch.Options', "
                                     "got 'x'"),
    (lambda d: d.update(version=2), "options document: version 2 is not 1, the version this "
                                    "poptorch-mlir reads"),
    (lambda d: d.update(version=True), "options document: version True is not 1, the version "
                                       "this poptorch-mlir reads"),
    (lambda d: d.update(version=16**2000), "options document: version an int of 8001 bits is "
                                           "not 1, the version this poptorch-mlir reads"),
    (lambda d: values(d).update(foo=1), "options: unknown option 'foo'"),
    (lambda d: values(d).__delitem__("device_iterations"),
     "options: missing option 'device_iterations'"),
    (lambda d: values(d)["Training"].update(x=1), "options Training: unknown option 'x'"),
    (lambda d: values(d).update(Training=[]), "options Training must be a JSON object, got []"),
    (lambda d: values(d).update(device_iterations=0), "option device_iterations: "
     "deviceIterations: device_iterations must be an int >= 1, got 0"),
    (lambda d: values(d).update(device_iterations="4"), "option device_iterations: "
     "deviceIterations: device_iterations must be an int >= 1, got '4'"),
    (lambda d: values(d).update(device_iterations=4.0), "option device_iterations: "
     "deviceIterations: device_iterations must be an int >= 1, got 4.0"),
    (lambda d: values(d).update(device_iterations=True), "option device_iterations: "
     "deviceIterations: device_iterations must be an int >= 1, got True"),
    (lambda d: values(d).update(device_iterations=2**70), "option device_iterations: "
     "1180591620717411303424 is out of range (an option's ints have at most 64 bits)"),
    (lambda d: values(d).update(output_mode={"enum": "OutputMode.Nope"}),
     "option output_mode: 'OutputMode.Nope' is not a poptorch enum value"),
    (lambda d: values(d).update(output_mode={"enum": "os.system"}),
     "option output_mode: 'os.system' is not a poptorch enum value"),
    (lambda d: values(d).update(output_mode={"enum": "ReductionType.Sum"}),
     "option output_mode: outputMode: output_mode must be a poptorch.OutputMode (All, Sum, "
     "Final, EveryN, Default), got <ReductionType.Sum: 0>"),
    (lambda d: values(d).update(output_mode={"enum": "OutputMode.All"}, output_return_period=5),
     "option output_return_period: the "
     f"document holds 5, but outputMode() sets 1 {HOLDS}"),
    (lambda d: values(d)["Precision"].update(partials_type={"dtype": "os"}),
     "option Precision.partials_type: 'os' is not a torch dtype"),
    (lambda d: values(d)["Precision"].update(partials_type={"dtype": "int32"}),
     "option Precision.partials_type: setPartialsType: dtype must be torch.float or "
     "torch.half, got torch.int32"),
    (lambda d: values(d).update(random_seed={"pickle": "cos\nsystem\n"}), "option random_seed: "
     "{'pickle': 'cos\\nsystem\\n'} is not an option value options_to_json writes"),
    (lambda d: values(d).update(random_seed={"enum": "OutputMode.All", "x": 1}),
     "option random_seed: {'enum': 'OutputMode.All', 'x': 1} is not an option value "
     "options_to_json writes"),
    (lambda d: values(d).update(source_location_excludes=deep(20)),
     "option source_location_excludes: the value is nested more than 16 levels deep"),
    (lambda d: values(d).update(source_location_excludes=deep(100000)),
     "option source_location_excludes: the value is nested more than 16 levels deep"),
    (lambda d: values(d).update(anchored_tensors={"dict": [["g", 1]]}),
     "option anchored_tensors: anchorTensor: anchor 'g' must be a dict of anchorTensor's "
     "arguments, got 1"),
    (lambda d: values(d).update(anchored_tensors={"dict": [["g", {"dict": [
        ["long_name", "w"], ["evil", 1]]}]]}), "option anchored_tensors: anchorTensor: "
     "Options.anchorTensor() got an unexpected keyword argument 'evil'"),
    (lambda d: values(d).update(available_memory_proportion={"dict": [[1]]}),
     "option available_memory_proportion: a dict entry must be a [key, value] pair, got [1]"),
    (lambda d: values(d).update(available_memory_proportion={"dict": [[[1], 0.5]]}),
     "option available_memory_proportion: a dict key must be a str or an int, got [1]"),
    (lambda d: values(d).update(available_memory_proportion={"dict": [[0, 1.5]]}),
     "option available_memory_proportion: setAvailableMemoryProportion: the proportion for IPU0 "
     "must be a number between 0 and 1, got 1.5"),
    (lambda d: values(d).update(available_memory_proportion={"dict": [["0", 0.5]]}),
     "option available_memory_proportion.dict[0][0]: the document holds '0', but "
     f"setAvailableMemoryProportion() sets 0 {HOLDS}"),
    (lambda d: values(d).update(available_memory_proportion=[0.5]),
     "option available_memory_proportion: setAvailableMemoryProportion: expected a dict such "
     "as {\"IPU0\": 0.5}, got [0.5]"),
    (lambda d: values(d).update(execution_strategy={"strategy": {"type": "os.system"}}),
     "option execution_strategy: the strategy's type must be one of PipelinedExecution, "
     "ShardedExecution, SerialPhasedExecution, ParallelPhasedExecution, got 'os.system'"),
    (lambda d: strategy_of(d).__delitem__("recompute"),
     "option execution_strategy: PipelinedExecution: missing field 'recompute'"),
    (lambda d: strategy_of(d)["stages"][0].update(blocks=[]),
     "option execution_strategy: Stage needs at least one block id"),
    (lambda d: strategy_of(d)["stages"][0].update(ipu=-1),
     "option execution_strategy: Stage.ipu: ipu must be an int >= 0, got -1"),
    (lambda d: strategy_of(d)["stages"][0].update(ipu=70000),
     "option execution_strategy: Stage.ipu: ipu must be an int <= 65535, got 70000"),
    (lambda d: strategy_of(d)["stages"][0].update(ipu=2**63 - 1),
     "option execution_strategy: Stage.ipu: ipu must be an int <= 65535, got "
     "9223372036854775807"),
    (lambda d: strategy_of(d)["stages"][0].update(blocks=[1]), "option execution_strategy"
     f".strategy.stages[0].blocks[0]: the document holds 1, but setExecutionStrategy() sets "
     f"'1' {HOLDS}"),
    (lambda d: strategy_of(d).update(auto_stage={"enum": "AutoStage.AutoIncrement"}),
     "option execution_strategy.strategy.auto_stage.enum: the document holds "
     f"'AutoStage.AutoIncrement', but setExecutionStrategy() sets 'AutoStage.SameAsIpu' {HOLDS}"),
    (lambda d: strategy_of(d).update(stages={}),
     "option execution_strategy: stages must be a JSON array, got {}"),
    (lambda d: weight_settings(d).update(on_chip=1), "option TensorLocations.weight_location: "
     "TensorLocationSettings: on_chip must be True or False, got 1"),
    (lambda d: weight_settings(d).update(evil=1), "option TensorLocations.weight_location: "
     "tensor location settings: unknown setting 'evil'"),
    (lambda d: values(d).update(updatable_named_buffers="inner.b"),
     "option updatable_named_buffers: updatableNamedBuffers: buffers must be a list of buffer "
     "names (str), got 'inner.b'"),
    (lambda d: values(d).update(updatable_named_buffers=[1]),
     "option updatable_named_buffers: updatableNamedBuffers: buffers must be a list of buffer "
     "names (str), got [1]"),
    (lambda d: values(d).update(module_namescope=0), "option module_namescope: the document "
     f"holds 0, but disableModuleNamescope() sets False {HOLDS}"),
    (lambda d: values(d).update(use_ipu_model=True), "option offline_ipu_version: "
     "useOfflineIpuTarget: an offline IPU target cannot use the IPU Model; call "
     "useIpuModel(False) or unset POPTORCH_IPU_MODEL"),
]


@pytest.mark.parametrize("change, message", REFUSALS, ids=range(len(REFUSALS)))
def test_options_from_json_refusals(change, message):
    document = options_to_json(every_option_changed())
    changed = change(document)
    document = document if changed is None else changed
    with pytest.raises(Error) as info:
        options_from_json(document)
    assert (str(info.value), info.value.type, info.value.location) == (message, "options", "")


def test_run_time_options_apply_to_frozen_options():
    source = every_option_changed().useIpuId(7).logDir("new")
    target = Options().deviceIterations(2)
    target._freeze(compile_time_only=True)
    apply_run_time(target, source)
    for name in RUN_TIME_OPTIONS:
        assert getattr(target, name) == getattr(source, name)
    assert target.device_iterations == 2 and target.Training.gradient_accumulation == 1
    target.log_dir = "changed"
    assert source.log_dir == "new"


def test_updatable_named_buffers_round_trip_as_a_run_time_option():
    """Issue 22: updatableNamedBuffers was kept out of the options' values, so the JSON
    document (and so executable files) and toDict() lost it."""
    opts = Options().updatableNamedBuffers(("inner.b", "norm.running_mean"))
    document = options_to_json(opts)
    assert document["values"]["updatable_named_buffers"] == ["inner.b", "norm.running_mean"]
    assert options_to_json(Options())["values"]["updatable_named_buffers"] is None
    loaded = round_trip(opts)
    assert loaded.updatable_named_buffers == ["inner.b", "norm.running_mean"]
    assert loaded.toDict() == opts.toDict()
    assert opts.toDict()["updatable_named_buffers"] == ["inner.b", "norm.running_mean"]
    assert round_trip(Options().updatableNamedBuffers([])).updatable_named_buffers == []
    assert "updatable_named_buffers" in RUN_TIME_OPTIONS
    assert compile_time_differences(Options(), opts) == []
    frozen = Options()
    frozen._freeze(compile_time_only=True)  # a compiled model's options: still settable
    assert frozen.updatableNamedBuffers(["b"]).updatable_named_buffers == ["b"]


def test_compile_time_differences():
    a = Options()
    assert compile_time_differences(a, Options().useIpuId(3).logDir("x")) == []
    b = Options().deviceIterations(2).outputMode(OutputMode.EveryN, 2).enableProfiling("p")
    b.Training.gradientAccumulation(2)
    b.TensorLocations.setWeightLocation(Settings())
    b.Distributed.configureProcessId(0, 2)
    assert compile_time_differences(a, b) == [
        "deviceIterations", "outputMode", "Training.gradientAccumulation",
        "TensorLocations.setWeightLocation", "Distributed.configureProcessId"]
    assert compile_time_differences(b, b.clone()) == []
    strategy = every_option_changed()
    assert compile_time_differences(strategy, round_trip(strategy)) == []

    class MyStrategy(PipelinedExecution):
        pass

    mine = Options().setExecutionStrategy(MyStrategy())
    assert compile_time_differences(mine, mine) == []
    assert compile_time_differences(mine, Options().setExecutionStrategy(MyStrategy())) == [
        "setExecutionStrategy"]
