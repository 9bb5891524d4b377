"""PopTorch API pieces around a wrapped model's calls (spec 4.8, 11.4; PopTorch 3.x):

- compile hooks: `poptorch.registerPreCompileHook(hook)` / `registerPostCompileHook`
  return a `torch.utils.hooks.RemovableHandle`; every compilation runs them in order.
- buffers: a forward may update buffers in place only; reassigning or deleting one is
  a `poptorch.Error` (PopTorch's words). Replicas updating buffers need
  `broadcastBuffers(False)` (batch-norm statistics excepted: replica 0's are kept).
- anchors (`Options.anchorTensor`, `getAnchoredTensor`): a weight or buffer by name
  (its value after the call), `Gradient___<parameter>` (the reduced gradient of the
  last step) and `UpdatedVar___<parameter>` (the weight after the update).
- outputs: `.backward()` on an output of a wrapped model is PopTorch's error.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
import torch.utils.hooks
from torch.utils import _pytree as pytree

from poptorch._frontend.annotations import begin_block_of, forward_hooks
from poptorch.enums import OutputMode
from poptorch.errors import Error

# ---- compile hooks -----------------------------------------------------------------------
_PRE_COMPILE: collections.OrderedDict[int, Callable[[], Any]] = collections.OrderedDict()
_POST_COMPILE: collections.OrderedDict[int, Callable[[], Any]] = collections.OrderedDict()


def _register(hooks: collections.OrderedDict, hook: Any, what: str
              ) -> torch.utils.hooks.RemovableHandle:
    if not callable(hook):
        raise Error(f"{what} hook must be callable, got {type(hook).__name__}", type="api")
    handle = torch.utils.hooks.RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def registerPreCompileHook(hook: Callable[[], Any]  # noqa: N802 - PopTorch's name
                           ) -> torch.utils.hooks.RemovableHandle:
    """Call `hook()` before each model compilation; `.remove()` on the handle undoes it."""
    return _register(_PRE_COMPILE, hook, "Pre-compile")


def registerPostCompileHook(hook: Callable[[], Any]  # noqa: N802 - PopTorch's name
                            ) -> torch.utils.hooks.RemovableHandle:
    """Call `hook()` after each model compilation; `.remove()` on the handle undoes it."""
    return _register(_POST_COMPILE, hook, "Post-compile")


def run_hooks(pre: bool) -> None:
    for hook in list((_PRE_COMPILE if pre else _POST_COMPILE).values()):
        hook()


# ---- buffers -----------------------------------------------------------------------------
def _buffer_ids(model: torch.nn.Module) -> dict[str, int]:
    return {name: id(b) for name, b in torch.nn.Module.named_buffers(model)}


@contextlib.contextmanager
def forward_keeps_buffers(model: torch.nn.Module):
    """While capturing: the forward of `model` must neither reassign nor delete a buffer
    (torch.export would turn a reassignment into an update; PopTorch refuses both)."""
    seen: list[dict[str, int]] = []

    def before(module, args):
        seen.append(_buffer_ids(module))

    def after(module, args, output):
        if not seen:
            return
        old, new = seen.pop(), _buffer_ids(module)
        for name in old:
            if name not in new:
                raise Error(f"Buffer {name} is removed from the model when calling the "
                            "forward method; buffers can only be updated in place",
                            type="capture")
            if new[name] != old[name]:
                raise Error(f"Buffer {name} is reassigned within the model when calling the "
                            "forward method. This is not supported. Consider using "
                            f"self.{name}.copy_(src) to copy data from a source tensor, "
                            "where src is the name of the source tensor", type="capture")

    with forward_hooks(model, before, after):
        yield


def _is_norm_statistic(model: torch.nn.Module, name: str) -> bool:
    owner, _, _ = name.rpartition(".")
    try:
        module = model.get_submodule(owner)
    except AttributeError:
        return False
    return isinstance(module, torch.nn.modules.batchnorm._NormBase)


def check_replicated_buffers(model: torch.nn.Module, mutated: Iterable[str],
                             replicas: int, broadcast: bool, frozen: Iterable[str]) -> None:
    """Updating buffers with several replicas needs broadcastBuffers(False) (spec 4.8)."""
    if replicas == 1 or not broadcast:
        return
    names = [n for n in mutated if n not in frozen and not _is_norm_statistic(model, n)]
    if names:
        raise Error(f"the model updates buffers ({', '.join(names)}) with replicationFactor "
                    f"{replicas}: PopTorch does not support broadcasting buffers. If your "
                    "model is able to tolerate buffers becoming out of sync between "
                    "replicas, you can disable buffer broadcasting using "
                    "poptorch.Options.broadcastBuffers(False)", type="executor")


def updatable_buffers(options: Any, model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(name, host tensor) of the buffers `Options.updatableNamedBuffers` names."""
    names = options.updatable_named_buffers
    if not names:
        raise Error("copyNamedBuffersToDevice: no named buffers marked as updatable via the "
                    "updatableNamedBuffers option", type="executor")
    buffers = dict(torch.nn.Module.named_buffers(model))
    unknown = [n for n in names if n not in buffers]
    if unknown:
        raise Error(f"updatableNamedBuffers: the model has no buffer {', '.join(unknown)}; "
                    f"its buffers are {', '.join(buffers) or 'none'}", type="executor")
    return [(n, buffers[n]) for n in names]


# ---- outputs -----------------------------------------------------------------------------
def _no_backward(*args, **kwargs):
    raise Error("backward() cannot be called explicitly on outputs of a PopTorch model. "
                "If you're using a trainingModel, the backwards pass is performed "
                "automatically when invoking the model. If you're using an inferenceModel, "
                "you should use a trainingModel instead.", type="executor")


def guard_outputs(result: Any) -> Any:
    """Make `.backward()` on each output tensor PopTorch's error."""
    for leaf in pytree.tree_leaves(result):
        if isinstance(leaf, torch.Tensor):
            leaf.backward = _no_backward
    return result


# ---- anchors -----------------------------------------------------------------------------
GRADIENT, UPDATED = "Gradient___", "UpdatedVar___"


def anchor_names(weights: Iterable[str], trainable: Iterable[str]) -> list[str]:
    """The tensor names an anchor may name beyond the weights, buffers and inputs."""
    trainable = list(trainable)
    return [*weights, *(GRADIENT + n for n in trainable), *(UPDATED + n for n in trainable)]


def check_anchors(options: Any, names: list[str]) -> None:
    for short, anchor in options.anchored_tensors.items():
        if anchor["long_name"] not in names:
            raise Error(f"anchorTensor: '{short}' anchors '{anchor['long_name']}', which is "
                        f"not a tensor of the model; its tensors are {', '.join(names)}",
                        type="executor")


class Anchors:
    """The anchored tensors' values per step of the last call."""

    def __init__(self) -> None:
        self.steps: list[dict[str, np.ndarray]] = []  # long name -> value, per step
        self.values: dict[str, torch.Tensor] = {}  # short name -> value of the last call

    def record(self, values: dict[str, np.ndarray]) -> None:
        self.steps.append({k: np.array(v) for k, v in values.items()})

    def finish(self, options: Any, training: bool) -> None:
        """Combine the steps of the call for each anchor as its output mode says."""
        default = OutputMode.Final if training else OutputMode.All
        for short, anchor in options.anchored_tensors.items():
            name = anchor["long_name"]
            values = [s[name] for s in self.steps if name in s]
            if not values:
                continue
            # (OutputMode.All is 0: test for None, not truth)
            mode = options.output_mode if anchor["output_mode"] is None else anchor["output_mode"]
            if mode == OutputMode.Default:
                mode = default
            if mode == OutputMode.Sum:
                value = np.sum(values, axis=0)
            elif mode == OutputMode.All and len(values) > 1:
                value = np.stack(values)
            elif mode == OutputMode.EveryN and len(values) > 1:
                value = np.stack(values[anchor["output_return_period"] - 1::
                                        anchor["output_return_period"]])
            else:
                value = values[-1]
            self.values[short] = torch.from_numpy(np.array(value))
        self.steps = []

    def get(self, short_name: str) -> torch.Tensor:
        if short_name not in self.values:
            known = ", ".join(self.values) or "none yet (anchor with Options.anchorTensor, " \
                "then run the model)"
            raise Error(f"getAnchoredTensor: no tensor with name '{short_name}' found; "
                        f"anchored tensors: {known}", type="executor")
        return self.values[short_name]


class ExecutorExtras:
    """PoplarExecutor's methods for anchors, named buffers and its repr (a mixin: the
    executor's state is its own)."""

    def setOptimizer(self, optimizer: Any) -> None:  # noqa: N802 - PopTorch's name
        """An inference model has no optimizer (trainingModel's replaces this)."""
        raise Error("setOptimizer: this is an inferenceModel, which has no optimizer; wrap "
                    "the model with poptorch.trainingModel to train it", type="api")

    def _tensor_names(self, captured: Any) -> list[str]:
        base = [a.name if a.kind != "input" else f"input{a.name}" for a in captured.arguments]
        return anchor_names(base, captured.trainable if self._training else [])

    def _check_buffers_and_anchors(self, captured: Any) -> None:
        opts = self._options
        check_replicated_buffers(self._model, captured.mutated_buffers,
                                 opts.replication_factor, opts.broadcast_buffers, self._frozen)
        check_anchors(opts, self._tensor_names(captured))

    def _record_anchors(self, arguments: list[Any], args: list[Any],
                        more: dict[str, Any] | None = None) -> None:
        """The anchored tensors' values after a step: weights and buffers from the device,
        inputs as given, gradients and updated weights (`more`) from the optimizer step."""
        wanted = {a["long_name"] for a in self._options.anchored_tensors.values()}
        if not wanted:
            return
        arrays = self._device_weights.arrays
        values = {name: value for name, value in (more or {}).items() if name in wanted}
        for arg, value in zip(arguments, args, strict=True):
            name = arg.name if arg.kind != "input" else f"input{arg.name}"
            if name in wanted:
                values[name] = arrays.get(name, value)
        self._anchors.record(values)

    def getAnchoredTensor(self, short_name: str) -> torch.Tensor:  # noqa: N802
        """The value of the tensor anchored as `short_name` (Options.anchorTensor) in the
        last call."""
        self._check_alive()
        return self._anchors.get(short_name)

    def copyNamedBuffersToDevice(self) -> None:  # noqa: N802
        """Upload the buffers named by Options.updatableNamedBuffers from the host model."""
        self._check_alive()
        if self._compiled is None:
            raise Error("copyNamedBuffersToDevice: the model has not been compiled or has "
                        "been destroyed", type="executor")
        self._device_weights.upload_some(updatable_buffers(self._options, self._model),
                                         self._groupings)

    def __repr__(self) -> str:
        # PopTorch's: the model with its BeginBlock annotations
        return module_repr(self._user_model)


def module_repr(m: torch.nn.Module) -> str:
    """torch's repr of `m` with each module's forward pre-hooks (its BeginBlock) before
    its name, as `poptorch.module_repr` shows them."""
    lines = m.extra_repr().split("\n") if m.extra_repr() else []
    extra = len(lines)
    for key, module in m._modules.items():
        text = module_repr(module).replace("\n", "\n  ")
        lines.append(f"({key}): {text}")
    block = begin_block_of(m)  # BeginBlock's (user_id, ipu_id)
    hooks = f"BeginBlock(user_id={block[0]}, ipu_id={block[1]}) " if block else ""
    text = f"{hooks}{m._get_name()}("
    if lines:
        text += lines[0] if extra == 1 and len(lines) == 1 else \
            "\n  " + "\n  ".join(lines) + "\n"
    return text + ")"
