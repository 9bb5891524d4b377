"""The model, data and options shared by test_distributed.py and its worker processes
(distributed_worker.py)."""

from __future__ import annotations

import torch

import poptorch

PROCESSES, REPLICAS, ACCUMULATION, MICRO_BATCH = 2, 2, 2, 2
STEPS = 3  # calls (optimizer steps) a run
SAMPLES = PROCESSES * REPLICAS * ACCUMULATION * MICRO_BATCH * STEPS


class Classifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                       torch.nn.Linear(16, 4))
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.net(x)
        return out, self.loss(out, y)


def make_model() -> Classifier:
    return Classifier()


def make_optimizer(kind: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if kind == "sgd":
        return poptorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return poptorch.optim.Adam(model.parameters(), lr=0.01)


def dataset() -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 8, generator=generator)
    y = torch.randint(0, 4, (SAMPLES,), generator=generator)
    return torch.utils.data.TensorDataset(x, y)


def options(replicas: int = REPLICAS) -> poptorch.Options:
    opts = poptorch.Options()
    opts.replicationFactor(replicas)
    opts.Training.gradientAccumulation(ACCUMULATION)
    opts.randomSeed(0)
    return opts
