"""`decompose` (poptorch/_frontend/decompose.py) gives the graph that torch's own
`run_decompositions(decompositions())` gives, on models that exercise the CIA ops torch's
export keeps (linear, layer_norm, gelu, dropout, batch norm, attention, einsum, ops
torch-mlir keeps whole), in nested control-flow graphs too."""

from __future__ import annotations

import collections

import pytest
import torch

from poptorch._frontend import decompose


class Mixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)
        self.linear = torch.nn.Linear(16, 16)
        self.layer_norm = torch.nn.LayerNorm(16)
        self.attention = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, image, tokens):
        x = torch.nn.functional.gelu(self.norm(self.conv(image))).flatten(2)  # 1,4,16
        y = self.layer_norm(self.linear(tokens)) + x
        y, _ = self.attention(y, y, y)
        y = torch.nn.functional.dropout(y, 0.1, training=False)
        z = torch.einsum("bij,bkj->bik", y, y).softmax(-1)
        return z, torch.isfinite(z).all(), torch.nn.functional.one_hot(
            z.argmax(-1), 4), torch.rms_norm(y, [16])


class Looped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda v: torch.nn.functional.silu(self.linear(v)),
                          lambda v: torch.nn.functional.hardswish(v), (x,))


def _ops(program) -> collections.Counter:
    return collections.Counter(
        str(node.target) for module in program.graph_module.modules()
        if isinstance(module, torch.fx.GraphModule)
        for node in module.graph.nodes if node.op == "call_function")


@pytest.mark.parametrize("model, args", [
    (Mixed(), (torch.randn(1, 3, 4, 4), torch.randn(1, 4, 16))),
    (Looped(), (torch.randn(2, 8),)),
], ids=["mixed", "control-flow"])
def test_decompose_equals_run_decompositions(model, args):
    model.eval()
    exported = torch.export.export(model, args, strict=False)
    ours = decompose.decompose(exported)
    torchs = exported.run_decompositions(decompose.decompositions())
    assert _ops(ours) == _ops(torchs)
    assert sum(_ops(ours).values()) > 10
    expected = torchs.module()(*args)
    for got, want in zip(ours.module()(*args), expected, strict=True):
        torch.testing.assert_close(got, want)


def test_kept_whole_ops_stay_whole():
    """The ops torch-mlir keeps whole (no decomposition in its table) are kept whole
    when the graph calls them."""
    exported = torch.export.export(Mixed().eval(), (torch.randn(1, 3, 4, 4),
                                                    torch.randn(1, 4, 16)), strict=False)
    ops = _ops(decompose.decompose(exported))
    assert {"aten.isfinite.default", "aten.one_hot.default",
            "aten.rms_norm.default"} <= set(ops)
