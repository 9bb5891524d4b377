"""Softmax and attention of float16 values kept in float16, as popnn computes them.

torch's decompositions of `aten._softmax` and `aten._softmax_backward_data` compute a
float16 input in float32 (`get_computation_dtype`, `compute_only_pw_cast_for_opmath`),
and the CompositeImplicitAutograd kernel of `aten.scaled_dot_product_attention` (and
`_scaled_dot_product_attention_math`, which the CPU flash-attention decomposition calls)
casts float16 query, key and value to float32 on the CPU, so a half attention's
[batch, heads, sequence, sequence] scores, softmax and their gradients would all be
float32 between casts (so would a PopTorch model's BERT attention: Hugging Face
calls scaled_dot_product_attention). PopTorch lowers softmax to PopART's, fp16 in and fp16 out:
popnn's softmax (graphcore/poplibs lib/popnn/NonLinearity.cpp, softmaxImpl) takes the
max and subtracts it, exponentiates in the input's type, reduces the sum into FLOAT,
inverts it in float and multiplies by it cast to half. These do the same for 16-bit
float inputs:

- `_softmax`: max, sub and exp in the input's type; the sum into float32, its
  reciprocal cast to the input's type, a product.
- `_softmax_backward_data`: dx = y x (dy - sum(dy x y)) with the sum into float32 and
  the products in the input's type.
- `F.scaled_dot_product_attention` (a route of `static_ops.StaticShapes`, not a table
  entry: the op is CompositeImplicitAutograd, which the training capture decomposes by
  its own kernel): the math kernel's steps (scores = q k^T x scale, the causal or given
  mask, `_safe_softmax`, dropout, the product by v) in the inputs' type.

Other inputs (and grouped-query attention) keep torch's decompositions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own alias

from poptorch._frontend.norm_decompositions import HALF, with_fallback

aten = torch.ops.aten


def _softmax(previous: Callable, x, dim, half_to_float):
    if x.dtype not in HALF or half_to_float or x.dim() == 0:
        return previous(x, dim, half_to_float)
    shifted = x - torch.amax(x, dim, keepdim=True)
    exps = torch.exp(shifted)
    total = torch.sum(exps, dim, keepdim=True, dtype=torch.float32)
    return exps * torch.reciprocal(total).to(x.dtype)


def _softmax_backward(previous: Callable, grad_output, output, dim, input_dtype):
    if output.dtype not in HALF or input_dtype != output.dtype or output.dim() == 0:
        return previous(grad_output, output, dim, input_dtype)
    product = grad_output * output
    total = torch.sum(product, dim, keepdim=True, dtype=torch.float32)
    return product - output * total.to(output.dtype)


def _scores(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The attention output in the inputs' type, computed as torch's math kernel does
    (aten/src/ATen/native/transformers/attention.cpp)."""
    factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = torch.matmul(query, key.transpose(-2, -1)) * factor
    length, source = query.shape[-2], key.shape[-2]
    if is_causal:
        keep = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask.to(scores.dtype)
    weights = aten._safe_softmax(scores, -1)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, True)
    return torch.matmul(weights, value)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention with 16-bit float inputs in their own type (a
    `static_ops` route: the capture meets it before torch's kernel casts them to
    float32, in the training capture too, where CompositeImplicitAutograd ops never
    reach the decomposition table); other inputs and grouped-query attention go to
    torch's."""
    grouped = bool(enable_gqa) and query.shape[-3] != key.shape[-3]
    if query.dtype not in HALF or grouped:
        return F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
                                              is_causal, scale=scale, enable_gqa=enable_gqa)
    return _scores(query, key, value, attn_mask, dropout_p, is_causal, scale)


def attention_decompositions(table: dict) -> dict:
    """The half softmax decompositions, each falling back to `table`'s own entry."""
    return with_fallback(table, {aten._softmax.default: _softmax,
                                 aten._softmax_backward_data.default: _softmax_backward})
