"""The benchmark model zoo: four classifiers at sizes a user would port, with their
inputs and labels made from fixed seeds (no downloaded data).

Each model maps a micro-batch to 10 class scores; `WithLoss` adds the cross-entropy
loss a `poptorch.trainingModel` needs. Sizes are small enough that batch 256 of every
model runs a training step in tens of milliseconds on a 2-core CPU.

`Spec` is what every section reads of a model, here and in the real-model zoo
(`zoo.py`): how to build it, its inputs and labels at a batch size, its loss, the modules
a multi-IPU run begins its blocks at, and the batch sizes each mode is measured at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

CLASSES = 10


class MLP(torch.nn.Module):
    """Three linear layers, 256 -> 512 -> 512 -> 10, with ReLU and GELU."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
            torch.nn.GELU(), torch.nn.Linear(512, CLASSES))

    def forward(self, x):
        return self.layers(x)


class CNN(torch.nn.Module):
    """Two conv + batch-norm + ReLU + max-pool blocks on 3x32x32 images, then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class Transformer(torch.nn.Module):
    """One transformer encoder layer (d_model 128, 4 heads, feed-forward 512) over 32
    tokens, mean-pooled into a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1,
                                                      batch_first=True)
        self.head = torch.nn.Linear(128, CLASSES)

    def forward(self, x):
        return self.head(self.layer(x).mean(1))


class LSTM(torch.nn.Module):
    """A one-layer LSTM (32 inputs, 128 hidden) over 16 steps; the last step's output
    goes to a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(32, 128, batch_first=True)
        self.head = torch.nn.Linear(128, CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class WithLoss(torch.nn.Module):
    """`model`'s scores and their cross-entropy loss against `labels`."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x, labels):
        scores = self.model(x)
        return scores, torch.nn.functional.cross_entropy(scores, labels)


MODELS = {"mlp": MLP, "cnn": CNN, "transformer": Transformer, "lstm": LSTM}
_SHAPES = {"mlp": (256,), "cnn": (3, 32, 32), "transformer": (32, 128), "lstm": (16, 32)}


def make(name: str) -> torch.nn.Module:
    """Model `name` with the weights of seed 0."""
    torch.manual_seed(0)
    return MODELS[name]()


def batch(name: str, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs of `size` samples for model `name`, and their labels (seed 1)."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn((size,) + _SHAPES[name], generator=generator)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    return x, labels


@dataclass(frozen=True)
class Spec:
    """One benchmark model as the sections use it."""

    name: str
    build: Callable[[], torch.nn.Module]  # the model (weights from the seed set before)
    inputs: Callable[[int], tuple[torch.Tensor, torch.Tensor]]  # batch -> (x, labels)
    # the model's modules in execution order; blocks of a multi-IPU run begin at them
    stages: Callable[[torch.nn.Module], list[torch.nn.Module]]
    loss: Callable[[torch.nn.Module], torch.nn.Module] = WithLoss
    inference_batches: tuple[int, ...] = (1, 32, 256)
    training_batches: tuple[int, ...] = (1, 32, 256)
    # batches torch.compile (inductor) runs at beside eager (its compile takes 10-135 s
    # a model and batch on 2 cores, measured)
    inductor_inference: tuple[int, ...] = (32,)
    inductor_training: tuple[int, ...] = (32,)

    def make(self) -> torch.nn.Module:
        """The model with the weights of seed 0."""
        torch.manual_seed(0)
        return self.build()


SPECS = {
    "mlp": Spec("mlp", MLP, lambda size: batch("mlp", size), lambda m: list(m.layers)),
    "cnn": Spec("cnn", CNN, lambda size: batch("cnn", size),
                lambda m: [*m.features, m.head]),
    "transformer": Spec("transformer", Transformer, lambda size: batch("transformer", size),
                        lambda m: [m.layer.self_attn, m.layer.linear1, m.layer.linear2,
                                   m.head]),
    "lstm": Spec("lstm", LSTM, lambda size: batch("lstm", size), lambda m: [m.lstm, m.head]),
}
