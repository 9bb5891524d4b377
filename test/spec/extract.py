"""Every code example of the spec's text files, as runnable source (issue 24).

The spec (/work/shared/spec) is text converted from the user guide's PDF, so its
code comes in four shapes, all found here:

- `listing`: 4-features.txt's numbered listings, a caption line ("Listing 4.3 ...")
  and lines " 1import torch", "11    def forward": the number is right-aligned in the
  width of the largest one, the code follows it with its own indentation. The PDF's
  blank lines, and some code lines, lost their line: a number missing from the
  sequence becomes a blank line, so line numbers stay those of the spec. A numbered
  block without a caption (the `ctc_beam_search_decoder` and `ipu_print_tensor`
  snippets) is named after its spec line; a caption whose code did not survive the
  conversion (Listing 4.1) is an example with empty source, and one followed by an
  unnumbered indented block (Listing 4.18) takes that block.
- `code`: unnumbered blocks at column 0 starting with `class` or `def` (the
  isRunningOnIpu network, ipu_print_tensor's three `forward`s), up to a blank line.
- `doctest`: 11-api-reference.txt's `>>>` / `...` blocks, a run of prompt lines.
- `shell`: `export VAR=value` lines (environment variables the spec sets).

`examples(path)` returns them in file order; the test module runs each one.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass

SPEC_DIR = "/work/shared/spec"
FILES = ("4-features.txt", "11-api-reference.txt")

CAPTION = re.compile(r"^Listing (\d+\.\d+)\b")
# a listing starts at line 1: "1code" (fewer than 10 lines) or " 1code" (10 or more)
FIRST_NUMBERED = re.compile(r"^( ?)1(?![\d.])")
CODE_START = re.compile(r"^(class |def )(?!poptorch\.)")
SHELL = re.compile(r"^export [A-Z_]+=")
PROMPT = re.compile(r"^(>>>|\.\.\.)( |$)")


@dataclass(frozen=True)
class Example:
    """One example: `name` is its caption ("Listing 4.3") or "line N", `line` the spec
    line (1-based) of its caption or first code line, `source` the reconstructed code."""

    file: str
    name: str
    line: int
    kind: str  # listing, code, doctest or shell
    source: str

    @property
    def key(self) -> str:
        """The example's name in the test tables: "<file stem>:<name>"."""
        return f"{self.file.split('.')[0]}:{self.name}"


def _numbered(lines: list[str], start: int) -> tuple[str, int]:
    """The listing whose line 1 is lines[start]: (source, index after it)."""
    width = len(FIRST_NUMBERED.match(lines[start]).group(1)) + 1
    code: list[str] = []
    index = start
    while index < len(lines):
        field, text = lines[index][:width], lines[index][width:]
        if not field.strip().isdigit() or int(field) <= len(code):
            break
        code.extend([""] * (int(field) - 1 - len(code)))  # lines lost in conversion
        code.append(text.rstrip())
        index += 1
    return textwrap.dedent("\n".join(code) + "\n"), index


def _block(lines: list[str], start: int, indented: bool) -> tuple[str, int]:
    """The paragraph from lines[start] to a blank line; an `indented` one goes on across
    blank lines while the next text is indented too. (source, index after it)."""
    index = start
    while index < len(lines):
        if not lines[index].strip():
            following = next((line for line in lines[index:] if line.strip()), "")
            if not (indented and following.startswith("    ")):
                break
        index += 1
    code = [line.rstrip() for line in lines[start:index]]
    if indented:  # dedent by the block's indentation
        margin = min(len(line) - len(line.lstrip()) for line in code if line)
        code = [line[margin:] for line in code]
    return "\n".join(code) + "\n", index


def _doctest(lines: list[str], start: int) -> tuple[str, int]:
    """The run of `>>>` / `...` lines from lines[start], prompts removed."""
    index = start
    code = []
    while index < len(lines) and PROMPT.match(lines[index]):
        code.append(lines[index][4:].rstrip())
        index += 1
    return "\n".join(code) + "\n", index


def parse(file: str, text: str) -> list[Example]:
    """The examples of one spec file's `text`, in order."""
    lines = text.splitlines()
    found: list[Example] = []
    caption: tuple[str, int] | None = None  # a caption waiting for its code
    index = 0
    while index < len(lines):
        line = lines[index]
        if match := CAPTION.match(line):
            if caption:  # the previous caption's code was lost
                found.append(Example(file, caption[0], caption[1], "listing", ""))
            caption = (f"Listing {match.group(1)}", index + 1)
            index += 1
            continue
        if FIRST_NUMBERED.match(line):
            source, end = _numbered(lines, index)
            kind = "listing"
        elif caption and line.startswith("    "):
            source, end = _block(lines, index, indented=True)
            kind = "listing"
        elif CODE_START.match(line):
            source, end = _block(lines, index, indented=False)
            kind = "code"
        elif PROMPT.match(line):
            source, end = _doctest(lines, index)
            kind = "doctest"
        elif SHELL.match(line):
            source, end = line.strip() + "\n", index + 1
            kind = "shell"
        else:
            if line.strip() and caption and index > caption[1] + 1:
                # prose after the caption's blank line: its code was lost
                found.append(Example(file, caption[0], caption[1], "listing", ""))
                caption = None
            index += 1
            continue
        if kind == "listing" and caption:
            found.append(Example(file, caption[0], caption[1], kind, source))
        else:
            found.append(Example(file, f"line {index + 1}", index + 1, kind, source))
        caption = None
        index = end
    if caption:
        found.append(Example(file, caption[0], caption[1], "listing", ""))
    return found


def examples(spec_dir: str = SPEC_DIR) -> list[Example]:
    """Every example of the spec's FILES, file by file."""
    found = []
    for file in FILES:
        with open(os.path.join(spec_dir, file), encoding="utf-8") as handle:
            found.extend(parse(file, handle.read()))
    return found


if __name__ == "__main__":  # print them: python test/spec/extract.py
    for example in examples():
        print(f"===== {example.key} ({example.kind}, line {example.line})")
        print(example.source, end="")
