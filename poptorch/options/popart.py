"""Options._Popart (PopTorch's `_PopartOptions`): the PopART session options users set
with `opts._Popart.set(key, value)`, and which of them this compiler honours.

PopTorch passes any key on to PopART's SessionOptions; here only the keys with a meaning
in this compiler are accepted, and any other key is a poptorch.Error naming it (no option
is silently ignored), with the poptorch.Options method that does the same where one exists.
Accepted:

- `autoRecomputation`: an int of PopART's RecomputationType (graphcore/popart
  willow/include/popart/sessionoptions.hpp: None=0, Standard=1, NormOnly=2, Pipeline=3,
  RecomputeAll=4). 0 stashes every activation (as PopTorch, where the user's value
  replaces the Pipeline it sets when it pipelines); 3 recomputes the forward stages of a
  pipeline but its fused last stage (what PopTorch's pipelines do by default, and
  `PipelinedExecution.useRecomputation`); 4 recomputes in every stage, so a model that is
  not pipelined (one stage) keeps only its `recomputationCheckpoint` values and inputs
  between forward and backward (`ipu-recompute{fused-stage}`). Standard and NormOnly
  (PopART's own choice of what to recompute) are refused.
- `explicitRecomputation`: a bool. PopART then writes the recomputed ops into its IR
  instead of re-running fragments at lowering; ipu-recompute always writes them into the
  IR (ops tagged `ipu.recomputed`), which computes the same values with the same memory,
  so both values are accepted.
- `instrumentWithHardwareCycleCounter` and `rearrangeAnchorsOnHost`, which PopTorch sets
  to False in every `_PopartOptions`: False only (the defaults, which this compiler's
  programs match).

`options` is PopTorch's dict view of the values set (the two defaults included).
"""

from __future__ import annotations

from typing import Any

from poptorch.errors import Error
from poptorch.options.categories import OptionsGroup, shown

RECOMPUTATION_TYPES = {0: "None", 1: "Standard", 2: "NormOnly", 3: "Pipeline",
                       4: "RecomputeAll"}
NONE, PIPELINE, RECOMPUTE_ALL = 0, 3, 4
_DEFAULTS = {"instrumentWithHardwareCycleCounter": False, "rearrangeAnchorsOnHost": False}
# PopART keys with a poptorch.Options method of their own
_INSTEAD = {"enableStableNorm": "Options.enableStableNorm(enabled)",
            "syntheticDataMode": "Options.enableSyntheticData(enabled)",
            "availableMemoryProportion": "Options.setAvailableMemoryProportion(...)",
            "enableEngineCaching": "Options.enableExecutableCaching(path)",
            "cachePath": "Options.enableExecutableCaching(path)",
            "updatableNamedBuffers": "Options.updatableNamedBuffers(buffers)",
            "partialsTypeMatMuls": "Options.Precision.setPartialsType(dtype)",
            "enableStochasticRounding": "Options.Precision.enableStochasticRounding(enabled)"}


def _check(key: Any, value: Any) -> None:
    """Raise poptorch.Error unless `value` is one this compiler honours for `key`."""
    where = f"_Popart.set({key!r}, {shown(value)})"
    if key == "autoRecomputation":
        if type(value) is not int or value not in RECOMPUTATION_TYPES:
            raise Error(f"{where}: autoRecomputation takes an int of PopART's "
                        f"RecomputationType: {_types()}", type="options")
        if value not in (NONE, PIPELINE, RECOMPUTE_ALL):
            raise Error(f"{where}: RecomputationType.{RECOMPUTATION_TYPES[value]} (PopART "
                        "choosing what to recompute) is not supported; use 4 (RecomputeAll) "
                        "with poptorch.recomputationCheckpoint at the values to keep, "
                        "3 (Pipeline) or 0 (None)", type="options")
    elif key == "explicitRecomputation":
        if type(value) is not bool:
            raise Error(f"{where}: explicitRecomputation takes True or False",
                        type="options")
    elif key in _DEFAULTS:
        if value is not False:
            raise Error(f"{where}: only {key}=False (PopTorch's default) is supported",
                        type="options")
    else:
        instead = f"; use {_INSTEAD[key]} instead" if key in _INSTEAD else ""
        raise Error(f"{where}: PopART option {key!r} is not supported by this compiler "
                    f"(supported: autoRecomputation, explicitRecomputation, and "
                    f"{', '.join(_DEFAULTS)} set to False){instead}", type="options")


def _types() -> str:
    return ", ".join(f"{name}={n}" for n, name in RECOMPUTATION_TYPES.items())


class _PopartOptions(OptionsGroup):
    """Options of the PopART backend (`Options._Popart`), for advanced users: the keys
    this compiler honours (see the module docstring), as ints and bools, PopART's enums
    given as ints.

    >>> opts._Popart.set("autoRecomputation", 4)  # RecomputationType::RecomputeAll
    """

    _prefix = "_Popart."

    def __init__(self) -> None:
        self.options: dict[str, Any] = dict(_DEFAULTS)

    def set(self, key: str, value: Any) -> _PopartOptions:
        """Set PopART session option `key` to `value` (refused when not supported)."""
        _check(key, value)
        self.options = {**self.options, key: value}  # through the frozen-options check
        return self

    def setEngineOptions(self, engine_options: dict[str, str]) -> _PopartOptions:  # noqa: N802
        """Poplar engine options: none is supported (an Error naming them)."""
        return self.set("engineOptions", engine_options)

    def setPatterns(self, patterns: dict[str, bool],  # noqa: N802
                    level: int = 2) -> _PopartOptions:
        """PopART's pattern levels: not supported (an Error)."""
        return self.set("patterns", patterns)

    @property
    def auto_recomputation(self) -> int | None:
        """The RecomputationType set (None when `autoRecomputation` was not set), every
        value checked again (`options` is a dict users may write into)."""
        for key, value in self.options.items():
            _check(key, value)
        return self.options.get("autoRecomputation")


def set_all(group: _PopartOptions, values: dict[str, Any]) -> None:
    """Set every entry of `values["options"]` (a stored `options` dict) with `set`."""
    for key, value in values["options"].items():
        group.set(key, value)
