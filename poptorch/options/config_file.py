"""Options.loadFromFile (spec 4.1.1): config files of option calls, read with `ast` and
never evaluated.

Each line calls one method of the options without the `options.` prefix
(`deviceIterations(4)`, `Training.gradientAccumulation(2)`) with arguments that are
literals, poptorch enum values, torch dtypes, or poptorch's option objects built the
same way (`setExecutionStrategy(poptorch.ShardedExecution())`, the spec's own example;
`poptorch.Stage("a").ipu(1)`, `poptorch.TensorLocationSettings().useOnChipStorage(False)`):
only those classes and their public methods are called, nothing else is evaluated. Blank
lines and `#` comments are skipped. Any other line, and any refusal by the method, is a
poptorch.Error located at `path:line`: the lines before it have been applied, the lines
after it have not.
"""

from __future__ import annotations

import ast
import enum
import inspect
from typing import Any

import torch

from poptorch import enums
from poptorch.errors import Error
from poptorch.options.categories import TensorLocationSettings
from poptorch.options.strategies import (
    ParallelPhasedExecution,
    Phase,
    PipelinedExecution,
    SerialPhasedExecution,
    ShardedExecution,
    Stage,
)

CATEGORIES = ("Training", "Precision", "TensorLocations", "Distributed", "Jit", "_Popart")
MAX_FILE_BYTES = 1 << 20
_NOT_SETTERS = frozenset({"clone", "toDict", "loadFromFile", "defaultOutputMode"})
# looked up in the modules' namespaces: a name in the file never triggers an import
_DTYPES = {name: value for name, value in vars(torch).items() if isinstance(value, torch.dtype)}
_ENUMS = {name: value for name, value in vars(enums).items()
          if isinstance(value, type) and issubclass(value, enum.Enum)
          and value.__module__ == enums.__name__}
# the objects a line may build, as `poptorch.<name>(...)`, and then call public methods of
_CLASSES = {cls.__name__: cls for cls in (
    PipelinedExecution, ShardedExecution, SerialPhasedExecution, ParallelPhasedExecution,
    Stage, Phase, TensorLocationSettings)}
_NOT_LITERAL = ("is not a literal (number, string, bool, None, list, tuple or dict), a poptorch "
                "enum value such as poptorch.OutputMode.All, a torch dtype or one of "
                f"poptorch.{', poptorch.'.join(_CLASSES)} built from such values")


def load_config(options: Any, path: str) -> None:
    """Apply the option calls of the config file `path` to `options`, line by line."""
    for lineno, raw in enumerate(_read(path).split(b"\n"), 1):
        try:
            text = _decode(raw, lineno).strip()
            if text and not text.startswith("#"):
                _call(options, *parse_config_line(text))
        except Error as err:
            raise Error(err.message, type="options", location=f"{path}:{lineno}") from None


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except (OSError, ValueError) as err:  # ValueError: a NUL character in the path
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise Error(f"loadFromFile: cannot read {path}: {reason}", type="options") from None
    if len(data) > MAX_FILE_BYTES:
        raise Error(f"loadFromFile: {path} is larger than {MAX_FILE_BYTES} bytes, too large "
                    "for a config file of option calls", type="options")
    return data


def _decode(raw: bytes, lineno: int) -> str:
    if lineno == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise Error(f"the line is not valid UTF-8: byte 0x{raw[err.start]:02x} at column "
                    f"{err.start + 1}", type="options") from None


def _excerpt(text: str, limit: int = 100) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}..."


def _source(text: str, node: ast.AST) -> str:
    """The source text of `node` in `text`, shortened for a message."""
    segment = ast.get_source_segment(text, node) or type(node).__name__
    return segment if len(segment) <= 80 else f"{segment[:77]}..."


def parse_config_line(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """The dotted method name and arguments of a config-file line such as
    `Training.gradientAccumulation(4)`, without evaluating anything."""
    try:
        try:
            call = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError) as err:  # ValueError: NUL bytes before Python 3.12
            reason = err.msg if isinstance(err, SyntaxError) else str(err)
            raise Error(f"syntax error ({reason}) in {_excerpt(text)}", type="options") from None
        if not isinstance(call, ast.Call):
            raise Error(f"expected an option call such as deviceIterations(4), got "
                        f"{_excerpt(text)}", type="options")
        name = _dotted_name(call.func) or _source(text, call.func)
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                kw.arg is None for kw in call.keywords):
            raise Error(f"{name}: * and ** arguments are not supported", type="options")
        return (name, [_config_value(text, name, a) for a in call.args],
                {kw.arg: _config_value(text, name, kw.value) for kw in call.keywords})
    except (RecursionError, MemoryError):  # the parser's and literal_eval's nesting limits
        raise Error(f"the line is nested too deeply for an option call: {_excerpt(text, 60)}",
                    type="options") from None


def _dotted_name(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of attribute reads on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _config_value(text: str, where: str, node: ast.expr) -> Any:
    """The value of a config-file argument: a literal, a poptorch enum, a torch dtype, a
    list or tuple of such values, or an object of `_CLASSES` built from them."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        pass
    if isinstance(node, ast.List | ast.Tuple):
        values = [_config_value(text, where, element) for element in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.Call) and _built_from_class(node):
        return _build(text, where, node)
    parts = (_dotted_name(node) or "").split(".")
    if len(parts) == 2 and parts[0] == "torch" and parts[1] in _DTYPES:
        return _DTYPES[parts[1]]
    if len(parts) >= 2 and parts[:-2] in ([], ["poptorch"], ["poptorch", "enums"]):
        enum_type = _ENUMS.get(parts[-2])
        if enum_type is not None and parts[-1] in enum_type.__members__:
            return enum_type[parts[-1]]
    raise Error(f"{where}: argument {_source(text, node)} {_NOT_LITERAL}", type="options")


def _built_from_class(call: ast.Call) -> bool:
    """Whether `call` is `poptorch.<class>(...)` of `_CLASSES`, or method calls on one."""
    while isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call):
        call = call.func.value
    name = _dotted_name(call.func) or ""
    return name.startswith("poptorch.") and name[9:] in _CLASSES


def _build(text: str, where: str, call: ast.Call) -> Any:
    """The object made by `poptorch.<class>(...)` or by a public method called on such an
    object (`poptorch.Stage("a").ipu(1)`), its arguments being config values too."""
    source = _source(text, call)
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
            kw.arg is None for kw in call.keywords):
        raise Error(f"{where}: * and ** arguments are not supported in {source}",
                    type="options")
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        target = _build(text, where, func.value)
        if func.attr.startswith("_") or not inspect.isfunction(
                inspect.getattr_static(type(target), func.attr, None)):
            raise Error(f"{where}: {_excerpt(func.attr, 40)} is not a method of "
                        f"poptorch.{type(target).__name__} in {source}", type="options")
        function: Any = getattr(target, func.attr)
    else:  # poptorch.<class>, as _built_from_class checked
        function = _CLASSES[(_dotted_name(func) or "")[9:]]
    args = [_config_value(text, where, a) for a in call.args]
    kwargs = {kw.arg: _config_value(text, where, kw.value) for kw in call.keywords}
    try:
        return function(*args, **kwargs)
    except Error as err:
        raise Error(f"{where}: {source}: {err.message}", type="options") from None
    except (TypeError, ValueError, OverflowError) as err:  # bad arguments
        raise Error(f"{where}: {source}: {err}", type="options") from None


def _call(options: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Call the option method `name` (`method` or `Category.method`) of `options`."""
    parts = name.split(".")
    target, method = options, parts[0] if len(parts) == 1 else ""
    if len(parts) == 2 and parts[0] in CATEGORIES:
        target, method = getattr(options, parts[0]), parts[1]
    if (not method or method.startswith("_") or method in _NOT_SETTERS
            or not inspect.isfunction(inspect.getattr_static(type(target), method, None))):
        raise Error(f"unknown option {_excerpt(name, 80)}: expected a method of "
                    f"poptorch.Options or of its categories {', '.join(CATEGORIES)}",
                    type="options")
    try:
        getattr(target, method)(*args, **kwargs)
    except (TypeError, ValueError, OverflowError) as err:  # bad arguments for the method
        raise Error(f"{name}: {err}", type="options") from None
