"""The names users wrote: which torch call an exported node came from, and the error for
an op whose output shape depends on its input's values.

torch.export records in `node.meta["torch_fn"]` the Python callable a node was traced
from, as ("nonzero_1", "builtin_function_or_method.nonzero"); the importer puts its name
into each op's location (`CALL_KEY` metadata), so that an unsupported op is reported as
the user wrote it (`torch.nonzero`) rather than as the aten op it decomposed into
(`aten.Int.Tensor`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own alias
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from poptorch.errors import Error

# the fused-location metadata key of the torch call an op came from (see
# passes/import_annotations.py, `called_as`)
CALL_KEY = "torch.call"

_OPERATORS = {"__getitem__": "tensor[...]", "__setitem__": "tensor[...] = ...",
              "getitem": "tensor[...]"}


def called_as(node: torch.fx.Node) -> str | None:
    """The torch call `node` was traced from, as users write it (`torch.nonzero`,
    `Tensor.add_`, `F.gelu`), or None."""
    recorded = node.meta.get("torch_fn")
    if not recorded:
        return None
    kind, _, name = recorded[1].rpartition(".")
    if name in _OPERATORS:
        return _OPERATORS[name]
    if kind in ("OpOverload", "OpOverloadPacket"):
        return None  # an aten op called directly: its own name says it
    if kind in ("method_descriptor", "wrapper_descriptor", "getset_descriptor"):
        return f"Tensor.{name}"
    if hasattr(torch, name):
        return f"torch.{name}"
    if hasattr(F, name):
        return f"torch.nn.functional.{name}"
    if hasattr(torch.Tensor, name):
        return f"Tensor.{name}"
    return name


def check_static_shapes(graph: torch.fx.Graph, user_line) -> None:
    """A poptorch.Error at the first op whose output shape depends on its input's values
    (`torch.nonzero`, boolean-mask indexing, `torch.unique`, `.item()`): IPU programs
    have static shapes, as in PopTorch."""
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        value = node.meta.get("val")
        if value is None or not free_unbacked_symbols(value):
            continue
        raise static_shape_error(node.target, user_line(node), called_as(node))


def static_shape_error(op: torch._ops.OpOverload, location: str,
                       name: str | None = None) -> Error:
    """The error for aten op `op` (called as `name`), whose output shape or value depends
    on its input's values."""
    aten = op.name().removeprefix("aten::")
    if name is None:  # the training graph records aten ops only: torch's own name
        name = f"torch.{aten}" if hasattr(torch, aten) else f"aten.{aten}"
    what = ("its result is a Python number computed on the device"
            if aten in ("item", "_local_scalar_dense")
            else "its output's shape depends on the values of its input")
    return Error(f"unsupported op '{name}': {what}, and IPU programs have static shapes "
                 "(PopTorch does not support it either): keep shapes fixed, for example "
                 "`torch.where(mask, x, 0)` instead of `x[mask]`, or move it out of the "
                 "model", type="capture", location=location)
