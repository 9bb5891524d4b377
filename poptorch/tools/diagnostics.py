"""Collecting MLIR diagnostics for ipu-opt, in the coordinates of the user's file.

Diagnostics reach Python three ways: in `MLIRError.error_diagnostics` (parse and pass
pipeline failures), through a context's diagnostic handler (errors emitted outside a
failing operation), and as `DiagnosticWarning` Python warnings (warnings and remarks
from ipu passes, which the bindings cannot emit). `Collector` gathers all three as
`Diagnostic` records. Like mlir-opt, `--verify-diagnostics` leaves out the verifier's
"see current operation" notes. Text parsed from a string gets the file name "-"; `relocate`
and `Collector` map it back to the real input name.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from torch_mlir import ir

from poptorch.passes import DiagnosticWarning
from poptorch.tools.verify_diagnostics import Diagnostic

_SEVERITIES = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.REMARK: "remark",
    ir.DiagnosticSeverity.NOTE: "note",
}
PARSED_NAME = "-"  # the file name MLIR gives text parsed from a string
OP_NOTE = "see current operation:"  # the verifier's note printing the failing op


def downcast(loc: ir.Location) -> ir.Location:
    """The concrete location class (diagnostics hand out plain `ir.Location`s)."""
    return ir.Location.from_attr(loc.attr) if type(loc) is ir.Location else loc


def _children(loc: ir.Location) -> list[ir.Location]:
    """The locations `loc` is made of, in the order MLIR looks for a file location."""
    if isinstance(loc, ir.NameLoc):
        return [loc.child_loc]
    if isinstance(loc, ir.CallSiteLoc):
        return [loc.callee, loc.caller]
    if isinstance(loc, ir.FusedLoc):
        return list(loc.locations)
    return []


# Locations nest as deep as the input does (ipu-opt accepts up to nesting.MAX_DEPTH),
# deeper than Python's recursion limit: both walks below keep their own stack.

def file_location(loc: ir.Location) -> ir.FileLineColLoc | None:
    """The file location MLIR would show for `loc` (callee first, fused in order)."""
    todo = [loc]
    while todo:
        loc = downcast(todo.pop())
        if isinstance(loc, ir.FileLineColLoc):
            return loc
        todo.extend(reversed(_children(loc)))
    return None


def relocate(loc: ir.Location, filename: str) -> ir.Location:
    """`loc` with every file location in the parsed-text file "-" renamed to `filename`."""
    todo: list[tuple[ir.Location, bool]] = [(downcast(loc), False)]
    done: list[ir.Location] = []  # rebuilt locations, children before their parent
    while todo:
        loc, children_done = todo.pop()
        children = _children(loc)
        if children and not children_done:
            todo.append((loc, True))
            todo.extend((downcast(c), False) for c in reversed(children))
            continue
        parts = done[len(done) - len(children):]
        del done[len(done) - len(children):]
        done.append(_rebuild(loc, parts, filename))
    return done[0]


def _rebuild(loc: ir.Location, parts: list[ir.Location], filename: str) -> ir.Location:
    """`loc` made of the relocated `parts` (its `_children`)."""
    if isinstance(loc, ir.FileLineColLoc):
        if loc.filename != PARSED_NAME:
            return loc
        return ir.Location.file(filename, loc.start_line, loc.start_col)
    if isinstance(loc, ir.NameLoc):
        return ir.Location.name(loc.name_str, parts[0])
    if isinstance(loc, ir.CallSiteLoc):
        return ir.Location.callsite(parts[0], [parts[1]])
    if isinstance(loc, ir.FusedLoc):
        return ir.Location.fused(parts, metadata=loc.metadata)
    return loc


def relocate_module(module: ir.Module, filename: str) -> None:
    """Give every op and block argument of a module parsed from text its place in `filename`."""

    def visit(op: ir.Operation) -> ir.WalkResult:
        op.location = relocate(op.location, filename)
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    arg.set_location(relocate(arg.location, filename))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


class Collector:
    """Gathers the diagnostics of one input chunk as `Diagnostic` records."""

    def __init__(self, context: ir.Context, filename: str, op_notes: bool = True) -> None:
        self.filename = filename
        self.op_notes = op_notes
        self.diagnostics: list[Diagnostic] = []
        context.attach_diagnostic_handler(self._handle)

    def _handle(self, diag: ir.Diagnostic) -> bool:
        self.add(diag)
        return True

    def make(self, severity: str, location: ir.Location, message: str) -> Diagnostic:
        """A Diagnostic at `location`, in the user's file when it was parsed from text."""
        loc = file_location(location)
        if loc is None:
            return Diagnostic(severity, message, None, None, None)
        name = self.filename if loc.filename == PARSED_NAME else loc.filename
        return Diagnostic(severity, message, name, loc.start_line, loc.start_col)

    def add(self, diag: ir.Diagnostic | ir.DiagnosticInfo) -> None:
        """Record an MLIR diagnostic and its notes."""
        severity = _SEVERITIES.get(diag.severity, "error")
        if not self.op_notes and severity == "note" and diag.message.startswith(OP_NOTE):
            return
        self.diagnostics.append(self.make(severity, diag.location, diag.message))
        for note in diag.notes:
            self.add(note)

    def add_error(self, err: ir.MLIRError) -> None:
        """Record the diagnostics an MLIRError carries (or its text if it has none)."""
        if not err.error_diagnostics:
            self.diagnostics.append(Diagnostic("error", str(err), None, None, None))
        for diag in err.error_diagnostics:
            self.add(diag)

    @contextlib.contextmanager
    def warnings(self) -> Iterator[None]:
        """Turn DiagnosticWarnings raised in the block into diagnostics."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DiagnosticWarning)
            try:
                yield
            finally:
                for w in caught:
                    if isinstance(w.message, DiagnosticWarning):
                        d = w.message
                        self.diagnostics.append(self.make(d.severity, d.location, d.message))
                    else:
                        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)
