"""torch -> ipu: what normalisation layers leave that no other family lowers.

torch-mlir decomposes batch, layer, group and instance normalisation into reductions and
elementwise ops before this conversion. What remains is `aten.norm.Scalar`, the norm of
a whole tensor, which `torch.nn.utils.weight_norm(module, dim=None)` computes for its
weight (`_weight_norm` with dim -1 is `v * (g / v.norm())`): it is the vector norm of
every element, built as `aten.linalg_vector_norm` is (passes/conversion/reduction.py).
"""

from __future__ import annotations

from torch_mlir import ir

from .common import Builder, Patterns
from .reduction import rank_of, vector_norm


def norm_scalar(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.norm.Scalar(x, p): the p-norm of all of x's elements, a 0-d tensor."""
    order = b.scalar(op.operands[1])
    x = b.cast(b.tensor(op.operands[0]), b.result_type().element_type)
    return vector_norm(x, order, list(range(rank_of(op.operands[0]))), False, b)


def populate_normalization(patterns: Patterns) -> None:
    """Register the normalisation lowerings."""
    patterns.lower("torch.aten.norm.Scalar", norm_scalar)
