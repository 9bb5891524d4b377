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


def _model(name: str, train: bool) -> torch.nn.Module:
    """Model `name` (seed 0 weights), with its loss for training."""
    return WithLoss(make(name)).train() if train else make(name).eval()


def _inputs(name: str, size: int, train: bool) -> tuple[torch.Tensor, ...]:
    x, labels = batch(name, size)
    return (x, labels) if train else (x,)


def _poptorch_call(model: torch.nn.Module, args: tuple, replicas: int, train: bool):
    """`model` compiled by poptorch for `args` over `replicas` replicas: an inference, or
    a training step with SGD and momentum. Returns (call, compiled model)."""
    if train:
        ipu = poptorch.trainingModel(
            model, _options(replicas),
            poptorch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    else:
        ipu = poptorch.inferenceModel(model, _options(replicas))
    ipu(*args)
    return lambda: ipu(*args), ipu


def _against_torch(torch_call, ipu_call, ipu) -> dict[str, float]:
    torch_s, ipu_s, repeats = pair(torch_call, ipu_call)
    ipu.destroy()
    return {"torch_s": torch_s, "poptorch_s": ipu_s, "ratio": ipu_s / torch_s,
            "repeats": repeats}


def inference(name: str, size: int) -> dict[str, float]:
    """One micro-batch of `size` through model `name`: torch under no_grad, poptorch's
    inferenceModel."""
    model = _model(name, train=False)
    args = _inputs(name, size, train=False)
    call, ipu = _poptorch_call(copy.deepcopy(model), args, 1, train=False)
    if not torch.allclose(call(), model(*args), rtol=1e-3, atol=1e-4):
        raise AssertionError(f"{name} at batch {size}: poptorch and torch disagree")

    def eager():
        with torch.no_grad():
            model(*args)

    return _against_torch(eager, call, ipu)


def training(name: str, size: int) -> dict[str, float]:
    """One training step on a micro-batch of `size`: forward, cross-entropy, backward and
    SGD with momentum on both sides."""
    model = _model(name, train=True)
    args = _inputs(name, size, train=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    call, ipu = _poptorch_call(copy.deepcopy(model), args, 1, train=True)

    def eager():
        optimizer.zero_grad()
        _, loss = model(*args)
        loss.backward()
        optimizer.step()

    return _against_torch(eager, call, ipu)


def replication(name: str, size: int, replicas: int, train: bool) -> dict[str, float]:
    """`replicas` replicas of micro-batch `size` against one replica of `replicas * size`
    (both poptorch, same weights and inputs): the overhead of running replicas as a
    leading axis."""
    args = _inputs(name, size * replicas, train)
    replicated, first = _poptorch_call(_model(name, train), args, replicas, train)
    whole, second = _poptorch_call(_model(name, train), args, 1, train)
    replicated_s, whole_s, repeats = pair(replicated, whole, settle=False)
    first.destroy()
    second.destroy()
    return {"replicated_s": replicated_s, "one_replica_s": whole_s,
            "overhead": replicated_s / whole_s - 1, "repeats": repeats}
