"""poptorch.Options as data: a JSON document (stored in executable files) and back, the
run-time options applied to a loaded executable (spec 4.10.2) and the compile-time ones
it ignores.

A document holds every option by attribute name, categories as nested objects:
`{"format": "poptorch.Options", "version": 1, "values": {"device_iterations": 4, ...,
"Training": {"gradient_accumulation": 2, ...}, ...}}`; each value is encoded as
`encoding.py` says. Reading one calls the option methods, so it refuses what they refuse.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import torch

from poptorch.enums import AutoStage
from poptorch.errors import Error
from poptorch.options.categories import OptionsGroup, TensorLocationSettings, check_enum, shown
from poptorch.options.config_file import CATEGORIES
from poptorch.options.encoding import ENUMS, MAX_INT_BITS, STRATEGIES, encode, encode_group
from poptorch.options.options import Options
from poptorch.options.schema import CALLS, METHODS, RUN_TIME_OPTIONS, brief
from poptorch.options.strategies import (
    Phase,
    PipelinedExecution,
    Stage,
    _PhasedExecution,
    _Strategy,
)

__all__ = ["RUN_TIME_OPTIONS", "apply_run_time", "compile_time_differences",
           "options_from_json", "options_to_json"]

FORMAT, VERSION = "poptorch.Options", 1
MAX_DEPTH = 16  # nesting of a value; the deepest the options write is 6

_DTYPES = {str(v).removeprefix("torch."): v for v in vars(torch).values()
           if isinstance(v, torch.dtype)}


def options_to_json(options: Options) -> dict[str, Any]:
    """Every option value of `options` as JSON data (json.dumps writes it)."""
    values = encode_group("", options)
    for name in CATEGORIES:
        values[name] = encode_group(f"{name}.", getattr(options, name))
    return {"format": FORMAT, "version": VERSION, "values": values}


# ---- decoding --------------------------------------------------------------------------
def _fields(where: str, value: Any, keys: list[str], what: str = "entry") -> dict[str, Any]:
    """`value`, checked to be a JSON object with exactly the entries `keys`."""
    if type(value) is not dict:
        raise Error(f"{where} must be a JSON object, got {brief(value)}", type="options")
    for key in value:
        if key not in keys:
            raise Error(f"{where}: unknown {what} {brief(key)}", type="options")
    for key in keys:
        if key not in value:
            raise Error(f"{where}: missing {what} {key!r}", type="options")
    return value


def _list(what: str, value: Any) -> list[Any]:
    if type(value) is not list:
        raise Error(f"{what} must be a JSON array, got {brief(value)}", type="options")
    return value


def _decode(value: Any, depth: int = 0) -> Any:
    """The option value that `encode` wrote as `value`; an Error for anything else."""
    if depth > MAX_DEPTH:
        raise Error(f"the value is nested more than {MAX_DEPTH} levels deep", type="options")
    if type(value) is int and value.bit_length() > MAX_INT_BITS:
        raise Error(f"{shown(value)} is out of range (an option's ints have at most "
                    f"{MAX_INT_BITS} bits)", type="options")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is list:
        return [_decode(v, depth + 1) for v in value]
    tag, payload = next(iter(value.items())) if type(value) is dict and len(value) == 1 else ("", 0)
    if tag == "tuple" and type(payload) is list:
        return tuple(_decode(v, depth + 2) for v in payload)
    if tag == "dict" and type(payload) is list:
        result = {}
        for pair in payload:
            if type(pair) is not list or len(pair) != 2:
                raise Error(f"a dict entry must be a [key, value] pair, got {brief(pair)}",
                            type="options")
            key = _decode(pair[0], depth + 3)
            if type(key) not in (str, int):
                raise Error(f"a dict key must be a str or an int, got {brief(key)}",
                            type="options")
            result[key] = _decode(pair[1], depth + 3)
        return result
    if tag == "enum" and type(payload) is str:
        type_name, _, member = payload.partition(".")
        enum_type = ENUMS.get(type_name)
        if enum_type is None or member not in enum_type.__members__:
            raise Error(f"{brief(payload)} is not a poptorch enum value", type="options")
        return enum_type[member]
    if tag == "dtype" and type(payload) is str:
        if payload not in _DTYPES:
            raise Error(f"{brief(payload)} is not a torch dtype", type="options")
        return _DTYPES[payload]
    if tag == "tensor_location":
        settings = _fields("tensor location settings", payload,
                           list(TensorLocationSettings()._values()), "setting")
        return TensorLocationSettings(**{key: _decode(v, depth + 2)
                                         for key, v in settings.items()})
    if tag == "strategy":
        return _decode_strategy(payload, depth + 2)
    raise Error(f"{brief(value)} is not an option value options_to_json writes",
                type="options")


def _decode_strategy(payload: Any, depth: int) -> _Strategy:
    """An execution strategy, built with its own constructors and methods."""
    kind = payload.get("type") if type(payload) is dict else None
    cls = STRATEGIES.get(kind) if type(kind) is str else None
    if cls is None:
        raise Error(f"the strategy's type must be one of {', '.join(STRATEGIES)}, got "
                    f"{brief(kind)}", type="options")
    phased = issubclass(cls, _PhasedExecution)
    keys = (["type", "phases", "liveness", "separate_backward"] if phased
            else ["type", "auto_stage", "stages"])
    keys += ["schedule", "recompute"] if issubclass(cls, PipelinedExecution) else []
    fields = _fields(kind, payload, keys, "field")

    def stages(value: Any) -> list[tuple[Stage, Any]]:
        result = []
        for record in _list("stages", value):
            stage = _fields("a stage", record, ["blocks", "ipu"], "field")
            blocks = _list("a stage's blocks", _decode(stage["blocks"], depth + 3))
            result.append((Stage(*blocks), _decode(stage["ipu"], depth + 3)))
        return result

    def place(staged: list[tuple[Stage, Any]]) -> list[Stage]:
        for stage, ipu in staged:
            if ipu is not None:
                stage.ipu(ipu)
        return [stage for stage, _ in staged]

    if phased:
        phases = []
        for record in _list("phases", fields["phases"]):
            entry = _fields("a phase", record, ["stages", "ipus"], "field")
            staged = stages(entry["stages"])
            phase = Phase(*[stage for stage, _ in staged])
            if entry["ipus"] is not None:  # before the stages' own IPUs, which may differ
                phase.ipus(*_list("a phase's ipus", _decode(entry["ipus"], depth + 2)))
            place(staged)
            phases.append(phase)
        strategy = cls(*phases)
        strategy.setTensorsLiveness(_decode(fields["liveness"], depth + 1))
        strategy.useSeparateBackwardPhase(_decode(fields["separate_backward"], depth + 1))
    else:
        placed = place(stages(fields["stages"]))
        auto = check_enum("auto_stage", _decode(fields["auto_stage"], depth + 1), AutoStage)
        strategy = cls(*placed) if placed else cls(auto)
    if isinstance(strategy, PipelinedExecution):
        strategy.setSchedule(_decode(fields["schedule"], depth + 1))
        strategy.useRecomputation(_decode(fields["recompute"], depth + 1))
    return strategy


def _same(a: Any, b: Any) -> bool:
    """JSON data equality that tells True from 1 and 1 from 1.0."""
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(map(_same, a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _difference(a: Any, b: Any) -> tuple[str, Any, Any]:
    """(path, part of `a`, part of `b`) where the JSON data `a` and `b` first differ."""
    if type(a) is type(b) is list and len(a) == len(b):
        keys, form = range(len(a)), "[{}]"
    elif type(a) is type(b) is dict and a.keys() == b.keys():
        keys, form = list(a), ".{}"
    else:
        return "", a, b
    key = next(k for k in keys if not _same(a[k], b[k]))
    path, a_part, b_part = _difference(a[key], b[key])
    return form.format(key) + path, a_part, b_part


def _read_group(prefix: str, group: OptionsGroup, data: dict[str, Any]) -> None:
    """Set the options of `group` that differ from `data` with their methods."""
    methods = METHODS.get(prefix, {})
    done = set()
    for name in data:
        method = methods.get(name, "")
        names = [n for n in data if methods.get(n) == method] if method else [name]
        if method in done or all(_same(data[n], encode(prefix + n, getattr(group, n)))
                                 for n in names):
            continue
        if not method:
            raise Error(f"option {prefix}{name}: no method sets it", type="options")
        done.add(method)
        try:
            values = {n: _decode(data[n]) for n in names}
            if method in CALLS:
                CALLS[method](group, values)
            else:
                getattr(group, method)(values[name])
        except Error as err:
            raise Error(f"option {prefix}{name}: {err.message}", type="options") from None
        except (TypeError, ValueError, OverflowError) as err:
            raise Error(f"option {prefix}{name}: {method}: {err}", type="options") from None


def options_from_json(data: Any) -> Options:
    """The Options that options_to_json wrote as `data`, read from an untrusted source:
    anything else raises poptorch.Error(type="options") naming the option. Values are set
    with the option methods; nothing named by the data is imported or run."""
    try:
        return _options_from_json(data)
    except RecursionError:  # a safety net: _decode limits the depth it walks
        raise Error("the options document is nested too deeply", type="options") from None


def _options_from_json(data: Any) -> Options:
    document = _fields("options document", data, ["format", "version", "values"])
    if not _same(document["format"], FORMAT):
        raise Error(f"options document: format must be {FORMAT!r}, got "
                    f"{brief(document['format'])}", type="options")
    if not _same(document["version"], VERSION):
        raise Error(f"options document: version {brief(document['version'])} is not "
                    f"{VERSION}, the version this poptorch-mlir reads", type="options")
    options = Options()
    general = list(options._values())
    values = _fields("options", document["values"], general + list(CATEGORIES), "option")
    _read_group("", options, {name: values[name] for name in general})
    for name in CATEGORIES:
        category = getattr(options, name)
        _read_group(f"{name}.", category, _fields(f"options {name}", values[name],
                                                  list(category._values()), "option"))
    written = options_to_json(options)["values"]
    for prefix, expected, actual in [("", values, written), *(
            (f"{name}.", values[name], written[name]) for name in CATEGORIES)]:
        for key, value in expected.items():
            if not (prefix == "" and key in CATEGORIES or _same(value, actual[key])):
                path, held, sets = _difference(value, actual[key])
                method = METHODS.get(prefix, {}).get(key, "its method")
                raise Error(f"option {prefix}{key}{path}: the document holds {brief(held)}, "
                            f"but {method}() sets {brief(sets)} with the other options of "
                            "this document", type="options")
    return options


# ---- run-time and compile-time options ---------------------------------------------------
def _group(options: Options, prefix: str) -> OptionsGroup:
    return functools.reduce(getattr, prefix.split(".")[:-1], options)


def apply_run_time(target: Options, source: Options) -> None:
    """Copy the run-time options of `source` into `target` (possible when `target` is
    frozen by a compiled model)."""
    for name in sorted(RUN_TIME_OPTIONS):
        prefix, _, attribute = name.rpartition(".")
        prefix += "." if prefix else ""
        value = getattr(_group(source, prefix), attribute)
        setattr(_group(target, prefix), attribute, copy.deepcopy(value))


def _equal(where: str, a: Any, b: Any) -> bool:
    try:
        return _same(encode(where, a), encode(where, b))
    except Error:  # a value options_to_json refuses (a user's strategy class)
        return a is b


def compile_time_differences(a: Options, b: Options) -> list[str]:
    """PopTorch's names (the methods setting them, as `Category.method` for categories) of
    the compile-time options whose values differ between `a` and `b`."""
    names: list[str] = []
    for prefix, methods in METHODS.items():
        group_a, group_b = _group(a, prefix), _group(b, prefix)
        for attribute, value in group_a._values().items():
            name = prefix + methods.get(attribute, attribute)
            if (prefix + attribute not in RUN_TIME_OPTIONS and name not in names
                    and not _equal(prefix + attribute, value, getattr(group_b, attribute))):
                names.append(name)
    return names
