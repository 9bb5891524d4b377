"""Training capture: one joint forward + backward graph with the loss found.

`aot_export_joint_with_descriptors` is the joint route that keeps annotations on
backward ops (notes/FRONTEND.md). The model is wrapped so that the graph's first output
is the loss (the rest are detached, so only the loss gets a tangent); the tangent input
is the loss seed, which the executor sets to the loss scaling factor. Descriptors on the
graph's placeholders and outputs say which are parameters, buffers, user inputs,
gradients and buffer updates.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
from torch.fx.experimental.proxy_tensor import _MakefxTracer
from torch.utils import _pytree as pytree

from poptorch import ops
from poptorch._frontend import capture, tied
from poptorch.errors import Error

NO_LOSS = ("Couldn't find a loss in graph: the model must return its loss, a scalar "
           "computed from its outputs (by a torch.nn loss or poptorch.identity_loss)")


@dataclass
class TrainingCaptured:
    """A joint graph and how host values map onto its arguments and results."""

    graph_module: torch.fx.GraphModule
    arguments: list[capture.Argument]  # kinds: parameter, buffer, constant, input, tangent
    results: list[tuple[str, Any]]  # ("buffer", name) | ("output", leaf) | ("grad", param)
    loss_shape: tuple[int, ...]
    out_spec: pytree.TreeSpec  # the user's output structure
    loss_leaf: int  # which leaf of the user's outputs is the loss
    constants: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def trainable(self) -> list[str]:
        return [name for kind, name in self.results if kind == "grad"]

    @property
    def mutated_buffers(self) -> list[str]:
        return [name for kind, name in self.results if kind == "buffer"]


class _LossFirst(torch.nn.Module):
    """Runs the user's model and returns (loss, the other outputs detached)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.out_spec: pytree.TreeSpec | None = None
        self.loss_leaf = -1

    def forward(self, *args, **kwargs):
        ops._loss_marks.clear()
        leaves, self.out_spec = pytree.tree_flatten(self.model(*args, **kwargs))
        self.loss_leaf = _find_loss(leaves, list(ops._loss_marks))
        others = [leaf.detach() for i, leaf in enumerate(leaves) if i != self.loss_leaf]
        return (leaves[self.loss_leaf], *others)


@contextlib.contextmanager
def _stack_traces():
    """Record the Python stack of every traced op, as torch.export does for inference, so
    that an error in the training graph names the model's line: aot_export traces with
    make_fx's tracer, whose `record_stack_traces` it leaves off and does not expose."""
    init = _MakefxTracer.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.record_stack_traces = True

    _MakefxTracer.__init__ = recording
    try:
        yield
    finally:
        _MakefxTracer.__init__ = init


def _backward_traces(graph: torch.fx.Graph) -> None:
    """Give each backward op the stack trace of the forward op it differentiates (the
    same autograd sequence number): the backward runs no user code of its own."""
    forward: dict[int, str] = {}
    for node in graph.nodes:
        if node.meta.get("partitioner_tag") != "is_backward" and node.stack_trace \
                and node.meta.get("seq_nr") is not None:
            forward.setdefault(node.meta["seq_nr"], node.stack_trace)
    for node in graph.nodes:
        if node.meta.get("partitioner_tag") == "is_backward" and not node.stack_trace:
            node.stack_trace = forward.get(node.meta.get("seq_nr"))


def _find_loss(leaves: list[Any], marks: list[tuple[torch.Tensor, str]]) -> int:
    if marks:
        final = marks[-1][0]
        _check_marks_reach(final, marks[:-1])
        for index, leaf in enumerate(leaves):
            if leaf is final:
                return index
        raise Error("the loss marked with poptorch.identity_loss is not returned by the "
                    "model; return it (for example `return output, loss`)", type="capture")
    candidates = [i for i, leaf in enumerate(leaves)
                  if isinstance(leaf, torch.Tensor) and leaf.dim() == 0
                  and leaf.dtype.is_floating_point and leaf.requires_grad]
    if not candidates:
        raise Error(NO_LOSS, type="capture")
    if len(candidates) > 1:
        raise Error(f"the model returns {len(candidates)} scalar outputs that could be its "
                    "loss; mark the loss with poptorch.identity_loss(loss, reduction)",
                    type="capture")
    return candidates[0]


def _strip(target: str) -> str:
    return target.removeprefix("model.")


def capture_training(model: torch.nn.Module, args: tuple, kwargs: dict) -> TrainingCaptured:
    """Export the joint forward + backward graph of `model` (in train mode)."""
    wrapper = _LossFirst(model)
    with contextlib.ExitStack() as stack:
        stack.enter_context(capture.quiet_torch())
        for context in capture.tracing_contexts(model):
            stack.enter_context(context)
        stack.enter_context(_stack_traces())
        try:
            joint = aot_export_joint_with_descriptors(
                stack, wrapper, tuple(args), dict(kwargs),
                decompositions=capture.decompositions())
        except Error:
            raise
        except Exception as err:  # noqa: BLE001 - torch's reason, re-raised for the user
            raise capture.capture_error(err, "the training graph") from err
    gm = joint.graph_module
    _backward_traces(gm.graph)
    for node in gm.graph.nodes:  # backward ops run in backward pipeline stages
        if node.meta.get("partitioner_tag") == "is_backward":
            node.meta["custom"] = {**(node.meta.get("custom") or {}), "ipu.backward": True}
    # tied weights (one tensor under several names) are one argument (`_tied`)
    alias_of = tied.module_aliases(wrapper, "model.")
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    for node in list(placeholders):  # non-tensor inputs: constants the graph specialised on
        if not isinstance(node.meta.get("val"), torch.Tensor) and not node.users:
            gm.graph.erase_node(node)
            placeholders.remove(node)
    erased = tied.merge_tied(gm.graph, [(node, _strip(node.meta["desc"].target))
                                         for node in placeholders if _is_weight(node)],
                              alias_of)
    arguments = [_argument(node.meta["desc"], alias_of) for node in placeholders
                 if node not in erased]
    output = next(node for node in gm.graph.nodes if node.op == "output")
    kept = _merged_results(gm.graph, output, alias_of)
    output.args = (tuple(value for value, _ in kept),)
    gm.recompile()
    results = [result for _, result in kept]
    loss_node = kept[[kind for kind, _ in results].index("output")][0]
    return TrainingCaptured(gm, arguments, results,
                            tuple(loss_node.meta["val"].shape), wrapper.out_spec,
                            wrapper.loss_leaf)


def _is_weight(node: torch.fx.Node) -> bool:
    return type(node.meta["desc"]).__name__ in ("ParamAOTInput", "BufferAOTInput")


def _merged_results(graph: torch.fx.Graph, output: torch.fx.Node,
                    alias_of: dict[str, str]) -> list[tuple[torch.fx.Node, tuple[str, Any]]]:
    """The graph's results that are not None, with what each is; a tied weight's
    gradients under its several names summed into one (`tied.sum_gradients`)."""
    grouped: dict[tuple[str, Any], list[torch.fx.Node]] = {}
    for value, desc in zip(output.args[0], output.meta["desc"], strict=True):
        if value is not None:
            grouped.setdefault(_result(desc, alias_of), []).append(value)
    kept = []
    for (kind, name), values in grouped.items():
        if len(values) > 1 and kind == "buffer":
            names = ", ".join([name, *(n for n, first in alias_of.items() if first == name)])
            raise Error(f"the buffer '{name}' is updated in place under several names "
                        f"({names}), which are one tensor; update it under one name",
                        type="capture")
        value = values[0] if len(values) == 1 else tied.sum_gradients(graph, values, output)
        kept.append((value, (kind, name)))
    return kept


def _argument(desc, alias_of: dict[str, str]) -> capture.Argument:
    kind = type(desc).__name__
    if kind == "ParamAOTInput":
        name = _strip(desc.target)
        return capture.Argument("parameter", alias_of.get(name, name))
    if kind == "BufferAOTInput":
        name = _strip(desc.target)
        return capture.Argument("buffer", alias_of.get(name, name))
    if kind == "PlainAOTInput":
        return capture.Argument("input", str(desc.idx))
    if kind == "TangentAOTInput":
        return capture.Argument("tangent", "loss")
    raise Error(f"unsupported input {desc} in the training graph", type="capture")


def _result(desc, alias_of: dict[str, str]) -> tuple[str, Any]:
    kind = type(desc).__name__
    if kind == "InputMutationAOTOutput":
        name = _strip(desc.mutated_input.target)
        return "buffer", alias_of.get(name, name)
    if kind == "PlainAOTOutput":
        return "output", desc.idx
    if kind == "GradAOTOutput":
        name = _strip(desc.grad_of.target)
        return "grad", alias_of.get(name, name)
    raise Error(f"unsupported output {desc} in the training graph", type="capture")


def _check_marks_reach(final: torch.Tensor, marks: list[tuple[torch.Tensor, str]]) -> None:
    """Every earlier identity_loss must feed the final one (spec 11: "all marked losses must
    be traceable into a single final tensor"), found through the autograd graph."""
    seen, todo = set(), [final.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo.extend(next_fn for next_fn, _ in node.next_functions)
    for tensor, location in marks:
        if tensor.grad_fn is not None and tensor.grad_fn not in seen:
            raise Error("this poptorch.identity_loss is not used by the final loss; combine "
                        "it into the loss the model returns (for example "
                        "identity_loss(loss_a + loss_b, ...))", type="capture",
                        location=location)
