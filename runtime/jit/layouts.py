"""Layouts the JIT chooses for products' operands: views it runs together so that a copy,
when one is needed, is made in the layout its reader takes, or not made at all.

- `reshape_permutes`: a reshape that only a permute reads runs with it
  (`reshape_permute`), copying, when it must, in the permute's order.
- `shared_reshapes`: reshapes of one value after the first reshape the first's result
  (a copying reshape is then made once: a training step's QKV gradient, reshaped to
  (s, b, 3e) for the bias gradient and to (s*b, 3e) for the weight's, was copied twice).
- `unmerged_products`: a batched matmul whose operands are reshapes merging or splitting
  only batch dims multiplies the reshapes' operands instead, and reshapes its fresh
  result: attention's heads `(b, h, s, d) -> (b*h, s, d)` are a copy when the heads are
  a permuted view of a projection (HF BERT: six 1 MB copies an inference at batch 32),
  while NumPy's matmul takes the unmerged batch dims as they are.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.data_movement import PermuteOp, ReshapeOp
from poptorch.dialects.linear import MatMulOp


def _single_reshape(value: ir.Value, block: ir.Block, excluded: set[ir.Operation]
                    ) -> ir.Operation | None:
    """The reshape op making `value`, when it is of this block, read by one op, and not
    otherwise handled (`excluded`)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or op_class(owner) is not ReshapeOp:
        return None
    owner = owner.operation
    if owner.block != block or owner in excluded or len(list(owner.results[0].uses)) != 1:
        return None
    return owner


def reshape_permutes(block: ir.Block, excluded: set[ir.Operation],
                     copied: set[ir.Operation]) -> dict[ir.Operation, ir.Operation]:
    """Permutes of a reshape that nothing else reads, each mapped to that reshape: the
    pair is one `reshape_permute` call, which copies (when the reshape must) in the
    permute's order, the layout the result is read in. `excluded`: ops handled
    otherwise (fused, chained, summed over replicas); `copied`: views copied where made
    (the permute may be one: its result is then C-contiguous already)."""
    merged = {}
    for op in block.operations:
        op = op.operation
        if op_class(op) is not PermuteOp or op in excluded:
            continue
        reshape = _single_reshape(op.operands[0], block, excluded | copied)
        if reshape is not None:
            merged[op] = reshape
    return merged


def unmerged_products(block: ir.Block, excluded: set[ir.Operation]
                      ) -> dict[ir.Operation, tuple[ir.Value, ir.Value]]:
    """Batched matmuls whose operands are reshapes (read by nothing else) of values with
    the same batch dims and the same last two dims, each mapped to the two values to
    multiply instead: the result, of those batch dims, is then reshaped to the matmul's
    (a view: the product is a fresh C-contiguous array)."""
    unmerged = {}
    for op in block.operations:
        op = op.operation
        if op_class(op) is not MatMulOp or op in excluded:
            continue
        ranks = {v.type.rank for v in op.operands}
        if ranks != {op.results[0].type.rank} or ranks == {2}:
            continue
        sources = []
        for value in op.operands:
            reshape = _single_reshape(value, block, excluded)
            if reshape is not None and \
                    reshape.operands[0].type.shape[-2:] == value.type.shape[-2:]:
                value = reshape.operands[0]
            sources.append(value)
        lhs, rhs = sources
        if (lhs, rhs) != tuple(op.operands) and lhs != rhs and lhs.type.rank >= 3 \
                and lhs.type.shape[:-2] == rhs.type.shape[:-2]:
            unmerged[op] = (lhs, rhs)
    return unmerged


def shared_reshapes(block: ir.Block, excluded: set[ir.Operation],
                    unnamed: set[ir.Operation]) -> dict[ir.Operation, ir.Value]:
    """Reshapes of a value that an earlier reshape of this block also reads, each mapped
    to that reshape's result, which they reshape instead: the same elements in the same
    order. `excluded`: reshapes left as they are (summed over replicas); `unnamed`:
    reshapes whose result has no array of its own (fused, or run with their reader)."""
    first: dict[ir.Value, ir.Value] = {}
    shared = {}
    for op in block.operations:
        op = op.operation
        if op_class(op) is not ReshapeOp or op in excluded:
            continue
        source = op.operands[0]
        if source in first:
            shared[op] = first[source]
        elif op not in unnamed:
            first[source] = op.results[0]
    return shared
