"""Half batch norm computed as popnn does (f32 statistics, f16 activations:
poptorch/_frontend/norm_decompositions.py) and GELU's one-op backward (ipu.gelu_grad)
against PyTorch on the CPU: forward, running statistics and one SGD step."""

import copy

import numerics
import pytest
import torch

import poptorch


class NormNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x, y):
        out = torch.relu(self.bn(self.conv(x)))
        return out, (out.float() - y.float()).square().mean()


def step(model, *inputs):
    """One SGD step (lr 0.1) on the IPU, the weights copied back to `model`; its outputs."""
    ipu = poptorch.trainingModel(model, poptorch.Options(),
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    outputs = ipu(*inputs)
    ipu.copyWeightsToHost()
    ipu.detachFromDevice()
    return outputs


@pytest.mark.parametrize("stable", [False, True])
def test_half_batch_norm_trains_like_the_cpu(stable):
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 8, 8).half() * 4 + 2, torch.randn(4, 8, 8, 8).half()
    model = NormNet().half()
    reference = copy.deepcopy(model).float()
    ipu = poptorch.trainingModel(model, poptorch.Options().enableStableNorm(stable),
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    out, loss = ipu(x, y)
    ipu.copyWeightsToHost()
    expected, expected_loss = reference(x.float(), y.float())
    expected_loss.backward()
    torch.optim.SGD(reference.parameters(), lr=0.1).step()
    assert out.dtype == torch.float16
    numerics.assert_close(out, expected.half())
    torch.testing.assert_close(loss.float(), expected_loss, rtol=1e-3, atol=1e-3)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.float(), q, rtol=1e-2, atol=2e-3, msg=name)
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(model.bn, name).float(),
                                   getattr(reference.bn, name), rtol=1e-2, atol=1e-3)


def test_half_batch_norm_inference_uses_the_running_statistics():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(8)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    x = torch.randn(2, 8, 5, 5)
    out = poptorch.inferenceModel(copy.deepcopy(bn).half().eval())(x.half())
    numerics.assert_close(out, bn.eval()(x).half())


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_gelu_backward_is_torchs(approximate, dtype):
    torch.manual_seed(0)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x, y):
            out = torch.nn.functional.gelu(self.fc(x), approximate=approximate)
            return out, (out.float() * y.float()).sum()

    model = Layer().to(dtype)
    reference = copy.deepcopy(model).float()
    x, y = (torch.randn(16, 8) * 3).to(dtype), torch.randn(16, 8).to(dtype)
    step(model, x, y)
    _, loss = reference(x.float(), y.float())
    loss.backward()
    torch.optim.SGD(reference.parameters(), lr=0.1).step()
    tolerance = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-2, 4e-3)}[dtype]
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.float(), q, rtol=tolerance[0], atol=tolerance[1])
