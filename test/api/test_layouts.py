"""The layouts the JIT gives products' operands: a reshape that only a permute reads runs
with it (`reshape_permute`), copying, when it must, in the permute's order, so that an
attention's heads reach their batched products as dense matrices."""

import numpy as np
from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime.jit.kernels.data_movement import _refinement, permute, reshape_permute
from poptorch.runtime.jit.program import compile_module

# a sequence-first projection (s=8, b=2, h*d=3*4) split into heads: (b*h, s, d)
HEADS = """
func.func @main(%x: tensor<8x2x12xf32>) -> (tensor<6x8x4xf32>, tensor<8x6x4xf32>) {
  %0 = "ipu.reshape"(%x) : (tensor<8x2x12xf32>) -> tensor<8x6x4xf32>
  %1 = "ipu.permute"(%0) {dims = array<i64: 1, 0, 2>} : (tensor<8x6x4xf32>) -> tensor<6x8x4xf32>
  %2 = "ipu.reshape"(%x) : (tensor<8x2x12xf32>) -> tensor<8x6x4xf32>
  %3 = "ipu.permute"(%2) {dims = array<i64: 1, 0, 2>} : (tensor<8x6x4xf32>) -> tensor<6x8x4xf32>
  %4 = "ipu.exp"(%2) : (tensor<8x6x4xf32>) -> tensor<8x6x4xf32>
  %5 = "ipu.add"(%1, %3) : (tensor<6x8x4xf32>, tensor<6x8x4xf32>) -> tensor<6x8x4xf32>
  return %5, %4 : tensor<6x8x4xf32>, tensor<8x6x4xf32>
}
"""


def test_a_reshape_only_a_permute_reads_runs_with_it():
    """%0 is read by its permute alone: one `reshape_permute` call; %2 is also read by
    an exp, so it stays a reshape of its own."""
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(HEADS), fuse=False)
    body = [line.strip() for line in program.source.splitlines() if " = " in line][-5:]
    assert body == [
        "v2 = reshape_permute(v0, rank=3, shape=(8, 6, 4), dims=(1, 0, 2))",
        "v3 = ipu_reshape(v0, rank=3, shape=(8, 6, 4))",
        "v4 = ipu_permute(v3, dims=(1, 0, 2))",
        "v5 = ipu_exp(v3)",
        "v6 = ipu_add(v2, v4)",
    ]
    x = np.random.default_rng(0).standard_normal((8, 2, 12), dtype=np.float32)
    heads = x.reshape(8, 6, 4).transpose(1, 0, 2)
    total, exp = program.run(x)
    np.testing.assert_array_equal(total, heads + heads)
    np.testing.assert_array_equal(exp, np.exp(x.reshape(8, 6, 4)))


def test_a_copying_reshape_is_copied_in_the_permutes_order():
    """Heads sliced out of a fused projection, (s, b, 3, h*d) -> (s, b*h, d): the reshape
    copies, and the copy is the permuted result, C-contiguous, with the same values."""
    qkv = np.random.default_rng(1).standard_normal((1, 8, 2, 3, 12), dtype=np.float32)
    q = qkv[:, :, :, 0]  # one replica axis in front
    heads = reshape_permute(q, 3, (8, 6, 4), (1, 0, 2))
    assert heads.flags.c_contiguous
    np.testing.assert_array_equal(heads, permute(q.reshape(1, 8, 6, 4), (1, 0, 2)))


def test_a_reshape_that_is_a_view_stays_one():
    x = np.random.default_rng(2).standard_normal((8, 2, 12), dtype=np.float32)
    heads = reshape_permute(x, 3, (8, 2, 3, 4), (1, 2, 0, 3))
    assert np.shares_memory(heads, x)
    np.testing.assert_array_equal(heads, x.reshape(8, 2, 3, 4).transpose(1, 2, 0, 3))


def test_refinement_splits_both_shapes_to_one():
    assert _refinement((8, 2, 12), (8, 6, 4)) == (8, 2, 3, 4)
    assert _refinement((1, 16, 4), (1, 64)) == (1, 16, 4)
    assert _refinement((6, 4), (4, 6)) is None  # 6 and 4 are merged on both sides
    assert _refinement((0, 4), (4, 0)) is None
