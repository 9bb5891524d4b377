"""The JIT's buffer reuse: an elementwise op writes into an operand's array when nothing
reads that array later, never into an argument, a value read twice, one with a live view
or a returned one; the allocator tuning that lets a program's arrays reuse pages between
calls; and the kernel table, which covers every ipu op or names why not."""

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime.jit import heap
from poptorch.runtime.jit.kernels.common import REUSE_BYTES
from poptorch.runtime.jit.kernels.elementwise import select
from poptorch.runtime.jit.kernels.structure import replica_sum
from poptorch.runtime.jit.program import compile_module

T = "tensor<64x512xf32>"
CHAIN = f"""
func.func @main(%x: {T}, %b: tensor<512xf32>) -> ({T}, {T}, tensor<32768xf32>) {{
  %0 = "ipu.exp"(%x) : ({T}) -> {T}
  %1 = "ipu.add"(%0, %b) : ({T}, tensor<512xf32>) -> {T}
  %2 = "ipu.relu"(%1) : ({T}) -> {T}
  %3 = "ipu.mul"(%2, %2) : ({T}, {T}) -> {T}
  %4 = "ipu.reshape"(%3) : ({T}) -> tensor<32768xf32>
  %5 = "ipu.neg"(%3) : ({T}) -> {T}
  %6 = "ipu.sub"(%5, %x) : ({T}, {T}) -> {T}
  %7 = "ipu.exp"(%6) : ({T}) -> {T}
  %8 = "ipu.exp"(%x) : ({T}) -> {T}
  %9 = "ipu.neg"(%8) : ({T}) -> {T}
  %10 = "ipu.add"(%8, %9) : ({T}, {T}) -> {T}
  %11 = "ipu.reshape"(%10) : ({T}) -> tensor<32768xf32>
  %12 = "ipu.exp"(%11) : (tensor<32768xf32>) -> tensor<32768xf32>
  return %6, %7, %12 : {T}, {T}, tensor<32768xf32>
}}
"""


@pytest.fixture(scope="module")
def program():
    with make_context(), ir.Location.unknown():
        yield compile_module(ir.Module.parse(CHAIN), fuse=False)  # NumPy calls only


def test_reuse_goes_only_to_arrays_nothing_else_reads(program):
    body = [line.strip() for line in program.source.splitlines() if " = ipu_" in line]
    assert body == [
        "v2 = ipu_exp(v0)",                                      # an argument: never
        "v3 = ipu_add(v2, v1, ranks=(2, 1), out_rank=2, out=v2)",
        "v4 = ipu_relu(v3, out=v3)",
        "v5 = ipu_mul(v4, v4)",                                  # read twice
        "v6 = ipu_reshape(v5, rank=2, shape=(32768,))",           # v5 also has a view
        "v7 = ipu_neg(v5)",
        "v8 = ipu_sub(v7, v0, out=v7)",
        "v9 = ipu_exp(v8)",                                      # v8 is returned
        "v10 = ipu_exp(v0)",
        "v11 = ipu_neg(v10)",
        "v12 = ipu_add(v10, v11, out=v10)",   # neg read v10 earlier and kept nothing
        "v13 = ipu_reshape(v12, rank=2, shape=(32768,))",
        "v14 = ipu_exp(v13, out=v13)",        # a view of an array nothing else reads
    ]


def test_reused_buffers_give_the_same_numbers(program):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 512), dtype=np.float32)
    b = rng.standard_normal(512, dtype=np.float32)
    before = x.copy()
    six, seven, fourteen = program.run(x, b)
    squared = np.maximum(np.exp(x) + b, 0) ** 2
    np.testing.assert_array_equal(six, -squared - x)
    np.testing.assert_array_equal(seven, np.exp(-squared - x))
    np.testing.assert_array_equal(fourteen, np.exp((np.exp(x) - np.exp(x)).reshape(-1)))
    np.testing.assert_array_equal(x, before)  # the argument is untouched


def test_leading_axes_that_do_not_fit_get_a_new_array(program):
    """The types say nothing about leading (replica) axes: a reused array of the wrong
    shape at run time is left alone."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 512), dtype=np.float32)
    b = rng.standard_normal((3, 512), dtype=np.float32)  # 3 replicas' biases
    six, _, _ = program.run(x, b)
    assert six.shape == (3, 64, 512)
    squared = np.maximum(np.exp(x) + b[:, None], 0) ** 2
    np.testing.assert_array_equal(six, -squared - x)
    assert REUSE_BYTES <= x.nbytes  # the chain was big enough to reuse


@pytest.mark.parametrize("setting, tuned", [(None, True), ("0", False)])
def test_freed_memory_is_kept_unless_turned_off(setting, tuned):
    """Compiling a program tunes glibc's allocator once per process (runtime/heap.py);
    POPTORCH_KEEP_FREED_MEMORY=0 leaves it alone."""
    env = {k: v for k, v in os.environ.items() if k != heap.VARIABLE}
    if setting is not None:
        env[heap.VARIABLE] = setting
    code = ("from poptorch.runtime.jit import heap; from poptorch.dialects import make_context\n"
            "from poptorch.runtime.jit.program import compile_module\n"
            "from torch_mlir import ir\n"
            "with make_context(), ir.Location.unknown():\n"
            "    compile_module(ir.Module.parse('func.func @main() { return }'))\n"
            "print(heap.keep_freed_memory.cache_info().currsize, heap.keep_freed_memory())")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    # compiling called it (one cached result) and it tuned the allocator unless told not to
    assert done.stdout.split() == ["1", str(tuned and platform.libc_ver()[0] == "glibc")]


F = "tensor<128x512xf32>"
B = "tensor<128x512xi1>"
SELECT = f"""
func.func @main(%c: {B}, %x: {F}) -> ({F}, {F}, {B}) {{
  %0 = "ipu.exp"(%x) : ({F}) -> {F}
  %1 = "ipu.neg"(%x) : ({F}) -> {F}
  %2 = "ipu.select"(%c, %x, %0) : ({B}, {F}, {F}) -> {F}
  %3 = "ipu.select"(%c, %1, %x) : ({B}, {F}, {F}) -> {F}
  %4 = "ipu.logical_not"(%c) : ({B}) -> {B}
  %5 = "ipu.select"(%4, %c, %c) : ({B}, {B}, {B}) -> {B}
  return %2, %3, %5 : {F}, {F}, {B}
}}
"""


def test_select_writes_into_either_branch_never_the_condition():
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(SELECT), fuse=False)
    calls = [line.strip() for line in program.source.splitlines() if "ipu_select(" in line]
    assert calls == ["v4 = ipu_select(v0, v1, v2, out=v2)", "v5 = ipu_select(v0, v3, v1, out=v3)",
                     "v7 = ipu_select(v6, v0, v0, out=v6)"]
    rng = np.random.default_rng(0)
    c = rng.random((128, 512)) > 0.5
    x = rng.standard_normal((128, 512), dtype=np.float32)
    two, three, five = program.run(c, x)
    np.testing.assert_array_equal(two, np.where(c, x, np.exp(x)))
    np.testing.assert_array_equal(three, np.where(c, -x, x))
    assert c.nbytes >= REUSE_BYTES  # the condition's array was offered to the kernel
    np.testing.assert_array_equal(five, c)  # where(not c, c, c) is c, whatever is reused


@pytest.mark.parametrize("size", [64, 1 << 15])  # np.where below 2**14 elements, bits above
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int64, np.bool_])
def test_select_is_where_bit_for_bit(size, dtype):
    """The select kernel, branchless on large operands, gives np.where's bits: NaN, inf and
    -0.0 included, with a zero (or -0.0) side, a scalar side, and into either side's
    array."""
    rng = np.random.default_rng(0)
    c = rng.random(size) > 0.5
    x, y = (rng.standard_normal((2, size)) * 4).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x[:5] = y[-5:] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    zero, minus_zero = np.zeros((), dtype), np.array(-0.0).astype(dtype)
    for lhs, rhs in [(x, y), (zero, y), (x, zero), (minus_zero, y), (x, minus_zero),
                     (np.array(3).astype(dtype), y)]:
        expected = np.where(c, lhs, rhs)
        got = select(c, lhs, rhs)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got.view(bits), expected.view(bits))
    expected = np.where(c, x, y)
    for side in (0, 1):
        operands = [x.copy(), y.copy()]
        got = select(c, *operands, out=operands[side])
        assert (got is operands[side]) == (x.nbytes >= REUSE_BYTES)
        np.testing.assert_array_equal(got.view(bits), expected.view(bits))


def _concat(n: int, rows: int = 2) -> str:
    return f"tensor<{n * rows}x3xf32>"


CONCATS = f"""
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %c: tensor<2x3xf32>,
                %d: tensor<2x3xf32>, %w: {_concat(2)}) -> ({_concat(4)}, {_concat(2)},
                                                       tensor<4x6xf32>, tensor<2x3xf32>) {{
  %e = "ipu.exp"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = "ipu.concat"(%e, %b) {{dim = 0 : i64}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> {_concat(2)}
  %n = "ipu.neg"(%e) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "ipu.concat"(%c, %0) {{dim = 0 : i64}} : (tensor<2x3xf32>, {_concat(2)}) -> {_concat(3)}
  %2 = "ipu.concat"(%1, %n) {{dim = 0 : i64}} : ({_concat(3)}, tensor<2x3xf32>) -> {_concat(4)}
  %3 = "ipu.concat"(%c, %d) {{dim = 0 : i64}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> {_concat(2)}
  %4 = "ipu.concat"(%3, %3) {{dim = 0 : i64}} : ({_concat(2)}, {_concat(2)}) -> {_concat(4)}
  %5 = "ipu.concat"(%d, %c) {{dim = 0 : i64}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> {_concat(2)}
  %6 = "ipu.concat"(%5, %w) {{dim = 1 : i64}} : ({_concat(2)}, {_concat(2)}) -> tensor<4x6xf32>
  %7 = "ipu.add"(%n, %n) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %2, %3, %6, %7 : {_concat(4)}, {_concat(2)}, tensor<4x6xf32>, tensor<2x3xf32>
}}
"""


def test_a_chain_of_concats_is_one_call():
    """torch.cat of n tensors is n - 1 binary concats in the IR; the JIT joins a chain of
    them, each link read only by the next along the same dim, in one call (one copy). A
    concat read twice, or by a concat along another dim, stays; a link's operands are
    read where the chain ends, so no op in between overwrites them (%e below)."""
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(CONCATS))
    body = [line.strip() for line in program.source.splitlines() if " = ipu_" in line]
    assert body == [
        "v5 = ipu_exp(v0)",
        "v6 = ipu_neg(v5)",                   # not into %e's array: the chain reads it
        "v7 = ipu_concat(v2, v5, v1, v6, axis=-2, rank=2)",
        "v8 = ipu_concat(v2, v3, axis=-2, rank=2)",       # returned, and read twice
        "v9 = ipu_concat(v8, v8, axis=-2, rank=2)",
        "v10 = ipu_concat(v3, v2, axis=-2, rank=2)",      # read along another dim
        "v11 = ipu_concat(v10, v4, axis=-1, rank=2)",
        "v12 = ipu_add(v6, v6)",
    ]
    rng = np.random.default_rng(0)
    a, b, c, d = rng.standard_normal((4, 2, 3), dtype=np.float32)
    w = rng.standard_normal((4, 3), dtype=np.float32)
    joined, pair, wide, total = program.run(a, b, c, d, w)
    np.testing.assert_array_equal(joined, np.concatenate([c, np.exp(a), b, -np.exp(a)]))
    np.testing.assert_array_equal(pair, np.concatenate([c, d]))
    np.testing.assert_array_equal(wide, np.concatenate([np.concatenate([d, c]), w], axis=1))
    np.testing.assert_array_equal(total, -2 * np.exp(a))


W = "tensor<4x3xf32>"
GRADIENTS = f"""
func.func @main(%x: tensor<5x4xf32>, %g: tensor<5x3xf32>, %h: tensor<5x3xf32>,
                %b: tensor<3xf32>) -> ({W}, {W}, tensor<3x4xf32>, tensor<3xf32>, {W}, {W}) {{
  %xt = "ipu.permute"(%x) {{dims = array<i64: 1, 0>}} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %0 = "ipu.matmul"(%xt, %g) : (tensor<4x5xf32>, tensor<5x3xf32>) -> {W}
  %1 = "ipu.matmul"(%xt, %h) : (tensor<4x5xf32>, tensor<5x3xf32>) -> {W}
  %2 = "ipu.matmul"(%xt, %g) : (tensor<4x5xf32>, tensor<5x3xf32>) -> {W}
  %3 = "ipu.add"(%1, %2) : ({W}, {W}) -> {W}
  %4 = "ipu.permute"(%0) {{dims = array<i64: 1, 0>}} : ({W}) -> tensor<3x4xf32>
  %5 = "ipu.reduce"(%g) {{kind = "sum", dims = array<i64: 0>, keepdim = false}}
       : (tensor<5x3xf32>) -> tensor<3xf32>
  %6 = "ipu.matmul"(%xt, %h) : (tensor<4x5xf32>, tensor<5x3xf32>) -> {W}
  %7 = "ipu.mul"(%6, %6) : ({W}, {W}) -> {W}
  %8 = "ipu.matmul"(%xt, %h) : (tensor<4x5xf32>, tensor<5x3xf32>) -> {W}
  %9 = "ipu.sub"(%8, %8) : ({W}, {W}) -> {W}
  return %3, %6, %4, %5, %7, %9 : {W}, {W}, tensor<3x4xf32>, tensor<3xf32>, {W}, {W}
}}
"""


@pytest.fixture(scope="module")
def summing():
    with make_context(), ir.Location.unknown():
        yield compile_module(ir.Module.parse(GRADIENTS), "main",
                             dict.fromkeys([0, 2, 3, 4, 5], "mean") | {1: "sum"}, 3)


def test_summed_results_are_summed_where_their_matmuls_are(summing):
    """Results to reduce over replicas (a training step's gradients): a matmul read once,
    views of one and sums of such are summed by the matmul itself, as one gemm over every
    replica's rows; anything else is reduced on return. A matmul also read by another op
    (%6), or read twice (%8), is not."""
    body = [line.strip() for line in summing.source.splitlines()
            if " = " in line or "return" in line]
    reduced = "reduction='mean', rank=2, replicas=3"
    assert body[-12:-1] == [
        "v4 = ipu_permute(v0, dims=(1, 0))",
        f"v5 = matmul_replica_sum(v4, v1, {reduced})",
        f"v6 = matmul_replica_sum(v4, v2, {reduced})",
        f"v7 = matmul_replica_sum(v4, v1, {reduced})",
        "v8 = ipu_add(v6, v7, out=v6)",
        "v9 = ipu_permute(v5, dims=(1, 0))",
        "v10 = ipu_reduce(v1, kind='sum', axes=(-2,), keepdim=False)",
        "v11 = ipu_matmul(v4, v2)",
        "v12 = ipu_mul(v11, v11)",
        "v13 = ipu_matmul(v4, v2)",
        "v14 = ipu_sub(v13, v13)",
    ]
    assert body[-1] == (
        "return (v8, replica_sum(v11, reduction='sum', rank=2, replicas=3), v9, "
        "replica_sum(v10, reduction='mean', rank=1, replicas=3), "
        f"replica_sum(v12, {reduced}), replica_sum(v14, {reduced}))")


def test_summed_results_are_the_replicas_reduction(summing):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 4), dtype=np.float32)  # three replicas' micro-batches
    g, h = rng.standard_normal((2, 3, 5, 3), dtype=np.float32)
    b = rng.standard_normal(3, dtype=np.float32)
    three, six, four, five, seven, nine = summing.run(x, g, h, b)
    xt = x.transpose(0, 2, 1)
    close = {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(three, (xt @ h + xt @ g).mean(0), **close)
    np.testing.assert_allclose(six, (xt @ h).sum(0), **close)
    np.testing.assert_allclose(four, (xt @ g).mean(0).T, **close)
    np.testing.assert_allclose(five, g.sum(1).mean(0), **close)
    np.testing.assert_allclose(seven, ((xt @ h) ** 2).mean(0), **close)
    np.testing.assert_array_equal(nine, np.zeros((4, 3), np.float32))


def test_summed_results_without_a_replica_axis(summing):
    """A result that no replica's input reaches is the same on every replica: its sum
    over 3 replicas is 3 times it, its mean itself (a new array)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4), dtype=np.float32)
    g, h = rng.standard_normal((2, 5, 3), dtype=np.float32)
    b = rng.standard_normal(3, dtype=np.float32)
    three, six, four, five, _, _ = summing.run(x, g, h, b)
    np.testing.assert_allclose(three, x.T @ h + x.T @ g, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(six, 3 * (x.T @ h), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(five, g.sum(0), rtol=1e-6)


def test_summed_results_of_other_replica_counts_are_refused(summing):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 4), dtype=np.float32)
    g, h = rng.standard_normal((2, 2, 5, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="operands of 2 and 2 replicas where 3 were compiled"):
        summing.run(x, g, h, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="a result has 2 replicas where 3 were compiled"):
        replica_sum(g, reduction="sum", rank=2, replicas=3)
