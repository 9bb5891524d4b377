"""The torch.nn layers of spec/supported-ops.md (activations, normalisation, linear,
losses, upsampling) against PyTorch on CPU, several per compiled model."""

import re

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the usual spelling
from numerics import check
from torch import nn

import poptorch


class Layers(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, x):
        return tuple(layer(x) for layer in self.layers)


def test_activations_of_the_spec():
    torch.manual_seed(0)
    layers = [nn.ELU(), nn.CELU(0.5), nn.GELU(), nn.Hardshrink(), nn.LeakyReLU(0.2),
              nn.LogSoftmax(1), nn.Mish(), nn.ReLU(), nn.SELU(), nn.SiLU(), nn.Sigmoid(),
              nn.Softmax(0), nn.Softplus(2.0, 5.0), nn.Softsign(), nn.Softshrink(0.3),
              nn.Tanh(), nn.PReLU(6), nn.RReLU(), nn.Hardtanh(-0.5, 0.5),
              nn.Threshold(0.1, 20.0), nn.GLU(1), nn.Identity()]
    check(Layers(layers), torch.randn(4, 6) * 2)


def test_normalisation_layers_of_the_spec():
    torch.manual_seed(0)
    model = Layers([nn.BatchNorm3d(3), nn.InstanceNorm3d(3, affine=True), nn.GroupNorm(3, 3)])
    for layer in model.layers[:1]:
        layer.running_mean.uniform_(-1, 1)
        layer.running_var.uniform_(0.5, 2)
    check(model, torch.randn(2, 3, 2, 3, 4), rtol=1e-4, atol=1e-5)
    check(Layers([nn.BatchNorm1d(4), nn.InstanceNorm1d(4)]), torch.randn(3, 4, 5),
          rtol=1e-4, atol=1e-5)
    norm = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))
    check(norm, torch.randn(2, 4))


def test_linear_layers_of_the_spec():
    torch.manual_seed(0)
    bilinear = nn.Bilinear(3, 4, 5)
    check(lambda a, b: bilinear(a, b), torch.randn(2, 3), torch.randn(2, 4), rtol=1e-4,
          atol=1e-5)


def test_losses_of_the_spec():
    torch.manual_seed(0)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    p = torch.rand(4, 5) * 0.8 + 0.1
    labels = torch.tensor([1, 0, 4, 2])
    signs = torch.tensor([1.0, -1.0, 1.0, -1.0])

    def losses(x, y, p, labels, signs):
        return (F.l1_loss(x, y), F.mse_loss(x, y, reduction="sum"), F.cross_entropy(x, labels),
                F.nll_loss(F.log_softmax(x, 1), labels, reduction="none"),
                F.binary_cross_entropy(p, (y > 0).float()),
                F.kl_div(F.log_softmax(x, 1), F.softmax(y, 1), reduction="batchmean"),
                F.poisson_nll_loss(x, p), F.hinge_embedding_loss(x, (y > 0).float() * 2 - 1),
                F.binary_cross_entropy_with_logits(x, p), F.smooth_l1_loss(x, y, beta=0.5),
                F.soft_margin_loss(x, (y > 0).float() * 2 - 1),
                F.cosine_embedding_loss(x, y, signs),
                F.margin_ranking_loss(x[:, 0], y[:, 0], signs),
                F.triplet_margin_loss(x, y, p), F.cross_entropy(x, labels, label_smoothing=0.1))

    check(losses, x, y, p, labels, signs, rtol=1e-4, atol=1e-5)


def test_upsample_layers():
    torch.manual_seed(0)
    check(Layers([nn.Upsample(scale_factor=2), nn.Upsample(size=(5, 7)),
                  nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)]),
          torch.randn(1, 2, 3, 4), rtol=1e-4, atol=1e-5)


class Interpolate(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs
        self.scale = torch.nn.Parameter(torch.ones(1))

    def forward(self, x):
        y = F.interpolate(x * self.scale, **self.kwargs)
        return y, poptorch.identity_loss(y.sum(), "none")


@pytest.mark.parametrize("kwargs, rank, message", [
    ({"size": 5, "mode": "linear"}, 3, "unsupported upsample mode 'linear', as in PopTorch: "
     "only 'nearest' (1-d, 2-d and 3-d), 'area', 'bilinear' and 'bicubic' (2-d) upsampling "
     "is supported; for 1-d linear upsampling, add a dimension of size 1 (x.unsqueeze(2)) "
     "and use mode='bilinear'"),
    ({"size": 3, "mode": "trilinear"}, 5, "unsupported upsample mode 'trilinear'"),
    ({"size": 5, "mode": "nearest-exact"}, 3, "unsupported upsample mode 'nearest-exact'"),
    ({"size": 5, "mode": "bicubic", "align_corners": True}, 4,
     "bicubic upsampling with align_corners=True is not supported, as in PopTorch "
     "(\"Only support align_corners=False.\"): use align_corners=False"),
    ({"scale_factor": 1.5, "mode": "bilinear"}, 4, "bilinear upsampling with a non-integer "
     "scale_factor (1.5) is not supported, as in PopTorch: use an integer factor, or pass "
     "size= instead (or recompute_scale_factor=True)"),
    ({"scale_factor": (2, 3), "mode": "bilinear"}, 4, "non-uniform bilinear upsampling "
     "(scale_factor=(2.0, 3.0)) is not supported, as in PopTorch: use one scale factor for "
     "both dims, or pass size= instead"),
])
@pytest.mark.parametrize("training", [False, True])
def test_upsampling_poptorch_refuses(kwargs, rank, message, training):
    """PopTorch's refusals (its ReshapeOps.cpp upsample handlers), at the user's line, in
    inference and training."""
    model = Interpolate(**kwargs)
    optimizer = torch.optim.SGD(model.parameters(), 0.1)
    wrapped = (poptorch.trainingModel(model, optimizer=optimizer)
               if training else poptorch.inferenceModel(model))
    with pytest.raises(poptorch.Error, match=re.escape(message)) as caught:
        wrapped(torch.randn(*[1, 2, 4, 4, 4][:rank]))
    line = Interpolate.forward.__code__.co_firstlineno + 1
    assert caught.value.location.endswith(f"test_layers.py:{line}")


def test_upsampling_poptorch_accepts():
    """Bilinear from a size or an integer factor, bicubic without aligned corners, and a
    factor torch turns into a size (recompute_scale_factor=True)."""
    torch.manual_seed(0)
    check(Layers([nn.Upsample(size=(5, 6), mode="bilinear"),
                  nn.Upsample(scale_factor=3, mode="bilinear", align_corners=True),
                  nn.Upsample(size=(5, 6), mode="bicubic"),
                  nn.Upsample(scale_factor=1.5, mode="bilinear", recompute_scale_factor=True)]),
          torch.randn(1, 2, 3, 4), rtol=1e-4, atol=1e-5)


class WithLoss(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        y = self.inner(x)
        return y, poptorch.identity_loss(y.square().sum(), "none")


@pytest.mark.parametrize("dim", [0, None])
def test_weight_norm_hook(dim):
    """torch.nn.utils.weight_norm's pre-hook recomputes `weight` at each call: it is part
    of the graph, not a buffer the forward reassigns, and both its parameters train."""
    def make():
        torch.manual_seed(0)
        return nn.utils.weight_norm(nn.Conv1d(2, 3, 3), dim=dim)

    x = torch.randn(2, 2, 6)
    model, reference = make(), make()
    torch.testing.assert_close(poptorch.inferenceModel(model)(x), reference(x).detach(),
                               rtol=1e-5, atol=1e-6)
    training = poptorch.trainingModel(WithLoss(model),
                                      optimizer=torch.optim.SGD(model.parameters(), 1.0))
    training(x)
    training.copyWeightsToHost()
    optimizer = torch.optim.SGD(reference.parameters(), 1.0)
    reference(x).square().sum().backward()
    optimizer.step()
    for actual, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(actual.detach(), expected.detach(), rtol=1e-4, atol=1e-4)


def test_batch_norm_cumulative_average_poptorch_refuses():
    """momentum=None reads num_batches_tracked as a Python number while training; in
    inference it is not used, and the layer runs."""
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4, momentum=None))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(poptorch.Error, match=re.escape(
            "BatchNorm1d 'inner.1' has momentum=None (a cumulative moving average of its running "
            "statistics, which reads num_batches_tracked as a Python number): it is not "
            "supported, as in PopTorch; give it a constant momentum (for example "
            "momentum=0.1)")):
        poptorch.trainingModel(WithLoss(model), optimizer=optimizer)(torch.randn(5, 3))
    check(model, torch.randn(5, 3), rtol=1e-4, atol=1e-5)
