"""ipu-opt as an installed command and as a function: exit codes, no tracebacks."""

import os
import subprocess
import sys

import pytest

from poptorch.tools import ipu_opt

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
