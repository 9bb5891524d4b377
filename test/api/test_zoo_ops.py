"""Ops that real models use, found missing by sweeping torchvision, timm and Hugging Face
models on one IPU (issue 20, item 8), and the smallest configurations of the models that
showed them, in inference and training against PyTorch on the CPU.

- `aten.as_strided_scatter`: the backward of the `as_strided` view that
  `adaptive_avg_pool2d` makes of a channels-last input (a permuted NHWC tensor, as in
  ConvNeXt and Swin heads). Lowered to a reshape, a slice_update or an index_put of
  constant positions (passes/conversion/indexing.py).
- the gathers torch-mlir makes of `as_strided` (`aten.index` with constant index
  tensors): a reshape or a slice when the positions are a run in steps.
- `aten._upsample_{bilinear,bicubic}2d_aa` and their backward (timm's position-embedding
  resampling with `dynamic_img_size`, `interpolate(..., antialias=True)`): two matmuls
  with constant matrices of PyTorch's filter weights (passes/conversion/convolution.py).
- `aten._weight_norm_interface_backward` (training convolutions under `weight_norm`,
  as wav2vec2's positional convolution): reductions and elementwise ops
  (passes/conversion/reduction.py).
- `aten.grid_sampler_2d_backward` (training spatial transformers, deformable attention,
  optical flow): a scatter sum and gathers (passes/conversion/indexing.py).
- `aten.replication_pad{1,2,3}d_backward`: constant 0/1 matrix products
  (passes/conversion/convolution_backward.py).
- `aten.rrelu_with_noise_backward` with a fixed slope, which torch-mlir decomposed into
  wrong gradients: lowered before its backend pipeline
  (passes/conversion/elementwise.py).
"""

import copy
import sys
from pathlib import Path

import pytest
import torch
from numerics import check

import poptorch


def _torchvision():
    models = str(Path(__file__).parents[1] / "models")
    if models not in sys.path:
        sys.path.insert(0, models)
    from zoo import import_torchvision

    return import_torchvision()


def _timm():
    _torchvision()  # timm imports torchvision (a CUDA build here)
    return pytest.importorskip("timm")


def train_like_the_cpu(model: torch.nn.Module, *inputs, rtol: float = 1e-4,
                       atol: float = 1e-5) -> None:
    """One SGD step (lr 1: the weights move by their gradients) on the IPU and on the
    CPU: the outputs, the loss and every parameter's gradient match (`atol` relative to
    the largest gradient; a parameter the loss does not use stays)."""
    model.train()
    reference = copy.deepcopy(model)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = poptorch.trainingModel(model, poptorch.Options(),
                                     torch.optim.SGD(model.parameters(), lr=1.0))
    out, loss = trainer(*inputs)
    expected_out, expected_loss = reference(*inputs)
    expected_loss.backward()
    torch.testing.assert_close(out, expected_out.detach(), rtol=rtol, atol=atol)
    torch.testing.assert_close(loss, expected_loss.detach(), rtol=rtol, atol=atol)
    grads = [torch.zeros_like(q) if q.grad is None else q.grad  # an unused parameter
             for q in reference.parameters()]
    scale = max(g.abs().max().item() for g in grads)
    for (name, p), start, grad in zip(model.named_parameters(), before, grads, strict=True):
        torch.testing.assert_close(start - p.detach(), grad, rtol=rtol, atol=atol * scale,
                                   msg=lambda m, name=name: f"{name}: {m}")


class WithLoss(torch.nn.Module):
    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x, labels):
        out = self.model(x)
        return out, torch.nn.functional.cross_entropy(out, labels)


# ---- as_strided / as_strided_scatter ----------------------------------------------------
# input shape, view size, view stride, storage offset
VIEWS = {
    "reshape": ((6,), (2, 3), (3, 1), 0),      # the whole input in order
    "run": ((4, 5), (2, 3), (6, 2), 1),        # a run in steps of the flattened input
    "box": ((4, 5), (3, 2), (5, 2), 1),        # x[0:3, 1::2]
    "transposed": ((2, 3), (3, 2), (1, 3), 0),  # no box: constant positions
}


@pytest.mark.parametrize("view", VIEWS)
def test_as_strided_scatter(view):
    shape, size, stride, offset = VIEWS[view]
    torch.manual_seed(0)
    check(lambda x, src: torch.as_strided_scatter(x * 2, src + 1, size, stride, offset),
          torch.randn(shape), torch.randn(size))


@pytest.mark.parametrize("view", VIEWS)
def test_as_strided(view):
    shape, size, stride, offset = VIEWS[view]
    torch.manual_seed(0)
    check(lambda x: (x * 2).as_strided(size, stride, offset) + 1, torch.randn(shape))


class ChannelsLastPool(torch.nn.Module):
    """A linear layer on NHWC features, permuted to NCHW (channels-last strides) and
    pooled: torch views the pooled mean with `as_strided`, whose backward is
    `as_strided_scatter`."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, labels):
        x = self.fc(x).permute(0, 3, 1, 2)
        out = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return out, torch.nn.functional.cross_entropy(out, labels)


def test_as_strided_scatter_trains():
    torch.manual_seed(0)
    train_like_the_cpu(ChannelsLastPool(), torch.randn(2, 3, 3, 4), torch.tensor([0, 2]))


# ---- antialiased resampling ------------------------------------------------------------
# (input height, width), then size or scale_factor
RESAMPLES = {"up": ((3, 5), {"size": (6, 8)}), "down": ((9, 7), {"size": (4, 3)}),
             "mixed": ((5, 6), {"size": (7, 2)}), "scale": ((6, 4), {"scale_factor": 0.5})}


@pytest.mark.parametrize("align_corners", [False, True], ids=["half_pixel", "corners"])
@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialiased_interpolate(mode, resample, align_corners):
    size, how = RESAMPLES[resample]
    torch.manual_seed(0)
    check(lambda x: torch.nn.functional.interpolate(x, mode=mode, antialias=True,
                                                    align_corners=align_corners, **how),
          torch.randn(2, 3, *size))


class Resampled(torch.nn.Module):
    """A learnt 3x5 grid resampled with antialiasing (as timm resamples position
    embeddings), then a linear head."""

    def __init__(self, mode: str, size: tuple[int, int]):
        super().__init__()
        self.grid = torch.nn.Parameter(torch.randn(1, 4, 3, 5))
        self.mode, self.size = mode, size
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x, labels):
        grid = torch.nn.functional.interpolate(self.grid, size=self.size, mode=self.mode,
                                               antialias=True)
        out = self.head((x * grid).mean((2, 3)))
        return out, torch.nn.functional.cross_entropy(out, labels)


@pytest.mark.parametrize("size", [(6, 4), (2, 7)], ids=["up_down", "down_up"])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialiased_interpolate_trains(mode, size):
    torch.manual_seed(0)
    train_like_the_cpu(Resampled(mode, size), torch.randn(2, 4, *size), torch.tensor([0, 2]))


# ---- weight normalisation --------------------------------------------------------------
class WeightNormConv(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        conv = torch.nn.Conv1d(4, 6, 3, padding=1, groups=2)
        self.conv = torch.nn.utils.parametrizations.weight_norm(conv, dim=dim)
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x, labels):
        out = self.head(torch.nn.functional.gelu(self.conv(x)).mean(2))
        return out, torch.nn.functional.cross_entropy(out, labels)


@pytest.mark.parametrize("dim", [0, 2], ids=["dim0", "dim2"])
def test_weight_norm_trains(dim):
    torch.manual_seed(0)
    model = WeightNormConv(dim)
    x, labels = torch.randn(2, 4, 7), torch.tensor([1, 2])
    check(copy.deepcopy(model), x, labels)
    train_like_the_cpu(model, x, labels)


# ---- grid sampling ----------------------------------------------------------------------
class Sampler(torch.nn.Module):
    """A spatial transformer: a convolution's features sampled at a grid the model
    predicts from them (both gradients flow), then a linear head."""

    def __init__(self, mode: str, padding_mode: str, align_corners: bool):
        super().__init__()
        self.features = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.offsets = torch.nn.Conv2d(4, 2, 3, padding=1, stride=2)
        self.head = torch.nn.Linear(4, 3)
        self.how = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}

    def forward(self, x, labels):
        features = self.features(x)
        grid = 1.3 * torch.tanh(self.offsets(features)).permute(0, 2, 3, 1)  # some outside
        sampled = torch.nn.functional.grid_sample(features, grid, **self.how)
        out = self.head(sampled.mean((2, 3)))
        return out, torch.nn.functional.cross_entropy(out, labels)


@pytest.mark.parametrize("align_corners", [False, True], ids=["half_pixel", "corners"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_trains(mode, padding_mode, align_corners):
    torch.manual_seed(0)
    train_like_the_cpu(Sampler(mode, padding_mode, align_corners), torch.randn(2, 3, 6, 7),
                       torch.tensor([0, 2]))


def test_grid_sample_reflection_is_an_error():
    """The reflection padding's gradient is not lowered: the error names the op."""
    torch.manual_seed(0)
    with pytest.raises(poptorch.Error, match="grid_sampler_2d_backward.*reflection padding"):
        poptorch.trainingModel(Sampler("bilinear", "reflection", False))(
            torch.randn(2, 3, 6, 7), torch.tensor([0, 2]))


# ---- replication padding ---------------------------------------------------------------
class ReplicationPadded(torch.nn.Module):
    def __init__(self, dims: int):
        super().__init__()
        conv = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)[dims - 1]
        self.first, self.second = conv(2, 3, 1), conv(3, 2, 2)
        self.padding = (2, 1, 0, 3, 1, 1)[:2 * dims]
        self.head = torch.nn.Linear(2, 3)

    def forward(self, x, labels):
        padded = torch.nn.functional.pad(self.first(x), self.padding, mode="replicate")
        out = self.head(self.second(padded).flatten(2).mean(2))
        return out, torch.nn.functional.cross_entropy(out, labels)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_replication_pad_trains(dims):
    torch.manual_seed(0)
    x = torch.randn(2, 2, *(4, 5, 3)[:dims])
    model = ReplicationPadded(dims)
    check(copy.deepcopy(model), x, torch.tensor([1, 0]))
    train_like_the_cpu(model, x, torch.tensor([1, 0]))


# ---- RReLU's gradient ---------------------------------------------------------------------
class RReLUHead(torch.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.linear, self.act = torch.nn.Linear(4, 5), act

    def forward(self, x, labels):
        out = self.act(self.linear(x))
        return out, torch.nn.functional.cross_entropy(out, labels)


@pytest.mark.parametrize("act", [
    torch.nn.RReLU(0.1, 0.1),  # training, a fixed slope
    lambda x: torch.nn.functional.rrelu(x, training=False),  # the mean slope
], ids=["fixed_slope", "eval_slope"])
def test_rrelu_trains(act):
    torch.manual_seed(0)
    train_like_the_cpu(RReLUHead(act), torch.randn(6, 4), torch.tensor([0, 1, 2, 3, 4, 0]))


# ---- the models that showed them -------------------------------------------------------
def _convnext():
    _torchvision()
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    return ConvNeXt([CNBlockConfig(8, None, 2)], num_classes=4)


def _swin():
    _torchvision()
    from torchvision.models.swin_transformer import SwinTransformer

    return SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[2], num_heads=[2],
                           window_size=[2, 2], stochastic_depth_prob=0.0, num_classes=4)


def _timm_convnext():
    return _timm().create_model("convnext_atto", pretrained=False, num_classes=4,
                                depths=(1, 0, 0, 0), dims=(8, 8, 8, 8))


def _timm_vit_dynamic():
    """A ViT for 32x32 images run on 40x40 ones: its 4x4 position embeddings are
    resampled to 5x5 (bicubic, antialiased)."""
    return _timm().create_model("vit_tiny_patch16_224", pretrained=False, num_classes=4,
                                img_size=32, patch_size=8, depth=1, embed_dim=16,
                                num_heads=2, dynamic_img_size=True)


# name -> (build, image size)
MODELS = {"torchvision_convnext": (_convnext, 16), "torchvision_swin": (_swin, 16),
          "timm_convnext": (_timm_convnext, 32), "timm_vit_dynamic_size": (_timm_vit_dynamic, 40)}


@pytest.mark.parametrize("name", MODELS)
def test_model_infers_and_trains(name):
    build, size = MODELS[name]
    torch.manual_seed(0)
    model = build()
    images, labels = torch.randn(2, 3, size, size), torch.tensor([1, 3])
    check(copy.deepcopy(model), images, rtol=1e-4, atol=1e-5)
    train_like_the_cpu(WithLoss(model), images, labels)


class Wav2Vec2(torch.nn.Module):
    """Hugging Face's wav2vec2 classifier (a small configuration): its positional
    convolution is under `weight_norm`."""

    def __init__(self):
        super().__init__()
        _torchvision()  # transformers imports torchvision (a CUDA build here)
        transformers = pytest.importorskip("transformers")
        config = transformers.Wav2Vec2Config(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
            conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
            num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, num_labels=3,
            hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
            feat_proj_dropout=0.0, layerdrop=0.0, apply_spec_augment=False)
        self.model = transformers.Wav2Vec2ForSequenceClassification(config)

    def forward(self, audio, labels):
        out = self.model(audio).logits
        return out, torch.nn.functional.cross_entropy(out, labels)


def test_wav2vec2_infers_and_trains():
    torch.manual_seed(0)
    model = Wav2Vec2()
    audio, labels = torch.randn(2, 200), torch.tensor([0, 2])
    check(copy.deepcopy(model), audio, labels, rtol=1e-4, atol=1e-5)
    train_like_the_cpu(model, audio, labels)
