"""Textual pass pipelines that mix ipu passes with upstream and torch-mlir passes.

MLIR's own pipeline parser knows only C++-registered passes, so ipu-opt and the Python
API parse `builtin.module(ipu-a, canonicalize, ipu-b{opt=1}, func.func(cse))` here:
registered ipu passes become Python pass objects, and each run of other elements is
handed to MLIR as text, all into one PassManager so the pipeline runs (and prints IR
after each pass) as one.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from .registry import Pass, get_pass


class PipelineError(ValueError):
    """A pipeline that cannot be parsed or names a pass that does not exist."""


@dataclass(frozen=True)
class Element:
    """One pipeline element: `name{options}(nested)`, as written."""

    name: str
    options: str | None
    nested: str | None

    @property
    def text(self) -> str:
        opts = "" if self.options is None else "{" + self.options + "}"
        nested = "" if self.nested is None else "(" + self.nested + ")"
        return self.name + opts + nested


_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_PARSER_PREFIX = re.compile(r"^MLIR Textual PassPipeline Parser:\d+:\d+: error: ")


def split_elements(text: str) -> list[Element]:
    """Split a comma-separated pipeline into elements, respecting braces and quotes."""
    elements, pos, text = [], 0, text.strip()
    while pos < len(text):
        match = _NAME.match(text, pos)
        if not match:
            raise PipelineError(f"expected a pass name at column {pos + 1} of '{text}'")
        name, pos = match.group(), match.end()
        options = nested = None
        if pos < len(text) and text[pos] == "{":
            options, pos = _balanced(text, pos, "{", "}")
        if pos < len(text) and text[pos] == "(":
            nested, pos = _balanced(text, pos, "(", ")")
        elements.append(Element(name, options, nested))
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos < len(text):
            if text[pos] != ",":
                raise PipelineError(f"expected ',' at column {pos + 1} of '{text}'")
            pos += 1
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos == len(text):
                raise PipelineError(f"pipeline '{text}' ends with ','")
    return elements


def _balanced(text: str, start: int, open_: str, close: str) -> tuple[str, int]:
    """The text between text[start] == open_ and its matching close, and the end index."""
    depth, quote = 0, None
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    raise PipelineError(f"unbalanced '{open_}' at column {start + 1} of '{text}'")


def parse_pipeline(text: str) -> list[Pass | str]:
    """Parse a pipeline into ipu pass instances and textual runs of other passes.

    The text may be anchored (`builtin.module(...)`) or a bare list of module passes.
    """
    elements = split_elements(text)
    if len(elements) == 1 and elements[0].name == "builtin.module":
        if elements[0].nested is None:
            raise PipelineError("'builtin.module' needs a parenthesised list of passes")
        elements = split_elements(elements[0].nested)
    steps: list[Pass | str] = []
    for element in elements:
        cls = get_pass(element.name)
        if cls is not None:
            if element.nested is not None:
                raise PipelineError(f"pass '{element.name}' takes no nested pipeline")
            steps.append(cls.from_text(element.options or ""))
            continue
        _reject_nested_ipu_passes(element)
        if steps and isinstance(steps[-1], str):
            steps[-1] += "," + element.text
        else:
            steps.append(element.text)
    return steps


def _reject_nested_ipu_passes(element: Element) -> None:
    if element.nested is None:
        return
    for inner in split_elements(element.nested):
        if get_pass(inner.name) is not None:
            raise PipelineError(
                f"ipu pass '{inner.name}' runs on the whole module: write it at the top "
                f"level of the pipeline, not inside '{element.name}(...)'"
            )
        _reject_nested_ipu_passes(inner)


def build_pass_manager(steps: list[Pass | str], context: ir.Context) -> PassManager:
    """A module PassManager running `steps` in order (see `parse_pipeline`)."""
    pm = PassManager("builtin.module", context=context)
    for step in steps:
        if isinstance(step, Pass):
            step.add_to(pm)
        else:
            add_textual(pm, step)
    return pm


def add_textual(pm: PassManager, text: str) -> None:
    """Add upstream/torch-mlir passes by text; MLIR's complaint becomes a PipelineError."""
    with _native_stderr() as captured:
        try:
            pm.add(text)
            return
        except ValueError as err:
            message = captured() + str(err)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    # MLIR repeats the pipeline text and a caret under it; keep the explanatory lines.
    lines = [_PARSER_PREFIX.sub("", ln).lstrip(": ") for ln in lines
             if ln != text and set(ln) != {"^"}]
    raise PipelineError("; ".join(lines) or f"cannot add passes '{text}'")


@contextlib.contextmanager
def _native_stderr() -> Iterator:
    """Capture what C++ code writes to file descriptor 2 while the block runs."""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield lambda: _read(sink)
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _read(sink) -> str:
    sink.seek(0)
    return sink.read().decode(errors="replace")
