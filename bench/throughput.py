"""Run time against torch eager (and torch.compile's inductor): inference and training
steps of one model at one batch size.

Each side gets its own deep copy of the same torch model, so all start from the same
weights, and all get the same input tensors. One poptorch call is one micro-batch
(device iterations, replication and accumulation 1); the time is the whole call as a
user sees it (input checks, the program, the machine model's bookkeeping and the outputs
back as torch tensors). Where inductor runs (its batches in the model's `Spec`), the
three sides are timed in one `harness.interleave`; a side that fails to compile is
reported with its error, not timed.
"""

from __future__ import annotations

import copy
import time

import harness
import torch
from models import Spec

import poptorch

# the sanity check of an inference's result against torch's (not a parity test)
RTOL, ATOL = 1e-3, 1e-4


def options(replicas: int = 1) -> poptorch.Options:
    return poptorch.Options().showCompilationProgressBar(False).replicationFactor(replicas)


def sgd(model: torch.nn.Module, ipu: bool):
    """SGD with momentum, poptorch's or torch's."""
    optim = poptorch.optim.SGD if ipu else torch.optim.SGD
    return optim(model.parameters(), lr=0.01, momentum=0.9)


def wrap(model: torch.nn.Module, opts: poptorch.Options, train: bool):
    """`model` (with its loss for training) as a poptorch inference or training model."""
    if train:
        return poptorch.trainingModel(model, opts, sgd(model, ipu=True))
    return poptorch.inferenceModel(model, opts)


def describe(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:160] if text else ''}"


def eager_call(model: torch.nn.Module, args: tuple, train: bool):
    if train:
        optimizer = sgd(model, ipu=False)

        def step():
            optimizer.zero_grad()
            _, loss = model(*args)
            loss.backward()
            optimizer.step()
        return step

    def infer():
        with torch.no_grad():
            return model(*args)
    return infer


def _inductor(model: torch.nn.Module, args: tuple, train: bool) -> tuple[object, float]:
    """An inductor-compiled copy's call and the seconds its first call took (the
    compile); raises what the compile raised."""
    compiled = torch.compile(model, backend="inductor", dynamic=False)
    call = eager_call(compiled, args, train)
    start = time.perf_counter()
    call()
    return call, time.perf_counter() - start


def measure(spec: Spec, size: int, train: bool, inductor: bool,
            **timing) -> dict[str, object]:
    """One inference (torch under no_grad) or training step (forward, cross-entropy,
    backward, SGD with momentum) of `spec` at batch `size`: median seconds a call of
    torch eager, poptorch and (with `inductor`) torch.compile, and the ratios to eager.
    `timing` goes to `harness.interleave`."""
    model = spec.loss(spec.make()) if train else spec.make()
    model.train(train)
    x, labels = spec.inputs(size)
    args = (x, labels) if train else (x,)
    row: dict[str, object] = {"model": spec.name, "batch": size}
    calls = {"torch": eager_call(model, args, train)}
    try:
        start = time.perf_counter()
        ipu = wrap(copy.deepcopy(model), options(), train)
        result = ipu(*args)
        row["poptorch_compile_s"] = time.perf_counter() - start
        if not train and not torch.allclose(result, calls["torch"](), rtol=RTOL, atol=ATOL):
            raise AssertionError(f"{spec.name} at batch {size}: poptorch and torch disagree")
        calls["poptorch"] = lambda: ipu(*args)
    except Exception as error:  # noqa: BLE001 (a failing model is a row of the report)
        row["poptorch_error"] = describe(error)
        ipu = None
    if inductor:
        try:
            calls["inductor"], row["inductor_compile_s"] = _inductor(
                copy.deepcopy(model), args, train)
        except Exception as error:  # noqa: BLE001
            row["inductor_error"] = describe(error)
    medians, row["repeats"] = harness.interleave(list(calls.values()), **timing)
    for side, seconds in zip(calls, medians, strict=True):
        row[f"{side}_s"] = seconds
        if side != "torch":
            row[f"{side}_ratio"] = seconds / row["torch_s"]
    if ipu is not None:
        ipu.destroy()
    torch._dynamo.reset()
    return row
