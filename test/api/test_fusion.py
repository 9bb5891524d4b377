"""Elementwise fusion in the JIT (`runtime/jit/codegen/fusion/`): which ops become one
kernel, the kernel's MLIR, and its numbers against the NumPy kernels (bit for bit where the op is
exact) and against float64 (exp, tanh, sigmoid, erf, GELU within a few ulp)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch_mlir import execution_engine, ir

import poptorch
import poptorch.runtime.jit.program as jit
from poptorch.dialects import make_context
from poptorch.runtime.jit.codegen.fusion import cache, compiled, grouping
from poptorch.runtime.jit.program import compile_module

N = 64 * 128  # at least FUSE_MIN_ELEMENTS
T = "tensor<64x128xf32>"
B = "tensor<64x128xi1>"


def compile_both(text: str):
    """The program of `text` fused and as NumPy calls only."""
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        return compile_module(module), compile_module(module, fuse=False)


def body(program) -> list[str]:
    return [line.strip() for line in program.source.split("def main", 1)[1].splitlines()[1:]
            if line.strip()]


def values(seed: int, shape=(64, 128)) -> np.ndarray:
    """Normal values with NaN, infinities, signed zeros and large magnitudes mixed in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape, dtype=np.float32) * 3
    flat = x.reshape(-1)
    flat[:9] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 90.0, -110.0, 1e-30, -88.5]
    rng.shuffle(flat)
    return x


EXACT_BINARY = ["add", "sub", "mul", "div", "max", "min"]
EXACT_UNARY = ["neg", "abs", "square", "sqrt", "rsqrt", "reciprocal", "relu"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("name", EXACT_BINARY)
def test_binary_ops_match_numpy_bit_for_bit(name):
    """With a broadcast row and a broadcast column, and an exp after it so the group is
    worth a kernel (the exp is checked separately)."""
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {T}, %row: tensor<128xf32>, %column: tensor<64x1xf32>)
        -> ({T}, {T}) {{
      %0 = "ipu.{name}"(%x, %row) : ({T}, tensor<128xf32>) -> {T}
      %1 = "ipu.{name}"(%column, %0) : (tensor<64x1xf32>, {T}) -> {T}
      return %0, %1 : {T}, {T}
    }}""")
    assert body(program)[0] == f"v3, v4 = fused_0(v0, v1, v2)  # {name} {name}"
    args = values(0), values(1, (128,)), values(2, (64, 1))
    with np.errstate(all="ignore"):
        for fused, reference in zip(program.run(*args), numpy_only.run(*args), strict=True):
            np.testing.assert_array_equal(fused, reference)
            assert fused.dtype == np.float32


@pytest.mark.parametrize("name", EXACT_UNARY)
def test_unary_ops_match_numpy_bit_for_bit(name):
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {T}) -> {T} {{
      %0 = "ipu.{name}"(%x) : ({T}) -> {T}
      %1 = "ipu.neg"(%0) : ({T}) -> {T}
      return %1 : {T}
    }}""")
    assert body(program)[0] == f"v1, = fused_0(v0)  # {name} neg"
    assert "%e0 = arith.constant 8192 : i64" in program.kernels  # one loop: contiguous
    assert "%e1" not in program.kernels
    x = values(3)
    with np.errstate(all="ignore"):
        fused, = program.run(x)
        reference, = numpy_only.run(x)
    np.testing.assert_array_equal(fused, reference)
    number = ~np.isnan(reference)  # (a NaN's sign bit means nothing)
    assert np.array_equal(np.signbit(fused[number]), np.signbit(reference[number]))


@pytest.mark.parametrize("name", COMPARE)
def test_comparisons_selects_and_logic_match_numpy(name):
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {T}, %y: {T}, %c: {B}) -> ({B}, {T}, {T}) {{
      %0 = "ipu.{name}"(%x, %y) : ({T}, {T}) -> {B}
      %1 = "ipu.logical_xor"(%0, %c) : ({B}, {B}) -> {B}
      %2 = "ipu.logical_and"(%1, %c) : ({B}, {B}) -> {B}
      %3 = "ipu.logical_or"(%2, %0) : ({B}, {B}) -> {B}
      %4 = "ipu.select"(%3, %x, %y) : ({B}, {T}, {T}) -> {T}
      %5 = "ipu.cast"(%3) : ({B}) -> {T}
      return %3, %4, %5 : {B}, {T}, {T}
    }}""")
    assert body(program)[0] == ("v3, v4, v5 = fused_0(v0, v1, v2)  "
                                f"# {name} logical_xor logical_and logical_or select cast")
    x, y = values(4), values(5)
    y.reshape(-1)[::3] = x.reshape(-1)[::3]  # equal pairs too
    c = np.random.default_rng(6).random((64, 128)) > 0.5
    for fused, reference in zip(program.run(x, y, c), numpy_only.run(x, y, c), strict=True):
        np.testing.assert_array_equal(fused, reference)
        assert fused.dtype == reference.dtype


def ulp_error(result: np.ndarray, exact: np.ndarray) -> float:
    """The largest error of float32 `result` in units of float32 spacing at `exact`
    (float64), over the finite values whose float32 is normal (denormal results are not
    counted); non-finite values must match exactly."""
    finite = np.isfinite(exact) & (np.abs(exact) < np.finfo(np.float32).max)
    with np.errstate(over="ignore"):
        rounded = exact.astype(np.float32)
    np.testing.assert_array_equal(result[~finite], rounded[~finite])
    spacing = np.spacing(np.abs(rounded[finite])).astype(np.float64)
    normal = np.abs(rounded[finite]) >= np.finfo(np.float32).tiny
    error = np.abs(result[finite].astype(np.float64) - exact[finite])
    return float(np.max(np.where(normal, error / spacing, 0.0)))


SWEEP = np.concatenate([np.linspace(-110, 95, 1 << 20, dtype=np.float32),
                        np.random.default_rng(7).standard_normal(1 << 20).astype(np.float32)
                        * 3, np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 1e-30],
                                      np.float32)])


@pytest.mark.parametrize("name, exact, bound", [
    ("exp", np.exp, 1.0),
    ("tanh", np.tanh, 1.5),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), 2.5),
])
def test_transcendentals_are_within_a_few_ulp(name, exact, bound):
    size = SWEEP.size
    program, _ = compile_both(f"""
    func.func @main(%x: tensor<{size}xf32>) -> tensor<{size}xf32> {{
      %0 = "ipu.{name}"(%x) : (tensor<{size}xf32>) -> tensor<{size}xf32>
      return %0 : tensor<{size}xf32>
    }}""")
    assert body(program)[0] == f"v1, = fused_0(v0)  # {name}"
    result, = program.run(SWEEP)
    with np.errstate(all="ignore"):
        reference = exact(SWEEP.astype(np.float64))
    assert np.array_equal(np.isnan(result), np.isnan(SWEEP))
    assert ulp_error(result[~np.isnan(SWEEP)], reference[~np.isnan(SWEEP)]) <= bound
    assert np.signbit(result[SWEEP.size - 3]) == (name == "tanh")  # f(-0.0)


@pytest.mark.parametrize("name", ["erf", "gelu", "gelu_tanh"])
def test_erf_and_gelu_match_the_numpy_kernels(name):
    """The same rational erf as the NumPy kernel, so within float32 rounding of it."""
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {T}) -> {T} {{
      %0 = "ipu.{name}"(%x) : ({T}) -> {T}
      return %0 : {T}
    }}""")
    x = values(8)
    x[np.isnan(x)] = 0  # (GELU of NaN: NaN in both, checked by the sweep below)
    fused, = program.run(x)
    with np.errstate(invalid="ignore"):  # inf * 0 in the NumPy kernel's GELU of -inf
        reference, = numpy_only.run(x)
    np.testing.assert_allclose(fused, reference, rtol=2e-6, atol=1e-6)
    exact = torch.nn.functional.gelu(torch.from_numpy(x).double(),
                                     approximate="tanh" if name == "gelu_tanh" else "none")
    if name != "erf":
        np.testing.assert_allclose(fused, exact.float().numpy(), rtol=1e-5, atol=1e-6)


def test_gelu_grad_matches_the_numpy_kernel_and_float64():
    """GELU's gradient (`ipu.gelu_grad`) through the same erf and exp as the NumPy kernel:
    its slope Phi(x) + x phi(x) within 3e-7 of float64's (the NumPy kernel's: 2.5e-7),
    the product with the incoming gradient rounded once more."""
    size = SWEEP.size
    program, numpy_only = compile_both(f"""
    func.func @main(%g: tensor<{size}xf32>, %x: tensor<{size}xf32>) -> tensor<{size}xf32> {{
      %0 = "ipu.gelu_grad"(%g, %x) : (tensor<{size}xf32>, tensor<{size}xf32>)
          -> tensor<{size}xf32>
      return %0 : tensor<{size}xf32>
    }}""")
    assert body(program)[0] == "v2, = fused_0(v0, v1)  # gelu_grad"
    slope, = program.run(np.ones_like(SWEEP), SWEEP)
    with np.errstate(all="ignore"):  # inf * 0 in both: NaN
        reference, = numpy_only.run(np.ones_like(SWEEP), SWEEP)
    x64 = torch.from_numpy(SWEEP).double().requires_grad_()
    torch.nn.functional.gelu(x64).backward(torch.ones_like(x64))
    finite = np.isfinite(SWEEP)
    assert np.array_equal(np.isnan(slope), np.isnan(reference))
    assert np.max(np.abs(slope - x64.grad.numpy())[finite]) <= 3e-7
    assert np.max(np.abs(slope - reference)[finite]) <= 3e-7
    g = np.random.default_rng(9).standard_normal(size).astype(np.float32) * 3
    fused, = program.run(g, SWEEP)
    with np.errstate(all="ignore"):
        reference, = numpy_only.run(g, SWEEP)
    error = np.abs(fused - reference)[finite]
    assert np.all(error <= 3e-7 * np.abs(g[finite]) + 1.2e-7 * np.abs(reference[finite]))


def test_splat_constants_are_literals_also_when_infinite():
    """An attention mask's -inf (and a 0.5) become kernel constants, -inf as hex bits."""
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {T}, %c: {B}) -> {T} {{
      %inf = "ipu.constant"() {{value = dense<0xFF800000> : {T}}} : () -> {T}
      %half = "ipu.constant"() {{value = dense<0.5> : tensor<f32>}} : () -> tensor<f32>
      %0 = "ipu.mul"(%x, %half) : ({T}, tensor<f32>) -> {T}
      %1 = "ipu.select"(%c, %inf, %0) : ({B}, {T}, {T}) -> {T}
      return %1 : {T}
    }}""")
    assert body(program)[0] == "v2, = fused_0(v0, v1)  # mul select"
    assert "arith.constant 0xFF800000 : f32" in program.kernels
    assert "arith.constant 0.5 : f32" in program.kernels
    x, c = values(16), np.random.default_rng(17).random((64, 128)) > 0.5
    np.testing.assert_array_equal(program.run(x, c)[0], numpy_only.run(x, c)[0])


CELL = f"""
func.func @main(%gates: tensor<1x64x512xf32>, %c: tensor<64x128xf32>)
    -> ({T}, {T}) {{
  %i = "ipu.slice"(%gates) {{starts = array<i64: 0, 0, 0>, ends = array<i64: 1, 64, 128>,
       steps = array<i64: 1, 1, 1>}} : (tensor<1x64x512xf32>) -> tensor<1x64x128xf32>
  %f = "ipu.slice"(%gates) {{starts = array<i64: 0, 0, 128>, ends = array<i64: 1, 64, 256>,
       steps = array<i64: 1, 1, 1>}} : (tensor<1x64x512xf32>) -> tensor<1x64x128xf32>
  %g = "ipu.slice"(%gates) {{starts = array<i64: 0, 0, 256>, ends = array<i64: 1, 64, 384>,
       steps = array<i64: 1, 1, 1>}} : (tensor<1x64x512xf32>) -> tensor<1x64x128xf32>
  %o = "ipu.slice"(%gates) {{starts = array<i64: 0, 0, 384>, ends = array<i64: 1, 64, 512>,
       steps = array<i64: 1, 1, 1>}} : (tensor<1x64x512xf32>) -> tensor<1x64x128xf32>
  %0 = "ipu.sigmoid"(%i) : (tensor<1x64x128xf32>) -> tensor<1x64x128xf32>
  %1 = "ipu.sigmoid"(%f) : (tensor<1x64x128xf32>) -> tensor<1x64x128xf32>
  %2 = "ipu.tanh"(%g) : (tensor<1x64x128xf32>) -> tensor<1x64x128xf32>
  %3 = "ipu.sigmoid"(%o) : (tensor<1x64x128xf32>) -> tensor<1x64x128xf32>
  %4 = "ipu.mul"(%1, %c) : (tensor<1x64x128xf32>, {T}) -> tensor<1x64x128xf32>
  %5 = "ipu.mul"(%0, %2) : (tensor<1x64x128xf32>, tensor<1x64x128xf32>)
       -> tensor<1x64x128xf32>
  %6 = "ipu.add"(%4, %5) : (tensor<1x64x128xf32>, tensor<1x64x128xf32>)
       -> tensor<1x64x128xf32>
  %7 = "ipu.tanh"(%6) : (tensor<1x64x128xf32>) -> tensor<1x64x128xf32>
  %8 = "ipu.mul"(%3, %7) : (tensor<1x64x128xf32>, tensor<1x64x128xf32>)
       -> tensor<1x64x128xf32>
  %h = "ipu.reshape"(%8) : (tensor<1x64x128xf32>) -> {T}
  %cell = "ipu.reshape"(%6) : (tensor<1x64x128xf32>) -> {T}
  return %h, %cell : {T}, {T}
}}
"""


def lstm_cell(gates, c):
    i, f, g, o = (torch.from_numpy(np.ascontiguousarray(gates[..., k * 128:(k + 1) * 128]))
                  for k in range(4))
    cell = torch.sigmoid(f) * torch.from_numpy(c) + torch.sigmoid(i) * torch.tanh(g)
    return ((torch.sigmoid(o) * torch.tanh(cell)).reshape(c.shape).numpy(),
            cell.reshape(c.shape).numpy())


def test_an_lstm_cell_is_one_kernel_reading_its_gates_in_place():
    """The four gate slices are read where they lie in the gates tensor; the cell's two
    results come out of one kernel, the reshapes that drop a leading 1 with them."""
    program, _ = compile_both(CELL)
    assert body(program) == [
        "v2, v3 = fused_0(v0, v1)  # sigmoid sigmoid tanh sigmoid mul mul add tanh mul "
        "reshape reshape", "return (v2, v3)"]
    rng = np.random.default_rng(9)
    gates = rng.standard_normal((1, 64, 512), dtype=np.float32)
    c = rng.standard_normal((64, 128), dtype=np.float32)
    for fused, reference in zip(program.run(gates, c), lstm_cell(gates, c), strict=True):
        np.testing.assert_allclose(fused, reference, rtol=1e-6, atol=1e-6)


def test_leading_replica_axes_go_through_the_kernel():
    """Inputs with leading (replica) axes share them with the outputs; an input without
    them (a weight) is broadcast over every replica."""
    program, _ = compile_both(CELL)
    rng = np.random.default_rng(10)
    gates = rng.standard_normal((3, 1, 64, 512), dtype=np.float32)
    c = rng.standard_normal((64, 128), dtype=np.float32)
    h, cell = program.run(gates, c)
    assert h.shape == cell.shape == (3, 64, 128)
    for r in range(3):
        for fused, reference in zip((h[r], cell[r]), lstm_cell(gates[r], c), strict=True):
            np.testing.assert_allclose(fused, reference, rtol=1e-6, atol=1e-6)
    # both replicated, and views that are not contiguous (copied first)
    cs = rng.standard_normal((3, 128, 64), dtype=np.float32).transpose(0, 2, 1)
    h, cell = program.run(gates, cs)
    np.testing.assert_allclose(cell[2], lstm_cell(gates[2], cs[2])[1], rtol=1e-6, atol=1e-6)


def test_a_kernel_called_with_changing_replica_axes_steps_each_call_right():
    """A kernel remembers the steps of each set of input shapes it has seen (its fast
    path); calls that alternate between them, and a call with an input that is not
    contiguous, each read their own inputs."""
    program, _ = compile_both(CELL)
    rng = np.random.default_rng(11)
    one = rng.standard_normal((1, 64, 512), dtype=np.float32)
    three = rng.standard_normal((3, 1, 64, 512), dtype=np.float32)
    c = rng.standard_normal((64, 128), dtype=np.float32)
    cs = rng.standard_normal((3, 64, 128), dtype=np.float32)
    transposed = np.ascontiguousarray(c.T).T
    calls = [(one, c), (three, c), (three, cs), (one, c), (three, c), (one, transposed)]
    for gates, cell in calls * 2:
        h, _ = program.run(gates, cell)
        if gates.ndim == 3:
            np.testing.assert_allclose(h, lstm_cell(gates, cell)[0], rtol=1e-6, atol=1e-6)
            continue
        assert h.shape == (3, 64, 128)
        for r in range(3):
            np.testing.assert_allclose(h[r], lstm_cell(gates[r], cell[r] if cell.ndim == 3
                                                       else cell)[0], rtol=1e-6, atol=1e-6)


def test_operands_with_different_leading_axes_are_an_error():
    program, _ = compile_both(CELL)
    gates = np.zeros((2, 1, 64, 512), np.float32)
    with pytest.raises(poptorch.Error, match=r"a fused kernel's operands have leading axes "
                                             r"\(2,\) and \(3,\)"):
        program.run(gates, np.zeros((3, 64, 128), np.float32))


def test_a_group_runs_where_its_last_op_was_so_early_readers_split_it():
    """%1 reads the exp before %2 joins its group: the reduction ends the exp's group
    (it folds the exp's loop), so %2 starts a new group. Ops of other shapes and small
    tensors stay NumPy calls, as does a single op that is one NumPy pass."""
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {T}, %small: tensor<8x8xf32>) -> ({T}, tensor<64x1xf32>, {T},
                                                          tensor<8x8xf32>, {T}) {{
      %0 = "ipu.exp"(%x) : ({T}) -> {T}
      %1 = "ipu.reduce"(%0) {{kind = "sum", dims = array<i64: 1>, keepdim = true}}
           : ({T}) -> tensor<64x1xf32>
      %2 = "ipu.sub"(%0, %1) : ({T}, tensor<64x1xf32>) -> {T}
      %3 = "ipu.mul"(%2, %2) : ({T}, {T}) -> {T}
      %4 = "ipu.exp"(%small) : (tensor<8x8xf32>) -> tensor<8x8xf32>
      %5 = "ipu.neg"(%4) : (tensor<8x8xf32>) -> tensor<8x8xf32>
      %6 = "ipu.add"(%x, %x) : ({T}, {T}) -> {T}
      return %0, %1, %3, %5, %6 : {T}, tensor<64x1xf32>, {T}, tensor<8x8xf32>, {T}
    }}""")
    assert body(program) == [
        "v2, v3 = fused_0(v0)  # exp reduce",
        "v4, = fused_1(v2, v3)  # sub mul",
        "v5 = ipu_exp(v1)",
        "v6 = ipu_neg(v5, out=v5)",
        "v7 = ipu_add(v0, v0)",
        "return (v2, v3, v4, v6, v7)"]
    x, small = values(11), values(12, (8, 8))
    x[np.isnan(x)] = 1
    with np.errstate(all="ignore"):
        for fused, reference in zip(program.run(x, small), numpy_only.run(x, small),
                                    strict=True):
            np.testing.assert_allclose(fused, reference, rtol=3e-6)


def test_kernel_ir(tmp_path):
    """The kernel module FileCheck'd: the gates are read at their slice's offset (128, an
    argument) and row stride (256), the bias along columns only; the slice keeps the two
    loops apart. The module lowers to LLVM with the JIT's passes in ipu-opt."""
    program, _ = compile_both(f"""
    func.func @main(%gates: tensor<64x256xf32>, %bias: tensor<128xf32>) -> {T} {{
      %a = "ipu.slice"(%gates) {{starts = array<i64: 0, 128>, ends = array<i64: 64, 256>,
           steps = array<i64: 1, 1>}} : (tensor<64x256xf32>) -> {T}
      %0 = "ipu.add"(%a, %bias) : ({T}, tensor<128xf32>) -> {T}
      %1 = "ipu.relu"(%0) : ({T}) -> {T}
      %2 = "ipu.add"(%1, %1) : ({T}, {T}) -> {T}
      return %2 : {T}
    }}""")
    checks = tmp_path / "checks"
    checks.write_text("""
CHECK-LABEL: func.func @fused_0(%in0: !llvm.ptr {llvm.noalias}, %in1: !llvm.ptr
CHECK-SAME: %out0: !llvm.ptr {llvm.noalias}, %replicas: i64, %step0: i64, %step1: i64,
CHECK-SAME: %off0: i64, %off1: i64, %lo: i64, %hi: i64)
CHECK: %outer = arith.constant 64 : i64
CHECK: scf.for %r = %c0 to %replicas step %c1 : i64
CHECK: %b0_0 = arith.addi %r0, %off0 : i64
CHECK: %rs = arith.muli %r, %outer : i64
CHECK-NEXT: %lo0 = arith.subi %lo, %rs : i64
CHECK-NEXT: %lo1 = arith.minsi %lo0, %outer : i64
CHECK-NEXT: %lo_ = arith.maxsi %lo1, %c0 : i64
CHECK: %hi_ = arith.maxsi %hi1, %c0 : i64
CHECK: %e0 = arith.constant 64 : i64
CHECK: scf.for %i0 = %lo_ to %hi_ step %c1 : i64
CHECK: %s0_0 = arith.constant 256 : i64
CHECK-NOT: %s1_0
CHECK: %e1 = arith.constant 128 : i64
CHECK: scf.for %i1 = %c0 to %e1 step %c1 : i64
CHECK: %b1_2 = arith.addi %b1_0, %m1_1 : i64
CHECK: %p0 = llvm.getelementptr %in0[%b0_2] : (!llvm.ptr, i64) -> !llvm.ptr, f32
CHECK: %p1 = llvm.getelementptr %in1[%b1_2] : (!llvm.ptr, i64) -> !llvm.ptr, f32
CHECK: %t1 = arith.addf %l0, %l1 : f32
CHECK: %t3 = arith.maximumf %t1, %t2 : f32
CHECK: %t4 = arith.addf %t3, %t3 : f32
CHECK: llvm.store %t4, %q0 : f32, !llvm.ptr
""")
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "filecheck"),
                           str(checks)], input=program.kernels, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    source = tmp_path / "kernels.mlir"
    source.write_text(program.kernels)
    lowered = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ipu-opt"),
                              str(source), "--pass-pipeline", cache.LOWERING],
                             capture_output=True, text=True)
    assert lowered.returncode == 0, lowered.stderr
    assert "llvm.func @fused_0" in lowered.stdout and "scf.for" not in lowered.stdout
    kernel = program.namespace["F"][0]
    # replicas, steps, offsets, the range of the outer loop
    assert list(kernel.integers) == [1, 0, 0, 128, 0, 0, 64]
    gates = values(13, (64, 256))
    bias = values(14, (128,))
    gates[np.isnan(gates)] = 0
    bias[np.isnan(bias)] = 0
    result, = program.run(gates, bias)
    np.testing.assert_array_equal(result, 2 * np.maximum(gates[:, 128:] + bias, 0))


G = "tensor<64x512xf32>"


def _step(n: int, h: str, c: str) -> str:
    """Step `n` of an LSTM-like recurrence: its gates are `h` plus slice n of %p, read
    through four column slices by one elementwise chain."""
    gates = "\n".join(
        f'  %g{n}{k} = "ipu.slice"(%a{n}) {{starts = array<i64: 0, {128 * k}>, '
        f'ends = array<i64: 64, {128 * (k + 1)}>, steps = array<i64: 1, 1>}} : ({G}) -> {T}'
        for k in range(4))
    return f"""
  %s{n} = "ipu.slice"(%p) {{starts = array<i64: {n}, 0, 0>, ends = array<i64: {n + 1}, 64, 512>,
        steps = array<i64: 1, 1, 1>}} : (tensor<2x64x512xf32>) -> tensor<1x64x512xf32>
  %r{n} = "ipu.reshape"(%s{n}) : (tensor<1x64x512xf32>) -> {G}
  %a{n} = "ipu.add"({h}, %r{n}) : ({G}, {G}) -> {G}
{gates}
  %i{n} = "ipu.sigmoid"(%g{n}0) : ({T}) -> {T}
  %t{n} = "ipu.tanh"(%g{n}1) : ({T}) -> {T}
  %m{n} = "ipu.mul"(%i{n}, %t{n}) : ({T}, {T}) -> {T}
  %f{n} = "ipu.mul"(%g{n}2, {c}) : ({T}, {T}) -> {T}
  %o{n} = "ipu.add"(%m{n}, %f{n}) : ({T}, {T}) -> {T}
  %q{n} = "ipu.add"(%o{n}, %g{n}3) : ({T}, {T}) -> {T}"""


def test_lowered_kernel_functions_prefer_512_bit_vectors():
    """Every function of a lowered kernel module asks LLVM for the host's widest vectors
    (LLVM prefers 256 bits on AVX-512 hosts otherwise)."""
    program, _ = compile_both(f"""
    func.func @main(%x: {T}, %y: {T}) -> ({T}, {T}) {{
      %0 = "ipu.tanh"(%x) : ({T}) -> {T}
      %1 = "ipu.sigmoid"(%y) : ({T}) -> {T}
      %2 = "ipu.mul"(%0, %1) : ({T}, {T}) -> {T}
      %3 = "ipu.add"(%2, %y) : ({T}, {T}) -> {T}
      return %2, %3 : {T}, {T}
    }}""")
    with make_context():
        module = ir.Module.parse(program.kernels)
        cache.lower(module)
        functions = [op.operation for op in module.body.operations
                     if op.operation.name == "llvm.func"]
        assert functions
        for function in functions:
            assert str(function.attributes["passthrough"]) == \
                '[["prefer-vector-width", "512"]]'


def _check_two_steps_in_one_kernel(program, numpy_only, projection: tuple[int, ...]) -> None:
    """Two LSTM steps (`_step`) reading a projection of both steps' rows: a kernel call a
    step, one kernel function for both, each step reading its own rows (per gate k: h at
    128k, the projection at n * 32768 + 128k, the bias at 128k), NumPy's values."""
    assert body(program) == [
        "v5, = fused_0(v2, v0, v1, v4)  # sigmoid tanh mul mul add add",
        "v6 = ipu_matmul(v5, v3)",
        "v7, = fused_1(v6, v0, v1, v5)  # sigmoid tanh mul mul add add",
        "return (v5, v7)"]
    assert program.kernels.count("func.func") == 1
    steps = [list(kernel.integers)[5:-2] for kernel in program.namespace["F"]]
    assert steps == [[0, 0, 0, 128, 128, 128, 256, 256, 256, 0, 384, 384, 384],
                     [0, 32768, 0, 128, 32896, 128, 256, 33024, 256, 0, 384, 33152, 384]]
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(shape, dtype=np.float32) / 4 for shape in
            [projection, (512,), (64, 512), (128, 512), (64, 128)]]
    for fused, reference in zip(program.run(*args), numpy_only.run(*args), strict=True):
        np.testing.assert_allclose(fused, reference, rtol=1e-5, atol=1e-6)


def test_ops_read_only_through_slices_are_computed_in_the_kernels_that_read_them():
    """An LSTM's gate sums: the bias add of the whole input projection (%p) and each
    step's add are read only through slices, so each step's kernel computes them where
    it reads them, at offsets that are arguments: one kernel function for both steps
    (step 1 reads the projection 64 * 512 further on), no NumPy add."""
    program, numpy_only = compile_both(f"""
    func.func @main(%proj: tensor<2x64x512xf32>, %bias: tensor<512xf32>, %h0: {G},
                    %w: tensor<128x512xf32>, %c: {T}) -> ({T}, {T}) {{
      %p = "ipu.add"(%proj, %bias) : (tensor<2x64x512xf32>, tensor<512xf32>)
           -> tensor<2x64x512xf32>
      {_step(0, "%h0", "%c")}
      %h1 = "ipu.matmul"(%q0, %w) : ({T}, tensor<128x512xf32>) -> {G}
      {_step(1, "%h1", "%q0")}
      return %q0, %q1 : {T}, {T}
    }}""")
    _check_two_steps_in_one_kernel(program, numpy_only, (2, 64, 512))


def test_a_projection_of_all_steps_rows_is_read_through_its_split_into_steps():
    """A stacked LSTM's second layer: its input projection is one (steps x batch, 4 x
    hidden) matrix plus the bias, split into steps by a reshape; each step's kernel
    computes the bias add at its own run of rows (step 1: 64 rows, 32768 elements, further
    on), and no NumPy add or reshape is left."""
    program, numpy_only = compile_both(f"""
    func.func @main(%proj: tensor<128x512xf32>, %bias: tensor<512xf32>, %h0: {G},
                    %w: tensor<128x512xf32>, %c: {T}) -> ({T}, {T}) {{
      %b = "ipu.add"(%proj, %bias) : (tensor<128x512xf32>, tensor<512xf32>)
           -> tensor<128x512xf32>
      %p = "ipu.reshape"(%b) : (tensor<128x512xf32>) -> tensor<2x64x512xf32>
      {_step(0, "%h0", "%c")}
      %h1 = "ipu.matmul"(%q0, %w) : ({T}, tensor<128x512xf32>) -> {G}
      {_step(1, "%h1", "%q0")}
      return %q0, %q1 : {T}, {T}
    }}""")
    _check_two_steps_in_one_kernel(program, numpy_only, (128, 512))


def test_a_split_read_other_than_by_rows_stays_a_numpy_reshape():
    """A slice of the split that takes two steps at once is not a run of rows the loop
    of a step's shape can read: the add and the reshape run in NumPy."""
    program, numpy_only = compile_both("""
    func.func @main(%proj: tensor<128x512xf32>, %bias: tensor<512xf32>)
        -> tensor<2x32x512xf32> {
      %b = "ipu.add"(%proj, %bias) : (tensor<128x512xf32>, tensor<512xf32>)
           -> tensor<128x512xf32>
      %p = "ipu.reshape"(%b) : (tensor<128x512xf32>) -> tensor<2x64x512xf32>
      %s = "ipu.slice"(%p) {starts = array<i64: 0, 0, 0>, ends = array<i64: 2, 32, 512>,
           steps = array<i64: 1, 1, 1>} : (tensor<2x64x512xf32>) -> tensor<2x32x512xf32>
      %t = "ipu.tanh"(%s) : (tensor<2x32x512xf32>) -> tensor<2x32x512xf32>
      %u = "ipu.sigmoid"(%t) : (tensor<2x32x512xf32>) -> tensor<2x32x512xf32>
      return %u : tensor<2x32x512xf32>
    }""")
    assert any("ipu_reshape" in line for line in body(program))
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(shape, dtype=np.float32) for shape in [(128, 512), (512,)]]
    np.testing.assert_allclose(program.run(*args)[0], numpy_only.run(*args)[0],
                               rtol=1e-6, atol=1e-7)


def test_an_op_read_through_overlapping_slices_is_computed_once():
    """Two slices that overlap would compute the exp of their common columns twice: the
    exp stays a kernel of its own, and the slices are read in place from its result."""
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {T}) -> (tensor<64x96xf32>, tensor<64x96xf32>) {{
      %0 = "ipu.exp"(%x) : ({T}) -> {T}
      %1 = "ipu.slice"(%0) {{starts = array<i64: 0, 0>, ends = array<i64: 64, 96>,
           steps = array<i64: 1, 1>}} : ({T}) -> tensor<64x96xf32>
      %2 = "ipu.slice"(%0) {{starts = array<i64: 0, 32>, ends = array<i64: 64, 128>,
           steps = array<i64: 1, 1>}} : ({T}) -> tensor<64x96xf32>
      %3 = "ipu.tanh"(%1) : (tensor<64x96xf32>) -> tensor<64x96xf32>
      %4 = "ipu.tanh"(%2) : (tensor<64x96xf32>) -> tensor<64x96xf32>
      return %3, %4 : tensor<64x96xf32>, tensor<64x96xf32>
    }}""")
    assert body(program) == ["v1, = fused_0(v0)  # exp", "v2, = fused_1(v1)  # tanh",
                             "v3, = fused_2(v1)  # tanh", "return (v2, v3)"]
    x = values(5)
    with np.errstate(all="ignore"):
        for fused, reference in zip(program.run(x), numpy_only.run(x), strict=True):
            np.testing.assert_allclose(fused, reference, rtol=1e-6)


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_a_reduction_over_the_last_dims_ends_the_group_of_its_operand(kind):
    """A sum, max or min over the trailing dims folds the group's inner loops (here the
    last two dims, with and without keepdim); the values before it come out too. Max and
    min are exact and keep NumPy's NaN; a sum is reassociated (vectorised), within a few
    ulp of NumPy's pairwise sum. A reduction that keeps the last dim stays a NumPy call
    (its fold would stride across memory; NumPy adds whole rows)."""
    S, K = "tensor<16x32x48xf32>", "tensor<16x1x1xf32>"
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {S}, %b: tensor<48xf32>) -> ({S}, {K}, tensor<16xf32>,
                                                       tensor<32x48xf32>) {{
      %0 = "ipu.add"(%x, %b) : ({S}, tensor<48xf32>) -> {S}
      %1 = "ipu.abs"(%0) : ({S}) -> {S}
      %2 = "ipu.reduce"(%1) {{kind = "{kind}", dims = array<i64: 1, 2>, keepdim = true}}
           : ({S}) -> {K}
      %3 = "ipu.square"(%x) : ({S}) -> {S}
      %4 = "ipu.reduce"(%3) {{kind = "{kind}", dims = array<i64: 1, 2>, keepdim = false}}
           : ({S}) -> tensor<16xf32>
      %5 = "ipu.reduce"(%3) {{kind = "{kind}", dims = array<i64: 0>, keepdim = false}}
           : ({S}) -> tensor<32x48xf32>
      return %0, %2, %4, %5 : {S}, {K}, tensor<16xf32>, tensor<32x48xf32>
    }}""")
    assert body(program) == [
        "v2, v3 = fused_0(v0, v1)  # add abs reduce",
        "v4, v5 = fused_1(v0)  # square reduce",
        f"v6 = ipu_reduce(v4, kind='{kind}', axes=(-3,), keepdim=False)",
        "return (v2, v3, v5, v6)"]
    rng = np.random.default_rng(21)
    x = rng.standard_normal((16, 32, 48), dtype=np.float32)
    x[3, 5, 7] = np.nan
    b = rng.standard_normal(48, dtype=np.float32)
    for fused, reference in zip(program.run(x, b), numpy_only.run(x, b), strict=True):
        if kind == "sum":
            np.testing.assert_allclose(fused, reference, rtol=2e-6)
        else:
            np.testing.assert_array_equal(fused, reference)
    assert np.isnan(program.run(x, b)[1][3]).all()
    # replicas: leading axes go through the fold
    xs = rng.standard_normal((2, 16, 32, 48), dtype=np.float32)
    fused = program.run(xs, b)[2]
    assert fused.shape == (2, 16)
    for r in range(2):
        np.testing.assert_allclose(fused[r], numpy_only.run(xs[r], b)[2], rtol=2e-6)


def test_a_reduction_over_batch_norms_dims_keeps_the_channel_loop_outside():
    """Batch norm's sums over (N, H, W) of NCHW: the loops run over the channels first,
    then fold N and H*W (merged: contiguous) into one accumulator per channel; the
    squared deviations come out too, in NCHW order."""
    S, K = "tensor<8x16x12x12xf32>", "tensor<1x16x1x1xf32>"
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {S}, %m: {K}) -> ({S}, {K}) {{
      %0 = "ipu.sub"(%x, %m) : ({S}, {K}) -> {S}
      %1 = "ipu.mul"(%0, %0) : ({S}, {S}) -> {S}
      %2 = "ipu.reduce"(%1) {{kind = "sum", dims = array<i64: 0, 2, 3>, keepdim = true}}
           : ({S}) -> {K}
      return %1, %2 : {S}, {K}
    }}""")
    assert body(program) == ["v2, v3 = fused_0(v0, v1)  # sub mul reduce",
                             "return (v2, v3)"]
    # loops: channels (16), then N (8) and H*W (144) folded; NCHW strides of the squares
    for line in ("%e0 = arith.constant 16 : i64", "%e1 = arith.constant 8 : i64",
                 "%e2 = arith.constant 144 : i64", "iter_args(%a1 = %init)",
                 "iter_args(%a2 = %a1)", "%os_0 = arith.constant 144 : i64",
                 "%os_1 = arith.constant 2304 : i64", "%os_2 = arith.constant 1 : i64"):
        assert line in program.kernels, line
    rng = np.random.default_rng(23)
    x = rng.standard_normal((8, 16, 12, 12), dtype=np.float32)
    m = rng.standard_normal((1, 16, 1, 1), dtype=np.float32)
    squares, sums = program.run(x, m)
    reference = numpy_only.run(x, m)
    np.testing.assert_array_equal(squares, reference[0])
    np.testing.assert_allclose(sums, reference[1], rtol=2e-6)


def test_reduction_kernel_ir(tmp_path):
    """FileCheck: the reduced loop carries the accumulator (reassociated adds), which is
    stored once per row after it; the tanh is stored in the loop."""
    program, _ = compile_both(f"""
    func.func @main(%x: {T}) -> ({T}, tensor<64xf32>) {{
      %0 = "ipu.tanh"(%x) : ({T}) -> {T}
      %1 = "ipu.reduce"(%0) {{kind = "sum", dims = array<i64: 1>, keepdim = false}}
           : ({T}) -> tensor<64xf32>
      return %0, %1 : {T}, tensor<64xf32>
    }}""")
    checks = tmp_path / "checks"
    checks.write_text("""
CHECK-LABEL: func.func @fused_0(
CHECK: %init = arith.constant 0.0 : f32
CHECK: %rb_0 = arith.muli %r, %nr_ : i64
CHECK: scf.for %i0 = %lo_ to %hi_ step %c1 : i64 {
CHECK: %rb_1 = arith.addi %rb_0, %rm_0 : i64
CHECK: %acc1 = scf.for %i1 = %c0 to %e1 step %c1 iter_args(%a1 = %init) -> (f32) : i64 {
CHECK: %[[SUM:.*]] = arith.addf %a1, %[[TANH:.*]] fastmath<reassoc> : f32
CHECK-NEXT: %q0 = llvm.getelementptr %out0[%ob_2]
CHECK-NEXT: llvm.store %[[TANH]], %q0 : f32, !llvm.ptr
CHECK-NEXT: scf.yield %[[SUM]] : f32
CHECK-NEXT: }
CHECK-NEXT: %q1 = llvm.getelementptr %out1[%rb_1]
CHECK-NEXT: llvm.store %acc1, %q1 : f32, !llvm.ptr
""")
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "filecheck"),
                           str(checks)], input=program.kernels, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_identical_groups_share_one_kernel_function():
    program, _ = compile_both(f"""
    func.func @main(%x: {T}, %y: {T}) -> ({T}, {T}) {{
      %0 = "ipu.sigmoid"(%x) : ({T}) -> {T}
      %1 = "ipu.reduce"(%0) {{kind = "sum", dims = array<i64: 1>, keepdim = true}}
           : ({T}) -> tensor<64x1xf32>
      %2 = "ipu.sigmoid"(%y) : ({T}) -> {T}
      return %0, %2 : {T}, {T}
    }}""")
    assert program.kernels.count("func.func") == 1
    assert [line for line in body(program) if "fused" in line] == [
        "v2, = fused_0(v0)  # sigmoid", "v4, = fused_1(v1)  # sigmoid"]


def _small_steps(count: int) -> str:
    """`count` steps of an unrolled recurrence on 4 x 8 tensors (below
    FUSE_MIN_ELEMENTS): a product with %w, then the same three elementwise ops."""
    t, m = "tensor<4x8xf32>", "tensor<8x8xf32>"
    lines, last = [], "%h"
    for i in range(count):
        lines += [f'%p{i} = "ipu.matmul"({last}, %w) : ({t}, {m}) -> {t}',
                  f'%a{i} = "ipu.mul"(%p{i}, %x) : ({t}, {t}) -> {t}',
                  f'%b{i} = "ipu.add"(%a{i}, {last}) : ({t}, {t}) -> {t}',
                  f'%c{i} = "ipu.tanh"(%b{i}) : ({t}) -> {t}']
        last = f"%c{i}"
    return (f"func.func @main(%x: {t}, %h: {t}, %w: {m}) -> {t} {{\n" + "\n".join(lines)
            + f"\nreturn {last} : {t}\n}}")


@pytest.mark.parametrize("count", [grouping.FUSE_MIN_REPEATS - 1, grouping.FUSE_MIN_REPEATS])
def test_small_groups_are_compiled_when_their_structure_repeats(count):
    """Groups below FUSE_MIN_ELEMENTS stay NumPy calls unless the block holds at least
    FUSE_MIN_REPEATS of the same structure, which then share one kernel function."""
    program, numpy_only = compile_both(_small_steps(count))
    fused = [line for line in body(program) if "fused" in line]
    if count < grouping.FUSE_MIN_REPEATS:
        assert fused == [] and program.kernels == ""
        return
    assert len(fused) == count and all(line.endswith("# mul add tanh") for line in fused)
    assert program.kernels.count("func.func") == 1
    rng = np.random.default_rng(13)
    x, h = (rng.standard_normal((4, 8), dtype=np.float32) for _ in range(2))
    w = rng.standard_normal((8, 8), dtype=np.float32)
    np.testing.assert_allclose(program.run(x, h, w)[0], numpy_only.run(x, h, w)[0],
                               rtol=1e-6, atol=1e-6)


def test_models_dump_their_kernels(tmp_path):
    """A model with groups big enough dumps `kernels.mlir` beside `program.py`; its
    numbers match PyTorch's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                torch.nn.Linear(128, 128), torch.nn.Tanh())
    x = torch.randn(64, 64)
    ipu = poptorch.inferenceModel(model, poptorch.Options().dumpIR(str(tmp_path)))
    torch.testing.assert_close(ipu(x), model(x), rtol=1e-5, atol=1e-6)
    program = (tmp_path / "program.py").read_text()
    assert "= fused_0(" in program and "# add gelu" in program
    assert (tmp_path / "kernels.mlir").read_text() == ipu._compiled.program.kernels


needs_cc = pytest.mark.skipif(shutil.which("cc") is None,
                              reason="no C compiler driver to link the shared object with")


def forbid_compiling(patch: pytest.MonkeyPatch) -> None:
    """Make compiling a kernel module with MLIR's ExecutionEngine fail the test."""
    class NoEngine:
        def __init__(self, *args, **kwargs):
            raise AssertionError("compiled again")

    patch.setattr(execution_engine, "ExecutionEngine", NoEngine)


@needs_cc
def test_the_executable_cache_keeps_compiled_kernels(tmp_path, monkeypatch):
    """Within `kernel_directory`, a kernel module is linked into a shared object there;
    the next compile of the same kernels loads it without MLIR's ExecutionEngine. A
    damaged file is compiled again and replaced."""
    text = f"""
    func.func @main(%x: {T}) -> {T} {{
      %0 = "ipu.tanh"(%x) : ({T}) -> {T}
      return %0 : {T}
    }}"""
    x = values(15)
    with cache.kernel_directory(str(tmp_path)):
        first, _ = compile_both(text)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert len(kept) == 1 and kept[0].startswith("kernels-") and kept[0].endswith(".so")
    expected, = first.run(x)

    with monkeypatch.context() as patch, cache.kernel_directory(str(tmp_path)):
        forbid_compiling(patch)
        loaded, _ = compile_both(text)
    np.testing.assert_array_equal(loaded.run(x)[0], expected)

    # (in another directory: this process has the first file mapped, as dlopen keeps it)
    damaged = tmp_path / "other"
    damaged.mkdir()
    (damaged / kept[0]).write_bytes(b"not a shared object")
    with cache.kernel_directory(str(damaged)):
        again, _ = compile_both(text)
    np.testing.assert_array_equal(again.run(x)[0], expected)
    assert (damaged / kept[0]).read_bytes()[:4] == b"\x7fELF"


@needs_cc
def test_a_cold_compile_keeps_its_kernels_for_the_next_process(tmp_path, monkeypatch):
    """The first compile into a cache directory that does not exist yet keeps its kernel
    module there (the JIT runs before the cache entry makes the directory), so the next
    compile is a cache hit that loads it instead of compiling it again."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU())
    x = torch.randn(64, 64)
    cache = tmp_path / "not-yet"
    opts = poptorch.Options().enableExecutableCaching(str(cache))
    expected = poptorch.inferenceModel(model, opts)(x)
    assert len(list(cache.glob("kernels-*.so"))) == 1

    forbid_compiling(monkeypatch)
    warm = poptorch.inferenceModel(model, poptorch.Options().enableExecutableCaching(str(cache)))
    torch.testing.assert_close(warm(x), expected, rtol=0, atol=0)


LSTM_STEPS = f"""
    func.func @main(%proj: tensor<2x64x512xf32>, %bias: tensor<512xf32>, %h0: {G},
                    %w: tensor<128x512xf32>, %c: {T}) -> ({T}, tensor<64xf32>) {{
      %p = "ipu.add"(%proj, %bias) : (tensor<2x64x512xf32>, tensor<512xf32>)
           -> tensor<2x64x512xf32>
      {_step(0, "%h0", "%c")}
      %h1 = "ipu.matmul"(%q0, %w) : ({T}, tensor<128x512xf32>) -> {G}
      {_step(1, "%h1", "%q0")}
      %s = "ipu.reduce"(%q1) {{kind = "sum", dims = array<i64: 1>, keepdim = false}}
           : ({T}) -> tensor<64xf32>
      return %q0, %s : {T}, tensor<64xf32>
    }}"""


def test_groups_round_trip_through_their_data():
    """`groups_data` then `groups_from` on the same block gives the same groups: ops,
    inline ops, reads (with offsets and views), inputs, results, reductions, and the
    paths an inline op reads through."""
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(LSTM_STEPS)
        block = module.body.operations[0].regions[0].blocks[0]
        position = {op.operation: i for i, op in enumerate(block.operations)}
        found = grouping.find_groups(block, position)
        assert len(found) == 2 and found[1].reduced == (1,) and found[0].absorbed
        back = cache.groups_from(cache.groups_data(found, block), block)
        for a, b in zip(found, back, strict=True):
            assert (a.shape, a.ops, a.absorbed, a.inputs, a.outputs, a.reduced, a.paths) == \
                (b.shape, b.ops, b.absorbed, b.inputs, b.outputs, b.reduced, b.paths)
            assert [r.key for r in a.reads] == [r.key for r in b.reads]
        with pytest.raises(IndexError):  # groups of another block do not fit this one
            cache.groups_from([{**cache.groups_data(found, block)[0], "ops": [99]}], block)


def _warm(text: str):
    with make_context(), ir.Location.unknown():
        return compile_module(ir.Module.parse(text), key=text)


@needs_cc
def test_a_warm_compile_takes_its_groups_and_kernels_from_the_index(tmp_path, monkeypatch):
    """A compile given the module's text (`key`) writes an index entry beside the shared
    object; the next compile of that text takes its groups from it, and their kernels and
    IR, without finding groups or generating IR. An entry that does not fit (here: a
    group's op out of range) or does not parse is passed over and written anew."""
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(shape, dtype=np.float32) / 4 for shape in
            [(2, 64, 512), (512,), (64, 512), (128, 512), (64, 128)]]
    with cache.kernel_directory(str(tmp_path)):
        cold = _warm(LSTM_STEPS)
    index, = tmp_path.glob("kernels-*.json")
    expected = cold.run(*args)

    def forbidden(*args, **kwargs):
        raise AssertionError("found again")

    with monkeypatch.context() as patch, cache.kernel_directory(str(tmp_path)):
        forbid_compiling(patch)
        patch.setattr(jit, "find_groups", forbidden)
        patch.setattr(compiled, "kernel_module", forbidden)
        warm = _warm(LSTM_STEPS)
    assert warm.source == cold.source and warm.kernels == cold.kernels
    for a, b in zip(warm.run(*args), expected, strict=True):
        np.testing.assert_array_equal(a, b)

    entry = json.loads(index.read_text())
    for damage in ('{"library": "kernels-0.so"', json.dumps(
            {**entry, "functions": [[{**entry["functions"][0][0], "ops": [10**6]}]]})):
        index.write_text(damage)
        with cache.kernel_directory(str(tmp_path)):
            again = _warm(LSTM_STEPS)
        for a, b in zip(again.run(*args), expected, strict=True):
            np.testing.assert_array_equal(a, b)
        assert json.loads(index.read_text()) == entry


def test_a_view_two_kernels_read_is_made_contiguous_once():
    """A permuted view read by two kernel calls is copied once where it is made, not by
    each call; a view one call reads stays a view (the call copies it, as before)."""
    P = "tensor<128x64xf32>"
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {P}, %y: {T}, %z: {P}) -> ({T}, {T}, {T}) {{
      %p = "ipu.permute"(%x) {{dims = array<i64: 1, 0>}} : ({P}) -> {T}
      %0 = "ipu.exp"(%p) : ({T}) -> {T}
      %1 = "ipu.mul"(%0, %y) : ({T}, {T}) -> {T}
      %m = "ipu.matmul"(%1, %x) : ({T}, {P}) -> tensor<64x64xf32>
      %2 = "ipu.tanh"(%p) : ({T}) -> {T}
      %3 = "ipu.add"(%2, %y) : ({T}, {T}) -> {T}
      %q = "ipu.permute"(%z) {{dims = array<i64: 1, 0>}} : ({P}) -> {T}
      %4 = "ipu.sigmoid"(%q) : ({T}) -> {T}
      %5 = "ipu.mul"(%4, %y) : ({T}, {T}) -> {T}
      return %1, %3, %5 : {T}, {T}, {T}
    }}""")
    lines = body(program)
    assert lines[0] == "v3 = np.ascontiguousarray(ipu_permute(v0, dims=(1, 0)))"
    assert "v7 = ipu_permute(v2, dims=(1, 0))" in lines
    rng = np.random.default_rng(1)
    x, y, z = (rng.standard_normal(shape, dtype=np.float32)
               for shape in ((128, 64), (64, 128), (128, 64)))
    for fused, reference in zip(program.run(x, y, z), numpy_only.run(x, y, z), strict=True):
        np.testing.assert_allclose(fused, reference, rtol=2e-6, atol=1e-7)


def test_a_concatenation_of_a_kernels_results_is_stored_by_the_kernel():
    """Results of one group that only a concatenation reads (an LSTM's backward gate
    gradients) are stored straight into it: no concat call, the same numbers. A
    concatenation that also takes a value from outside the group stays a call."""
    R = "tensor<64x384xf32>"
    program, numpy_only = compile_both(f"""
    func.func @main(%x: {T}, %y: {T}, %z: {T}) -> ({R}, {T}, tensor<64x256xf32>) {{
      %0 = "ipu.exp"(%x) : ({T}) -> {T}
      %1 = "ipu.mul"(%0, %y) : ({T}, {T}) -> {T}
      %2 = "ipu.tanh"(%1) : ({T}) -> {T}
      %3 = "ipu.add"(%2, %y) : ({T}, {T}) -> {T}
      %4 = "ipu.sub"(%3, %x) : ({T}, {T}) -> {T}
      %a = "ipu.concat"(%1, %2) {{dim = 1 : i64}} : ({T}, {T}) -> tensor<64x256xf32>
      %c = "ipu.concat"(%a, %0) {{dim = 1 : i64}} : (tensor<64x256xf32>, {T}) -> {R}
      %e = "ipu.exp"(%z) : ({T}) -> {T}
      %f = "ipu.mul"(%e, %z) : ({T}, {T}) -> {T}
      %g = "ipu.concat"(%f, %y) {{dim = 1 : i64}} : ({T}, {T}) -> tensor<64x256xf32>
      return %c, %4, %g : {R}, {T}, tensor<64x256xf32>
    }}""")
    lines = body(program)
    assert lines[0] == "v3, v4 = fused_0(v0, v1)  # exp mul tanh add sub"
    assert lines[2] == "v6 = ipu_concat(v5, v1, axis=-1, rank=2)"
    assert sum("ipu_concat" in line for line in lines) == 1
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((64, 128), dtype=np.float32) for _ in range(3)]
    for fused, reference in zip(program.run(*args), numpy_only.run(*args), strict=True):
        np.testing.assert_allclose(fused, reference, rtol=2e-6, atol=1e-6)
    # offsets 0, 128 and 256 along each row of 384
    assert "%co2 = arith.constant 256 : i64" in program.kernels
