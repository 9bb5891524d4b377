"""poptorch.CPU (spec 11): a host callback inside a compiled inference model.

`CPU(layer_to_call, ID)` registers `layer_to_call` under `ID` (`runtime.user_code.
HOST_CALLBACKS`). An executable holds only the ID: when it runs it calls what the
process has registered under the ID then, so a process that loads an executable creates
the `CPU` wrappers again first (re-creating the model does; poptorch.load cannot
restore a model holding one: its unpickler rebuilds modules, not functions, so such a
model is exported with export_model=False and loaded with loadExecutable).

Called while poptorch captures the model, the wrapper runs the layer once on zero
tensors of its inputs' shapes, as PopTorch does, to learn its outputs' shapes, and
records `poptorch::host_call_<n>` (n outputs), which
`ipu-convert-poptorch-ops` lowers to `ipu.host_call`: the program streams the inputs
to the host, calls the layer with torch tensors and streams its results back, in
order with the rest of the program (once per device iteration, and per replica).
Outside poptorch the wrapper calls the layer. CPU ops are only supported in inference
graphs (spec): in a training model the wrapper is an Error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from poptorch._frontend import model_code
from poptorch._frontend.capture import isRunningOnIpu
from poptorch.dialects.custom import MAX_INPUTS, MAX_OUTPUTS
from poptorch.errors import Error
from poptorch.runtime.user_code import HOST_CALLBACKS, host_callback

__all__ = ["CPU"]


class CPU:
    """Execute a Python function on the host in the middle of an inference IPU graph."""

    def __init__(self, layer_to_call: Callable[..., Any], ID: str) -> None:  # noqa: N803 - PopTorch's name
        """`layer_to_call`: the function (or module) to run on the host, given the
        arguments the wrapper is called with; `ID`: the name of the CPU op."""
        if not callable(layer_to_call):
            raise Error(f"poptorch.CPU: layer_to_call must be callable, got "
                        f"{type(layer_to_call).__name__}", type="api",
                        location=model_code.running_user_line())
        if not isinstance(ID, str) or not ID:
            raise Error(f"poptorch.CPU: ID must be a non-empty string, got {ID!r}",
                        type="api", location=model_code.running_user_line())
        if isinstance(layer_to_call, torch.nn.Module):
            layer_to_call.requires_grad_(False)  # as PopTorch: a CPU op is not trained
        self._layer_to_call, self._ID = layer_to_call, ID
        self._returned_list = False  # the layer returned a list or tuple (at capture)
        HOST_CALLBACKS[ID] = layer_to_call

    def __call__(self, *inputs: torch.Tensor):
        if not isRunningOnIpu():
            return self._layer_to_call(*inputs)
        where = model_code.running_user_line()
        if torch.is_grad_enabled():
            raise Error(f"poptorch.CPU op '{self._ID}': CPU ops are only supported in "
                        "inference graphs (spec 11, poptorch.CPU); use it in a model "
                        "wrapped with poptorch.inferenceModel", type="api", location=where)
        if not 1 <= len(inputs) <= MAX_INPUTS or \
                not all(isinstance(t, torch.Tensor) for t in inputs):
            raise Error(f"poptorch.CPU op '{self._ID}' takes 1 to {MAX_INPUTS} tensors, got "
                        f"{[type(t).__name__ for t in inputs]}", type="api", location=where)
        HOST_CALLBACKS[self._ID] = self._layer_to_call  # the layer this model calls
        outputs = self._example_outputs(inputs, where)
        spec = json.dumps({"outputs": [[list(t.shape), str(t.dtype).removeprefix("torch.")]
                                       for t in outputs]})
        results = _HOST_CALLS[len(outputs)](list(inputs), self._ID, spec)
        single = len(outputs) == 1 and not self._returned_list
        results = [results] if isinstance(results, torch.Tensor) else list(results)
        return results[0] if single else results

    def _example_outputs(self, inputs: tuple, where: str) -> list[torch.Tensor]:
        """The layer's outputs on zero tensors of the inputs' shapes and dtypes (what
        PopTorch does to learn their shapes), outside the capture's tracing."""
        with _disable_current_modes(), torch.no_grad():
            zeros = [torch.zeros(tuple(t.shape), dtype=t.dtype) for t in inputs]
            outputs = self._layer_to_call(*zeros)
        self._returned_list = isinstance(outputs, list | tuple)
        outputs = list(outputs) if self._returned_list else [outputs]
        if not 1 <= len(outputs) <= MAX_OUTPUTS or \
                not all(isinstance(t, torch.Tensor) for t in outputs):
            raise Error(f"poptorch.CPU op '{self._ID}' must return 1 to {MAX_OUTPUTS} tensors, "
                        f"got {[type(t).__name__ for t in outputs]}", type="api",
                        location=where)
        return outputs

    def execute(self) -> None:
        """Implementation detail (PopTorch's API): the program calls the layer."""

    def registerPersistentData(self) -> None:  # noqa: N802 - PopTorch's name
        """Implementation detail (PopTorch's API): register the layer under the ID."""
        HOST_CALLBACKS[self._ID] = self._layer_to_call


def _define(count: int) -> Any:
    """The torch.library op `poptorch::host_call_<count>`."""
    name = f"host_call_{count}"
    returns = "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
    torch.library.define(f"poptorch::{name}",
                         f"(Tensor[] inputs, str callback, str spec) -> {returns}")

    def implementation(inputs, callback, spec):  # the callback itself, on the CPU
        outputs = host_callback(callback)(*inputs)
        outputs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
        shapes = json.loads(spec)["outputs"]
        results = [torch.as_tensor(o).to(getattr(torch, dtype)).clone()
                   for o, (_, dtype) in zip(outputs, shapes, strict=True)]
        return results[0] if count == 1 else tuple(results)

    def fake(inputs, callback, spec):
        results = [torch.empty(shape, dtype=getattr(torch, dtype))
                   for shape, dtype in json.loads(spec)["outputs"]]
        return results[0] if count == 1 else tuple(results)

    torch.library.impl(f"poptorch::{name}", "CompositeExplicitAutograd", func=implementation)
    torch.library.register_fake(f"poptorch::{name}", fake)
    return getattr(torch.ops.poptorch, name).default


_HOST_CALLS = {n: _define(n) for n in range(1, MAX_OUTPUTS + 1)}
