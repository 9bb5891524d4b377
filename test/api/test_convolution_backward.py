"""Training through convolutions, pooling and upsampling: the gradients of
dialects/convolution_backward.py, checked by SGD steps against the same steps on the CPU.

Each model groups several layers (a compile takes seconds); every parameter is compared
after a few steps with different batches.
"""

import copy

import pytest
import torch
from torch import nn

import poptorch
from poptorch._frontend import decompose


class Regression(nn.Module):
    """Runs `body` on the inputs; the loss is the squared error against a target."""

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, target, *inputs):
        out = self.body(*inputs)
        return out, ((out - target) ** 2).mean()


def train_like_cpu(body: nn.Module, *shapes, steps: int = 3, integers: bool = False,
                   options: poptorch.Options | None = None):
    """Train `body` for `steps` SGD steps with poptorch and on the CPU, from the same
    weights on the same batches (random inputs of `shapes`, small integers with
    `integers`, so that max pooling sees ties); assert every parameter matches."""
    torch.manual_seed(0)
    model = Regression(body)
    reference = copy.deepcopy(model)
    ipu = poptorch.trainingModel(model, options,
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(steps):
        inputs = [torch.randint(-2, 3, shape).float() if integers else torch.randn(shape)
                  for shape in shapes]
        with torch.no_grad():
            target = torch.randn_like(reference.body(*inputs))
        ipu(target, *inputs)
        cpu.zero_grad()
        reference(target, *inputs)[1].backward()
        cpu.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)


class Scale(nn.Module):
    """Multiplies by a per-element weight starting at 1: ties in the input stay ties, and
    the weight's gradient shows which of them pooling routed the gradient to."""

    def __init__(self, *shape):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(shape))

    def forward(self, x):
        return x * self.weight


class Branches(nn.Module):
    """One `nn.Sequential` per input; the outputs flattened and concatenated."""

    def __init__(self, *branches):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, *inputs):
        return torch.cat([b(x).flatten(1) for b, x in zip(self.branches, inputs,
                                                          strict=True)], dim=1)


def test_conv1d_and_conv3d_with_pooling():
    """Strided, padded, dilated and grouped convolutions with and without bias; max and
    average pooling (ceil mode, divisor_override) and adaptive average pooling."""
    train_like_cpu(Branches(
        nn.Sequential(nn.Conv1d(2, 4, 3, stride=2, padding=2, dilation=2), nn.Tanh(),
                      nn.Conv1d(4, 6, 3, groups=2, bias=False), nn.MaxPool1d(2),
                      nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False)),
        nn.Sequential(nn.Conv3d(2, 4, (2, 3, 3), stride=(1, 2, 2), padding=1), nn.Tanh(),
                      nn.Conv3d(4, 4, 3, padding=(1, 2, 2), dilation=(1, 2, 2), groups=4),
                      nn.MaxPool3d(2, ceil_mode=True), nn.Conv3d(4, 4, 1, bias=False),
                      nn.AvgPool3d(2, 1, 1, divisor_override=3),
                      nn.AdaptiveAvgPool3d((2, 3, 2)))),
        (2, 2, 13), (2, 2, 4, 7, 6))


def test_conv2d_groups_and_frozen_weight():
    """The first convolution's input needs no gradient and the third's weight is frozen
    (output_mask); depthwise with a channel multiplier, dilated, grouped, asymmetric."""
    body = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.Tanh(),
        nn.Conv2d(8, 16, 3, padding=2, dilation=2, groups=8, bias=False), nn.Tanh(),
        nn.Conv2d(16, 6, (3, 2), stride=(1, 2), padding=(1, 0), groups=2), nn.Tanh(),
        nn.Conv2d(6, 4, 1, bias=False))
    body[4].weight.requires_grad_(False)
    train_like_cpu(body, (3, 3, 9, 10))


def test_pointwise_convolutions():
    """1 x 1 convolutions as a product per image: the input gradient too (the scale)."""
    body = nn.Sequential(Scale(16, 12, 12), nn.Conv2d(16, 24, 1), nn.Conv2d(24, 8, 1))
    train_like_cpu(body, (8, 16, 12, 12))


def test_conv_transpose():
    """Transposed convolutions: grouped with output_padding, dilated without bias, and 1-d
    with an output_padding larger than the padding (the gradient's convolution crops it)."""
    train_like_cpu(Branches(
        nn.Sequential(nn.Conv2d(3, 4, 1),
                      nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                         groups=2), nn.Tanh(),
                      nn.ConvTranspose2d(6, 2, 3, padding=2, dilation=2, bias=False)),
        nn.Sequential(nn.ConvTranspose1d(2, 3, 4, stride=3, padding=1, output_padding=2),
                      nn.Tanh(), nn.ConvTranspose1d(3, 2, 3, dilation=3, output_padding=2))),
        (2, 3, 5, 4), (2, 2, 6))


def test_pooling_2d_with_ties():
    """Max pooling with overlapping windows over tied values (the gradient goes to the
    first maximum of each window), average pooling in ceil mode without padding counted,
    adaptive average and nearest upsampling by a scale and to a size."""
    train_like_cpu(nn.Sequential(
        Scale(1, 3, 9, 8), nn.MaxPool2d(3, stride=1, padding=1),
        nn.MaxPool2d(2, stride=2, dilation=(1, 2), ceil_mode=True),
        nn.Conv2d(3, 4, 3, padding=1),
        nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        nn.Upsample(scale_factor=2), nn.Conv2d(4, 4, 3), nn.AdaptiveAvgPool2d((3, 2)),
        nn.Upsample(size=(5, 7)), nn.AvgPool2d(2, divisor_override=3)),
        (2, 3, 9, 8), integers=True)


@pytest.mark.skipif(torch.ops.aten.adaptive_max_pool2d_backward.default
                    not in decompose.decompositions(),
                    reason="needs the frontend's decomposition of adaptive_max_pool2d_backward "
                           "(torch-mlir has no op for it)")
def test_adaptive_max_pool():
    """Uneven bins over tied values in 2-d and 3-d (1-d is 2-d with one row)."""
    train_like_cpu(Branches(
        nn.Sequential(Scale(1, 2, 7, 8), nn.AdaptiveMaxPool2d((3, 5)), nn.Conv2d(2, 2, 1)),
        nn.Sequential(Scale(1, 2, 5, 6, 5), nn.AdaptiveMaxPool3d((2, 4, 3))),
        nn.Sequential(Scale(1, 2, 9), nn.AdaptiveMaxPool1d(4))),
        (2, 2, 7, 8), (2, 2, 5, 6, 5), (2, 2, 9), integers=True)


def test_replicas_and_accumulation():
    """Per-replica weight gradients: the kernels keep the replica axis."""
    options = poptorch.Options().replicationFactor(2)
    options.Training.gradientAccumulation(2)
    body = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, groups=2), nn.MaxPool2d(2),
                         nn.Conv2d(4, 4, 3), nn.AvgPool2d(2, ceil_mode=True))
    torch.manual_seed(0)
    model = Regression(body)
    reference = copy.deepcopy(model)
    ipu = poptorch.trainingModel(model, options, torch.optim.SGD(model.parameters(), lr=0.1))
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        x, target = torch.randn(8, 2, 7, 7), torch.randn(8, 4, 1, 1)
        ipu(target, x)
        cpu.zero_grad()
        for xs, ts in zip(x.split(2), target.split(2), strict=True):
            (reference(ts, xs)[1] / 4).backward()
        cpu.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)
