"""The one numerics helper: run a model through poptorch and compare with PyTorch on CPU.

Every op and model test uses `check` (tinygrad's `helper_test_op` habit), so tolerances
and dtype handling live in one place.
"""

from __future__ import annotations

import torch

import poptorch

TOLERANCES = {torch.float32: (1e-5, 1e-6), torch.float16: (1e-2, 1e-2)}


def check(model: torch.nn.Module | callable, *inputs, options: poptorch.Options | None = None,
          rtol: float | None = None, atol: float | None = None, **kwargs):
    """Run `model(*inputs, **kwargs)` with poptorch and on the CPU; assert they match.

    A plain function is wrapped in a module. Returns the poptorch output.
    """
    if not isinstance(model, torch.nn.Module):
        model = _FunctionModule(model)
    model.eval()
    with torch.no_grad():
        expected = model(*inputs, **kwargs)
    actual = poptorch.inferenceModel(model, options)(*inputs, **kwargs)
    assert_close(actual, expected, rtol, atol)
    return actual


class _FunctionModule(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def assert_close(actual, expected, rtol: float | None = None, atol: float | None = None):
    """poptorch's outputs `actual` match PyTorch's `expected`: structures alike, tensors
    within the dtype's tolerances (int64 and float64 as the IPU's int32 and float32),
    other values (None, numbers, strings) equal."""
    if isinstance(expected, tuple | list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, rtol, atol)
        return
    if isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for key in expected:
            assert_close(actual[key], expected[key], rtol, atol)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    narrowed = {torch.int64: torch.int32, torch.float64: torch.float32}
    expected = expected.to(narrowed.get(expected.dtype, expected.dtype))
    default_rtol, default_atol = TOLERANCES.get(expected.dtype, (0, 0))
    torch.testing.assert_close(actual, expected,
                               rtol=default_rtol if rtol is None else rtol,
                               atol=default_atol if atol is None else atol)
