"""Half softmax and attention computed as popnn does (f16 scores, exponentials and
products, the softmax's sum into f32: poptorch/_frontend/attention_decompositions.py)
against PyTorch on the CPU: outputs, and one SGD step of a model around them."""

import copy

import numerics
import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own alias

import poptorch

MASKS = ["none", "bool", "additive", "causal"]


def attention_args(mask: str, dtype: torch.dtype):
    """(query, key, value) of 2 x 4 heads x 16 positions x 8, and the mask's kwargs."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8).to(dtype) * 2 for _ in range(3))
    kwargs = {"none": {}, "causal": {"is_causal": True},
              "bool": {"attn_mask": torch.rand(2, 1, 16, 16) > 0.3},
              "additive": {"attn_mask": (torch.randn(2, 1, 16, 16) * 3).to(dtype)}}[mask]
    return (q, k, v), kwargs


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_attention_matches_the_cpu(mask, dtype):
    (q, k, v), kwargs = attention_args(mask, dtype)
    out = numerics.check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs),
                         q, k, v)
    assert out.dtype == dtype


def test_fully_masked_rows_give_zeros():
    # torch's math kernel: a row with every position masked (_safe_softmax) is 0, not NaN
    (q, k, v), _ = attention_args("none", torch.float16)
    mask = torch.ones(16, 16, dtype=torch.bool)
    mask[3] = False
    out = numerics.check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask),
                         q, k, v)
    assert not out[:, :, 3].any()


@pytest.mark.parametrize("dim", [0, -1])
def test_half_softmax_matches_the_cpu(dim):
    torch.manual_seed(0)
    x = (torch.randn(6, 300) * 4).half()
    out = numerics.check(lambda x: torch.softmax(x, dim), x)
    assert out.dtype == torch.float16


class Attention(torch.nn.Module):
    """Q, K and V projections, masked attention over 4 heads, a loss in f32."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x, mask, y):
        q, k, v = (t.unflatten(-1, (4, 8)).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, -1))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out, (out.float() * y.float()).sum()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_attention_trains_like_the_cpu(dtype):
    torch.manual_seed(0)
    model = Attention().to(dtype)
    reference = copy.deepcopy(model).float()
    x, y = torch.randn(2, 16, 32).to(dtype), torch.randn(2, 4, 16, 8).to(dtype)
    mask = torch.rand(2, 1, 16, 16) > 0.2
    ipu = poptorch.trainingModel(model, poptorch.Options(),
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    out, loss = ipu(x, mask, y)
    ipu.copyWeightsToHost()
    expected, expected_loss = reference(x.float(), mask, y.float())
    expected_loss.backward()
    torch.optim.SGD(reference.parameters(), lr=0.1).step()
    assert out.dtype == dtype
    numerics.assert_close(out, expected.to(dtype))
    torch.testing.assert_close(loss.float(), expected_loss, rtol=1e-2, atol=1e-2)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.float(), q, rtol=1e-2, atol=5e-3, msg=name)
