"""Options.loadFromFile (spec 4.1.1): config files of option calls, parsed with `ast` and
never evaluated; every bad line is a poptorch.Error located at `path:line`."""

import pytest
import torch

import poptorch
from poptorch.enums import CommGroupType, ConnectionType, OutputMode
from poptorch.errors import Error
from poptorch.options import Options, TensorLocationSettings
from poptorch.options.config_file import MAX_FILE_BYTES

CATEGORIES = "Training, Precision, TensorLocations, Distributed, Jit, _Popart"
NOT_LITERAL = ("is not a literal (number, string, bool, None, list, tuple or dict), a poptorch "
               "enum value such as poptorch.OutputMode.All, a torch dtype or one of "
               "poptorch.PipelinedExecution, poptorch.ShardedExecution, "
               "poptorch.SerialPhasedExecution, poptorch.ParallelPhasedExecution, "
               "poptorch.Stage, poptorch.Phase, poptorch.TensorLocationSettings built from "
               "such values")
TOO_DEEP = "the line is nested too deeply for an option call: "


def unknown(name: str) -> str:
    """The loadFromFile message for a line calling an unknown option."""
    return (f"unknown option {name!r}: expected a method of poptorch.Options or of its "
            f"categories {CATEGORIES}")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in ("POPTORCH_IPU_MODEL", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(var, raising=False)


GOOD_CONFIG = """\
# Options for the test
deviceIterations(4)
replicationFactor(2)

Training.gradientAccumulation(8)  # trailing comment
outputMode(poptorch.OutputMode.EveryN, output_return_period=2)
connectionType(ConnectionType.OnDemand)
Precision.setPartialsType(torch.half)
setAvailableMemoryProportion({"IPU0": 0.25})
inputReplicaGrouping(2, poptorch.enums.CommGroupType.Orthogonal)
  logDir('logs')
Distributed.configureProcessId(0, 1)
TensorLocations.numIOTiles(32)
sourceLocationExcludes(["a", "b"])
updatableNamedBuffers(["inner.b", "norm.running_mean"])
"""


def test_load_from_file(tmp_path):
    path = tmp_path / "poptorch.conf"
    path.write_text(GOOD_CONFIG)
    opts = Options()
    assert opts.loadFromFile(str(path)) is opts
    assert (opts.device_iterations, opts.replication_factor) == (4, 2)
    assert opts.Training.gradient_accumulation == 8
    assert (opts.output_mode, opts.output_return_period) == (OutputMode.EveryN, 2)
    assert opts.connection_type == ConnectionType.OnDemand
    assert opts.Precision.partials_type == torch.half
    assert opts.available_memory_proportion == {0: 0.25}
    assert (opts.input_group_size, opts.input_group_type) == (2, CommGroupType.Orthogonal)
    assert opts.log_dir == "logs" and opts.TensorLocations.num_io_tiles == 32
    assert opts.source_location_excludes == ["a", "b"]
    assert opts.updatable_named_buffers == ["inner.b", "norm.running_mean"]
    assert opts.toDict()["updatable_named_buffers"] == ["inner.b", "norm.running_mean"]
    assert Options().loadFromFile(path).device_iterations == 4  # a Path works too


# spec 4.1.1, Listing 4.1: "Example contents of a config file used to set options"
SPEC_EXAMPLE = """\
deviceIterations(1)
setExecutionStrategy(poptorch.ShardedExecution())
replicationFactor(1)
enableSyntheticData(True)
"""


def test_the_specs_example_config_file(tmp_path):
    path = tmp_path / "poptorch.conf"
    path.write_text(SPEC_EXAMPLE)
    opts = poptorch.Options()
    opts.loadFromFile(str(path))  # Listing 4.2
    assert type(opts.execution_strategy) is poptorch.ShardedExecution
    assert (opts.device_iterations, opts.replication_factor, opts.synthetic_data) == (1, 1, True)


def test_config_files_build_strategies_stages_and_tensor_locations(tmp_path):
    path = tmp_path / "poptorch.conf"
    path.write_text(
        "setExecutionStrategy(poptorch.PipelinedExecution(poptorch.Stage('a', 'b').ipu(1), "
        "poptorch.Stage('c').ipu(0)).setSchedule(poptorch.PipelineSchedule.OneForwardOneBackward))\n"
        "TensorLocations.setWeightLocation(poptorch.TensorLocationSettings()"
        ".useOnChipStorage(False).minElementsForOffChip(4))\n")
    opts = Options().loadFromFile(str(path))
    expected = poptorch.PipelinedExecution(poptorch.Stage("a", "b").ipu(1),
                                           poptorch.Stage("c").ipu(0))
    expected.setSchedule(poptorch.PipelineSchedule.OneForwardOneBackward)
    assert str(opts) == str(Options().setExecutionStrategy(expected).TensorLocations
                            .setWeightLocation(TensorLocationSettings(
                                on_chip=False, min_elements_for_off_chip=4)) and opts)
    assert type(opts.execution_strategy) is poptorch.PipelinedExecution
    assert opts.TensorLocations.weight_location.on_chip is False
    path.write_text("setExecutionStrategy(poptorch.SerialPhasedExecution("
                    "[poptorch.Stage('a')], (poptorch.Stage('b'),)))\n")
    phased = Options().loadFromFile(str(path)).execution_strategy
    assert type(phased) is poptorch.SerialPhasedExecution
    assert [s.blocks for s in phased._all_stages()] == [["a"], ["b"]]


@pytest.mark.parametrize("line, message", [
    ("setExecutionStrategy(ShardedExecution())",
     f"setExecutionStrategy: argument ShardedExecution() {NOT_LITERAL}"),
    ("setExecutionStrategy(poptorch.Options())",
     f"setExecutionStrategy: argument poptorch.Options() {NOT_LITERAL}"),
    ("setExecutionStrategy(poptorch.ShardedExecution().__class__())",
     "setExecutionStrategy: '__class__' is not a method of poptorch.ShardedExecution in "
     "poptorch.ShardedExecution().__class__()"),
    ("setExecutionStrategy(poptorch.Stage('a').blocks())",
     "setExecutionStrategy: 'blocks' is not a method of poptorch.Stage in "
     "poptorch.Stage('a').blocks()"),
    ("setExecutionStrategy(poptorch.ShardedExecution(__import__('os').getpid()))",
     f"setExecutionStrategy: argument __import__('os').getpid() {NOT_LITERAL}"),
    ("setExecutionStrategy(poptorch.ShardedExecution(*['a']))",
     "setExecutionStrategy: * and ** arguments are not supported in "
     "poptorch.ShardedExecution(*['a'])"),
    ("setExecutionStrategy(poptorch.Stage())",
     "setExecutionStrategy: poptorch.Stage(): Stage needs at least one block id"),
    ("setExecutionStrategy(poptorch.Stage('a').ipu(1, 2))",
     "setExecutionStrategy: poptorch.Stage('a').ipu(1, 2): Stage.ipu() takes 2 positional "
     "arguments but 3 were given"),
    # the ids ipu-assign-stages takes go up to 65535 (issue 22: a PassOptionError at compile)
    ("setExecutionStrategy(poptorch.PipelinedExecution(poptorch.Stage('a').ipu(70000)))",
     "setExecutionStrategy: poptorch.Stage('a').ipu(70000): Stage.ipu: ipu must be an int "
     "<= 65535, got 70000"),
    ("setExecutionStrategy(poptorch.SerialPhasedExecution(poptorch.Phase('a').ipus(70000)))",
     "setExecutionStrategy: poptorch.Phase('a').ipus(70000): Phase.ipus: ipus must be an int "
     "<= 65535, got 70000"),
    ("setExecutionStrategy(poptorch.Stage('a'))",
     "setExecutionStrategy: strategy must be an instance of poptorch.PipelinedExecution, "
     "poptorch.ShardedExecution, poptorch.SerialPhasedExecution, "
     "poptorch.ParallelPhasedExecution, got Stage('a', ipu=None)"),
])
def test_config_file_objects_are_built_only_from_poptorch_classes(tmp_path, line, message):
    path = tmp_path / "bad.conf"
    path.write_text(line)
    with pytest.raises(Error) as info:
        Options().loadFromFile(str(path))
    assert (info.value.location, info.value.message) == (f"{path}:1", message)


def test_windows_line_ends_and_a_byte_order_mark(tmp_path):
    path = tmp_path / "windows.conf"
    path.write_bytes(b"\xef\xbb\xbfdeviceIterations(3)\r\n# comment\r\nlogDir('x')\r\n")
    opts = Options().loadFromFile(str(path))
    assert (opts.device_iterations, opts.log_dir) == (3, "x")


@pytest.mark.parametrize("line, message", [
    ("fooBar(1)", unknown("fooBar")),
    ("Training.fooBar(1)", unknown("Training.fooBar")),
    ("options.deviceIterations(1)", unknown("options.deviceIterations")),
    ("Training.gradientAccumulation.__class__(1)",
     unknown("Training.gradientAccumulation.__class__")),
    ("_freeze()", unknown("_freeze")),
    ("__init__()", unknown("__init__")),
    ("clone()", unknown("clone")),
    ("loadFromFile('/etc/passwd')", unknown("loadFromFile")),
    ("Distributed.numProcesses()", unknown("Distributed.numProcesses")),
    ("(lambda: 0)()", unknown("lambda: 0")),
    ("__import__('os').system('true')", unknown("__import__('os').system")),
    ("deviceIterations(n)", f"deviceIterations: argument n {NOT_LITERAL}"),
    ("deviceIterations(__import__('os').getpid())",
     f"deviceIterations: argument __import__('os').getpid() {NOT_LITERAL}"),
    ("logDir(f'{1}')", f"logDir: argument f'{{1}}' {NOT_LITERAL}"),
    ("deviceIterations([x for x in (1,)])",
     f"deviceIterations: argument [x for x in (1,)] {NOT_LITERAL}"),
    ("deviceIterations(torch.onnx)", f"deviceIterations: argument torch.onnx {NOT_LITERAL}"),
    ("outputMode(poptorch.OutputMode.Nope)",
     f"outputMode: argument poptorch.OutputMode.Nope {NOT_LITERAL}"),
    ("outputMode(os.OutputMode.All)", f"outputMode: argument os.OutputMode.All {NOT_LITERAL}"),
    ("deviceIterations(4", "syntax error ('(' was never closed) in 'deviceIterations(4'"),
    ("deviceIterations 4", "syntax error (invalid syntax) in 'deviceIterations 4'"),
    ("deviceIterations(1); logDir('x')", "syntax error (invalid syntax) in "
                                          "\"deviceIterations(1); logDir('x')\""),
    ("deviceIterations(\0)", "syntax error (source code string cannot contain null bytes) in "
                             "'deviceIterations(\\x00)'"),
    ("deviceIterations(1" + "0" * 5000 + ")",
     "syntax error (Exceeds the limit (4300 digits) for integer string conversion: value has "
     "5001 digits; use sys.set_int_max_str_digits() to increase the limit - Consider "
     "hexadecimal for huge integer literals to avoid decimal conversion limits.) in "
     "'deviceIterations(1" + "0" * 82 + "'..."),
    ("deviceIterations(0x1" + "0" * 5000 + ")", "deviceIterations: device_iterations must be "
                                                "an int <= 9223372036854775807, got an int of "
                                                "20001 bits"),
    ("deviceIterations(" + "(" * 300 + "1" + ")" * 300 + ")",
     "syntax error (too many nested parentheses) in 'deviceIterations(" + "(" * 83 + "'..."),
    ("deviceIterations(" + "-" * 100000 + "1)", TOO_DEEP + "'deviceIterations(" + "-" * 43 +
     "'..."),
    ("deviceIterations(" + "a." * 5000 + "b)", TOO_DEEP + "'deviceIterations(" + "a." * 21 +
     "a'..."),
    ("deviceIterations(" + "a." * 500 + "b)",
     f"deviceIterations: argument {'a.' * 38}a... {NOT_LITERAL}"),
    ("4", "expected an option call such as deviceIterations(4), got '4'"),
    ("deviceIterations(*[4])", "deviceIterations: * and ** arguments are not supported"),
    ("deviceIterations(**{'x': 4})", "deviceIterations: * and ** arguments are not supported"),
    ("deviceIterations(0)", "deviceIterations: device_iterations must be an int >= 1, got 0"),
    ("updatableNamedBuffers('inner.b')", "updatableNamedBuffers: buffers must be a list of "
                                         "buffer names (str), got 'inner.b'"),
    ("deviceIterations(1, 2)", "deviceIterations: Options.deviceIterations() takes 2 positional "
                               "arguments but 3 were given"),
    ("deviceIterations(iterations=2)", "deviceIterations: Options.deviceIterations() got an "
                                       "unexpected keyword argument 'iterations'"),
    ("setAvailableMemoryProportion({'IPU\u00b2': 0.5})", "setAvailableMemoryProportion: keys "
     "must be \"IPU<n>\" such as \"IPU0\", got 'IPU\u00b2'"),
    ("setAvailableMemoryProportion({[]: 0.5})", "setAvailableMemoryProportion: argument "
     f"{{[]: 0.5}} {NOT_LITERAL}"),
])
def test_load_from_file_errors_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.conf"
    path.write_text(f"# first line\n{line}\nreplicationFactor(2)\n")
    opts = Options()
    with pytest.raises(Error) as info:
        opts.loadFromFile(str(path))
    assert str(info.value) == f"{path}:2: {message}"
    assert (info.value.location, info.value.message) == (f"{path}:2", message)
    assert info.value.type == "options"
    assert opts.replication_factor == 1  # lines after the bad one are not applied


def test_lines_before_the_bad_one_are_applied(tmp_path):
    path = tmp_path / "bad.conf"
    path.write_bytes(b"deviceIterations(5)\n\nlogDir('\xff')\nreplicationFactor(2)\n")
    opts = Options()
    with pytest.raises(Error) as info:
        opts.loadFromFile(str(path))
    assert str(info.value) == f"{path}:3: the line is not valid UTF-8: byte 0xff at column 9"
    assert (opts.device_iterations, opts.log_dir, opts.replication_factor) == (5, None, 1)


class Refusing(Options):
    """Options whose setters fail with Python's own exceptions."""

    def deviceIterations(self, n):  # noqa: N802
        raise ValueError(f"no {n}")

    def replicationFactor(self, n):  # noqa: N802
        raise OverflowError("too large")


@pytest.mark.parametrize("line, message", [
    ("deviceIterations(2)", "deviceIterations: no 2"),
    ("replicationFactor(2)", "replicationFactor: too large"),
])
def test_setters_raising_python_errors(tmp_path, line, message):
    path = tmp_path / "refused.conf"
    path.write_text(line)
    with pytest.raises(Error) as info:
        Refusing().loadFromFile(str(path))
    assert (info.value.location, info.value.message) == (f"{path}:1", message)


def test_file_errors(tmp_path):
    too_large = tmp_path / "large.conf"
    too_large.write_text("# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    for path, message in [
            (tmp_path / "missing.conf", f"loadFromFile: cannot read {tmp_path / 'missing.conf'}: "
                                        "No such file or directory"),
            (tmp_path, f"loadFromFile: cannot read {tmp_path}: Is a directory"),
            (f"{tmp_path}/a\0b", f"loadFromFile: cannot read {tmp_path}/a\0b: embedded null byte"),
            (too_large, f"loadFromFile: {too_large} is larger than 1048576 bytes, too large for a "
                        "config file of option calls")]:
        with pytest.raises(Error) as info:
            Options().loadFromFile(str(path))
        assert str(info.value) == message and info.value.type == "options"
