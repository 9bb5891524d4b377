"""`set_overlap_for_input` / `set_overlap_for_output` (spec 11.3): mark a model input or
output whose host transfer overlaps compute on the IO tiles (`OverlapMode`).

Each tensor goes through a torch.library custom op (`poptorch::set_overlap_for_input`,
`poptorch::set_overlap_for_output`, an identity carrying the mode as an int) that
torch.export keeps whole. `ipu-mark-overlapped-io` turns it into an attribute of @main's
argument or result (`ipu.overlap = "overlap_accumulation_loop"`), as PopTorch turns it
into an attribute of the graph's input or output; the machine model's timeline reads
it (`runtime/machine/scheduler.py`). The options it needs (numIOTiles, not pipelined,
output mode All or Sum) are checked when the model is compiled
(`poptorch._executor.host_io`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from poptorch.enums import OverlapMode
from poptorch.errors import Error


@torch.library.custom_op("poptorch::set_overlap_for_input", mutates_args=())
def _overlap_input(tensor: torch.Tensor, mode: int) -> torch.Tensor:
    return tensor.clone()


@_overlap_input.register_fake
def _(tensor, mode):
    return torch.empty_like(tensor)


@torch.library.custom_op("poptorch::set_overlap_for_output", mutates_args=())
def _overlap_output(tensor: torch.Tensor, mode: int) -> torch.Tensor:
    return tensor.clone()


@_overlap_output.register_fake
def _(tensor, mode):
    return torch.empty_like(tensor)


_overlap_input.register_autograd(lambda ctx, grad: (grad, None))
_overlap_output.register_autograd(lambda ctx, grad: (grad, None))


def _mark(tensors: Any, mode: Any, what: str, op) -> Any:
    if not isinstance(mode, OverlapMode):
        raise Error(f"set_overlap_for_{what}: mode must be a poptorch.OverlapMode "
                    f"(NoOverlap, OverlapAccumulationLoop, OverlapDeviceIterationLoop), got "
                    f"{mode!r}", type="api")
    flat, spec = pytree.tree_flatten(tensors)
    for tensor in flat:
        if not isinstance(tensor, torch.Tensor):
            raise Error(f"You may only set overlap for torch.tensor {what}s. "
                        f"{type(tensor)} is not supported.", type="api")
    return pytree.tree_unflatten([op(t, int(mode)) for t in flat], spec)


def set_overlap_for_input(input_tensors: Any, mode: OverlapMode) -> Any:
    """Overlap the host-to-IPU copy of these model inputs with compute (on the IO tiles
    `TensorLocations.numIOTiles` reserves). Call it first in `forward` on each input (a
    tensor, or tuples, lists and dicts of them) and use the returned tensors."""
    return _mark(input_tensors, mode, "input", _overlap_input)


def set_overlap_for_output(output_tensors: Any, mode: OverlapMode) -> Any:
    """Overlap the IPU-to-host copy of these model outputs with compute (on the IO tiles
    `TensorLocations.numIOTiles` reserves). Call it last in `forward`, on tensors the
    model returns once, and return the returned tensors."""
    return _mark(output_tensors, mode, "output", _overlap_output)
