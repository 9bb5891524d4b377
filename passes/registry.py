"""The one pass registry: argument -> pass class, read by ipu-opt, --list-passes and the API.

A pass is a subclass of `Pass` with a kebab-case `argument` (`ipu-...`), a one-line
`description`, typed `options`, and a `run(module)` method that walks and rewrites the
IR. `@register` adds it to the table. `Pass.add_to(pm)` puts an instance into an MLIR
PassManager as a Python-defined pass, so it runs between upstream and torch-mlir passes
in one pipeline, with IR printing and verification by MLIR itself.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from poptorch.dialects.ipu import walk

log = logging.getLogger("poptorch.passes")


class PassOptionError(ValueError):
    """A pass option that does not exist or whose value has the wrong type."""


# Integer options hold 64-bit values, as MLIR's `long` options and i64 attributes do
# (a bound of every int option, below any tighter one it has).
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
_INT = re.compile(r"[+-]?[0-9]{1,19}")  # ASCII digits only, and never a huge int() parse
_DIGITS = re.compile(r"[+-]?[0-9]+")  # an integer, however long


@dataclass(frozen=True)
class Option:
    """A typed pass option: `name` as written on the command line (kebab-case).

    `minimum`/`maximum` bound an int option (default: the 64-bit range). A str option
    with `item` holds a comma-separated list whose every item matches `item` in full
    (`item_help` shows the syntax) and whose numbers after an item's first '=' are at
    most `item_max`; the empty string is the empty list.
    """

    name: str
    type: type  # bool, int, float or str
    default: Any
    description: str
    minimum: int | None = None
    maximum: int | None = None
    item: str | None = None
    item_help: str = ""
    item_max: int | None = None  # the largest number allowed after an item's first '='

    @property
    def attribute(self) -> str:
        """The Python attribute the value lands in on the pass instance."""
        return self.name.replace("-", "_")

    def parse(self, text: str, argument: str) -> Any:
        """Convert the textual value `text` as MLIR's pass option parser would, checked."""
        value: Any = None
        if self.type is bool:
            value = {"": True, "true": True, "1": True, "false": False, "0": False}.get(text)
        elif self.type is int:
            value = int(text) if _INT.fullmatch(text) else None
        elif self.type is float:
            with contextlib.suppress(ValueError):
                value = float(text)
        else:
            value = text
        if value is None:
            accepts = self.accepts(bounded=self.type is int and bool(_DIGITS.fullmatch(text)))
            raise PassOptionError(f"{self._what(argument)} expects {accepts}, got '{text}'")
        self.check(value, argument)
        return value

    def check(self, value: Any, argument: str) -> None:
        """Raise PassOptionError unless `value` (of the right type) is accepted."""
        bad = None
        if self.type is int:
            low = INT_MIN if self.minimum is None else self.minimum
            high = INT_MAX if self.maximum is None else self.maximum
            bad = None if low <= value <= high else f"got {value}"
        elif self.type is float and not math.isfinite(value):
            bad = f"got {value} (a finite number is needed)"
        elif self.type is str and self.item is not None and value:
            items = value.split(",")
            wrong = next((i for i in items if not re.fullmatch(self.item, i)
                          or not self._ids_ok(i)), None)
            if wrong == "":
                bad = f"got an empty item in '{_cut(value)}'"
            elif wrong is not None:
                bad = f"got '{_cut(wrong)}'" + (f" in '{_cut(value)}'" if wrong != value else "")
        elif self.type is str and any(ch.isspace() or ch in "{}" for ch in value):
            # would not survive the option text `{a=... b=...}`
            bad = f"got {value!r} (spaces and braces cannot be written in options)"
        if bad is not None:
            raise PassOptionError(f"{self._what(argument)} expects "
                                  f"{self.accepts(bounded=self.type is int)}, {bad}")

    def _ids_ok(self, item: str) -> bool:
        numbers = re.findall(r"[0-9]+", item.partition("=")[2])
        return self.item_max is None or all(int(n) <= self.item_max for n in numbers)

    def accepts(self, bounded: bool = False) -> str:
        """What the option accepts, in words; with `bounded`, an int option's range even
        when it is the 64-bit one (for a value outside it)."""
        if self.type is int and bounded and self.minimum is None and self.maximum is None:
            return f"an integer from {INT_MIN} to {INT_MAX}"
        if self.type is int and (self.minimum is not None or self.maximum is not None):
            if self.minimum is None:
                return f"an integer of at most {self.maximum}"
            if self.maximum is None:
                return f"an integer of at least {self.minimum}"
            return f"an integer from {self.minimum} to {self.maximum}"
        if self.type is str and self.item is not None:
            ids = "" if self.item_max is None else f", ids from 0 to {self.item_max}"
            return f"a comma-separated list of {self.item_help}{ids}"
        return _TYPE_NAMES[self.type]

    def _what(self, argument: str) -> str:
        return f"option '{self.name}' of pass '{argument}'"


def _cut(text: str, limit: int = 80) -> str:
    """`text` for a message, cut to `limit` characters (a list option may be long)."""
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


_TYPE_NAMES = {
    bool: "a boolean (true/false)",
    int: "an integer",
    float: "a number",
    str: "a string",
}

# Bounds the passes' own options use (see `Option`): stage, IPU and phase ids in option
# lists go up to MAX_ID (the schedule keeps per-IPU state, so ids are not free); `ID` is
# one id in an item pattern.
MAX_ID = 65535
ID = r"[0-9]{1,9}"


class PassError(Exception):
    """Raised by `Pass.error`: the pass failed on `op` with a user-facing message."""

    def __init__(self, op: ir.Operation | ir.OpView, message: str) -> None:
        super().__init__(message)
        self.op = op


class DiagnosticWarning(UserWarning):
    """A warning or remark a pass emits at an op's location.

    MLIR's Python bindings can only emit errors, so warnings travel as Python warnings:
    API users see them through `warnings`, and ipu-opt prints and verifies them like
    MLIR diagnostics.
    """

    def __init__(self, location: ir.Location, message: str, severity: str = "warning") -> None:
        super().__init__(message)
        self.location = location
        self.message = message
        self.severity = severity


class Pass:
    """Base of every ipu pass. Subclasses set `argument`, `description`, `options`."""

    argument: ClassVar[str]
    description: ClassVar[str]
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, **values: Any) -> None:
        known = {o.attribute: o for o in self.options}
        for key, value in values.items():
            if key not in known:
                raise PassOptionError(self._unknown_option(key.replace("_", "-")))
            opt = known[key]
            # bool is an int in Python, not a pass option's integer
            if not isinstance(value, opt.type) or (opt.type is not bool
                                                   and isinstance(value, bool)):
                raise PassOptionError(
                    f"option '{opt.name}' of pass '{self.argument}' expects "
                    f"{opt.accepts()}, got {value!r}"
                )
            opt.check(value, self.argument)
        for opt in self.options:
            setattr(self, opt.attribute, values.get(opt.attribute, opt.default))

    @classmethod
    def from_text(cls, text: str) -> Pass:
        """Build from MLIR's option syntax: `a=1 b=true` (space separated), each once."""
        by_name = {o.name: o for o in cls.options}
        values: dict[str, Any] = {}
        given: dict[str, str] = {}
        for item in text.split():
            name, _, value = item.partition("=")
            if not name:
                raise PassOptionError(f"pass '{cls.argument}' expects options as "
                                      f"name=value, got '{item}'")
            if name not in by_name:
                raise PassOptionError(cls._unknown_option(name))
            if name in given:
                raise PassOptionError(f"option '{name}' of pass '{cls.argument}' is given "
                                      f"twice ('{given[name]}' and '{item}'); give it once")
            given[name] = item
            values[by_name[name].attribute] = by_name[name].parse(value, cls.argument)
        return cls(**values)

    @classmethod
    def _unknown_option(cls, name: str) -> str:
        choices = ", ".join(o.name for o in cls.options) or "none"
        return f"pass '{cls.argument}' has no option '{name}' (options: {choices})"

    def option_text(self) -> str:
        """The options as `{a=1 b=true}` (empty when the pass has none)."""
        if not self.options:
            return ""
        items = " ".join(f"{o.name}={_format(getattr(self, o.attribute))}" for o in self.options)
        return "{" + items + "}"

    def run(self, module: ir.Operation) -> None:
        """Transform `module` in place; report user errors with `self.error`."""
        raise NotImplementedError

    walk = staticmethod(walk)  # every op nested in an op, pre-order (`dialects.ipu.walk`)

    def error(self, op: ir.Operation | ir.OpView, message: str) -> PassError:
        """An error at `op`'s location; `raise self.error(op, "...")` fails the pass."""
        return PassError(op, message)

    def report(self, op: ir.Operation | ir.OpView, message: str) -> None:
        """Emit an error at `op`'s location and go on; the pass fails when it returns."""
        op.location.emit_error(message)
        self._failed = True

    def warn(self, op: ir.Operation | ir.OpView, message: str) -> None:
        """Emit a warning diagnostic at `op`'s location."""
        warnings.warn(DiagnosticWarning(op.location, message), stacklevel=2)

    def remark(self, op: ir.Operation | ir.OpView, message: str) -> None:
        """Emit a remark diagnostic at `op`'s location."""
        warnings.warn(DiagnosticWarning(op.location, message, "remark"), stacklevel=2)

    def add_to(self, pm: PassManager) -> None:
        """Append this pass to `pm` as a Python-defined MLIR pass."""

        def run(op: ir.Operation, pass_: Any) -> None:
            self._failed = False
            try:
                self.run(op)
                if self._failed:
                    pass_.signal_pass_failure()
            except PassError as err:
                err.op.location.emit_error(str(err))
                pass_.signal_pass_failure()
            except Exception as err:  # noqa: BLE001 - a pass bug must stay a diagnostic
                log.debug("pass %s crashed:\n%s", self.argument, traceback.format_exc())
                op.location.emit_error(
                    f"internal error in pass '{self.argument}': {type(err).__name__}: {err}"
                )
                pass_.signal_pass_failure()

        pm.add(run, name=type(self).__name__, argument=self.argument,
               description=self.description)


def _format(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


_REGISTRY: dict[str, type[Pass]] = {}


def register(cls: type[Pass]) -> type[Pass]:
    """Class decorator adding a pass to the registry; an argument registers once."""
    if not cls.argument.startswith("ipu-"):
        raise ValueError(f"pass argument '{cls.argument}' must start with 'ipu-'")
    if cls.argument in _REGISTRY:
        raise ValueError(f"pass '{cls.argument}' is registered twice")
    _REGISTRY[cls.argument] = cls
    return cls


def get_pass(argument: str) -> type[Pass] | None:
    """The registered pass class for `argument`, or None."""
    return _REGISTRY.get(argument)


def all_passes() -> list[type[Pass]]:
    """Every registered pass, sorted by argument."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]
