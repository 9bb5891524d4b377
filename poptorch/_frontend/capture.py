"""Capture: from an nn.Module and example inputs to the torch dialect, with annotations.

The route is the one notes/FRONTEND.md measured: `torch.export.export` inside
`preserve_node_meta()`, torch-mlir's decomposition table, then `FxImporter`. Weights
are not frozen: `import_graph_module` makes every lifted parameter, buffer and constant
a function argument, in the exported graph's placeholder order. poptorch annotations
(`Block` and friends) set `node.meta["custom"]` through `torch.fx.traceback.annotate`;
`AnnotatingNodeImporter` carries them in fused-location metadata, which survives
torch-mlir's rewrites, and the `ipu-import-annotations` pass turns them into attributes.
Buffers and parameters the model updates in place (a BatchNorm's statistics, a
weight rescaled under `torch.no_grad()`) lead the program's results, as PopTorch
updates both in place on the device (its `update_param_inplace`); the new values of
inputs the model updates in place (`x += 1`, `torch.add(a, b, out=x)`) follow them, and
the executor copies them into the user's tensors after each call, as PopTorch does.

An exception the model's own code raises reaches the user as it is, as when PopTorch
traces forward in Python; what torch's export machinery raises becomes a poptorch.Error
at the model's line (`model_code`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx.traceback as fxtb
from torch._export.utils import _compiling_state_context
from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils import _pytree as pytree
from torch_mlir import ir
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir.extras.fx_importer import (
    TORCH_DTYPE_TO_MLIR_TYPE,
    TORCH_DTYPE_TO_NPY_TYPE,
    FxImporter,
    FxImporterHooks,
    GraphNodeImporter,
)

from poptorch._frontend import (
    arg_parsers,
    batch_norm,
    ctc_loss,
    half_parameters,
    model_code,
    static_ops,
    tied,
    upsample_modes,
)
from poptorch._frontend.annotations import capture_scope
from poptorch._frontend.control_flow import (
    ControlFlowImporter,
    body_module_path,
    drop_dynamo_marks,
)
from poptorch._frontend.norm_decompositions import norm_decompositions
from poptorch._frontend.op_names import CALL_KEY, called_as, check_static_shapes
from poptorch._frontend.reduction_decompositions import reduction_decompositions
from poptorch.errors import Error

ANNOTATION_PREFIX = "ipu."
_state = threading.local()


def isRunningOnIpu() -> bool:  # noqa: N802 - PopTorch's name
    """True while poptorch captures a model for the IPU, False when it runs on the CPU."""
    return getattr(_state, "capturing", False)


@contextlib.contextmanager
def _capturing():
    previous = isRunningOnIpu()
    _state.capturing = True
    try:
        yield
    finally:
        _state.capturing = previous


@contextlib.contextmanager
def _unchecked_distributions():
    """torch.distributions without argument validation: its checks (`if not
    valid.all(): raise`) read tensor values in Python, which no capture can; PopTorch
    turns them off while tracing too."""
    previous = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(previous)


# The IPU has no 64-bit types: such inputs are narrowed on the host before capture and
# streaming, as PopTorch does.
NARROWED = {torch.int64: torch.int32, torch.float64: torch.float32}


def dtype_name(dtype: torch.dtype) -> str:
    """"float32" for torch.float32: how errors and files name a dtype."""
    return str(dtype).removeprefix("torch.")


def dtype_named(name: Any) -> torch.dtype:
    """The dtype `dtype_name` names; ValueError for anything else."""
    value = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


# id of a copy poptorch made of a user's tensor (narrowed to 32 bits, or one tensor given
# for several inputs) -> (a weak reference to the copy, the dtype the user gave, a weak
# reference to the tensor copied), for errors in the user's terms and for writing inputs
# updated in place back (by identity: tensors' `==` compares their elements)
_COPIES: dict[int, tuple[weakref.ref, torch.dtype, weakref.ref]] = {}


def _forget(ref: weakref.ref, key: int) -> None:
    if _COPIES.get(key, (None,))[0] is ref:
        del _COPIES[key]


def _copy_of(copy: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    """`copy`, remembered as a copy of the user's `tensor` (`given_dtype`, `given_tensor`)."""
    key = id(copy)
    _COPIES[key] = (weakref.ref(copy, functools.partial(_forget, key=key)),
                    given_dtype(tensor), weakref.ref(tensor))
    return copy


def narrow(value: Any) -> Any:
    """`value` with int64/float64 tensors narrowed to int32/float32 (`given_dtype` tells
    the dtype a narrowed tensor had)."""
    if isinstance(value, torch.Tensor) and value.dtype in NARROWED:
        return _copy_of(value.to(NARROWED[value.dtype]), value)
    return value


def _copied(tensor: torch.Tensor) -> tuple[torch.dtype, weakref.ref] | None:
    ref, dtype, source = _COPIES.get(id(tensor), (None, None, None))
    return (dtype, source) if ref is not None and ref() is tensor else None


def given_dtype(tensor: torch.Tensor) -> torch.dtype:
    """The dtype the user gave for `tensor`: torch.int64 for an int64 input `narrow`
    made int32."""
    copied = _copied(tensor)
    return tensor.dtype if copied is None else copied[0]


def given_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The user's tensor that `tensor` is a copy of (`narrow`, `flatten_inputs`), or
    `tensor` itself: where an input updated in place is written back."""
    while (copied := _copied(tensor)) is not None and copied[1]() is not None:
        tensor = copied[1]()
    return tensor


@dataclass
class Argument:
    """One argument of the captured function: a weight (by name) or a user input."""

    kind: str  # "parameter", "buffer", "constant" or "input"
    name: str  # state name for weights, flat input index (as str) for inputs
    persistent: bool = True


@dataclass
class Captured:
    """A captured program and how host values map onto its arguments and results."""

    program: torch.export.ExportedProgram
    arguments: list[Argument]
    constants: dict[str, torch.Tensor]
    # names of the buffers and parameters updated in place, in the order they lead the
    # results
    mutated_buffers: list[str]
    in_spec: pytree.TreeSpec
    out_spec: pytree.TreeSpec
    input_meta: list[tuple[tuple[int, ...], torch.dtype]] = field(default_factory=list)
    # flat indices of the inputs updated in place, in the order their new values follow
    # the buffers' in the results
    mutated_inputs: list[int] = field(default_factory=list)
    # leaf index -> value of the outputs that are no tensors (None, a number, a string,
    # which torch.export keeps as constants): not results of the program, put back by
    # `outputs`
    constant_outputs: dict[int, Any] = field(default_factory=dict)

    @property
    def graph_module(self) -> torch.fx.GraphModule:
        return self.program.graph_module

    def outputs(self, results: list[Any]) -> Any:
        """The model's outputs, structured, from the program's output results."""
        leaves = list(results)
        for index, value in sorted(self.constant_outputs.items()):
            leaves.insert(index, value)
        return pytree.tree_unflatten(leaves, self.out_spec)


def _scalar_to_tensor(op):
    return lambda x, other: op(x, torch.scalar_tensor(other, dtype=x.dtype))


def _scatter_to_indices(dims: int, grad, x, indices):
    """adaptive_max_pool{2,3}d_backward: each gradient added at its argmax index."""
    flat = grad.new_zeros(x.shape[:-dims] + (math.prod(x.shape[-dims:]),))
    return flat.scatter_add(-1, indices.flatten(-dims), grad.flatten(-dims)).view(x.shape)


def decompositions() -> dict:
    """torch-mlir's decomposition table plus ours, for aten ops torch-mlir's torch dialect
    has no op for (they would import as an opaque `torch.operator`)."""
    aten = torch.ops.aten
    table = dict(get_decomposition_table())
    # addmm / baddbmm stay whole (torch-mlir has ops for them, lowered by
    # conversion/linear.py): torch's decompositions compute them in float32
    # (`pw_cast_for_opmath`), so an fp16 nn.Linear would become an fp32 matmul between
    # casts. PopTorch keeps fp16 in, fp16 out, partials by Precision.setPartialsType.
    for overload in (aten.addmm.default, aten.baddbmm.default):
        del table[overload]
    # gelu's backward stays one op (conversion/elementwise.py: ipu.gelu_grad, popnn's
    # NonLinearityGrad), not torch's erf, exp and products
    table.pop(aten.gelu_backward.default, None)
    table[aten.erfc.default] = lambda x: 1 - aten.erf(x)
    # ipu.sort is always stable, so the stable overload is the plain one.
    table[aten.sort.stable] = lambda x, *, stable=None, dim=-1, descending=False: \
        aten.sort.default(x, dim, descending)
    for dims in (2, 3):  # torch-mlir has no op for these backward ops
        table[getattr(aten, f"adaptive_max_pool{dims}d_backward").default] = \
            functools.partial(_scatter_to_indices, dims)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        table[getattr(aten, name).Scalar] = _scalar_to_tensor(getattr(aten, name).Tensor)
    table.update(reduction_decompositions(table))
    table.update(norm_decompositions(table))  # half batch norm stays half (popnn)
    return table


_TENSORS_SPEC: dict[int, pytree.TreeSpec] = {}


def flatten_inputs(args: tuple, kwargs: dict) -> tuple[list[Any], pytree.TreeSpec]:
    """Flatten call arguments as torch.export does: tensors and non-tensor values (None,
    numbers, strings) are leaves, as are the tensors of objects a registered
    `ICustomArgParser` takes apart. The usual call, plain tensors passed by position,
    reuses its spec (pytree's walk was a tenth of a small model's call)."""
    if not kwargs and all(type(a) is torch.Tensor for a in args):
        spec = _TENSORS_SPEC.get(len(args))
        if spec is None:
            spec = _TENSORS_SPEC[len(args)] = pytree.tree_flatten((tuple(args), {}))[1]
        return _distinct(list(args)), spec
    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    if arg_parsers.register_input_types(flat):  # a dict subclass, a type with a parser
        flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    return _distinct(flat), spec


def _distinct(flat: list[Any]) -> list[Any]:
    """`flat` with a tensor given for several inputs copied for all but the first:
    torch.export makes one graph input of one tensor object, so a program compiled with
    `model(x, x)` would read its first input for both ever after."""
    seen: set[int] = set()
    for index, value in enumerate(flat):
        if isinstance(value, torch.Tensor):
            if id(value) in seen:
                flat[index] = _copy_of(value.clone(), value)
            seen.add(id(value))
    return flat


# Noise torch 2.13 emits from inside export itself, about its own internals.
_TORCH_NOISE = ("TF32 acceleration on top of oneDNN", r"`isinstance\(treespec, LeafSpec\)`",
                r"The tensor attributes .*_flat_weights.* were assigned during export")


def tracing_contexts(model: torch.nn.Module) -> list:
    """Contexts every capture runs in: poptorch's capture flag, node metadata kept for
    annotations, torch's plain (decomposable) implementations of RNNs and attention
    instead of fused CPU kernels (mkldnn RNN layers, flash attention) that have no
    decomposition, in the forward or the backward, and torch.export's own "exporting"
    state, in the training capture too: libraries skip their data-dependent Python
    checks under `torch.compiler.is_exporting()` (Hugging Face's `mask.all()`); the
    check that forward keeps its inputs' shapes (`model_code.input_layouts_kept`);
    torch.distributions without its argument checks; PopTorch's static forms of some
    torch calls (`static_ops.StaticShapes`); the refusal of the upsampling modes PopTorch
    refuses (`upsample_modes`); CTC loss in tensor ops (`ctc_loss`); and the refusal of
    cumulative batch-norm statistics (`batch_norm`); float32 parameters of layers on
    float16 inputs cast to float16 (`half_parameters`)."""
    return [_capturing(), fxtb.preserve_node_meta(), capture_scope(model),
            torch.backends.mkldnn.flags(enabled=False), sdpa_kernel([SDPBackend.MATH]),
            _compiling_state_context(), model_code.input_layouts_kept(model),
            _unchecked_distributions(), static_ops.StaticShapes(model_code.library_file),
            upsample_modes.RefuseUpsampling(model_code.running_user_line),
            ctc_loss.CtcLossInTensorOps(model_code.running_user_line),
            batch_norm.constant_momentum(model), half_parameters.HalfParameters()]


@contextlib.contextmanager
def quiet_torch():
    """Silence the warnings torch emits about its own internals while exporting."""
    with warnings.catch_warnings():
        for message in _TORCH_NOISE:
            warnings.filterwarnings("ignore", message=message)
        yield


def capture(model: torch.nn.Module, args: tuple, kwargs: dict) -> Captured:
    """Export `model` called with (already narrowed) example `args` / `kwargs`."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(quiet_torch())
        for context in [*tracing_contexts(model), torch.no_grad()]:
            stack.enter_context(context)
        try:
            program = torch.export.export(model, tuple(args), dict(kwargs), strict=False)
            drop_dynamo_marks(program.graph_module)
            program = program.run_decompositions(decompositions())
        except Exception as err:  # noqa: BLE001 - the model's own, or torch's reason
            model_code.reraise_from_model(err, "the model with torch.export")
    check_static_shapes(program.graph_module.graph, model_code.user_line)
    signature = program.graph_signature
    merged, alias_of = tied.merge_exported(program, model)  # one argument per tensor
    arguments, user_index, input_index = [], 0, {}
    for index, spec in enumerate(signature.input_specs):
        if index in merged:
            continue
        if spec.kind == InputKind.USER_INPUT:
            if isinstance(spec.arg, ConstantArgument):  # export specialised the graph on it
                _drop_placeholder(program.graph_module, spec.arg.name)
            else:  # (None is a leaf of the flattened inputs too: it keeps its index)
                arguments.append(Argument("input", str(user_index)))
                input_index[spec.arg.name] = user_index
            user_index += 1
        elif spec.kind == InputKind.PARAMETER:
            arguments.append(Argument("parameter", alias_of.get(spec.target, spec.target)))
        elif spec.kind == InputKind.BUFFER:
            arguments.append(Argument("buffer", alias_of.get(spec.target, spec.target),
                                      bool(spec.persistent)))
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            arguments.append(Argument("constant", spec.target))
        else:
            raise Error(f"unsupported input kind {spec.kind.name} in the captured model",
                        type="capture")
    mutated, mutated_inputs, constant_outputs = [], [], {}
    output = next(node for node in program.graph_module.graph.nodes if node.op == "output")
    values: dict[str, list] = {"buffer": [], "input": [], "output": []}
    for spec, value in zip(signature.output_specs, output.args[0], strict=True):
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
            mutated.append(alias_of.get(spec.target, spec.target))
            values["buffer"].append(value)
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            mutated_inputs.append(input_index[spec.target])
            values["input"].append(value)
        elif spec.kind == OutputKind.USER_OUTPUT and isinstance(value, torch.fx.Node):
            values["output"].append(value)
        elif spec.kind == OutputKind.USER_OUTPUT:
            constant_outputs[len(values["output"]) + len(constant_outputs)] = value
        else:
            raise Error(f"unsupported output kind {spec.kind.name} ('{spec.target}') in the "
                        "captured model", type="capture")
    # the results' order: updated buffers, updated inputs, outputs (export's order too)
    output.args = (tuple(values["buffer"] + values["input"] + values["output"]),)
    program.graph_module.recompile()
    flat, _ = flatten_inputs(args, kwargs)
    return Captured(
        program=program,
        arguments=arguments,
        constants={k: v for k, v in program.constants.items() if isinstance(v, torch.Tensor)},
        mutated_buffers=mutated,
        in_spec=program.call_spec.in_spec,
        out_spec=program.call_spec.out_spec,
        input_meta=[(tuple(t.shape), t.dtype) for t in flat if isinstance(t, torch.Tensor)],
        mutated_inputs=mutated_inputs,
        constant_outputs=constant_outputs,
    )



def _drop_placeholder(gm: torch.fx.GraphModule, name: str) -> None:
    """Remove the placeholder of a non-tensor input (a bool, int, float or string the
    graph was specialised on): it is no argument of the compiled program."""
    node = next(n for n in gm.graph.nodes if n.op == "placeholder" and n.name == name)
    if node.users:
        raise Error(f"the model uses its non-tensor input '{name}' as a value in the graph; "
                    "pass it as a tensor", type="capture")
    gm.graph.erase_node(node)
    gm.recompile()


class AnnotatingNodeImporter(ControlFlowImporter, GraphNodeImporter):
    """Carries `ipu.*` entries of `node.meta["custom"]` in fused-location metadata, with
    the op's module path added to its `ipu.name_scope` unless `module_namescope` is off
    (Options.disableModuleNamescope), and the torch call the op came from (`CALL_KEY`)."""

    module_namescope = True

    def _import_torch_op_overload(self, loc, node, concrete_target=None):
        return super()._import_torch_op_overload(self._annotated(loc, node), node,
                                                 concrete_target)

    def _import_getitem(self, loc, node):
        # list unpacks (torch.split's pieces) become ops too: slices after decomposition
        return super()._import_getitem(self._annotated(loc, node), node)

    def _annotated(self, loc, node):
        """`loc` carrying the node's annotations as fused-location metadata."""
        custom = node.meta.get("custom") or {}
        entries = {k: v for k, v in custom.items() if k.startswith(ANNOTATION_PREFIX)}
        stack = node.meta.get("nn_module_stack") or {}
        if self.module_namescope and stack:
            path = body_module_path(list(stack.values())[-1][0]).removeprefix("model.") \
                .replace(".", "/")
            scope = "/".join(filter(None, [entries.get("ipu.name_scope"), path]))
            if scope:
                entries["ipu.name_scope"] = scope
        call = called_as(node)
        if call:  # the torch call the user wrote, for errors (passes/import_annotations.py)
            entries[CALL_KEY] = call
        if entries:
            metadata = ir.DictAttr.get({k: _attribute(v, self._c) for k, v in entries.items()},
                                       self._c)
            loc = ir.Location.fused([loc], metadata=metadata, context=self._c)
        return loc


def _attribute(value: Any, context: ir.Context) -> ir.Attribute:
    if isinstance(value, bool):
        return ir.BoolAttr.get(value, context)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64, context), value)
    return ir.StringAttr.get(str(value), context)


class DenseLiterals(FxImporterHooks):
    """Import tensor literals (small constants that decompositions make, such as the
    index tensors of group norm) as `dense<...>` rather than `dense_resource<...>`,
    whose data the ipu lowering could not read from Python."""

    def resolve_literal(self, gni, literal, info):
        if not isinstance(literal, torch.Tensor) or literal.numel() <= 1:
            return None  # torch-mlir's own path already makes these dense splats
        array = np.array(literal.tolist()).astype(TORCH_DTYPE_TO_NPY_TYPE[literal.dtype])
        with gni._c:
            attr = ir.DenseElementsAttr.get(array, type=TORCH_DTYPE_TO_MLIR_TYPE[literal.dtype](),
                                            shape=list(literal.shape))
            return ir.Operation.create(
                "torch.vtensor.literal", results=[gni._cc.tensor_to_vtensor_type(literal)],
                attributes={"value": attr}).result


def import_to_mlir(graph_module: torch.fx.GraphModule, context: ir.Context,
                   module_namescope: bool = True) -> ir.Module:
    """A captured (functionalised) graph as a torch-dialect module with one function,
    `@main`, whose arguments are the graph's placeholders in order."""
    node_importer = type("NodeImporter", (AnnotatingNodeImporter,),
                         {"module_namescope": module_namescope})
    importer = FxImporter(context=context, graph_node_importer_cls=node_importer,
                          hooks=DenseLiterals())
    importer.import_graph_module(graph_module, func_name="main")
    return importer.module
