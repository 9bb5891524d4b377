"""Depthwise and narrow grouped convolutions as direct compiled kernels
(runtime/jit/codegen/fusion/depthwise.py): the forward, the input gradient (a transposed
convolution) and the weight gradient against PyTorch on the CPU, over kernel sizes,
strides, padding, dilation, channel multipliers and both scratch layouts (images one
after another, and interleaved for small planes)."""

import pytest
import torch
import torch.nn.functional as F
from numerics import check
from test_convolution_backward import Scale, train_like_cpu
from torch import nn

import poptorch
from poptorch.runtime.jit.codegen.fusion.depthwise import DirectConvolution

# (channels, multiplier, kernel, stride, padding, dilation, images, size): the small
# planes (2 to 8 pixels) with 5 x 5 and 7 x 7 kernels interleave their images
CASES = [
    (8, 1, 3, 1, 1, 1, 32, 10),
    (8, 1, 3, 2, 1, 1, 32, 11),
    (6, 1, 5, 1, 2, 1, 32, 4),
    (6, 1, 5, 2, 2, 1, 16, 8),
    (6, 1, 7, 1, 3, 1, 8, 9),
    (8, 1, 5, 1, 2, 1, 32, 2),
    (4, 1, 3, 1, 2, 2, 32, 9),
    (4, 1, 3, 2, 0, 1, 7, 24),
    (4, 2, 3, 1, 1, 1, 32, 9),
    (3, 1, 3, 1, 1, 1, 1, 40),
]


def direct_kernels(ipu) -> list[DirectConvolution]:
    """The direct convolution kernels of a compiled model's program."""
    return [v for v in ipu._main_program().namespace.values()
            if isinstance(v, DirectConvolution)]


@pytest.mark.parametrize("channels,multiplier,kernel,stride,padding,dilation,images,size",
                         CASES)
def test_depthwise_forward(channels, multiplier, kernel, stride, padding, dilation, images,
                           size):
    torch.manual_seed(0)
    conv = nn.Conv2d(channels, channels * multiplier, kernel, stride, padding, dilation,
                     groups=channels)
    x = torch.randn(images, channels, size, size)
    check(conv, x)
    ipu = poptorch.inferenceModel(conv)
    ipu(x)
    assert len(direct_kernels(ipu)) == 1


def test_grouped_conv1d_with_two_channels_a_group():
    torch.manual_seed(0)
    conv = nn.Conv1d(8, 12, 3, 1, 1, groups=4)
    check(conv, torch.randn(32, 8, 40))


def test_wide_groups_stay_products():
    """A group of more than MAX_CHANNELS input channels is im2col and BLAS products."""
    conv = nn.Conv2d(32, 32, 3, 1, 1, groups=2).eval()
    ipu = poptorch.inferenceModel(conv)
    ipu(torch.randn(4, 32, 8, 8))
    assert direct_kernels(ipu) == []


@pytest.mark.parametrize("stride,padding,output_padding,size", [
    (1, 1, 0, 9), (2, 1, 1, 8), (2, 2, 0, 4), (3, 0, 2, 5)])
def test_depthwise_transposed(stride, padding, output_padding, size):
    torch.manual_seed(0)
    w = torch.randn(6, 1, 5, 5)
    x = torch.randn(32, 6, size, size)

    def transposed(x):
        return F.conv_transpose2d(x, w, stride=stride, padding=padding,
                                  output_padding=output_padding, groups=6)

    check(transposed, x)


@pytest.mark.parametrize("channels,multiplier,kernel,stride,padding,dilation,images,size",
                         CASES[:8])
def test_depthwise_training(channels, multiplier, kernel, stride, padding, dilation, images,
                            size):
    """SGD steps against the CPU's: the convolution's weight and bias (its weight
    gradient) and the scale before it (its input gradient)."""
    body = nn.Sequential(Scale(channels, size, size),
                         nn.Conv2d(channels, channels * multiplier, kernel, stride, padding,
                                   dilation, groups=channels))
    train_like_cpu(body, (images, channels, size, size))


def test_depthwise_training_over_replicas():
    """Replicas' leading axes go through the kernels (each replica its own images)."""
    body = nn.Sequential(Scale(8, 6, 6), nn.Conv2d(8, 16, 5, 1, 2, groups=8))
    train_like_cpu(body, (64, 8, 6, 6), options=poptorch.Options().replicationFactor(2))
