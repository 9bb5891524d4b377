"""Elementwise ops against PyTorch on CPU."""

import numpy as np
import pytest
import torch
from numerics import check

UNARY = ["neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
         "rsqrt", "reciprocal", "square", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
         "cosh", "tanh", "asinh", "atanh", "erf", "erfc", "sigmoid", "relu", "floor", "ceil",
         "round", "trunc", "sign"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    torch.manual_seed(0)
    x = torch.rand(3, 5) * 0.9 + 0.05  # inside every domain (asin, atanh, log, ...)
    check(lambda t: getattr(torch, name)(t), x)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum",
                                  "remainder", "fmod", "atan2", "pow"])
def test_binary_broadcast(name):
    torch.manual_seed(0)
    a, b = torch.rand(4, 3) + 0.5, torch.rand(3) + 0.5
    check(lambda x, y: getattr(torch, name)(x, y), a, b)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare(op):
    a = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    check(lambda x: getattr(torch, op)(x, 2.0), a)
    check(lambda x, y: getattr(torch, op)(x, y), a, a.flip(1))


def test_scalar_forms_and_alpha():
    x = torch.randn(2, 3)
    check(lambda t: (t + 2) * 3 - 1.5, x)
    check(lambda t: torch.add(t, t, alpha=2.5), x)
    check(lambda t: torch.sub(t, t * t, alpha=-1), x)
    check(lambda t: 1 - t, x)
    check(lambda t: 2 / (t.abs() + 1), x)


def test_integer_division_modes():
    a = torch.tensor([7, -7, 9], dtype=torch.int32)
    b = torch.tensor([2, 2, -4], dtype=torch.int32)
    check(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b)
    check(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b)
    check(lambda x, y: x / y, a, b)


def test_where_masked_fill_clamp():
    x = torch.randn(4, 5)
    check(lambda t: torch.where(t > 0, t, torch.zeros_like(t)), x)
    check(lambda t: t.masked_fill(t < 0, -1.0), x)
    check(lambda t: t.clamp(-0.5, 0.5), x)
    check(lambda t: t.clamp(min=0.1), x)
    check(lambda t: torch.nn.functional.hardtanh(t), x)


@pytest.mark.parametrize("fn", [
    torch.nn.functional.gelu,
    lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    torch.nn.functional.silu, torch.nn.functional.elu, torch.nn.functional.selu,
    torch.nn.functional.celu, torch.nn.functional.leaky_relu, torch.nn.functional.relu6,
    torch.nn.functional.hardsigmoid, torch.nn.functional.hardswish,
    torch.nn.functional.softplus, torch.nn.functional.mish, torch.nn.functional.logsigmoid,
    torch.nn.functional.softsign, torch.nn.functional.tanhshrink,
    torch.nn.functional.hardshrink, torch.nn.functional.softshrink,
])
def test_activations(fn):
    torch.manual_seed(0)
    check(fn, torch.randn(3, 7) * 3)


def test_logical_and_bitwise():
    a = torch.tensor([True, False, True, False])
    b = torch.tensor([True, True, False, False])
    check(lambda x, y: (x & y, x | y, x ^ y, ~x, torch.logical_not(x)), a, b)
    i = torch.tensor([5, 3, 12], dtype=torch.int32)
    check(lambda x: (x & 6, x | 1, x ^ 7, ~x), i)


def test_casts():
    x = torch.tensor([1.7, -2.2, 0.0])
    check(lambda t: (t.int(), t.to(torch.int32).float(), t.bool(), t.half()), x)


@pytest.mark.parametrize("name", ["_gelu", "_gelu_tanh", "erf"])
def test_composite_kernels_in_blocks_are_the_same_numbers(name, monkeypatch):
    """GELU and erf run block by block on large operands (to keep their temporaries in
    cache): the same bits as one pass over the whole operand, for any layout."""
    from poptorch.runtime.jit.kernels import elementwise

    fn = getattr(elementwise, name)
    x = np.random.default_rng(0).standard_normal((3, 700, 130), dtype=np.float32) * 3
    x = x.transpose(2, 0, 1)  # not contiguous
    monkeypatch.setattr(elementwise, "_BLOCK", 1 << 12)  # 67 blocks, the last partial
    blocked = fn(x)
    monkeypatch.setattr(elementwise, "_BLOCK", x.size)
    whole = fn(x)
    assert blocked.shape == x.shape and blocked.dtype == np.float32
    np.testing.assert_array_equal(blocked, whole)
