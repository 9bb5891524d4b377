"""Batch normalisation of float16 activations kept in float16, as popnn runs it.

torch's decompositions of `aten._native_batch_norm_legit_functional` /
`_native_batch_norm_legit_no_training` and `aten.native_batch_norm_backward` upcast a
float16 input to float32 (`get_computation_dtype`): every activation and gradient is
cast and normalised in float32, then cast back. PopTorch lowers batch norm to popnn
(graphcore/poplibs lib/poplin/Norms.cpp, normStatistics / normWhiten / normalise /
normParamGradients), which reduces the statistics into float32 (popops::reduce into a
float32 result: mean from ADD, power from SQUARE_ADD) and whitens, scales and shifts
the activations in their own type, with the statistics cast to it. These do the same
for 16-bit float inputs:

- forward: mean = sum(x) / n and the variance sum((x - mean)^2) / n into float32 (the
  two-pass form torch's decomposition has, which `ipu-precision` turns into popnn's
  one-pass form unless enableStableNorm); y = (x - mean) x rstd x weight + bias in
  float16; running statistics and the saved mean and rstd as torch's decomposition
  makes them (the saved ones in the input's type, as on the CPU).
- backward: x_hat = (x - mean) x rstd in float16; sum(dy) and sum(dy x x_hat) into
  float32 (popnn's normParamGradients: the bias and weight gradients); dx = (dy - x_hat x
  sum(dy x x_hat) / n - sum(dy) / n) x rstd x weight in float16 (dx = dy x rstd x
  weight with the running statistics in eval mode).

Other inputs keep torch's decompositions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

aten = torch.ops.aten
HALF = (torch.float16, torch.bfloat16)  # the 16-bit float types these rules keep


def _channels(t: torch.Tensor, rank: int) -> torch.Tensor:
    """A per-channel vector seen as (C, 1, ...) against a rank-`rank` activation."""
    return t.reshape([-1] + [1] * (rank - 2))


def _statistics(x: torch.Tensor, dims: list[int]
                ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The batch mean and biased variance of half `x` over `dims`, in float32, and the
    count of values each channel's statistics reduce."""
    count = x.numel() // x.shape[1]
    mean = torch.sum(x, dims, keepdim=True, dtype=torch.float32) / count
    centred = x - mean.to(x.dtype)
    var = torch.sum(centred * centred, dims, keepdim=True, dtype=torch.float32) / count
    return mean, var, count


def _normalise(x, mean, rstd, weight, bias):
    """(x - mean) x rstd x weight + bias in x's type (normWhiten, normalise)."""
    rank = x.dim()
    out = (x - mean.to(x.dtype)) * rstd.to(x.dtype)
    if weight is not None:
        out = out * _channels(weight, rank).to(x.dtype)
    if bias is not None:
        out = out + _channels(bias, rank).to(x.dtype)
    return out


def _functional(previous: Callable, input, weight, bias, running_mean, running_var,
                training, momentum, eps):
    if input.dtype not in HALF or not training:
        return previous(input, weight, bias, running_mean, running_var, training,
                        momentum, eps)
    dims = [0, *range(2, input.dim())]
    mean, var, count = _statistics(input, dims)
    rstd = torch.rsqrt(var + eps)
    out = _normalise(input, mean, rstd, weight, bias)
    save_mean, save_rstd = mean.flatten(), rstd.flatten()
    new_mean, new_var = running_mean, running_var
    if running_mean is not None:
        new_mean = momentum * save_mean + (1 - momentum) * running_mean
    if running_var is not None:
        new_var = momentum * var.flatten() * (count / max(1, count - 1)) + \
            (1 - momentum) * running_var
    return (out, save_mean.to(input.dtype), save_rstd.to(input.dtype), new_mean, new_var)


def _no_training(previous: Callable, input, weight, bias, running_mean, running_var,
                 momentum, eps):
    if input.dtype not in HALF:
        return previous(input, weight, bias, running_mean, running_var, momentum, eps)
    rank = input.dim()
    mean = _channels(running_mean.to(torch.float32), rank)
    rstd = torch.rsqrt(_channels(running_var.to(torch.float32), rank) + eps)
    out = _normalise(input, mean, rstd, weight, bias)
    return out, input.new_zeros((0,)), input.new_zeros((0,))


def _backward(previous: Callable, grad_out, input, weight, running_mean, running_var,
              save_mean, save_invstd, train, eps, output_mask):
    if input.dtype not in HALF:
        return previous(grad_out, input, weight, running_mean, running_var, save_mean,
                        save_invstd, train, eps, output_mask)
    rank, dims = input.dim(), [0, *range(2, input.dim())]
    count = input.numel() // input.shape[1]
    if train:
        mean, rstd = save_mean.to(torch.float32), save_invstd.to(torch.float32)
    else:
        mean = running_mean.to(torch.float32)
        rstd = torch.rsqrt(running_var.to(torch.float32) + eps)
    mean, rstd = _channels(mean, rank), _channels(rstd, rank)
    x_hat = (input - mean.to(input.dtype)) * rstd.to(input.dtype)
    grad_sum = torch.sum(grad_out, dims, keepdim=True, dtype=torch.float32)
    dot = torch.sum(grad_out * x_hat, dims, keepdim=True, dtype=torch.float32)
    scale = rstd if weight is None else rstd * _channels(weight.to(torch.float32), rank)
    if train:
        grad_input = (grad_out - x_hat * (dot / count).to(input.dtype)
                      - (grad_sum / count).to(input.dtype)) * scale.to(input.dtype)
    else:
        grad_input = grad_out * scale.to(input.dtype)
    weight_type = input.dtype if weight is None else weight.dtype
    grad_weight = dot.flatten().to(weight_type) if output_mask[1] else None
    grad_bias = grad_sum.flatten().to(weight_type) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


def with_fallback(table: dict, rules: dict) -> dict:
    """Each op's rule of `rules`, given `table`'s own entry for that op as its first
    argument (what it falls back to for inputs it leaves alone)."""
    return {op: functools.partial(rule, table[op]) for op, rule in rules.items()}


def norm_decompositions(table: dict) -> dict:
    """The half batch-norm decompositions, each falling back to `table`'s own entry."""
    return with_fallback(table, {
        aten._native_batch_norm_legit_functional.default: _functional,
        aten._native_batch_norm_legit_no_training.default: _no_training,
        aten.native_batch_norm_backward.default: _backward})
