"""poptorch.MultiConv (spec 4.6.4): the convolutions evaluated inside the scope form one
multi-convolution, which PopLibs (poplin::multiconv) plans together: in parallel on
disjoint tile sets (MultiConvPlanType.Parallel, the default) or one after the other
(Serial).

The scope annotates the ops traced inside it (`torch.fx.traceback.annotate`, as
`poptorch.Block` does) with `ipu.multiconv` (the group's number) and
`ipu.multiconv_options` (its options as JSON, per-convolution values broadcast to
every convolution), which `ipu-import-annotations` puts on the ipu ops; the machine
model charges the group's convolutions together (runtime/machine/cost_multiconv.py).
Results are the plain convolutions'.

partialsTypes(torch.half) and enableConvDithering(True) are refused with an error:
neither the JIT (float32 partials) nor the machine model (tensors laid out from tile 0)
models them. The setters check their values as PopTorch's do (graphcore/poptorch, python/ops.py
MultiConv), with poptorch.Errors instead of assertions. A list option must have one
value per convolution of the scope (PopART's check), counted while the scope runs:
the error points at the `with` statement.
"""

from __future__ import annotations

import itertools
import json
import traceback

import torch
import torch.fx.traceback as fxtb
from torch.overrides import TorchFunctionMode

from poptorch.enums import MultiConvPlanType
from poptorch.errors import Error

# the torch calls a convolution layer makes
_CONVOLUTIONS = frozenset({
    torch.conv1d, torch.conv2d, torch.conv3d, torch.conv_transpose1d, torch.conv_transpose2d,
    torch.conv_transpose3d, torch.nn.functional.conv1d, torch.nn.functional.conv2d,
    torch.nn.functional.conv3d, torch.nn.functional.conv_transpose1d,
    torch.nn.functional.conv_transpose2d, torch.nn.functional.conv_transpose3d})
_groups = itertools.count()
_active: list[MultiConv] = []


def _error(message: str, depth: int = 3) -> Error:
    """An API error at the user's line (`depth` frames up from here)."""
    frame = traceback.extract_stack(limit=depth)[0]
    return Error(message, type="api", location=f"{frame.filename}:{frame.lineno}")


class _CountConvolutions(TorchFunctionMode):
    """Counts the convolutions called while a MultiConv scope is open."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _CONVOLUTIONS:
            self.count += 1
        return func(*args, **(kwargs or {}))


class MultiConv:
    """Combines all convolution layers evaluated inside this scope into a single
    multi-convolution (spec 4.6.4): `with poptorch.MultiConv(): y = self.convA(x); ...`."""

    def __init__(self) -> None:
        self._options: dict[str, object] = {}
        self._counter: _CountConvolutions | None = None
        self._annotation = None

    def _per_conv(self, name: str, key: str, value, kind: type, what: str) -> MultiConv:
        if value is None:
            self._options.pop(key, None)
            return self
        values = value if isinstance(value, list | tuple) else (value,)
        if not values or not all(isinstance(v, kind) and not (kind is not bool
                                                              and isinstance(v, bool))
                                 for v in values):
            raise _error(f"Invalid {name}! Pass {what}, or a list of one per convolution; "
                         f"got {value!r}", depth=4)
        self._options[key] = list(values)
        return self

    def availableMemoryProportions(self, value) -> MultiConv:  # noqa: N802 - PopTorch's names
        """The available memory proportion per convolution, each in [0, 1)."""
        self._per_conv("available memory proportion", "available_memory_proportions", value,
                       float, "a float in [0, 1)")
        if value is not None and not all(0.0 <= v < 1.0
                                         for v in self._options["available_memory_proportions"]):
            raise _error(f"Invalid available memory proportion! Each must be in [0, 1), got "
                         f"{value!r}")
        return self

    def partialsTypes(self, value) -> MultiConv:  # noqa: N802
        """The partials type (torch.float or torch.half) of each convolution."""
        values = value if isinstance(value, list | tuple) else (value,)
        names = {torch.float32: "float", torch.float16: "half"}
        if not values or any(v not in names for v in values):
            raise _error("Invalid partials types. Expecting torch.float or torch.half, got "
                         f"{value!r}")
        if any(v == torch.float16 for v in values):
            raise _error("poptorch.MultiConv: half partials (torch.half) are not modelled: the "
                         "JIT and the machine model accumulate convolutions in float32 "
                         "partials; use torch.float")
        self._options["partials_types"] = [names[v] for v in values]
        return self

    def enableConvDithering(self, value) -> MultiConv:  # noqa: N802
        """Enable per-convolution dithering (a bool, or one per convolution)."""
        self._per_conv("conv dithering", "enable_conv_dithering", value, bool, "a bool")
        if value is not None and any(self._options["enable_conv_dithering"]):
            raise _error("poptorch.MultiConv: conv dithering is not modelled: the machine "
                         "model lays every convolution out from tile 0; pass False")
        return self

    def planType(self, value: MultiConvPlanType) -> MultiConv:  # noqa: N802
        """Run the convolutions in parallel (Parallel) or one after the other (Serial)."""
        if value is None:
            self._options.pop("plan_type", None)
        elif isinstance(value, MultiConvPlanType):
            self._options["plan_type"] = value.name.lower()
        else:
            raise _error(f"Invalid plan type! Pass a poptorch.MultiConvPlanType, got {value!r}")
        return self

    def perConvReservedTiles(self, value: int) -> MultiConv:  # noqa: N802
        """Tiles to reserve for each convolution."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _error(f"Invalid per-convolution reserved tiles! Pass a number of tiles "
                         f"(an int >= 0), got {value!r}")
        self._options["per_conv_reserved_tiles"] = value
        return self

    def cycleBackOff(self, value: float) -> MultiConv:  # noqa: N802
        """Cycle back off proportion, a number between 0 and 1."""
        if not isinstance(value, float) or not 0.0 <= value <= 1.0:
            raise _error(f"Invalid cycle back off! Pass a float between 0 and 1, got {value!r}")
        self._options["cycle_back_off"] = value
        return self

    def __enter__(self) -> MultiConv:
        if _active:
            raise _error("Nested poptorch.MultiConv is not supported.", depth=3)
        _active.append(self)
        self._counter = _CountConvolutions()
        self._counter.__enter__()
        self._group = next(_groups)
        self._annotation = fxtb.annotate({"ipu.multiconv": self._group,
                                          "ipu.multiconv_options": json.dumps(self._options)})
        self._annotation.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        self._annotation.__exit__(*exc)
        self._counter.__exit__(*exc)
        _active.pop()
        if exc[0] is None:
            count = self._counter.count
            for key, values in self._options.items():
                if isinstance(values, list) and len(values) not in (1, count):
                    raise _error(f"poptorch.MultiConv: {key} has {len(values)} values for the "
                                 f"{count} convolutions of this MultiConv; give one value, or "
                                 "one per convolution", depth=3)
        return False
