"""The layouts the JIT gives products' operands: a reshape that only a permute reads runs
with it (`reshape_permute`), copying, when it must, in the permute's order, so that an
attention's heads reach their batched products as dense matrices; a product of reshapes
that merge batch dims takes the unmerged operands; a product of rows out of C order is
C-contiguous; a broadcast that fused kernels read is read in place; a second reshape
of a value reshapes the first."""

import numpy as np
from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime.jit.kernels.data_movement import _refinement, permute, reshape_permute
from poptorch.runtime.jit.kernels.linear import matmul
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
        "v1 = reshape_permute(v0, rank=3, shape=(8, 6, 4), dims=(1, 0, 2))",
        "v2 = ipu_reshape(v0, rank=3, shape=(8, 6, 4))",
        "v3 = ipu_permute(v2, dims=(1, 0, 2))",
        "v4 = ipu_exp(v2)",
        "v5 = ipu_add(v1, v3)",
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


# attention's scores over (b=2, h=3) heads, read as (b*h, s, d) through reshapes
SCORES = """
func.func @main(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x4x8xf32>) -> tensor<2x3x8x8xf32> {
  %0 = "ipu.reshape"(%q) : (tensor<2x3x8x4xf32>) -> tensor<6x8x4xf32>
  %1 = "ipu.reshape"(%k) : (tensor<2x3x4x8xf32>) -> tensor<6x4x8xf32>
  %2 = "ipu.matmul"(%0, %1) : (tensor<6x8x4xf32>, tensor<6x4x8xf32>) -> tensor<6x8x8xf32>
  %3 = "ipu.reshape"(%2) : (tensor<6x8x8xf32>) -> tensor<2x3x8x8xf32>
  return %3 : tensor<2x3x8x8xf32>
}
"""


def test_a_product_of_reshaped_heads_multiplies_the_heads_as_they_are():
    """The reshapes merging (b, h) would copy strided heads; the product takes the
    4-d operands and its fresh result is reshaped instead."""
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(SCORES), fuse=False)
    body = [line.strip() for line in program.source.splitlines()
            if line.startswith("    v")]
    assert body == [
        "v2 = ipu_reshape(ipu_matmul(v0, v1), rank=4, shape=(6, 8, 8))",
        "v3 = ipu_reshape(v2, rank=3, shape=(2, 3, 8, 8))",
    ]
    rng = np.random.default_rng(3)
    qkv = rng.standard_normal((2, 8, 3, 3, 4), dtype=np.float32)  # a projection's heads
    q, k = qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 3, 1)
    scores, = program.run(q, k)
    np.testing.assert_array_equal(scores, np.matmul(q, k))


def test_a_product_of_rows_out_of_order_is_c_contiguous():
    """A sequence-first view of a batch-first input times a weight: the product of a
    copy, C-contiguous (a result out of C order is copied by every kernel reading it)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 4, 6, 8), dtype=np.float32).transpose(0, 2, 1, 3)
    w = rng.standard_normal((8, 5), dtype=np.float32)
    out = matmul(x, np.broadcast_to(w, (6, 8, 5)), ranks=(4, 3), out_rank=4)
    assert out.shape == (1, 6, 4, 5) and out.flags.c_contiguous
    np.testing.assert_array_equal(
        out, (np.ascontiguousarray(x).reshape(-1, 8) @ w).reshape(1, 6, 4, 5))


def test_a_copy_moving_the_last_dim_is_made_in_c_order():
    """A weight gradient's transposed rows: copying in the permute's order would
    transpose element by element; the C-order copy's transpose is returned instead."""
    grads = np.random.default_rng(5).standard_normal((3, 4, 1, 6), dtype=np.float32)
    rows = grads.transpose(2, 1, 0, 3)  # (1, 4, 3, 6), not mergeable in place
    out = reshape_permute(rows, 4, (4, 18), (1, 0))
    assert out.flags.f_contiguous and not out.flags.c_contiguous
    np.testing.assert_array_equal(out, rows.reshape(4, 18).T)


def test_matrices_without_a_unit_stride_are_copied_for_blas():
    """Heads whose matrices have no unit stride are multiplied as a C-contiguous copy
    (NumPy's matmul would multiply them element by element), with the copy's result."""
    rng = np.random.default_rng(6)
    heads = rng.standard_normal((2, 8, 4, 8), dtype=np.float32).transpose(0, 3, 1, 2)
    other = rng.standard_normal((2, 8, 4, 3), dtype=np.float32)
    out = matmul(heads, other)
    np.testing.assert_array_equal(out, np.matmul(np.ascontiguousarray(heads), other))


# the backward of a fused QKV projection: each part's gradient broadcast over the three
BROADCAST = """
func.func @main(%g: tensor<64x128xf32>, %h: tensor<3x64x128xf32>) -> tensor<3x64x128xf32> {
  %0 = "ipu.broadcast"(%g) : (tensor<64x128xf32>) -> tensor<3x64x128xf32>
  %1 = "ipu.mul"(%0, %h) : (tensor<3x64x128xf32>, tensor<3x64x128xf32>)
       -> tensor<3x64x128xf32>
  %2 = "ipu.add"(%1, %0) : (tensor<3x64x128xf32>, tensor<3x64x128xf32>)
       -> tensor<3x64x128xf32>
  return %2 : tensor<3x64x128xf32>
}
"""


def test_a_broadcast_read_by_a_fused_kernel_is_read_in_place():
    """The kernel reads %g with stride 0 along the broadcast dim: no broadcast call,
    no contiguous copy of it; the values are the NumPy calls' bit for bit."""
    with make_context(), ir.Location.unknown():
        fused = compile_module(ir.Module.parse(BROADCAST))
        numpy_only = compile_module(ir.Module.parse(BROADCAST), fuse=False)
    body = [line.strip() for line in fused.source.splitlines() if line.startswith("    ")]
    assert body == ["v2, = fused_0(v0, v1)  # mul add", "return (v2,)"]
    rng = np.random.default_rng(7)
    g = rng.standard_normal((64, 128), dtype=np.float32)
    h = rng.standard_normal((3, 64, 128), dtype=np.float32)
    np.testing.assert_array_equal(fused.run(g, h)[0], numpy_only.run(g, h)[0])


# a QKV gradient reshaped for the bias gradient and, transposed, for the weight's
TWICE = """
func.func @main(%g: tensor<4x2x3x8xf32>, %x: tensor<8x5xf32>)
    -> (tensor<24xf32>, tensor<24x5xf32>) {
  %0 = "ipu.permute"(%g) {dims = array<i64: 1, 0, 2, 3>} : (tensor<4x2x3x8xf32>)
       -> tensor<2x4x3x8xf32>
  %1 = "ipu.reshape"(%0) : (tensor<2x4x3x8xf32>) -> tensor<2x4x24xf32>
  %2 = "ipu.reduce"(%1) {kind = "sum", dims = array<i64: 0, 1>, keepdim = false}
       : (tensor<2x4x24xf32>) -> tensor<24xf32>
  %3 = "ipu.reshape"(%0) : (tensor<2x4x3x8xf32>) -> tensor<8x24xf32>
  %4 = "ipu.permute"(%3) {dims = array<i64: 1, 0>} : (tensor<8x24xf32>) -> tensor<24x8xf32>
  %5 = "ipu.matmul"(%4, %x) : (tensor<24x8xf32>, tensor<8x5xf32>) -> tensor<24x5xf32>
  return %2, %5 : tensor<24xf32>, tensor<24x5xf32>
}
"""


def test_a_second_reshape_of_a_value_reshapes_the_first():
    """%3 reads %1's array (a copy already made) rather than copying %0 again."""
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(TWICE), fuse=False)
    body = [line.strip() for line in program.source.splitlines() if line.startswith("    v")]
    assert body[1:] == [
        "v3 = ipu_reshape(v2, rank=4, shape=(2, 4, 24))",
        "v4 = ipu_reduce(v3, kind='sum', axes=(-3, -2), keepdim=False)",
        "v5 = reshape_permute(v3, rank=3, shape=(8, 24), dims=(1, 0))",
        "v6 = ipu_matmul(v5, v1)",
    ]
    rng = np.random.default_rng(8)
    g = rng.standard_normal((4, 2, 3, 8), dtype=np.float32)
    x = rng.standard_normal((8, 5), dtype=np.float32)
    rows = g.transpose(1, 0, 2, 3).reshape(8, 24)
    bias, weight = program.run(g, x)
    np.testing.assert_allclose(bias, rows.reshape(2, 4, 24).sum((0, 1)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(weight, rows.T @ x, rtol=1e-6)


def test_a_reshape_ending_a_fused_group_is_read_as_the_groups_result():
    """Attention's probabilities (a fused kernel that also does the reshape merging
    (b, h)) times the values: the product reads the kernel's result, since the reshape's
    operand is never an array (BERT at batch 1 named a value the program never made)."""
    p, v, r = "tensor<1x8x64x64xf32>", "tensor<1x8x64x32xf32>", "tensor<8x64x64xf32>"
    module = f"""
    func.func @main(%p: {p}, %v: {v}) -> {v} {{
      %e = "ipu.exp"(%p) : ({p}) -> {p}
      %t = "ipu.tanh"(%e) : ({p}) -> {p}
      %0 = "ipu.reshape"(%t) : ({p}) -> {r}
      %1 = "ipu.reshape"(%v) : ({v}) -> tensor<8x64x32xf32>
      %2 = "ipu.matmul"(%0, %1) : ({r}, tensor<8x64x32xf32>) -> tensor<8x64x32xf32>
      %3 = "ipu.reshape"(%2) : (tensor<8x64x32xf32>) -> {v}
      return %3 : {v}
    }}"""
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(module))
    body = [line.strip() for line in program.source.splitlines()
            if line.startswith("    v")]
    assert body == ["v2, = fused_0(v0)  # exp tanh reshape",
                    "v3 = ipu_reshape(v1, rank=4, shape=(8, 64, 32))",
                    "v4 = ipu_matmul(v2, v3)",
                    "v5 = ipu_reshape(v4, rank=3, shape=(1, 8, 64, 32))"]
    rng = np.random.default_rng(5)
    probabilities = rng.standard_normal((1, 8, 64, 64), dtype=np.float32)
    values = rng.standard_normal((1, 8, 64, 32), dtype=np.float32)
    out, = program.run(probabilities, values)
    np.testing.assert_allclose(out, np.matmul(np.tanh(np.exp(probabilities)), values),
                               rtol=1e-5, atol=1e-5)
