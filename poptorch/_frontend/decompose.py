"""The decomposition table of the capture, and running it on an exported program.

`decompositions()` is torch-mlir's table plus ours. `decompose(program)` has the effect
of `program.run_decompositions(decompositions())` at a fraction of its cost.

Why not `run_decompositions` itself: for a plain-dict table it splits the table anew and
then overrides the CompositeImplicitAutograd (CIA) kernel of every functional CIA op
torch knows (about 500 with this table: the table's decomposition for those in it,
"keep it whole" for the rest) for the length of one retrace. Patching is torch's
`OperatorBase.py_impl`, which builds typing generics on every call: measured 0.5-0.8 s
for each capture of a one-Linear model (of about 1 s in all), on torch 2.13.0. Only
the CIA ops that are in the exported graph can be met in the retrace's first step, so
`decompose` overrides those alone: each gets the table's decomposition, or is kept
whole, exactly as `run_decompositions` would; the split of the table is computed once.

The one difference: a CIA op that appears only inside the decomposition of another op
is decomposed by its own CIA kernel rather than by the table (aot autograd's path for
every CIA op, the one training captures already take), and one of the ops torch-mlir
keeps whole (`rms_norm`, `isfinite`, `one_hot`, the FFTs...) is decomposed too if it
appears only that way. `_decompose_exported_program` is private to torch; torch is
pinned to 2.13.0 (pyproject), and `test_decompose.py` checks the two routes agree.
"""

from __future__ import annotations

import functools
import math

import torch
from torch.export import exported_program
from torch_mlir.extras.fx_decomp_util import get_decomposition_table

from poptorch._frontend.attention_decompositions import attention_decompositions
from poptorch._frontend.norm_decompositions import norm_decompositions
from poptorch._frontend.reduction_decompositions import reduction_decompositions


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
    table.update(attention_decompositions(table))  # half softmax, attention stay half
    return table


@functools.cache
def _split() -> tuple[dict, dict]:
    """(CIA op -> its decomposition or torch's keep-whole marker, the other ops' table),
    as `run_decompositions` splits `decompositions()`."""
    return exported_program._split_decomp_table_to_cia_and_python_decomp(decompositions())


def _graph_ops(program: torch.export.ExportedProgram) -> set:
    """Every op the program calls, in nested graphs (control-flow bodies) too."""
    return {node.target for module in program.graph_module.modules()
            if isinstance(module, torch.fx.GraphModule)
            for node in module.graph.nodes if node.op == "call_function"}


def decompose(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """`program.run_decompositions(decompositions())`, overriding only the graph's own
    CIA ops (the module docstring says why and what differs)."""
    cia, python_table = _split()
    used = _graph_ops(program)
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        return exported_program._decompose_exported_program(
            program, cia_to_decomp={op: fn for op, fn in cia.items() if op in used},
            python_decomp_table=dict(python_table), joint_loss_index=None,
            decompose_custom_triton_ops=False)
