"""PopTorch ops (spec 4.6) as torch.library custom ops.

torch.export keeps a custom op whole, and torch-mlir imports it as
`torch.operator "torch.poptorch.<name>"`, which `ipu-convert-poptorch-ops` lowers to
its ipu op. On the CPU the ops run their Python implementation here.
"""

import torch


@torch.library.custom_op("poptorch::nop", mutates_args=())
def _nop(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.clone()


@_nop.register_fake
def _(tensor):
    return torch.empty_like(tensor)


@torch.library.custom_op("poptorch::ipu_print_tensor", mutates_args=())
def _ipu_print_tensor(tensor: torch.Tensor, title: str) -> torch.Tensor:
    return tensor.clone()


@_ipu_print_tensor.register_fake
def _(tensor, title):
    return torch.empty_like(tensor)


def nop(tensor: torch.Tensor) -> torch.Tensor:
    """A no-operation: an identity that is never optimised away (spec 4.6.5)."""
    return _nop(tensor)


def ipu_print_tensor(tensor: torch.Tensor, title: str = "") -> torch.Tensor:
    """Print `tensor` (after `title`) when the model runs on the IPU; returns it unchanged.

    Use the returned tensor in the rest of the model (spec 4.6.2).
    """
    return _ipu_print_tensor(tensor, title)
