"""ipu-convert-poptorch-ops: PopTorch's own ops (custom ops `torch.poptorch.*`) to ipu ops.

torch-mlir imports torch.library custom ops as opaque `torch.operator`s, which its
backend pipeline rejects, so this runs first, on the freshly imported module: each
`torch.operator "torch.poptorch.<name>"` becomes its ipu op between torch_c casts. So do
the aten ops torch-mlir has no op for that a conversion family lowers (its `OPERATORS`:
antialiased resampling and its gradient, the gradients of weight normalisation, grid
sampling and replication padding), and the torch ops that torch-mlir's backend
pipeline decomposes wrongly (`BEFORE_BACKEND`: RReLU's gradient, fmod). Other opaque
operators are left for
`ipu-check-torch-ops` to report, with the reason a lowering declined them (the
`ipu.unsupported` attribute).

`set_available_memory(x, p)` becomes `x`, its proportion annotating the op producing x
when that is a convolution, matrix product, embedding or indexing op (through views and
Linear's bias addition); elsewhere it is an identity (spec 4.6.9). The annotation rides
in the producer's location metadata as `ipu.available_memory = p : f64`, which survives
torch-mlir's decompositions; `ipu-import-annotations` then puts it on the ipu ops, where
the machine model's cost model reads it.
"""

from __future__ import annotations

import logging

from torch_mlir import ir, rewrite

from poptorch.dialects.ipu import make_bool
from poptorch.dialects.reduction import ReduceOp
from poptorch.dialects.structure import NopOp, PrintOp
from poptorch.dialects.types import Unsupported

from .conversion import BEFORE_BACKEND, OPERATORS, custom
from .conversion.common import Builder, Patterns, decline_key
from .import_annotations import annotate
from .registry import Pass, register

log = logging.getLogger("poptorch.passes")


def nop(op: ir.OpView, b: Builder) -> ir.Value:
    return NopOp(b.tensor(op.operands[0]), b.result_type()).result


def recomputation_checkpoint(op: ir.OpView, b: Builder) -> ir.Value:
    """A value kept (not recomputed) between forward and backward: a tagged ipu.nop."""
    nop_op = NopOp(b.tensor(op.operands[0]), b.result_type())
    nop_op.operation.attributes["ipu.checkpoint"] = ir.UnitAttr.get()
    return nop_op.result


def ipu_print_tensor(op: ir.OpView, b: Builder) -> ir.Value:
    title = ir.StringAttr.get(b.scalar(op.operands[1]))
    return PrintOp(b.tensor(op.operands[0]), title, b.result_type()).result


def identity_loss(op: ir.OpView, b: Builder) -> ir.Value:
    """The loss marker: reduce with its reduction ("none" keeps the tensor as it is)."""
    reduction = b.scalar(op.operands[1])
    x = b.tensor(op.operands[0])
    if reduction == "none" or x.type.rank == 0:
        return x
    if reduction not in ("sum", "mean"):
        raise Unsupported(f"identity_loss reduction '{reduction}'")
    dims = ir.DenseI64ArrayAttr.get(list(range(x.type.rank)))
    return ReduceOp(x, ir.StringAttr.get(reduction), dims, make_bool(False),
                    b.result_type()).result


LOWERINGS = {"torch.poptorch.nop": nop, "torch.poptorch.ipu_print_tensor": ipu_print_tensor,
             "torch.poptorch.identity_loss": identity_loss,
             "torch.poptorch.recomputation_checkpoint": recomputation_checkpoint,
             **custom.LOWERINGS}


UNSUPPORTED = "ipu.unsupported"  # why a lowering declined an opaque aten operator


def lower_operator(op: ir.OpView, b: Builder) -> ir.Value:
    name = op.attributes["name"].value
    lowering = LOWERINGS.get(name) or OPERATORS.get(name)
    if lowering is None:
        raise Unsupported("not a PopTorch op")
    return lowering(op, b)


# torch ops whose temporary memory set_available_memory tunes (spec 4.6.9: convolution,
# matrix multiplication, embedding lookups, indexing operations), and ops looked through
# to find one (views, and the bias addition torch.export splits out of nn.Linear).
AVAILABLE_MEMORY_OPS = frozenset(f"torch.aten.{name}" for name in (
    "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "mm", "bmm", "matmul", "addmm", "baddbmm",
    "linear", "einsum", "embedding", "embedding_bag", "_embedding_bag", "index_select",
    "gather", "index.Tensor", "index_put", "_index_put_impl", "scatter.src", "scatter_add",
    "scatter_reduce.two"))
LOOKED_THROUGH = frozenset({"torch.aten.view", "torch.aten._unsafe_view", "torch.aten.reshape",
                            "torch.aten.add.Tensor"})
SET_AVAILABLE_MEMORY = "torch.poptorch.set_available_memory"


def tuned_producer(value: ir.Value) -> ir.Operation | None:
    """The op set_available_memory on `value` tunes, if any."""
    owner = value.owner
    if not isinstance(owner, ir.OpView):
        return None
    name = owner.operation.name
    if name in AVAILABLE_MEMORY_OPS:
        return owner.operation
    if name in LOOKED_THROUGH:
        for operand in owner.operands:
            if str(operand.type).startswith("!torch.vtensor") and (
                    found := tuned_producer(operand)) is not None:
                return found
    return None


@register
class ConvertPoptorchOps(Pass):
    argument = "ipu-convert-poptorch-ops"
    description = ("Lower PopTorch's custom ops (torch.operator \"torch.poptorch.*\") and "
                   "the aten ops torch-mlir has no op for that we lower to ipu ops")

    def run(self, module: ir.Operation) -> None:
        for op in self.walk(module):
            if op.name == "torch.operator" and op.attributes["name"].value == SET_AVAILABLE_MEMORY:
                self.set_available_memory(op)
        patterns = Patterns()
        patterns.lower("torch.operator", lower_operator)
        for name, lowering in BEFORE_BACKEND.items():
            patterns.lower(name, lowering)
        rewrite.apply_patterns_and_fold_greedily(module, patterns.set.freeze())
        if not patterns.declined:
            return
        for op in self.walk(module):
            if op.name == "torch.operator" and op.attributes["name"].value in OPERATORS:
                reason = patterns.declined.get(decline_key(op))
                if reason is not None:
                    op.attributes[UNSUPPORTED] = ir.StringAttr.get(reason)

    def set_available_memory(self, op: ir.Operation) -> None:
        """Annotate the tuned producer (if any) and forward the tensor."""
        try:
            proportion = Builder(op).scalar(op.operands[1])
        except Unsupported:
            proportion = None
        if isinstance(proportion, bool) or not isinstance(proportion, int | float):
            raise self.error(op, "set_available_memory needs a constant proportion")
        if not 0.0 <= proportion <= 1.0:
            raise self.error(op, f"available memory proportion {proportion} is not between "
                                 "0.0 and 1.0")
        producer = tuned_producer(op.operands[0])
        if producer is None:
            log.debug("set_available_memory at %s: the tensor does not come from a "
                      "convolution, matrix product, embedding or indexing op; an identity",
                      op.location)
        else:
            annotate(producer, "ipu.available_memory",
                     ir.FloatAttr.get(ir.F64Type.get(op.context), float(proportion),
                                       loc=op.location))
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()
