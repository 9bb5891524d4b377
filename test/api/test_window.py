"""Compiled window kernels (`runtime/jit/codegen/fusion/`: `window.py`, `pooling.py`,
`convolution.py`): max pooling, with and without indices, and its gradient, bit for bit
against the NumPy kernels and PyTorch, over the window shapes PyTorch allows (padding,
ceil mode, dilation, 1 to 3 pooled dims), NaN and ties, and replica axes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own spelling
from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime.jit.codegen.fusion import window
from poptorch.runtime.jit.program import compile_module


def _t(shape, element="f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"


def _attrs(kernel, strides, padding, dilations, ceil_mode) -> str:
    def arr(v):
        return f"array<i64: {', '.join(map(str, v))}>"
    return (f"{{ceil_mode = {str(ceil_mode).lower()}, dilations = {arr(dilations)}, "
            f"kernel = {arr(kernel)}, padding = {arr(padding)}, strides = {arr(strides)}}}")


def _programs(source, out, kernel, strides, padding, dilations, ceil_mode):
    """max_pool_with_indices, its gradient and max_pool as one module: compiled kernels
    and NumPy calls only."""
    a = _attrs(kernel, strides, padding, dilations, ceil_mode)
    x, y, i = _t(source), _t(out), _t(out, "i64")
    text = f"""
    func.func @main(%x: {x}, %g: {y}) -> ({y}, {i}, {x}, {y}) {{
      %y:2 = "ipu.max_pool_with_indices"(%x) {a} : ({x}) -> ({y}, {i})
      %d = "ipu.max_pool_grad"(%g, %y#1) {a} : ({y}, {i}) -> {x}
      %m = "ipu.max_pool"(%x) {a} : ({x}) -> {y}
      return %y#0, %y#1, %d, %m : {y}, {i}, {x}, {y}
    }}"""
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        return compile_module(module), compile_module(module, fuse=False)


def _values(shape, seed):
    """Normal values with ReLU's ties at 0, NaN and infinities mixed in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape, dtype=np.float32)
    x[x < -0.5] = 0.0
    flat = x.reshape(-1)
    flat[:12] = [np.nan, np.nan, np.inf, -np.inf, -np.inf, -0.0, 0.0, np.nan, 5.0, 5.0,
                 -np.inf, np.inf]
    rng.shuffle(flat)
    return x


CASES = [  # (input, kernel, strides, padding, dilations, ceil_mode)
    ((4, 16, 32, 32), (2, 2), (2, 2), (0, 0), (1, 1), False),  # a CNN's 2x2 pool
    ((4, 8, 33, 31), (3, 3), (2, 2), (1, 1), (1, 1), False),  # ResNet's stem pool
    ((4, 8, 33, 31), (3, 2), (2, 3), (1, 0), (1, 1), True),  # partial windows at the end
    ((4, 8, 30, 30), (3, 3), (1, 2), (1, 1), (2, 3), False),  # dilated, padded
    ((8, 32, 512), (4,), (3,), (2,), (1,), True),  # 1 pooled dim
    ((2, 4, 12, 12, 12), (2, 3, 2), (2, 2, 2), (1, 1, 0), (1, 1, 1), False),  # 3
]


def _output(source, kernel, strides, padding, dilations, ceil_mode):
    d = len(kernel)
    pool = [F.max_pool1d, F.max_pool2d, F.max_pool3d][d - 1]
    y = pool(torch.zeros(source), kernel, strides, padding, dilations, ceil_mode)
    return tuple(y.shape), pool


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[1])))
def test_pools_and_their_gradient_match_numpy_and_torch_bit_for_bit(case):
    source, kernel, strides, padding, dilations, ceil_mode = case
    out, pool = _output(*case)
    program, numpy_only = _programs(source, out, *case[1:])
    assert "= fused_0(v0)  # max_pool_with_indices" in program.source
    assert "= fused_1(v1, v3)  # max_pool_grad" in program.source
    assert "= fused_2(v0)  # max_pool" in program.source
    x = _values(source, 1)
    g = np.random.default_rng(2).standard_normal(out, dtype=np.float32)
    got = program.run(x, g)
    for fused, reference in zip(got, numpy_only.run(x, g), strict=True):
        assert fused.dtype == reference.dtype
        np.testing.assert_array_equal(fused, reference)
    xt = torch.from_numpy(x).requires_grad_()
    y, index = pool(xt, kernel, strides, padding, dilations, ceil_mode, return_indices=True)
    y.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(got[0], y.detach().numpy())
    np.testing.assert_array_equal(got[1], index.numpy())
    np.testing.assert_array_equal(got[2], xt.grad.numpy())
    np.testing.assert_array_equal(got[3], y.detach().numpy())


def test_replica_axes_go_through_the_pool_kernels():
    """Replicas are leading axes of every operand; each replica pools its own input."""
    case = CASES[1]
    out, _ = _output(*case)
    program, numpy_only = _programs(case[0], out, *case[1:])
    x = np.stack([_values(case[0], seed) for seed in (3, 4, 5)])
    g = np.random.default_rng(6).standard_normal((3,) + out, dtype=np.float32)
    for fused, reference in zip(program.run(x, g), numpy_only.run(x, g), strict=True):
        np.testing.assert_array_equal(fused, reference)


def test_small_and_non_f32_pools_stay_numpy_kernels():
    """Below FUSE_MIN_ELEMENTS, or on float16, a pool is a NumPy call."""
    small = _t((1, 2, 8, 8))
    a = _attrs((2, 2), (2, 2), (0, 0), (1, 1), False)
    half, half_out = _t((4, 16, 32, 32), "f16"), _t((4, 16, 16, 16), "f16")
    text = f"""
    func.func @main(%x: {small}, %h: {half}) -> ({_t((1, 2, 4, 4))}, {half_out}) {{
      %y = "ipu.max_pool"(%x) {a} : ({small}) -> {_t((1, 2, 4, 4))}
      %z = "ipu.max_pool"(%h) {a} : ({half}) -> {half_out}
      return %y, %z : {_t((1, 2, 4, 4))}, {half_out}
    }}"""
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(text))
    assert "fused" not in program.source.split("def main", 1)[1]


def test_a_gradient_index_outside_the_plane_is_skipped():
    """The kernel never writes outside its result: an index past the pooled plane (not
    one its forward made) adds nothing."""
    x, y, i = _t((4, 16, 32, 32)), _t((4, 16, 16, 16)), _t((4, 16, 16, 16), "i64")
    a = _attrs((2, 2), (2, 2), (0, 0), (1, 1), False)
    text = f"""
    func.func @main(%g: {y}, %i: {i}) -> {x} {{
      %d = "ipu.max_pool_grad"(%g, %i) {a} : ({y}, {i}) -> {x}
      return %d : {x}
    }}"""
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(text))
    g = np.ones((4, 16, 16, 16), np.float32)
    index = np.zeros((4, 16, 16, 16), np.int64)
    index[0, 0, 0, :3] = [-1, 1024, 5]
    dx, = program.run(g, index)
    assert dx[0, 0].reshape(-1)[5] == 1 and dx[0, 0].reshape(-1)[0] == 16 * 16 - 3
    assert dx.sum() == g.size - 2


def test_pool_kernel_ir():
    """A 2x2 pool without padding: four taps, no bounds checks, the first tap taken as
    it is, the others when greater or NaN; value and index stored once."""
    group = None
    a = _attrs((2, 2), (2, 2), (0, 0), (1, 1), False)
    x, y, i = _t((4, 16, 32, 32)), _t((4, 16, 16, 16)), _t((4, 16, 16, 16), "i64")
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(f"""
        func.func @main(%x: {x}) -> ({y}, {i}) {{
          %y:2 = "ipu.max_pool_with_indices"(%x) {a} : ({x}) -> ({y}, {i})
          return %y#0, %y#1 : {y}, {i}
        }}""")
        op = module.body.operations[0].regions[0].blocks[0].operations[0]
        group = window.window_group(op.operation)
        text = window.function("pool", group)
    assert text.count("llvm.load") == 4 and text.count("llvm.store") == 2
    assert "arith.cmpi" not in text  # every window lies inside
    assert text.count("arith.cmpf ogt") == 3 and text.count("arith.cmpf uno") == 3
    assert text.count("scf.for") == 4  # replicas, planes, rows, columns


CONVOLUTIONS = [  # (input, weight, strides, padding low, padding high, dilations, groups)
    ((8, 3, 32, 32), (16, 3, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),  # a CNN's first
    ((8, 8, 15, 17), (12, 4, 3, 5), (2, 3), (1, 2), (2, 0), (2, 1), 2),  # grouped, strided
    ((4, 6, 40), (6, 1, 7), (3,), (3,), (1,), (2,), 6),  # depthwise, 1 spatial dim
    ((2, 4, 6, 7, 8), (8, 4, 2, 3, 2), (1, 2, 1), (1, 0, 1), (0, 1, 1), (1, 1, 2), 1),  # 3
]


def _conv_programs(x, w, strides, low, high, dilations, groups):
    """A convolution and its weight gradient: compiled windows and NumPy calls only."""
    out = tuple((n + a + b - di * (k - 1) - 1) // s + 1 for n, a, b, di, k, s in zip(
        x[2:], low, high, dilations, w[2:], strides, strict=True))
    y = (x[0], w[0]) + out

    def arr(v):
        return f"array<i64: {', '.join(map(str, v))}>"
    a = (f"{{dilations = {arr(dilations)}, groups = {groups} : i64, padding_high = "
         f"{arr(high)}, padding_low = {arr(low)}, strides = {arr(strides)}}}")
    text = f"""
    func.func @main(%x: {_t(x)}, %w: {_t(w)}, %g: {_t(y)}) -> ({_t(y)}, {_t(w)}) {{
      %y = "ipu.conv"(%x, %w) {a} : ({_t(x)}, {_t(w)}) -> {_t(y)}
      %d = "ipu.conv_weight_grad"(%x, %g) {a} : ({_t(x)}, {_t(y)}) -> {_t(w)}
      return %y, %d : {_t(y)}, {_t(w)}
    }}"""
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        return compile_module(module), compile_module(module, fuse=False), y


@pytest.mark.parametrize("case", CONVOLUTIONS, ids=lambda c: "x".join(map(str, c[1])))
def test_convolutions_gather_their_windows_in_a_kernel(case):
    """A convolution and its weight gradient read the windows a compiled kernel gathers
    (zeros in the padding): the numbers of the NumPy kernels and of torch, with and
    without replica axes."""
    x_shape, w_shape, strides, low, high, dilations, groups = case
    program, numpy_only, y_shape = _conv_programs(*case)
    assert program.source.split("def main", 1)[1].count("= fused_") == 2
    rng = np.random.default_rng(4)
    x, w, g = (rng.standard_normal(s, dtype=np.float32) for s in (x_shape, w_shape, y_shape))
    got = program.run(x, w, g)
    for fused, reference in zip(got, numpy_only.run(x, w, g), strict=True):
        np.testing.assert_allclose(fused, reference, rtol=1e-5, atol=1e-4)
    d = len(x_shape) - 2
    conv = [F.conv1d, F.conv2d, F.conv3d][d - 1]
    pad = [torch.nn.functional.pad(torch.from_numpy(x), [p for lo, hi in zip(
        low[::-1], high[::-1], strict=True) for p in (lo, hi)])][0].requires_grad_()
    wt = torch.from_numpy(w).requires_grad_()
    y = conv(pad, wt, None, strides, 0, dilations, groups)
    y.backward(torch.from_numpy(g))
    np.testing.assert_allclose(got[0], y.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], wt.grad.numpy(), rtol=1e-4, atol=1e-3)
    xs, gs = np.stack([x, -x, 2 * x]), np.stack([g, g, -g])  # replicas
    for fused, reference in zip(program.run(xs, w, gs), numpy_only.run(xs, w, gs),
                                strict=True):
        np.testing.assert_allclose(fused, reference, rtol=1e-5, atol=1e-4)


def test_a_convolution_given_other_operands_calls_the_numpy_kernel():
    """Operands the windows were not compiled for (float64 here) go to the NumPy kernel."""
    program, numpy_only, y_shape = _conv_programs(*CONVOLUTIONS[0])
    rng = np.random.default_rng(5)
    x, w, g = (rng.standard_normal(s) for s in (CONVOLUTIONS[0][0], CONVOLUTIONS[0][1],
                                                y_shape))
    for fused, reference in zip(program.run(x, w, g), numpy_only.run(x, w, g), strict=True):
        assert fused.dtype == reference.dtype == np.float64
        np.testing.assert_array_equal(fused, reference)


TRANSPOSED = [  # (input, weight, strides, padding, output padding, dilations, groups)
    ((8, 32, 16, 16), (32, 16, 3, 3), (1, 1), (1, 1), (0, 0), (1, 1), 1),  # a CNN's
    ((8, 8, 7, 9), (8, 3, 3, 4), (2, 3), (1, 2), (1, 0), (2, 1), 2),
    ((4, 6, 20), (6, 1, 5), (3,), (2,), (2,), (2,), 6),
    ((2, 4, 3, 4, 5), (4, 2, 2, 3, 2), (1, 2, 2), (0, 1, 1), (0, 1, 0), (1, 1, 2), 2),
]


@pytest.mark.parametrize("case", TRANSPOSED, ids=lambda c: "x".join(map(str, c[1])))
def test_transposed_convolutions_add_their_taps_in_a_kernel(case):
    """A transposed convolution (a convolution's input gradient) adds every tap's
    products into its output in a compiled kernel: the numbers of the NumPy kernel and
    of torch, with and without replica axes."""
    x_shape, w_shape, strides, padding, extra, dilations, groups = case
    out = tuple((n - 1) * s - 2 * p + di * (k - 1) + e + 1 for n, s, p, di, k, e in zip(
        x_shape[2:], strides, padding, dilations, w_shape[2:], extra, strict=True))
    y_shape = (x_shape[0], w_shape[1] * groups) + out

    def arr(v):
        return f"array<i64: {', '.join(map(str, v))}>"
    a = (f"{{dilations = {arr(dilations)}, groups = {groups} : i64, output_padding = "
         f"{arr(extra)}, padding = {arr(padding)}, strides = {arr(strides)}}}")
    x, w, y = _t(x_shape), _t(w_shape), _t(y_shape)
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(f"""
        func.func @main(%x: {x}, %w: {w}) -> {y} {{
          %y = "ipu.conv_transpose"(%x, %w) {a} : ({x}, {w}) -> {y}
          return %y : {y}
        }}""")
        program, numpy_only = compile_module(module), compile_module(module, fuse=False)
    assert "v2, = fused_0(v0, v1)  # conv_transpose" in program.source
    rng = np.random.default_rng(6)
    xv, wv = rng.standard_normal(x_shape, dtype=np.float32), \
        rng.standard_normal(w_shape, dtype=np.float32)
    got, = program.run(xv, wv)
    np.testing.assert_allclose(got, numpy_only.run(xv, wv)[0], rtol=1e-5, atol=1e-5)
    transpose = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][len(out) - 1]
    expected = transpose(torch.from_numpy(xv), torch.from_numpy(wv), None, strides, padding,
                         extra, groups, dilations)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-4, atol=1e-4)
    xs = np.stack([xv, -xv])
    np.testing.assert_allclose(program.run(xs, wv)[0], numpy_only.run(xs, wv)[0],
                               rtol=1e-5, atol=1e-5)
