"""Compiled kernels on several threads (`runtime/jit/codegen/fusion/threads.py`): a call
big enough is cut into ranges of its kernel's outer parallel loop, one per thread
(torch's count), and its results are the one-thread results bit for bit, for every
emitter that splits (elementwise with a trailing reduction, im2col and col2im windows,
direct depthwise kernels, max pooling and its gradient), with replica axes and outer
loops of odd sizes."""

import contextlib

import numpy as np
import pytest
import torch
from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime.jit.codegen.fusion import threads
from poptorch.runtime.jit.codegen.fusion.compiled import FusedKernel
from poptorch.runtime.jit.program import compile_module


def _t(shape, element="f32") -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{element}>"


def _arr(v) -> str:
    return f"array<i64: {', '.join(map(str, v))}>"


def _compile(text: str):
    with make_context(), ir.Location.unknown():
        return compile_module(ir.Module.parse(text))


@contextlib.contextmanager
def _threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _kernels(program) -> list[FusedKernel]:
    return [getattr(k, "kernel", k) for k in program.namespace["F"]]


def _same_on_one_and_two_threads(program, *args) -> None:
    """The program's results on one thread and on two are the same bits, with and
    without three replicas (leading axes), and the two-thread calls were split."""
    replicated = tuple(np.stack([a, -a, 2 * a]) for a in args)
    for inputs in (args, replicated):
        with _threads(1):
            one = program.run(*inputs)
        with _threads(2):
            two = program.run(*inputs)
            again = program.run(*inputs)  # (the fast path, its plan learnt)
        for a, b, c in zip(one, two, again, strict=True):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, c)
    assert all(any(plan[2] for plan in k.plans.values()) for k in _kernels(program))
    assert threads.POOL.queues, "no worker thread ran a chunk"


def _normal(seed: int, *shapes) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s, dtype=np.float32) for s in shapes]


def test_an_elementwise_chain_and_its_trailing_reductions_split_their_kept_rows():
    """tanh of 33 rows, their sums (the fold of each row is never split) and the sum of
    everything (nothing kept: only replicas split)."""
    x, y, s = _t((33, 8192)), _t((33,)), _t(())
    program = _compile(f"""
    func.func @main(%x: {x}, %b: {x}) -> ({x}, {y}, {s}) {{
      %0 = "ipu.add"(%x, %b) : ({x}, {x}) -> {x}
      %1 = "ipu.tanh"(%0) : ({x}) -> {x}
      %2 = "ipu.reduce"(%1) {{kind = "sum", dims = array<i64: 1>, keepdim = false}}
           : ({x}) -> {y}
      %3 = "ipu.exp"(%x) : ({x}) -> {x}
      %4 = "ipu.reduce"(%3) {{kind = "sum", dims = array<i64: 0, 1>, keepdim = false}}
           : ({x}) -> {s}
      return %1, %2, %4 : {x}, {y}, {s}
    }}""")
    assert program.source.count("= fused_") == 2
    _same_on_one_and_two_threads(program, *_normal(1, (33, 8192), (33, 8192)))


def test_a_flat_elementwise_kernel_splits_at_whole_vectors():
    """One flat loop of an odd length: chunk bounds are multiples of threads.ALIGN."""
    x = _t((3, 5, 7, 1031))
    program = _compile(f"""
    func.func @main(%x: {x}, %y: {x}) -> {x} {{
      %0 = "ipu.mul"(%x, %y) : ({x}, {x}) -> {x}
      %1 = "ipu.sigmoid"(%0) : ({x}) -> {x}
      return %1 : {x}
    }}""")
    _same_on_one_and_two_threads(program, *_normal(2, (3, 5, 7, 1031), (3, 5, 7, 1031)))
    assert threads.bounds(108255, 2, threads.ALIGN) == [0, 54144, 108255]


def _pool_attrs() -> str:
    return (f"{{ceil_mode = false, dilations = {_arr((1, 1))}, kernel = {_arr((3, 3))}, "
            f"padding = {_arr((1, 1))}, strides = {_arr((2, 2))}}}")


def test_max_pooling_and_its_gradient_split_their_planes():
    """33 planes (3 images x 11 channels)."""
    a = _pool_attrs()
    x, y, i = _t((3, 11, 96, 96)), _t((3, 11, 48, 48)), _t((3, 11, 48, 48), "i64")
    program = _compile(f"""
    func.func @main(%x: {x}, %g: {y}) -> ({y}, {i}, {x}, {y}) {{
      %y:2 = "ipu.max_pool_with_indices"(%x) {a} : ({x}) -> ({y}, {i})
      %d = "ipu.max_pool_grad"(%g, %y#1) {a} : ({y}, {i}) -> {x}
      %m = "ipu.max_pool"(%x) {a} : ({x}) -> {y}
      return %y#0, %y#1, %d, %m : {y}, {i}, {x}, {y}
    }}""")
    assert program.source.count("= fused_") == 3
    _same_on_one_and_two_threads(program, *_normal(3, (3, 11, 96, 96), (3, 11, 48, 48)))


def _conv_attrs(strides, low, high, groups) -> str:
    return (f"{{dilations = {_arr((1, 1))}, groups = {groups} : i64, padding_high = "
            f"{_arr(high)}, padding_low = {_arr(low)}, strides = {_arr(strides)}}}")


@pytest.mark.parametrize("case", [
    ((8, 5, 48, 48), (16, 5, 3, 3), (16, 5, 48, 48), 1),  # im2col: 5 channels
    ((8, 33, 32, 32), (33, 1, 3, 3), (8, 33, 32, 32), 33),  # direct: 33 groups
], ids=["im2col", "depthwise"])
def test_convolutions_and_weight_gradients_split_their_channels(case):
    x_shape, w_shape, y_shape, groups = case
    y_shape = (x_shape[0], w_shape[0]) + x_shape[2:]
    a = _conv_attrs((1, 1), (1, 1), (1, 1), groups)
    x, w, y = _t(x_shape), _t(w_shape), _t(y_shape)
    program = _compile(f"""
    func.func @main(%x: {x}, %w: {w}, %g: {y}) -> ({y}, {w}) {{
      %y = "ipu.conv"(%x, %w) {a} : ({x}, {w}) -> {y}
      %d = "ipu.conv_weight_grad"(%x, %g) {a} : ({x}, {y}) -> {w}
      return %y, %d : {y}, {w}
    }}""")
    assert program.source.count("= fused_") == 2
    _same_on_one_and_two_threads(program, *_normal(4, x_shape, w_shape, y_shape))


@pytest.mark.parametrize("case", [
    ((7, 16, 32, 32), (16, 8, 3, 3), (7, 8, 64, 64), 1),  # col2im: 7 images
    ((8, 33, 32, 32), (33, 1, 3, 3), (8, 33, 64, 64), 33),  # direct: 33 groups
], ids=["col2im", "depthwise"])
def test_transposed_convolutions_split(case):
    x_shape, w_shape, y_shape, groups = case
    a = (f"{{dilations = {_arr((1, 1))}, groups = {groups} : i64, output_padding = "
         f"{_arr((1, 1))}, padding = {_arr((1, 1))}, strides = {_arr((2, 2))}}}")
    x, w, y = _t(x_shape), _t(w_shape), _t(y_shape)
    program = _compile(f"""
    func.func @main(%x: {x}, %w: {w}) -> {y} {{
      %y = "ipu.conv_transpose"(%x, %w) {a} : ({x}, {w}) -> {y}
      return %y : {y}
    }}""")
    assert "fused_0(v0, v1)  # conv_transpose" in program.source
    _same_on_one_and_two_threads(program, *_normal(5, x_shape, w_shape))


def test_small_calls_stay_on_the_calling_thread():
    """Below threads.SPLIT_MIN_ELEMENTS elements read and written: one call, no split."""
    x = _t((64, 128))
    program = _compile(f"""
    func.func @main(%x: {x}) -> {x} {{
      %0 = "ipu.tanh"(%x) : ({x}) -> {x}
      return %0 : {x}
    }}""")
    with _threads(2):
        program.run(*_normal(6, (64, 128)))
    kernel, = _kernels(program)
    assert [plan[2] for plan in kernel.plans.values()] == [0]
