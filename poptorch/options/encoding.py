"""An option value as JSON data and as text: the encoding that the options' JSON
document stores (`serialise.py`) and the `name = value` listing of `str(options)`
(`Options.__str__`), which shows execution strategies through their encoding.

Values that JSON lacks are objects of one tagged entry: `{"enum": "OutputMode.All"}`,
`{"dtype": "float16"}`, `{"tuple": [...]}`, `{"dict": [[key, value], ...]}`,
`{"tensor_location": {...}}`, `{"strategy": {"type": "PipelinedExecution", ...}}`.
"""

from __future__ import annotations

import enum
from typing import Any

import torch

from poptorch import enums
from poptorch.errors import Error
from poptorch.options.categories import OptionsGroup, TensorLocationSettings, shown
from poptorch.options.schema import brief, option_groups
from poptorch.options.strategies import (
    ParallelPhasedExecution,
    PipelinedExecution,
    SerialPhasedExecution,
    ShardedExecution,
    Stage,
    _PhasedExecution,
    _Strategy,
)

MAX_INT_BITS = 64

STRATEGIES = {cls.__name__: cls for cls in (PipelinedExecution, ShardedExecution,
                                            SerialPhasedExecution, ParallelPhasedExecution)}
ENUMS = {name: value for name, value in vars(enums).items()
         if isinstance(value, type) and issubclass(value, enum.Enum)
         and value.__module__ == enums.__name__}


# ---- JSON data --------------------------------------------------------------------------
def encode(where: str, value: Any) -> Any:
    """`value` as JSON data (see the module docstring)."""
    if type(value) is int and value.bit_length() > MAX_INT_BITS:
        raise Error(f"options_to_json: option {where} holds {shown(value)}, more than an "
                    f"option's {MAX_INT_BITS} bits", type="options")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is list:
        return [encode(where, v) for v in value]
    if type(value) is tuple:
        return {"tuple": [encode(where, v) for v in value]}
    if type(value) is dict:
        return {"dict": [[encode(where, k), encode(where, v)] for k, v in value.items()]}
    if isinstance(value, enum.Enum) and ENUMS.get(type(value).__name__) is type(value):
        return {"enum": f"{type(value).__name__}.{value.name}"}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if type(value) is TensorLocationSettings:
        return {"tensor_location": encode_group(where + ".", value)}
    if type(value) in STRATEGIES.values():
        return {"strategy": encode_strategy(where, value)}
    raise Error(f"options_to_json: option {where} holds {brief(value)}, which cannot be "
                f"stored: only numbers, str, None, lists, tuples, dicts, poptorch enums, torch "
                f"dtypes, TensorLocationSettings and poptorch.{', poptorch.'.join(STRATEGIES)}",
                type="options")


def encode_group(prefix: str, group: OptionsGroup) -> dict[str, Any]:
    """The option values of `group` as JSON data, by attribute name (`prefix` names the
    group in errors)."""
    return {name: encode(prefix + name, value) for name, value in group._values().items()}


def encode_strategy(where: str, strategy: _Strategy) -> dict[str, Any]:
    """An execution strategy as JSON data: its type and the fields its methods set."""
    def stages(items: list[Stage]) -> list[dict[str, Any]]:
        return [{"blocks": list(s._blocks), "ipu": s._ipu} for s in items]

    fields: dict[str, Any] = {"type": type(strategy).__name__}
    if isinstance(strategy, _PhasedExecution):
        fields["phases"] = [{"stages": stages(p.stages), "ipus": None if p._ipus is None
                             else encode(where, list(p._ipus))} for p in strategy._phases]
        fields["liveness"] = encode(where, strategy._liveness)
        fields["separate_backward"] = strategy._separate_backward
    else:
        fields["auto_stage"] = encode(where, strategy._auto)
        fields["stages"] = stages(strategy._stages)
    if isinstance(strategy, PipelinedExecution):
        fields["schedule"] = encode(where, strategy._schedule)
        fields["recompute"] = strategy._recompute
    return fields


# ---- str(options) ------------------------------------------------------------------------
def _show(value: Any) -> str:
    """A value as a user writes it: enum members as `Type.Member`, dtypes as `torch.x`."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, torch.dtype):
        return str(value)
    if type(value) in (list, tuple):
        items = ", ".join(map(_show, value))
        return f"[{items}]" if type(value) is list else f"({items}{',' * (len(value) == 1)})"
    if type(value) is dict:
        return "{" + ", ".join(f"{_show(k)}: {_show(v)}" for k, v in value.items()) + "}"
    if type(value) in STRATEGIES.values():
        fields = encode_strategy("execution_strategy", value)
        kind = fields.pop("type")
        return f"{kind}({', '.join(f'{k}={_show_json(v)}' for k, v in fields.items())})"
    return shown(value)


def _show_json(value: Any) -> str:
    """Encoded strategy fields: enums as `Type.Member`, stages as `{blocks: [...], ...}`."""
    if type(value) is dict and set(value) == {"enum"}:
        return value["enum"]
    if type(value) is dict:
        return "{" + ", ".join(f"{k}: {_show_json(v)}" for k, v in value.items()) + "}"
    if type(value) is list:
        return "[" + ", ".join(map(_show_json, value)) + "]"
    return repr(value)


def options_text(options: OptionsGroup) -> str:
    """str(options): one `name = value` line per option, `Category.name` in categories
    and `Category.name.setting` for TensorLocationSettings."""
    lines = []
    for prefix, group in option_groups(options):
        for name, value in group._values().items():
            if not isinstance(value, OptionsGroup):  # settings: their own lines
                lines.append(f"{prefix}{name} = {_show(value)}")
    return "\n".join(lines)
