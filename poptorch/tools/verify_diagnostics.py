"""Pure-Python implementation of mlir-opt's ``--verify-diagnostics``.

MLIR's ``SourceMgrDiagnosticVerifierHandler`` (mlir/lib/IR/Diagnostics.cpp) is not exposed through
the Python bindings, so this module re-implements it on plain data: the driver collects the
diagnostics emitted while processing one chunk of an input file and calls :func:`verify` with the
chunk's text. Nothing here imports MLIR, which keeps the checker testable on its own.

Expectations are comments of the form::

    expected-<severity>[-re] [@<designator>] {{<message>}}

where ``<severity>`` is ``error``, ``warning``, ``remark`` or ``note`` and ``{{<message>}}`` ends
the line. The designator selects the line the diagnostic must be reported on:

* none: the comment's own line;
* ``@+N`` / ``@-N``: N lines below / above the comment;
* ``@above`` / ``@below``: the closest line above / below that is not just an expectation
  comment (so several stacked expectations can all refer to the same line);
* ``@unknown``: a diagnostic without a file location.

Without ``-re`` the message must be a substring of the diagnostic's message. With ``-re`` the
message is literal text in which each ``{{...}}`` section is a regular expression (Python ``re``
syntax), searched anywhere in the diagnostic's message.

Differences from MLIR, all of them stricter or more deterministic:

* every expectation matches at most one diagnostic, so identical diagnostics need one expectation
  each;
* a diagnostic whose severity differs from the only matching expectation is reported as unexpected
  (and the expectation as not produced) rather than as a "near miss";
* ``@above`` / ``@below`` only skip lines holding nothing but an expectation comment, where MLIR
  also skips code lines that end with one;
* malformed expectations (a directive followed by ``@`` or ``{{`` that does not parse) and
  designators pointing outside the chunk are reported instead of being ignored or clamped.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

__all__ = ["Diagnostic", "format_diagnostic", "verify"]

# The directive regex used by MLIR's SourceMgrDiagnosticVerifierHandler.
_DIRECTIVE = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *"
    r"\{\{(.*)\}\}$"
)
# Something meant as a directive: the keyword followed by a designator or a message.
_DIRECTIVE_LIKE = re.compile(r"(?<![\w-])expected-(?:error|note|remark|warning)(?:-re)?\s*[@{]")

_MALFORMED = (
    "invalid expected diagnostic: expected "
    "'expected-<severity>[-re] [@<designator>] {{<message>}}' ending the line"
)


@dataclass(frozen=True)
class Diagnostic:
    """One diagnostic as the driver collected it."""

    severity: str  # "error" | "warning" | "remark" | "note"
    message: str
    filename: str | None  # None for diagnostics without a file location (unknown loc)
    line: int | None  # 1-based line in the ORIGINAL file (not the chunk)
    col: int | None


def format_diagnostic(d: Diagnostic, default_file: str) -> str:
    """Format `d` like the first line mlir-opt prints for it.

    Located diagnostics give ``'file:line:col: severity: message'``; diagnostics without a file
    location give ``'default_file: severity: message'``.
    """
    if d.filename is None:
        return f"{default_file}: {d.severity}: {d.message}"
    return f"{d.filename}:{d.line}:{d.col}: {d.severity}: {d.message}"


@dataclass
class _Expectation:
    """One parsed ``expected-*`` comment."""

    severity: str
    text: str  # the message as written between the outer braces
    regex: re.Pattern[str] | None  # compiled message for ``-re`` expectations
    target: int | None  # file line the diagnostic must be on; None for ``@unknown``
    line: int  # file line of the comment
    col: int  # 1-based column of the ``expected-`` keyword
    matched: bool = False

    def accepts(self, d: Diagnostic, filename: str) -> bool:
        """Whether this expectation is still unmatched and matches diagnostic `d`."""
        if self.matched or self.severity != d.severity:
            return False
        if d.filename is None:
            at_target = self.target is None
        else:
            at_target = d.filename == filename and self.target is not None and d.line == self.target
        if not at_target:
            return False
        if self.regex is not None:
            return self.regex.search(d.message) is not None
        return self.text in d.message


class _InvalidExpectationError(Exception):
    """An ``expected-*`` comment that cannot be used; the argument is the message to report."""


def _compile_regex(text: str) -> re.Pattern[str]:
    """Compile an ``-re`` message: ``{{...}}`` sections are regexes, the rest is literal."""
    parts = []
    rest = text
    while (start := rest.find("{{")) != -1:
        parts.append(re.escape(rest[:start]))
        rest = rest[start + 2 :]
        end = rest.find("}}")
        if end == -1:
            raise _InvalidExpectationError(
                "invalid expected diagnostic: found start of regex with no end '}}'"
            )
        parts.append(f"({rest[:end]})")
        rest = rest[end + 2 :]
    parts.append(re.escape(rest))
    try:
        return re.compile("".join(parts))
    except re.error as err:
        raise _InvalidExpectationError(
            f"invalid expected diagnostic: invalid regex: {err}"
        ) from err


def _is_only_expectation(text: str) -> bool:
    """Whether line `text` is nothing but an expectation comment (skipped by @above and @below)."""
    match = _DIRECTIVE.search(text) or _DIRECTIVE_LIKE.search(text)
    return match is not None and text[: match.start()].strip() in ("", "//")


def _resolve_target(designator: str, index: int, skipped: list[bool]) -> int | None:
    """Return the chunk line index `designator` (on line `index`) refers to; None for unknown.

    `skipped` tells, for each line of the chunk, whether ``@above`` and ``@below`` pass over it.
    """
    if designator == "unknown":
        return None
    if designator == "":
        return index
    if designator == "above":
        target = next((i for i in range(index - 1, -1, -1) if not skipped[i]), -1)
    elif designator == "below":
        size = len(skipped)
        target = next((i for i in range(index + 1, size) if not skipped[i]), size)
    else:
        target = index + int(designator)
    if not 0 <= target < len(skipped):
        raise _InvalidExpectationError(
            f"invalid expected diagnostic: '@{designator}' refers to a line outside the input"
        )
    return target


def _parse_directive(
    match: re.Match[str], index: int, first_line: int, skipped: list[bool]
) -> _Expectation:
    """Build the expectation for a line on which `_DIRECTIVE` matched."""
    severity, is_regex, _, designator, text = match.groups()
    target = _resolve_target(designator or "", index, skipped)
    return _Expectation(
        severity=severity,
        text=text,
        regex=_compile_regex(text) if is_regex else None,
        target=None if target is None else first_line + target,
        line=first_line + index,
        col=match.start() + 1,
    )


def _parse_expectations(
    lines: list[str], filename: str, first_line: int
) -> list[_Expectation | str]:
    """Parse the ``expected-*`` comments of a chunk, in source order.

    Each item is either an expectation or an already formatted error for an unusable comment.
    """
    skipped = [_is_only_expectation(text) for text in lines]
    items: list[_Expectation | str] = []
    for index, text in enumerate(lines):
        line = first_line + index
        match = _DIRECTIVE.search(text)
        if match is None:
            if malformed := _DIRECTIVE_LIKE.search(text):
                items.append(f"{filename}:{line}:{malformed.start() + 1}: error: {_MALFORMED}")
            continue
        try:
            items.append(_parse_directive(match, index, first_line, skipped))
        except _InvalidExpectationError as err:
            items.append(f"{filename}:{line}:{match.start() + 1}: error: {err}")
    return items


def verify(source: str, filename: str, first_line: int, diagnostics: list[Diagnostic]) -> list[str]:
    """Check `diagnostics` against the expected-* comments in `source`.

    `source` is one chunk of the input file (after --split-input-file splitting) whose first line
    is line `first_line` (1-based) of `filename`; diagnostic lines are in file coordinates.

    Each diagnostic is matched, in the given order, by the first still-unmatched expectation (in
    source order) of the same severity, on its line, whose message matches. Diagnostics located in
    another file can never match.

    Returns the failure lines (already formatted 'file:line:col: error: ...'), empty if all
    expectations were met exactly: first one ``unexpected <severity>: <message>`` line per
    unmatched diagnostic, in the order given, then, in source order, one line per unusable
    expectation comment and per ``expected <severity> "<message>" was not produced``.
    """
    lines = [s.rstrip() for s in source.split("\n")]
    if source.endswith("\n"):
        lines.pop()
    items = _parse_expectations(lines, filename, first_line)
    expectations = [item for item in items if isinstance(item, _Expectation)]

    failures = []
    for d in diagnostics:
        expectation = next((e for e in expectations if e.accepts(d, filename)), None)
        if expectation is None:
            unexpected = dataclasses.replace(
                d, severity="error", message=f"unexpected {d.severity}: {d.message}"
            )
            failures.append(format_diagnostic(unexpected, filename))
        else:
            expectation.matched = True

    for item in items:
        if isinstance(item, str):
            failures.append(item)
        elif not item.matched:
            failures.append(
                f'{filename}:{item.line}:{item.col}: error: expected {item.severity} "{item.text}"'
                " was not produced"
            )
    return failures
