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


class GroupedClassifier(Classifier):
    """The classifier with a per-group scale of its hidden features: replica-grouped
    Orthogonal in 2 groups of the run's 4 replicas ({0, 2}, {1, 3}: each group spans
    both processes)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(2, 16))  # one slice per group

    def forward(self, x, y):
        hidden = torch.relu(self.net[0](x)) * self.scale  # the slice of the replica's group
        out = self.net[2](hidden)
        return out, self.loss(out, y)


KINDS = ("sgd", "adam", "grouped")


def make_model(kind: str = "sgd") -> Classifier:
    return GroupedClassifier() if kind == "grouped" else Classifier()


def group(trainer: poptorch.PoplarExecutor, kind: str) -> None:
    if kind == "grouped":
        trainer.scale.replicaGrouping(poptorch.CommGroupType.Orthogonal, 2,
                                      poptorch.VariableRetrievalMode.OnePerGroup)


def make_optimizer(kind: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if kind in ("sgd", "grouped"):
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


def all_reduce_cycles(trainer: poptorch.PoplarExecutor) -> list[int]:
    """The simulated gradient all-reduces of the last call (cycles each)."""
    timeline = trainer.getTimeline()
    return [e.end - e.start for events in timeline.events.values() for e in events
            if e.kind == "all_reduce"]
