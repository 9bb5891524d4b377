"""Decompositions of reduction-family aten ops, added to the capture's table (see
`decompose.decompositions`) because torch-mlir either has no op for them or mishandles them.

- 0-d operands of softmax, log-softmax, their gradients and var/std: torch-mlir's backend
  pipeline loops forever (softmax: a greedy rewrite that never converges while memory
  grows) or crashes (var/std over an explicit dim) on them, so they run on the tensor
  seen as one element and the results are seen as 0-d again.
- `aten._cdist_forward` / `_cdist_backward` (torch.cdist): the p-norm of the pairwise
  differences over the last dim, as PopTorch's cdistHandler lowers it, and its gradient
  as PyTorch's CPU kernel computes it.
- `aten.median` / `median.dim`: the lower median from a sort (the ipu sort is stable).
- `aten.all.dims`: not any element false, through `aten.any.dims`.
- `aten.addmv` (torch.addmv, which the issue names): PyTorch's own decomposition, a
  scaled matrix-vector product plus the scaled bias.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch._decomp import decomposition_table

aten = torch.ops.aten

# ops whose 0-d operands torch-mlir's backend pipeline cannot take
_ZERO_DIM_UNSAFE = (
    aten._softmax.default, aten._log_softmax.default, aten.softmax.int,
    aten.log_softmax.int, aten._softmax_backward_data.default,
    aten._log_softmax_backward_data.default, aten.var.correction, aten.std.correction,
    aten.var_mean.correction, aten.std_mean.correction)


def _one_element(op: Any, previous: Callable | None) -> Callable:
    """`op` with 0-d tensor operands given as 1-element tensors (and 0-d results, which
    are all a reduction or softmax of a 0-d tensor can give); other calls go to
    `previous`, torch-mlir's decomposition of `op`, if there is one."""

    def decomposed(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or any(t.dim() != 0 for t in tensors):
            return NotImplemented if previous is None else previous(*args, **kwargs)
        args = [a.reshape([1]) if isinstance(a, torch.Tensor) else a for a in args]
        out = op(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.reshape([]) for o in out)
        return out.reshape([])

    return decomposed


def _pairs(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """x1[..., p, :] - x2[..., r, :] for every p, r: shape [..., P, R, M]."""
    return x1.unsqueeze(-2) - x2.unsqueeze(-3)


def _cdist_forward(x1, x2, p, compute_mode=None):
    return torch.linalg.vector_norm(_pairs(x1, x2), p, dim=-1)


def _cdist_backward(grad, x1, x2, p, cdist):
    """d cdist / d x1, summed over x2's rows, as PyTorch's CPU kernel: 0 for p = 0,
    sign(diff) for p = 1, diff * |diff|^(p-2) / dist^(p-1) otherwise (0 where the
    distance is 0), sign(diff) where |diff| is the distance for p = inf."""
    diff = _pairs(x1, x2)
    dist = cdist.unsqueeze(-1)
    if p == 0:
        return torch.zeros_like(x1)
    if p == 1:
        partial = torch.sign(diff)
    elif math.isinf(p):
        partial = torch.sign(diff) * (diff.abs() == dist).to(diff.dtype)
    else:
        scaled = diff * diff.abs().pow(p - 2) if p != 2 else diff
        safe = torch.where(dist == 0, torch.ones_like(dist), dist)
        partial = torch.where(dist == 0, torch.zeros_like(diff), scaled / safe.pow(p - 1))
    return (grad.unsqueeze(-1) * partial).sum(-2)


def _median(x):
    flat = x.reshape([-1])
    values, _ = aten.sort.default(flat, 0, False)
    return values[(flat.numel() - 1) // 2]


def _median_dim(x, dim, keepdim=False):
    if x.dim() == 0:
        return x.clone(), torch.zeros([], dtype=torch.int64)
    values, indices = aten.sort.default(x, dim, False)
    middle = (x.shape[dim] - 1) // 2
    values = values.narrow(dim, middle, 1)
    indices = indices.narrow(dim, middle, 1)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return values, indices


def _all_dims(x, dim=None, keepdim=False):
    return torch.logical_not(aten.any.dims(torch.logical_not(x), dim, keepdim))


def reduction_decompositions(table: dict) -> dict:
    """The entries to add to `table` (torch-mlir's and ours so far)."""
    entries: dict = {op: _one_element(op, table.get(op)) for op in _ZERO_DIM_UNSAFE}
    entries[aten._cdist_forward.default] = _cdist_forward
    entries[aten._cdist_backward.default] = _cdist_backward
    entries[aten.median.default] = _median
    entries[aten.median.dim] = _median_dim
    entries[aten.all.dims] = _all_dims
    entries[aten.addmv.default] = decomposition_table[aten.addmv.default]
    return entries
