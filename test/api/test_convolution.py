"""Convolutions, pooling, padding and upsampling against PyTorch on CPU.

Each model computes several configurations from one input, so that one compilation
covers them all.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from numerics import check
from torch import nn

import poptorch
from poptorch.runtime.jit.kernels.convolution import conv, conv_transpose


class Branches(nn.Module):
    """Applies each of `layers` to the input and returns all the results."""

    def __init__(self, *layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        return tuple(layer(x) for layer in self.layers)


class Fn(nn.Module):
    """A function as a layer (for pooling and padding branches)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
def test_conv2d():
    torch.manual_seed(0)
    model = Branches(
        nn.Conv2d(4, 6, 3, stride=2, padding=1),
        nn.Conv2d(4, 6, 3, dilation=2, bias=False),
        nn.Conv2d(4, 6, (3, 1), stride=(2, 1), padding=(2, 0), groups=2),
        nn.Conv2d(4, 8, 3, padding=1, groups=4),  # depthwise, channel multiplier 2
        nn.Conv2d(4, 5, (4, 2), padding="same"),  # asymmetric: pad folded into the conv
        nn.Conv2d(4, 3, 1),
    )
    check(model, torch.randn(2, 4, 9, 8))


def test_pointwise_convolutions_are_a_product_per_image():
    """1 x 1 convolutions over planes of at least POINTWISE_PIXELS pixels, and their
    transposed form, are one product per image in place; over replicas too."""
    torch.manual_seed(0)
    w = torch.randn(16, 8, 1, 1)
    model = Branches(nn.Conv2d(16, 24, 1), nn.Conv2d(16, 4, 1, bias=False),
                     Fn(lambda x: F.conv_transpose2d(x, w)))
    check(model, torch.randn(4, 16, 12, 12))
    check(model, torch.randn(8, 16, 12, 12), options=poptorch.Options().replicationFactor(2))


def test_conv1d_and_conv3d():
    torch.manual_seed(0)
    check(Branches(
        nn.Conv1d(3, 4, 3, stride=2, padding=2),
        nn.Conv1d(3, 6, 4, padding="same", dilation=2, groups=3, bias=False),
        nn.Conv1d(3, 3, 5, groups=3),
    ), torch.randn(2, 3, 17))
    check(Branches(
        nn.Conv3d(2, 4, 3, stride=(1, 2, 2), padding=1),
        nn.Conv3d(2, 4, (2, 3, 1), dilation=(2, 1, 1), groups=2, bias=False),
    ), torch.randn(1, 2, 5, 6, 7))


def test_conv_transpose():
    torch.manual_seed(0)
    check(Branches(
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1),
        nn.ConvTranspose2d(4, 6, (3, 2), stride=(1, 2), groups=2, bias=False),
        nn.ConvTranspose2d(4, 3, 3, stride=2, padding=2, dilation=2, output_padding=1),
        nn.ConvTranspose2d(4, 4, 2, stride=3, padding=0, groups=4),
    ), torch.randn(2, 4, 5, 6))
    check(Branches(
        nn.ConvTranspose1d(3, 4, 4, stride=2, padding=1),
        nn.ConvTranspose1d(3, 6, 3, stride=3, padding=1, output_padding=2, groups=3),
        nn.Sequential(nn.Unflatten(2, (2, 1, 2)), nn.ConvTranspose3d(3, 2, 2, stride=(2, 1, 1))),
    ), torch.randn(2, 3, 4))


def int_indices(pair):
    """(values, indices) with the indices as int32: poptorch returns the IR's int64
    indices as int64, while `numerics.check` narrows PyTorch's to int32."""
    return pair[0], pair[1].int()


def test_max_pool():
    torch.manual_seed(0)
    check(Branches(
        Fn(lambda x: F.max_pool2d(x, 2)),
        Fn(lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)),
        Fn(lambda x: F.max_pool2d(x, (3, 2), stride=(1, 2), dilation=(2, 1))),
        Fn(lambda x: F.max_pool1d(x.flatten(2), 4, stride=3, padding=2, ceil_mode=True)),
        Fn(lambda x: F.max_pool3d(x.unsqueeze(1), 2, stride=(1, 2, 2), padding=1)),
        Fn(lambda x: int_indices(F.max_pool2d(x.round(), 3, stride=2, padding=1, dilation=(1, 2),
                                              ceil_mode=True, return_indices=True))),
        Fn(lambda x: int_indices(F.max_pool3d(x.unsqueeze(1), (1, 3, 2), padding=(0, 1, 1),
                                              return_indices=True))),
        # windows inside the input take the argmax path: ties keep the first in tap order
        Fn(lambda x: int_indices(F.max_pool2d(x.round(), 2, return_indices=True))),
        Fn(lambda x: int_indices(F.max_pool2d(x.round(), (3, 2), stride=(1, 2),
                                              dilation=(2, 1), return_indices=True))),
    ), torch.randn(2, 3, 7, 8))


def test_avg_pool():
    torch.manual_seed(0)
    check(Branches(
        Fn(lambda x: F.avg_pool2d(x, 2)),
        Fn(lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)),
        Fn(lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
                                  count_include_pad=False)),
        Fn(lambda x: F.avg_pool2d(x, (3, 2), padding=(1, 1), divisor_override=4)),
        Fn(lambda x: F.avg_pool1d(x.flatten(2), 4, stride=3, padding=2, ceil_mode=True,
                                  count_include_pad=False)),
        Fn(lambda x: F.avg_pool3d(x.unsqueeze(1), 3, stride=2, padding=1, ceil_mode=True)),
    ), torch.randn(2, 3, 7, 8))


def test_adaptive_pool():
    torch.manual_seed(0)
    check(Branches(
        Fn(lambda x: F.adaptive_avg_pool2d(x, (4, 2))),  # divisible: avg_pool2d
        Fn(lambda x: F.adaptive_avg_pool2d(x, (3, 5))),
        Fn(lambda x: F.adaptive_avg_pool1d(x.flatten(2), 7)),
        Fn(lambda x: F.adaptive_max_pool2d(x, (4, 2))),  # divisible: max_pool2d
        Fn(lambda x: F.adaptive_avg_pool3d(x.unsqueeze(1), (2, 3, 2))),
        Fn(lambda x: F.adaptive_max_pool3d(x.unsqueeze(1), (2, 3, 5))),
    ), torch.randn(2, 3, 8, 8))


def test_adaptive_max_pool2d_uneven_bins():
    check(lambda x: F.adaptive_max_pool2d(x, (3, 5)), torch.randn(1, 2, 8, 8))


def test_padding():
    torch.manual_seed(0)
    check(Branches(
        Fn(lambda x: F.pad(x, (1, 2))),
        Fn(lambda x: F.pad(x, (1, 2, 0, 3, 1, 0), value=-1.5)),
        Fn(lambda x: F.pad(x, (-1, 2, 1, -2))),
        Fn(lambda x: F.pad(x, (2, 1, 1, 3), mode="reflect")),
        Fn(lambda x: F.pad(x, (2, 1, 1, 3), mode="replicate")),
        Fn(lambda x: F.pad(x.flatten(2), (3, 1), mode="reflect")),
        Fn(lambda x: F.pad(x.unsqueeze(1), (1, 1, 2, 0, 1, 2), mode="replicate")),
    ), torch.randn(2, 3, 5, 6))
    check(lambda x: F.pad(x, (1, 1), value=7), torch.arange(6, dtype=torch.int32).reshape(2, 3))


def test_upsample_nearest():
    torch.manual_seed(0)
    check(Branches(
        Fn(lambda x: F.interpolate(x, scale_factor=2)),
        Fn(lambda x: F.interpolate(x, scale_factor=(1.5, 1.7))),
        Fn(lambda x: F.interpolate(x, scale_factor=1.2)),  # 1.2 * 4 < 5: same size
        Fn(lambda x: F.interpolate(x, size=(7, 3))),
        Fn(nn.Upsample(scale_factor=3)),
        Fn(lambda x: F.interpolate(x.flatten(2), scale_factor=2.5)),
        Fn(lambda x: F.interpolate(x.unsqueeze(1), size=(3, 5, 9))),
    ), torch.randn(2, 3, 4, 5))


def test_float16():
    torch.manual_seed(0)
    model = Branches(
        nn.Conv2d(4, 6, 3, stride=2, padding=1),
        nn.Conv2d(4, 8, 3, padding=1, groups=4),
        nn.ConvTranspose2d(4, 3, 3, stride=2),
        Fn(lambda x: F.max_pool2d(x, 3, stride=2, padding=1)),
        Fn(lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)),
        Fn(lambda x: F.adaptive_avg_pool3d(x.unsqueeze(1), (2, 3, 5))),
    ).half()
    check(model, torch.randn(2, 4, 8, 10).half())


def test_replicas_fold_into_the_batch():
    torch.manual_seed(0)
    opts = poptorch.Options().deviceIterations(2).replicationFactor(2)
    check(Branches(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ConvTranspose2d(3, 2, 2, stride=2),
        Fn(lambda x: F.max_pool2d(x, 2)),
        Fn(lambda x: F.interpolate(x, scale_factor=2)),
    ), torch.randn(8, 3, 6, 6), options=opts)


def test_kernels_take_per_replica_weights():
    """A weight with a leading replica axis convolves each replica with its own weight."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5, 5), dtype=np.float32)
    w = rng.standard_normal((2, 6, 2, 3, 3), dtype=np.float32)
    attrs = {"strides": (2, 1), "dilations": (1, 2), "groups": 2}
    y = conv(x, w, padding_low=(1, 2), padding_high=(0, 2), **attrs)
    expected = [F.conv2d(F.pad(torch.from_numpy(x[r]), (2, 2, 1, 0)), torch.from_numpy(w[r]),
                         stride=(2, 1), dilation=(1, 2), groups=2) for r in range(2)]
    np.testing.assert_allclose(y, torch.stack(expected).numpy(), rtol=1e-5, atol=1e-5)
    wt = rng.standard_normal((2, 4, 3, 2, 3), dtype=np.float32)
    y = conv_transpose(x, wt, padding=(1, 0), output_padding=(1, 0), **attrs)
    expected = [F.conv_transpose2d(torch.from_numpy(x[r]), torch.from_numpy(wt[r]),
                                   stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
                                   dilation=(1, 2), groups=2) for r in range(2)]
    np.testing.assert_allclose(y, torch.stack(expected).numpy(), rtol=1e-5, atol=1e-5)
