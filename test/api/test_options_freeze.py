"""Freezing of poptorch.Options (by a DataLoader: every option; by a compiled model: the
compile-time options), toDict, repr and str."""

import pytest
import torch
from test_options_json import every_option_changed, flat

import poptorch
from poptorch.enums import ConnectionType, OutputMode
from poptorch.errors import Error
from poptorch.options import Options
from poptorch.options import TensorLocationSettings as Settings
from poptorch.options.serialise import options_to_json
from poptorch.options.strategies import ShardedExecution


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in ("POPTORCH_IPU_MODEL", "POPTORCH_CACHE_DIR", "POPTORCH_DUMP_IR",
                "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(var, raising=False)


def configured() -> Options:
    opts = Options().deviceIterations(2).replicationFactor(4).anchorTensor("g", "w")
    opts.Training.gradientAccumulation(3)
    opts.TensorLocations.setWeightLocation(Settings().useOnChipStorage(False))
    return opts


def test_options_frozen_by_a_dataloader_refuse_every_change_but_clone_does_not():
    opts = configured()
    opts._freeze()
    message = ("cannot change option {}: these options are frozen because a DataLoader uses "
               "them; change a copy made with options.clone() instead")
    for call, name in [(lambda: opts.deviceIterations(3), "device_iterations"),
                       (lambda: opts.anchorTensor("h", "v"), "anchored_tensors"),
                       (lambda: opts.logDir("x"), "log_dir"),
                       (lambda: opts.Training.gradientAccumulation(2),
                        "Training.gradient_accumulation"),
                       (lambda: opts.Jit.traceModel(False), "Jit.trace_model"),
                       (lambda: opts.TensorLocations.weight_location.useOnChipStorage(True),
                        "TensorLocations.weight_location.on_chip"),
                       (lambda: setattr(opts, "random_seed", 1), "random_seed")]:
        with pytest.raises(Error) as info:
            call()
        assert str(info.value) == message.format(name)
    copy = opts.clone().deviceIterations(3)
    copy.Training.gradientAccumulation(2)
    copy.TensorLocations.weight_location.useOnChipStorage(True)
    assert (copy.device_iterations, opts.device_iterations) == (3, 2)
    other = Options().TensorLocations.setWeightLocation(opts.TensorLocations.weight_location)
    assert other.weight_location.useOnChipStorage(True).on_chip is True  # an unfrozen copy


MODEL_FROZEN = ("cannot change option {}: these options are frozen because a model was "
                "wrapped with them (poptorch.inferenceModel or trainingModel); change a copy "
                "made with options.clone() instead")


def test_for_model_freezes_the_users_options_and_resolves_the_output_mode():
    opts = configured()
    training = Options._for_model(opts, training=True)
    with pytest.raises(Error) as info:
        opts.deviceIterations(3)
    assert (str(info.value), info.value.type) == (MODEL_FROZEN.format("device_iterations"),
                                                  "options")
    with pytest.raises(Error, match="^cannot change option log_dir: these options are frozen "
                                    "because a model was wrapped"):
        opts.logDir("x")  # PopTorch freezes every option, run-time ones too
    assert opts.output_mode == OutputMode.Default  # the user's options are not changed
    assert (training.output_mode, training.device_iterations) == (OutputMode.Final, 2)
    inference_opts = opts.clone()
    inference_opts.Training.gradientAccumulation(1)  # inference refuses accumulation
    assert Options._for_model(inference_opts, training=False).output_mode == OutputMode.All
    assert Options._for_model(None, training=False).output_mode == OutputMode.All
    chosen = Options._for_model(Options().outputMode(OutputMode.Sum), training=True)
    assert chosen.output_mode == OutputMode.Sum  # only Default is resolved
    assert training.deviceIterations(4).device_iterations == 4  # a copy, not frozen yet
    with pytest.raises(Error, match="^options must be a poptorch.Options, got 4$"):
        Options._for_model(4, training=True)
    loader_opts = Options()
    loader_opts._freeze()  # by a DataLoader first: the message says so
    Options._for_model(loader_opts, training=True)
    with pytest.raises(Error, match="frozen because a DataLoader uses them"):
        loader_opts.deviceIterations(3)


def test_wrapping_a_model_freezes_the_options():
    # PopTorch freezes the options given to inferenceModel / trainingModel: changing them
    # afterwards is an error (PopTorch: "Can't modify frozen Options"); the model works on
    # a copy of them
    opts = poptorch.Options()
    model = poptorch.inferenceModel(torch.nn.Linear(4, 3), opts)
    with pytest.raises(Error) as info:
        opts.deviceIterations(2)
    assert str(info.value) == MODEL_FROZEN.format("device_iterations")
    assert model.options is not opts
    other = poptorch.Options()
    poptorch.trainingModel(torch.nn.Sequential(torch.nn.Linear(4, 3)), other)
    with pytest.raises(Error, match="^cannot change option Training.gradient_accumulation: "
                                    "these options are frozen because a model was wrapped"):
        other.Training.gradientAccumulation(2)
    poptorch.inferenceModel(torch.nn.Linear(4, 3), opts)  # frozen options can be reused


def test_wrapped_models_read_back_the_resolved_output_mode():
    # spec 11.1 outputMode: "Default: All for inference, Final for training"; PopTorch sets
    # it on the wrapped model's options
    opts = poptorch.Options()
    assert opts.defaultOutputMode()
    inference = poptorch.inferenceModel(torch.nn.Linear(4, 3), opts)
    training = poptorch.trainingModel(torch.nn.Sequential(torch.nn.Linear(4, 3)), opts)
    assert inference.options.output_mode == OutputMode.All
    assert training.options.output_mode == OutputMode.Final
    assert not training.options.defaultOutputMode()
    assert opts.output_mode == OutputMode.Default


def test_a_compiled_model_freezes_its_compile_time_options_only():
    given = configured().replicationFactor(1).showCompilationProgressBar(False)
    given.Training.gradientAccumulation(1)  # inference refuses accumulation
    given.anchored_tensors = {}  # "w" is no tensor of this model
    model = poptorch.inferenceModel(torch.nn.Linear(4, 3), given)
    opts = model.options  # the model's own options
    x = torch.randn(2, 4)
    model.compile(x)
    message = ("cannot change compile-time option {}: a model was compiled with these options; "
               "change a copy made with options.clone() and wrap the model with it")
    for call, name in [(lambda: opts.deviceIterations(3), "device_iterations"),
                       (lambda: opts.outputMode(OutputMode.Sum), "output_mode"),
                       (lambda: opts.randomSeed(1), "random_seed"),
                       (lambda: opts.useOfflineIpuTarget(), "offline_ipu_version"),
                       (lambda: opts.Training.gradientAccumulation(2),
                        "Training.gradient_accumulation"),
                       (lambda: opts.Precision.setPartialsType(torch.half),
                        "Precision.partials_type"),
                       (lambda: opts.TensorLocations.weight_location.useOnChipStorage(True),
                        "TensorLocations.weight_location.on_chip"),
                       (lambda: opts.Distributed.configureProcessId(0, 1),
                        "Distributed.num_processes")]:
        with pytest.raises(Error) as info:
            call()
        assert (str(info.value), info.value.type) == (message.format(name), "options")
    assert opts.connection_type == ConnectionType.Always  # useOfflineIpuTarget changed nothing
    opts.logCycleCount(True).modelName("tiny").maxRepeatLogs(2).relaxOptimizerAttributesChecks()
    torch.testing.assert_close(model(x), model.model(x))
    opts.useIpuId(1).useIpuModel(True).enableProfiling("p").logDir("l").dumpIR("ir")
    opts.enableExecutableCaching("c").showCompilationProgressBar(True)
    opts.connectionType(ConnectionType.OnDemand)
    assert opts.clone().deviceIterations(3).device_iterations == 3
    opts._freeze()  # a DataLoader now freezes the run-time options too
    with pytest.raises(Error, match="^cannot change option log_dir: these options are frozen"):
        opts.logDir("m")
    opts._freeze(False)
    assert opts.deviceIterations(3).device_iterations == 3


def test_to_dict_and_repr():
    opts = configured().outputMode(OutputMode.All)
    values = opts.toDict()
    assert values["device_iterations"] == 2 and values["output_mode"] == OutputMode.All
    assert values["Training"]["gradient_accumulation"] == 3
    assert values["TensorLocations"]["weight_location"]["on_chip"] is False
    assert values["Distributed"] == {"num_processes": 1, "process_id": 0}
    assert set(values) >= {"Training", "Precision", "TensorLocations", "Distributed", "Jit"}
    values["anchored_tensors"]["g"]["long_name"] = "changed"
    assert opts.anchored_tensors["g"]["long_name"] == "w"  # a deep copy
    text = repr(opts)
    assert text.startswith("Options(device_iterations=2, ")
    assert "output_mode=OutputMode.All" in text and "random_seed=None" in text
    assert "Training=_TrainingOptions(gradient_accumulation=3, " in text
    assert "Jit=_JitOptions(trace_model=False)" in text
    assert not opts.defaultOutputMode()


def test_str_lists_one_option_per_line():
    opts = every_option_changed()
    lines = str(opts).splitlines()
    assert lines[:4] == ["device_iterations = 3", "replication_factor = 4",
                         "input_group_size = 2", "input_group_type = CommGroupType.Orthogonal"]
    for line in [
            "anchored_tensors = {'g': {'long_name': 'Gradient___w', 'output_mode': "
            "OutputMode.All, 'output_return_period': 1}, 'h': {'long_name': 'w', "
            "'output_mode': None, 'output_return_period': 1}}",
            "random_seed = 18446744073709551615", "max_repeat_logs = None",
            "execution_strategy = PipelinedExecution(auto_stage=AutoStage.SameAsIpu, "
            "stages=[{blocks: ['a', 'b'], ipu: 1}, {blocks: ['c'], ipu: None}], "
            "schedule=PipelineSchedule.OneForwardOneBackward, recompute=True)",
            "available_memory_proportion = {0: 0.5, 3: 1.0}", "log_dir = 'l'",
            "source_location_excludes = ['x']", "Training.gradient_accumulation = 4",
            "Precision.partials_type = torch.float16",
            "TensorLocations.weight_location.on_chip = False",
            "TensorLocations.weight_location.use_replicated_tensor_sharding = None",
            "Distributed.process_id = 1", "Jit.trace_model = False"]:
        assert line in lines
    assert not any(line.startswith("TensorLocations.weight_location =") for line in lines)
    assert len(lines) == len(flat(options_to_json(opts))) - 4 + 4 * 6
    assert "TensorLocations.weight_location = None" in str(Options()).splitlines()
    assert "execution_strategy = ShardedExecution(auto_stage=AutoStage.SameAsIpu, stages=[]" \
           ")" in str(Options().setExecutionStrategy(ShardedExecution())).splitlines()
