"""Logging (spec 4.11.1, setLogLevel, logDir, maxRepeatLogs) and the compilation progress
bar (showCompilationProgressBar)."""

import io
import logging
import os
import re
import subprocess
import sys

import pytest
import torch

import poptorch
from poptorch import _logging


@pytest.fixture(autouse=True)
def restore_level():
    level = _logging.logger.level
    yield
    _logging.logger.setLevel(level)
    _logging.configure(poptorch.Options())  # default repeat limit, no log file


class Terminal(io.StringIO):
    """A stdout that says it is a terminal."""

    def isatty(self):
        return True


def compile_linear(opts=None):
    model = poptorch.inferenceModel(torch.nn.Linear(4, 4), opts)
    model(torch.ones(2, 4))
    return model


@pytest.mark.parametrize("name, level", [
    ("TRACE_ALL", 1), ("TRACE", 5), ("DEBUG", logging.DEBUG), ("INFO", logging.INFO),
    ("WARN", logging.WARNING), ("ERR", logging.ERROR), ("OFF", logging.CRITICAL + 10),
    ("debug", logging.DEBUG)])
def test_set_log_level_names(name, level):
    poptorch.setLogLevel(name)
    assert _logging.logger.level == level
    assert logging.getLevelName(level) == name.upper()


@pytest.mark.parametrize("level, name", [
    (0, "TRACE"), (1, "DEBUG"), (2, "INFO"), (3, "WARN"), (4, "ERR"), (6, "OFF"),
    ("DEBUG_IR", "DEBUG")])
def test_set_log_level_takes_poptorchs_integers_and_debug_ir(level, name):
    # PopTorch's setLogLevel takes Union[str, int]: its legacy integers 0 TRACE, 1 DEBUG,
    # 2 INFO, 3 WARN, 4 ERR, 6 OFF, and its internal DEBUG_IR (DEBUG on the Python side)
    poptorch.setLogLevel(level)
    assert logging.getLevelName(_logging.logger.level) == name


INT_LEVELS = ("the integer levels are PopTorch's: 0 (TRACE), 1 (DEBUG), 2 (INFO), 3 (WARN), "
              "4 (ERR), 6 (OFF); or use a name: TRACE_ALL, TRACE, DEBUG, INFO, WARN, ERR, OFF")


@pytest.mark.parametrize("level, message", [
    (5, f"unknown log level 5; {INT_LEVELS}"), (7, f"unknown log level 7; {INT_LEVELS}"),
    (-1, f"unknown log level -1; {INT_LEVELS}"),
    (logging.WARNING, f"unknown log level 30; {INT_LEVELS}"),
    (2**100, f"unknown log level (an int too large); {INT_LEVELS}"),
    (True, "unknown log level True; use one of TRACE_ALL, TRACE, DEBUG, INFO, WARN, ERR, OFF"),
    (2.0, "unknown log level 2.0; use one of TRACE_ALL, TRACE, DEBUG, INFO, WARN, ERR, OFF"),
    (None, "unknown log level None; use one of TRACE_ALL, TRACE, DEBUG, INFO, WARN, ERR, OFF"),
    ("WARNING", "unknown log level 'WARNING'; use one of TRACE_ALL, TRACE, DEBUG, INFO, WARN, "
                "ERR, OFF")])
def test_set_log_level_rejects_levels_poptorch_does_not_have(level, message):
    before = _logging.logger.level
    with pytest.raises(poptorch.Error) as err:
        poptorch.setLogLevel(level)
    assert (err.value.message, err.value.type) == (f"setLogLevel: {message}", "options")
    assert _logging.logger.level == before


def test_set_log_level_rejects_unknown_levels():
    with pytest.raises(poptorch.Error) as err:
        poptorch.setLogLevel("LOUD")
    assert err.value.message == ("setLogLevel: unknown log level 'LOUD'; use one of TRACE_ALL, "
                                 "TRACE, DEBUG, INFO, WARN, ERR, OFF")
    assert err.value.type == "options"


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300, check=False)


COMPILE = ("import torch, poptorch\n"
           "poptorch.inferenceModel(torch.nn.Linear(4, 4))(torch.ones(2, 4))\n")


def test_environment_level_debug_prints_step_times_on_stdout():
    result = run_python(COMPILE, POPTORCH_LOG_LEVEL="DEBUG")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\.\d{3}\] \[poptorch\] \[DEBUG\] "
                        r"ipu-convert-torch-to-ipu: \d+\.\d{3} s",
                        next(line for line in lines if "ipu-convert-torch-to-ipu" in line))
    assert re.search(r"\[INFO\] compiled the inference model in \d+\.\d\d s$", lines[-1])


def test_environment_level_off_prints_nothing():
    result = run_python(COMPILE, POPTORCH_LOG_LEVEL="OFF")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_environment_level_must_be_known():
    result = run_python("import poptorch\npoptorch.Options()\n", POPTORCH_LOG_LEVEL="LOUD")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "poptorch.errors.Error: POPTORCH_LOG_LEVEL: unknown log level 'LOUD'; use one of "
        "TRACE_ALL, TRACE, DEBUG, INFO, WARN, ERR, OFF")


def test_trace_all_logs_the_ir_after_every_step(capsys):
    poptorch.setLogLevel("TRACE_ALL")
    compile_linear()
    out = capsys.readouterr().out
    assert "[TRACE] compiling: ipu-convert-torch-to-ipu" in out
    after = out.split("[TRACE_ALL] IR after ipu-convert-torch-to-ipu:\n", 1)[1]
    assert '"ipu.matmul"' in after.split("[poptorch]", 1)[0]


def test_info_is_the_default_and_hides_debug(capsys):
    compile_linear()
    out = capsys.readouterr().out
    assert "[INFO] compiled the inference model in" in out
    assert "[DEBUG]" not in out


def test_max_repeat_logs_suppresses_repeats(capsys):
    _logging.configure(poptorch.Options().maxRepeatLogs(2))
    for _ in range(5):
        _logging.logger.warning("step %d slow", 7)
    _logging.logger.warning("step %d slow", 8)
    messages = [line.split("[WARN] ")[1] for line in capsys.readouterr().out.splitlines()]
    assert messages == [
        "step 7 slow", "step 7 slow",
        "step 7 slow (repeated 2 times; further repeats suppressed, see Options.maxRepeatLogs)",
        "step 8 slow"]


def test_max_repeat_logs_none_shows_everything(capsys):
    _logging.configure(poptorch.Options().maxRepeatLogs(None))
    for _ in range(6):
        _logging.logger.warning("step %d slow", 7)
    assert len(capsys.readouterr().out.splitlines()) == 6


def test_log_dir_writes_the_log_and_reproducers(tmp_path, capsys):
    opts = poptorch.Options().logDir(str(tmp_path / "logs"))
    compile_linear(opts)
    log = (tmp_path / "logs" / "poptorch.log").read_text()
    assert "[INFO] compiled the inference model in" in log

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.lgamma(x)

    with pytest.raises(poptorch.Error) as err:
        poptorch.inferenceModel(Model(), opts)(torch.rand(3))
    reproducer = re.search(r"reproduce with: ipu-opt (\S+)", err.value.message).group(1)
    assert os.path.dirname(reproducer) == str(tmp_path / "logs")
    assert "torch.aten.lgamma" in open(reproducer).read()


def test_progress_bar_on_a_terminal(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    compile_linear(poptorch.Options())
    bar = terminal.getvalue().split("\r")[-1].splitlines()[0]
    # capture, import, the 18 steps of the pipeline (ipu-recompute among them: the default
    # PipelinedExecution recomputes, as PopTorch's; a model without blocks is unchanged by
    # it), the JIT and the machine model
    assert re.match(r"Graph compilation: 100%\|.*\| 23/23 \[", bar), bar


def test_progress_bar_hidden_when_asked_or_not_a_terminal(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    compile_linear(poptorch.Options().showCompilationProgressBar(False))
    assert "Graph compilation" not in terminal.getvalue()
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stdout", pipe)
    compile_linear(poptorch.Options())
    assert "Graph compilation" not in pipe.getvalue()
    assert "compiled the inference model" in pipe.getvalue()
