"""Run time against torch eager: inference, training steps and replication scaling.

Each poptorch model wraps a deep copy of the torch model, so both start from the same
weights, and both sides get the same input tensors. One poptorch call is one micro-batch
(device iterations, replication and accumulation 1) unless replicated; the time is the
whole call as a user sees it (input checks, the program, the machine model's bookkeeping
and the outputs back as torch tensors).
"""

from __future__ import annotations

import copy

import torch
from harness import pair
from models import WithLoss, batch, make

import poptorch


def _options(replicas: int = 1) -> poptorch.Options:
    return poptorch.Options().showCompilationProgressBar(False).replicationFactor(replicas)


def inference(name: str, size: int) -> dict[str, float]:
    """One micro-batch of `size` through model `name`: torch under no_grad, poptorch's
    inferenceModel."""
    model = make(name).eval()
    x, _ = batch(name, size)
    ipu = poptorch.inferenceModel(copy.deepcopy(model), _options())
    ipu(x)
    expected = model(x)
    if not torch.allclose(ipu(x), expected, rtol=1e-3, atol=1e-4):
        raise AssertionError(f"{name} at batch {size}: poptorch and torch disagree")

    def eager():
        with torch.no_grad():
            model(x)

    torch_s, ipu_s, repeats = pair(eager, lambda: ipu(x))
    ipu.destroy()
    return {"torch_s": torch_s, "poptorch_s": ipu_s, "ratio": ipu_s / torch_s,
            "repeats": repeats}


def _trainers(name: str, size: int, replicas: int = 1):
    """A torch training step and the same step through poptorch: forward, cross-entropy,
    backward and SGD with momentum."""
    model = WithLoss(make(name)).train()
    twin = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ipu = poptorch.trainingModel(twin, _options(replicas),
                                 poptorch.optim.SGD(twin.parameters(), lr=0.01, momentum=0.9))
    x, labels = batch(name, size)

    def eager():
        optimizer.zero_grad()
        _, loss = model(x, labels)
        loss.backward()
        optimizer.step()

    ipu(x, labels)
    return eager, lambda: ipu(x, labels), ipu


def training(name: str, size: int) -> dict[str, float]:
    """One training step on a micro-batch of `size`."""
    eager, step, ipu = _trainers(name, size)
    torch_s, ipu_s, repeats = pair(eager, step)
    ipu.destroy()
    return {"torch_s": torch_s, "poptorch_s": ipu_s, "ratio": ipu_s / torch_s,
            "repeats": repeats}


def replication(name: str, size: int, replicas: int, train: bool) -> dict[str, float]:
    """`replicas` replicas of micro-batch `size` against one replica of `replicas * size`
    (both poptorch, same inputs): the overhead of running replicas as a leading axis."""
    replicated, first = _poptorch_call(name, size, replicas, train)
    whole, second = _poptorch_call(name, size * replicas, 1, train)
    replicated_s, whole_s, repeats = pair(replicated, whole)
    first.destroy()
    second.destroy()
    return {"replicated_s": replicated_s, "one_replica_s": whole_s,
            "overhead": replicated_s / whole_s - 1, "repeats": repeats}


def _poptorch_call(name: str, size: int, replicas: int, train: bool):
    """A compiled poptorch call of `replicas` replicas, each on micro-batch `size`: an
    inference, or a training step with SGD and momentum. Returns (call, model)."""
    x, labels = batch(name, size * replicas)
    if train:
        model = WithLoss(make(name)).train()
        ipu = poptorch.trainingModel(
            model, _options(replicas),
            poptorch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
        args = (x, labels)
    else:
        ipu = poptorch.inferenceModel(make(name).eval(), _options(replicas))
        args = (x,)
    ipu(*args)
    return lambda: ipu(*args), ipu
