"""ipu-opt as an installed command and as a function: exit codes, no tracebacks."""

import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poptorch.passes import PassOptionError, get_pass, parse_pipeline
from poptorch.passes.registry import INT_MAX
from poptorch.tools import ipu_opt, nesting

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPS = os.path.join(ROOT, "test", "Dialect", "IPU", "structure.mlir")


def test_console_script_works_outside_the_checkout(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "ipu-opt")
    first = subprocess.run([exe, OPS], cwd=tmp_path, capture_output=True, text=True, check=True)
    second = subprocess.run([exe], input=first.stdout, cwd=tmp_path, capture_output=True,
                            text=True, check=True)
    assert first.stdout and first.stdout == second.stdout


def test_internal_error_is_one_line_without_traceback(monkeypatch, capsys):
    def explode(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(ipu_opt, "read_input", explode)
    monkeypatch.delenv("IPU_OPT_TRACEBACK", raising=False)
    assert ipu_opt.main([OPS]) == 1
    err = capsys.readouterr().err
    assert err == ("ipu-opt: error: internal error: RuntimeError: kaboom "
                   "(rerun with IPU_OPT_TRACEBACK=1 for the traceback)\n")


def test_traceback_on_request(monkeypatch, capsys):
    monkeypatch.setattr(ipu_opt, "read_input", lambda path: 1 / 0)
    monkeypatch.setenv("IPU_OPT_TRACEBACK", "1")
    assert ipu_opt.main([OPS]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--no-such-flag", OPS], ["-x"], [OPS, "extra", "args"]])
def test_usage_errors_exit_1(argv, capsys):
    assert ipu_opt.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("ipu-opt: error: ") and err.count("\n") == 1


def test_split_chunks_keeps_file_lines():
    chunks = ipu_opt.split_chunks("a\n// -----\nb\nc\n// -----\n", split=True)
    assert [(c.text, c.first_line) for c in chunks] == [("a\n", 1), ("b\nc\n", 3), ("", 6)]


@pytest.mark.parametrize("text", [
    "module {" * 8000 + "}" * 8000,  # crashed MLIR's parser (exit 139) before the limit
    "func.func @f() attributes {a = " + "[" * 8000 + "]" * 8000 + "} { return }",
    '"a.b"() ({' * 3000 + "}) : () -> ()" * 3000,
], ids=["modules", "attributes", "regions"])
def test_over_deep_input_is_refused_in_a_child_process(tmp_path, text):
    """A located error, exit 1, no crash: run in a child, as a crash would kill pytest."""
    path = tmp_path / "deep.mlir"
    path.write_text(text + "\n")
    result = subprocess.run([sys.executable, "-m", "poptorch.tools.ipu_opt", str(path),
                             "--allow-unregistered-dialect"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 1
    assert result.stdout == ""
    assert re.fullmatch(rf"{re.escape(str(path))}:1:\d+: error: input nested more than "
                        rf"{nesting.MAX_DEPTH} levels deep .*\n", result.stderr)


def test_nesting_counts_brackets_outside_strings_and_comments():
    assert nesting.find_too_deep("[" * 10, limit=10) is None
    deep = nesting.find_too_deep("x\n  " + "(" * 11, limit=10)
    assert (deep.line, deep.col) == (2, 13)
    assert nesting.find_too_deep('"' + "[" * 50 + '" // ' + "{" * 50, limit=10) is None
    # arrows and affine comparisons are not brackets, so they cannot hide nesting
    assert nesting.find_too_deep("[" * 6 + "->>=<=" + "[" * 5, limit=10) is not None


def test_deep_call_site_locations_are_relocated(tmp_path, capsys):
    """Locations as deep as the limit allows: no RecursionError in the driver."""
    depth = nesting.MAX_DEPTH - 1
    path = tmp_path / "loc.mlir"
    path.write_text('func.func @f() { return } loc(' + "callsite(" * depth + '"a"'
                    + ' at "b")' * depth + ")\n")
    assert ipu_opt.main([str(path), "--mlir-print-debuginfo"]) == 0
    assert "callsite" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--ipu-schedule=micro-batches=99999999999999999999"],
     "option 'micro-batches' of pass 'ipu-schedule' expects an integer from "
     "-9223372036854775808 to 9223372036854775807, got '99999999999999999999'"),
    (["--ipu-schedule=micro-batches=9223372036854775808"],
     "option 'micro-batches' of pass 'ipu-schedule' expects an integer from "
     "-9223372036854775808 to 9223372036854775807, got 9223372036854775808"),
    (["--ipu-schedule=micro-batches=4 micro-batches=5"],
     "option 'micro-batches' of pass 'ipu-schedule' is given twice ('micro-batches=4' and "
     "'micro-batches=5'); give it once"),
    (["--pass-pipeline=builtin.module(ipu-schedule{micro-batches=4 micro-batches=5})"],
     "option 'micro-batches' of pass 'ipu-schedule' is given twice ('micro-batches=4' and "
     "'micro-batches=5'); give it once"),
    (["--ipu-assign-stages=stages=A=0:x"],
     "option 'stages' of pass 'ipu-assign-stages' expects a comma-separated list of "
     "block=stage[:ipu[:phase]] items (e.g. A=0:0,B=1:1), ids from 0 to 65535, got 'A=0:x'"),
    (["--ipu-assign-stages=phase-ipus=,,,"],
     "option 'phase-ipus' of pass 'ipu-assign-stages' expects a comma-separated list of "
     "phase=ipu/ipu/... items (e.g. 0=0/1,1=2/3), ids from 0 to 65535, got an empty item "
     "in ',,,'"),
    (["--ipu-assign-stages=stages=A=0:0,B=1:70000"],
     "option 'stages' of pass 'ipu-assign-stages' expects a comma-separated list of "
     "block=stage[:ipu[:phase]] items (e.g. A=0:0,B=1:1), ids from 0 to 65535, got "
     "'B=1:70000' in 'A=0:0,B=1:70000'"),
    (["--ipu-schedule==4"], "pass 'ipu-schedule' expects options as name=value, got '=4'"),
])
def test_bad_pass_options_name_the_pass_option_and_accepted_values(argv, message, capsys):
    assert ipu_opt.main([OPS, *argv]) == 1
    assert capsys.readouterr().err == f"ipu-opt: error: {message}\n"


def test_api_pipeline_checks_options_the_same_way():
    steps = parse_pipeline("builtin.module(ipu-schedule{micro-batches=4}, canonicalize)")
    assert steps[0].micro_batches == 4 and steps[1] == "canonicalize"
    assert get_pass("ipu-assign-stages").from_text("stages= phase-ipus=").stages == ""
    with pytest.raises(PassOptionError, match="given twice"):
        parse_pipeline("ipu-schedule{micro-batches=4 micro-batches=5}")
    with pytest.raises(PassOptionError, match="from -9223372036854775808 to "
                                              "9223372036854775807, got 100000000000000000000$"):
        get_pass("ipu-schedule")(micro_batches=10**20)
    # more than MAX_MICRO_BATCHES is refused where the pass schedules stages (schedule.py)
    assert get_pass("ipu-schedule")(micro_batches=65537).micro_batches == 65537
    with pytest.raises(PassOptionError, match="empty item"):
        get_pass("ipu-assign-stages")(phase_ipus="0=0,,1=1")
    with pytest.raises(PassOptionError, match="expects an integer, got True"):
        get_pass("ipu-schedule")(micro_batches=True)


# Fuzzing the option parser: every text gives a pass or a PassOptionError.
_OPTION_TEXT = st.lists(st.sampled_from(
    ["micro-batches", "strategy", "stages", "phase-ipus", "pipelined", "", "=", ",", ":",
     "/", "A", "0", "1", "-1", "99999999999999999999", "65536", "65537", "x", "1e3",
     "{", "}", " ", "="]), max_size=12).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(text=_OPTION_TEXT, argument=st.sampled_from(["ipu-schedule", "ipu-assign-stages"]))
def test_fuzz_pass_option_text(text, argument):
    cls = get_pass(argument)
    try:
        instance = cls.from_text(text)
    except PassOptionError as err:
        assert str(err).startswith(("option '", f"pass '{argument}'"))
    else:  # what was accepted is within bounds and prints back to the same options
        assert getattr(instance, "micro_batches", 1) <= INT_MAX
        assert cls.from_text(instance.option_text()[1:-1]).option_text() == \
            instance.option_text()
