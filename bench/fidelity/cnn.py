"""ResNet-50 v1.5 as Graphcore's CNN examples run it, for the fidelity configurations:
torchvision's resnet50 (v1.5: stride 2 in the 3x3 convolution of each downsampling
bottleneck) with random weights, in half precision, with a classification loss for
training (the shape PopTorch's trainingModel wants: forward(images, labels) returns
(logits, loss)).

torchvision comes through test/models/zoo.py's `import_torchvision`, which works around
the registry serving only a CUDA build (README, "The model zoo").
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "models"))
from zoo import WithLoss, import_torchvision  # noqa: E402

__all__ = ["WithLoss", "images", "import_torchvision", "labels", "resnet50"]

IMAGE = (3, 224, 224)
CLASSES = 1000


def resnet50(training: bool) -> torch.nn.Module:
    """fp16 ResNet-50 (with its loss when `training`), random weights, seed 0."""
    torch.manual_seed(0)
    model = import_torchvision().models.resnet50(num_classes=CLASSES)
    model = WithLoss(model) if training else model
    return model.half().train(training)


def images(count: int) -> torch.Tensor:
    """`count` random fp16 images (the examples' --data generated / synthetic)."""
    return torch.randn(count, *IMAGE, generator=torch.Generator().manual_seed(1)).half()


def labels(count: int) -> torch.Tensor:
    return torch.randint(0, CLASSES, (count,), generator=torch.Generator().manual_seed(2))
