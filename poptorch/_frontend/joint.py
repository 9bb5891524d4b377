"""Training capture: one joint forward + backward graph with the loss found.

`aot_export_joint_with_descriptors` is the joint route that keeps annotations on
backward ops (notes/FRONTEND.md). The model is wrapped so that the graph's first output
is the loss (the rest are detached, so only the loss gets a tangent); the tangent input
is the loss seed, which the executor sets to the loss scaling factor. Descriptors on the
graph's placeholders and outputs say which are parameters, buffers, user inputs,
gradients and in-place updates. Tensors of modules the model does not own (held in a
closure, a global, or passed to forward) are constants of the graph, as PopTorch's
tracing sees them: arguments of kind "constant", not trained.

A parameter updated in place in forward (under `torch.no_grad()`, such as a weight
rescaled or clipped before use) is a "buffer" result too, as in PopTorch, which updates
parameters and buffers alike in place: the device keeps the new value, and the optimizer
steps it with the gradient taken at that value, as autograd on the CPU does. AOT
autograd gives such an update a tangent of its own, as if the loss could depend on the
updated value after the step; nothing does, so that tangent is zero
(`_zero_update_tangents`) and the loss seed is the graph's only tangent.

An input the model updates in place (`x.mul_(2)`, `torch.add(a, b, out=x)`) is data,
with no gradient (`_bind_objects` detaches it): its new value is one more forward result
("input", flat index), after the buffers' updates, which the executor writes back into
the user's tensor, as in inference.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
from torch._subclasses.fake_tensor import (
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.fx import proxy as fx_proxy
from torch.fx.experimental.proxy_tensor import _MakefxTracer
from torch.utils import _pytree as pytree
from torch.utils._traceback import CapturedTraceback

from poptorch import ops
from poptorch._frontend import capture, decompose, model_code, tied
from poptorch._frontend.op_names import check_static_shapes, static_shape_error
from poptorch.errors import Error

NO_LOSS = ("Couldn't find a loss in graph: the model must return its loss, a scalar "
           "computed from its outputs (by a torch.nn loss or poptorch.identity_loss)")

OUTSIDE_UPDATE = ("the model updates in place a tensor that is not its own (a buffer of a "
                  "module held outside the model, in a closure, a global or an input, such "
                  "as a BatchNorm in training mode): its tensors are constants of the "
                  "graph; register the module in the model (as an attribute) or put it in "
                  "eval mode")


@dataclass
class TrainingCaptured:
    """A joint graph and how host values map onto its arguments and results."""

    graph_module: torch.fx.GraphModule
    arguments: list[capture.Argument]  # kinds: parameter, buffer, constant, input, tangent
    # ("buffer", name) (a buffer or parameter updated in place) | ("input", flat index)
    # (an input updated in place) | ("output", leaf) | ("grad", param)
    results: list[tuple[str, Any]]
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

    @property
    def mutated_inputs(self) -> list[int]:
        return [int(index) for kind, index in self.results if kind == "input"]


class _LossFirst(torch.nn.Module):
    """Runs the user's model and returns (loss, the other outputs detached)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.out_spec: pytree.TreeSpec | None = None
        self.loss_leaf = -1
        self.bound: dict[int, Any] = {}

    def forward(self, *args, **kwargs):
        if self.bound:  # the objects `_bind_objects` took out of the inputs, put back
            flat, spec = pytree.tree_flatten((args, kwargs))
            for index, value in self.bound.items():
                flat[index] = value
            args, kwargs = pytree.tree_unflatten(flat, spec)
        ops._loss_marks.clear()
        leaves, self.out_spec = pytree.tree_flatten(self.model(*args, **kwargs))
        self.loss_leaf = _find_loss(leaves, list(ops._loss_marks))
        others = [leaf.detach() for i, leaf in enumerate(leaves) if i != self.loss_leaf]
        return (leaves[self.loss_leaf], *others)


@contextlib.contextmanager
def _stack_traces():
    """Record the Python stack of every traced op, as torch.export does for inference, so
    that an error in the training graph names the model's line: aot_export traces with
    make_fx's tracer, whose `record_stack_traces` it leaves off and does not expose.
    The tracer's stacks are taken through `_ForwardTraceback`."""
    init = _MakefxTracer.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.record_stack_traces = True

    _MakefxTracer.__init__ = recording
    fx_proxy.CapturedTraceback = _ForwardTraceback
    try:
        yield
    finally:
        _MakefxTracer.__init__ = init
        fx_proxy.CapturedTraceback = CapturedTraceback


class _ForwardTraceback:
    """torch.fx's `CapturedTraceback` for the tracer of the training capture. make_fx's
    tracer keeps only the frames of `forward` functions, of torch/__init__.py and of its
    anchors (`_record_forward_stack_traces_only`; other tracers keep the frames from the
    first `forward` on): a stack without any such frame ends up empty, as every op the
    backward traces does (autograd runs it after the forward has returned). Such a stack
    is given as empty before it is symbolised, which took a fifth of a BERT's capture."""

    @staticmethod
    def extract(*, script=False, cpp=False, skip=0):
        frame = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            if "forward" in (code.co_name, code.co_qualname) \
                    or code.co_filename.endswith("torch/__init__.py") \
                    or (code.co_filename, code.co_name) in fx_proxy._STACK_TRACE_ANCHORS:
                return CapturedTraceback.extract(script=script, cpp=cpp,
                                                 skip=skip if script or cpp else skip + 1)
            frame = frame.f_back
        return CapturedTraceback(None)


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


# input leaves the export takes as inputs (others, such as a loss module passed to
# forward, are bound into the traced function: their tensors become constants)
_TRACEABLE = (torch.Tensor, int, float, bool, str, type(None))


def _bind_objects(args: tuple, kwargs: dict, fake_mode: FakeTensorMode
                  ) -> tuple[tuple, dict, dict[int, Any]]:
    """The inputs for the export: tensors made fake in `fake_mode`, and each leaf the
    export cannot take (a module, a function) replaced by 0, a non-tensor input the graph
    does not use, so that the inputs keep their flat indices; returns them and {flat
    index: the object} for `_LossFirst` to put back."""
    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    bound = {index: leaf for index, leaf in enumerate(flat)
             if not isinstance(leaf, _TRACEABLE)}
    # detached: an input that requires grad gets no gradient (none is returned to the
    # host, as in PopTorch), and its own would be no weight of the joint graph
    flat = [0 if index in bound else fake_mode.from_tensor(leaf.detach())
            if isinstance(leaf, torch.Tensor) else leaf for index, leaf in enumerate(flat)]
    args, kwargs = pytree.tree_unflatten(flat, spec)
    return args, kwargs, bound


def _strip(target: str) -> str:
    return target.removeprefix("model.")


def capture_training(model: torch.nn.Module, args: tuple, kwargs: dict) -> TrainingCaptured:
    """Export the joint forward + backward graph of `model` (in train mode)."""
    wrapper = _LossFirst(model)
    # Tensors the model uses that are not its own (a module or loss held in a closure
    # or a global) are constants, as PopTorch's tracing sees them: a fake mode that
    # takes real tensors lets the export record them as `get_attr` constants, which
    # `_lift_constants` makes "constant" arguments. Only the model's parameters train.
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    names = model_code.input_names(model, args, kwargs)
    args, kwargs, wrapper.bound = _bind_objects(args, kwargs, fake_mode)
    with contextlib.ExitStack() as stack:
        stack.enter_context(capture.quiet_torch())
        for context in capture.tracing_contexts(model):
            stack.enter_context(context)
        stack.enter_context(_stack_traces())
        try:
            joint = aot_export_joint_with_descriptors(
                stack, wrapper, tuple(args), dict(kwargs),
                decompositions=decompose.decompositions())
        except Exception as err:  # noqa: BLE001 - the model's own, or torch's reason
            if isinstance(err, DynamicOutputShapeException):  # (reads: capture_error's words)
                location = model_code.capture_error(err, "the training graph").location
                raise static_shape_error(err.func, location) from err
            if "mutating a non-functional tensor" in str(err):
                error = model_code.capture_error(err, "the training graph")
                raise Error(f"could not capture the training graph: {OUTSIDE_UPDATE}",
                            type="capture", location=error.location) from err
            model_code.reraise_from_model(err, "the training graph")
    gm = joint.graph_module
    check_static_shapes(gm.graph, model_code.user_line)
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
    constants = _lift_constants(gm, placeholders)
    _zero_update_tangents(gm.graph, placeholders)
    erased = tied.merge_tied(gm.graph, [(node, _strip(node.meta["desc"].target))
                                         for node in placeholders if _is_weight(node)],
                              alias_of)
    arguments = [capture.Argument("constant", node.target) if node.target in constants
                 else _argument(node.meta["desc"], alias_of)
                 for node in placeholders if node not in erased]
    output = next(node for node in gm.graph.nodes if node.op == "output")
    kept = _merged_results(gm.graph, output, alias_of)
    _check_input_shapes(kept, placeholders, names, model)
    output.args = (tuple(value for value, _ in kept),)
    gm.recompile()
    results = [result for _, result in kept]
    loss_node = kept[[kind for kind, _ in results].index("output")][0]
    return TrainingCaptured(gm, arguments, results,
                            tuple(loss_node.meta["val"].shape), wrapper.out_spec,
                            wrapper.loss_leaf, constants)


def _lift_constants(gm: torch.fx.GraphModule,
                    placeholders: list[torch.fx.Node]) -> dict[str, torch.Tensor]:
    """Make the graph's tensor constants (`get_attr` nodes: tensors of modules outside
    the model, which the export does not differentiate) placeholders appended to
    `placeholders`; returns {placeholder name: the tensor, detached and narrowed}: the
    host value at capture, as PopTorch freezes a constant into its graph."""
    constants: dict[str, torch.Tensor] = {}
    lifted: dict[str, torch.fx.Node] = {}
    first_op = next((node for node in gm.graph.nodes if node.op != "placeholder"), None)
    for node in list(gm.graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(gm, node.target)
        if not isinstance(value, torch.Tensor):
            continue
        if node.target not in lifted:
            with gm.graph.inserting_before(first_op):
                placeholder = gm.graph.placeholder(f"constant_{node.target.lstrip('_')}")
            placeholder.meta["val"] = node.meta.get("val")
            placeholders.append(placeholder)
            lifted[node.target] = placeholder
            constants[placeholder.target] = capture.narrow(value.detach().clone())
        node.replace_all_uses_with(lifted[node.target])
        gm.graph.erase_node(node)
    for target in lifted:
        delattr(gm, target)
    return constants


def _zero_update_tangents(graph: torch.fx.Graph, placeholders: list[torch.fx.Node]) -> None:
    """Replace the tangent of each in-place update (see the module) by zeros made before
    its first use, with that use's annotations, and drop it from `placeholders`."""
    for node in list(placeholders):
        desc = node.meta.get("desc")
        if type(desc).__name__ != "TangentAOTInput" \
                or type(desc.output).__name__ != "InputMutationAOTOutput":
            continue
        value = node.meta["val"]
        if node.users:
            first = min(node.users, key=list(graph.nodes).index)
            with graph.inserting_before(first):
                zeros = graph.call_function(torch.ops.aten.zeros.default,
                                            (list(value.shape),), {"dtype": value.dtype})
            zeros.meta = {key: first.meta[key] for key in tied.KEPT_META if key in first.meta}
            zeros.meta["val"] = value
            node.replace_all_uses_with(zeros)
        graph.erase_node(node)
        placeholders.remove(node)


def _check_input_shapes(kept: list[tuple[torch.fx.Node, tuple[str, Any]]],
                        placeholders: list[torch.fx.Node], names: list[str],
                        model: torch.nn.Module) -> None:
    """An input updated in place keeps its shape: AOT autograd hides from forward the
    resize an `out=` tensor of another shape makes, which its update's shape shows
    (`model_code.input_layouts_kept` refuses the other shape changes)."""
    inputs = {node.meta["desc"].idx: node.meta["val"] for node in placeholders
              if type(node.meta.get("desc")).__name__ == "PlainAOTInput"}
    for value, (kind, index) in kept:
        if kind == "input" and value.meta["val"].shape != inputs[index].shape:
            raise model_code.shape_change_error(
                names[index], model_code.layout(inputs[index]),
                model_code.layout(value.meta["val"]), model)


def _is_weight(node: torch.fx.Node) -> bool:
    return type(node.meta.get("desc")).__name__ in ("ParamAOTInput", "BufferAOTInput")


def _merged_results(graph: torch.fx.Graph, output: torch.fx.Node,
                    alias_of: dict[str, str]) -> list[tuple[torch.fx.Node, tuple[str, Any]]]:
    """The graph's results that are not None, with what each is; a tied weight's
    gradients under its several names summed into one (`tied.sum_gradients`)."""
    grouped: dict[tuple[str, Any], list[torch.fx.Node]] = {}
    updated: dict[str, str] = {}  # name -> "parameter" or "buffer", of in-place updates
    for value, desc in zip(output.args[0], output.meta["desc"], strict=True):
        if value is None:
            continue
        result = _result(desc, alias_of)
        grouped.setdefault(result, []).append(value)
        if result[0] == "buffer":
            updated[result[1]] = ("parameter" if type(desc.mutated_input).__name__
                                  == "ParamAOTInput" else "buffer")
    kept = []
    for (kind, name), values in grouped.items():
        if len(values) > 1 and kind == "buffer":
            names = ", ".join([name, *(n for n, first in alias_of.items() if first == name)])
            raise Error(f"the {updated[name]} '{name}' is updated in place under several names "
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
    if kind == "InputMutationAOTOutput" and type(desc.mutated_input).__name__ \
            == "PlainAOTInput":
        return "input", desc.mutated_input.idx
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
