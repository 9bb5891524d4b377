"""The cost model: the cycles, exchange and temporary memory of one ipu op on a `Machine`.

`op_cost(op, machine, proportion)` plans one ipu op as PopLibs would, in BSP steps, and
returns `OpCost(compute, exchange, sync, temporary_bytes)`. The rule comes from
`COST_RULES`, keyed by the op's class (`poptorch.dialects.op_class`); the formulas of
each family's rule are in the `cost_families` module docstring. The available memory
proportion p (spec 4.6.9; default 0.6; an op's own `ipu.available_memory` attribute,
from `poptorch.set_available_memory`, wins) caps the temporary memory of AMP ops and
gathers: lower p, fewer temporary bytes, more exchange steps.

An op whose results are all empty costs nothing: there is no work (zero-size work, see
`cost_families`). Ops in `COST_EXEMPT` cost nothing here, each for the reason given there (views,
constants, markers, and transfers or collectives that the timeline charges with
`copy_cycles`, `host_cycles`, `streaming_cycles`, `collective_cycles`). An ipu op with
neither a rule nor an exemption is an error, not a default cost. Ops of other dialects
(`func.return`, `func.call`, whose callee the timeline costs op by op, the torch/builtin
casts) cost nothing here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.convolution import (
    AdaptiveAvgPoolOp,
    AdaptiveMaxPoolOp,
    AvgPoolOp,
    ConvOp,
    ConvTransposeOp,
    MaxPoolOp,
    MaxPoolWithIndicesOp,
    PadOp,
    UpsampleNearestOp,
)
from poptorch.dialects.convolution_backward import (
    AdaptiveAvgPoolGradOp,
    AdaptiveMaxPoolWithIndicesOp,
    AvgPoolGradOp,
    ConvWeightGradOp,
    MaxPoolGradOp,
)
from poptorch.dialects.creation import ConstantOp, IotaOp, RandomNormalOp, RandomUniformOp
from poptorch.dialects.ctc import CtcBeamSearchDecoderOp
from poptorch.dialects.custom import CustomOp, HostCallOp
from poptorch.dialects.data_movement import (
    BroadcastOp,
    ConcatOp,
    PermuteOp,
    ReshapeOp,
    SliceOp,
)
from poptorch.dialects.elementwise import (
    BINARY_OPS,
    COMPARE_OPS,
    UNARY_OPS,
    CastOp,
    SelectOp,
)
from poptorch.dialects.indexing import (
    DiagonalOp,
    EmbeddingBagOp,
    FlipOp,
    GatherOp,
    IndexOp,
    IndexPutOp,
    IndexSelectOp,
    ScatterOp,
    SliceUpdateOp,
    SortOp,
)
from poptorch.dialects.linear import MatMulOp
from poptorch.dialects.matmul_serialization import SerializedMatMulOp
from poptorch.dialects.optimizer import (
    AdamStepOp,
    LambStepOp,
    RmspropStepOp,
    SgdMomentumStepOp,
    SgdStepOp,
)
from poptorch.dialects.reduction import ArgMaxOp, ArgMinOp, CumprodOp, CumsumOp, ReduceOp
from poptorch.dialects.slicing import DynamicSliceOp, DynamicUpdateOp
from poptorch.dialects.structure import (
    AllReduceOp,
    CopyOp,
    HostLoadOp,
    HostStoreOp,
    NopOp,
    PrintOp,
    RemoteLoadOp,
    RemoteStoreOp,
)
from poptorch.errors import Error
from poptorch.runtime.machine import cost_conv, cost_user
from poptorch.runtime.machine import cost_families as family
from poptorch.runtime.machine import cost_multiconv as multiconv
from poptorch.runtime.machine.cost_ctc import ctc_beam_search_decoder
from poptorch.runtime.machine.cost_matmul import matmul
from poptorch.runtime.machine.cost_serialized import serialized_matmul
from poptorch.runtime.machine.plan import OpCost, Plan
from poptorch.runtime.machine.system import DEFAULT_AVAILABLE_MEMORY, GC200, Machine

__all__ = ["COST_EXEMPT", "COST_RULES", "CostMemo", "OpCost", "op_cost", "op_cycles",
           "op_proportion"]

CostRule = Callable[[Plan], OpCost]

ADD, MUL, MAX = family.ADD, family.MUL, family.MAX
SQRT, DIV = UNARY_OPS["sqrt"], BINARY_OPS["div"]


def _passes(*counts: tuple[type, int]) -> CostRule:
    """The optimizer rule for an update made of `count` passes of each elementwise op."""
    return functools.partial(family.optimizer,
                             passes=tuple(op for op, count in counts for _ in range(count)))


_MOVEMENT = functools.partial(family.movement, receives="result")
_AVERAGE = functools.partial(family.pool, step=ADD)
_MAXIMUM = functools.partial(family.pool, step=MAX)

COST_RULES: dict[type, CostRule] = {
    # elementwise: at the op's own vector rate (plan.VECTOR_RATES)
    **dict.fromkeys((*UNARY_OPS.values(), *BINARY_OPS.values(), *COMPARE_OPS.values(),
                     SelectOp, CastOp), family.elementwise),
    # AMP ops: a batch of (M x K) @ (K x N) products, dims per op
    MatMulOp: matmul,  # poplin's 1x1 conv vertex (cost_matmul)
    ConvOp: multiconv.conv,  # plain, or grouped by poptorch.MultiConv (cost_multiconv)
    # the input and weight gradients: poplin's conv vertices, as the forward (cost_conv)
    ConvTransposeOp: cost_conv.conv,
    ConvWeightGradOp: cost_conv.conv,
    # factor slices of an AMP op in sequence (cost_serialized)
    SerializedMatMulOp: serialized_matmul,
    # popnn::ctc_infer: a beam search step per time step (cost_ctc)
    CtcBeamSearchDecoderOp: ctc_beam_search_decoder,
    # gathers and scatters
    **dict.fromkeys((GatherOp, IndexSelectOp, IndexOp, EmbeddingBagOp, ScatterOp,
                     IndexPutOp), family.gather),
    # popops::dynamicSlice / dynamicUpdate: each tile copies its share of the slice at
    # the offset it receives (the DynamicSlice2d vertex), as a gather of one index
    **dict.fromkeys((DynamicSliceOp, DynamicUpdateOp), family.gather),
    # reductions (the `kind` attribute picks the vector rate)
    **dict.fromkeys((ReduceOp, ArgMaxOp, ArgMinOp), family.reduce),
    # scans: log2(n) passes of their step
    SortOp: functools.partial(family.scan, step=MAX),
    CumsumOp: functools.partial(family.scan, step=ADD),
    CumprodOp: functools.partial(family.scan, step=MUL),
    # data movement: a copy of the result share
    **dict.fromkeys((SliceOp, ConcatOp, PadOp, FlipOp, DiagonalOp,
                     UpsampleNearestOp, SliceUpdateOp), _MOVEMENT),
    PermuteOp: family.permute,  # a view of a pre-arranged operand, else a copy
    BroadcastOp: family.broadcast,  # a view of a pre-arranged operand, else a copy
    **dict.fromkeys((IotaOp, RandomUniformOp),
                    functools.partial(family.movement, receives="nothing")),
    # poprand::normal: the tile's generator makes gaussians as it makes uniforms
    # (f32v2grand beside urand64 in the IPU's instruction set), so at the same rate
    RandomNormalOp: functools.partial(family.movement, receives="nothing"),
    # window ops
    **dict.fromkeys((AvgPoolOp, AdaptiveAvgPoolOp, AvgPoolGradOp, AdaptiveAvgPoolGradOp),
                    _AVERAGE),
    **dict.fromkeys((MaxPoolOp, MaxPoolWithIndicesOp, AdaptiveMaxPoolOp, MaxPoolGradOp,
                     AdaptiveMaxPoolWithIndicesOp), _MAXIMUM),
    # optimizer updates: passes of elementwise ops over the weights
    SgdStepOp: _passes((MUL, 3)),
    SgdMomentumStepOp: _passes((MUL, 6)),
    AdamStepOp: _passes((MUL, 8), (SQRT, 1), (DIV, 1)),
    RmspropStepOp: _passes((MUL, 7), (SQRT, 1), (DIV, 1)),
    LambStepOp: _passes((MUL, 12), (SQRT, 1), (DIV, 1), (SQRT, 2)),
    # user code: the registered cost of a custom op, host transfers of a callback
    CustomOp: cost_user.custom,
    HostCallOp: cost_user.host_call,
}

COST_EXEMPT: dict[type, str] = {
    ReshapeOp: "a view: Poplar reshapes a tensor without moving its data",
    ConstantOp: "data loaded with the program; the memory estimate counts it as a weight",
    NopOp: "the identity: its result is its operand",
    PrintOp: "a debugging copy to the host, not modelled (poptorch.ipu_print_tensor)",
    CopyOp: "an IPU-Link transfer: the timeline charges it with copy_cycles",
    HostLoadOp: "host I/O: the timeline charges each streamed input with host_cycles",
    HostStoreOp: "host I/O: the timeline charges each streamed output with host_cycles",
    RemoteLoadOp: "a Streaming Memory load: the timeline charges it with streaming_cycles",
    RemoteStoreOp: "a Streaming Memory store: the timeline charges it with "
                   "streaming_cycles",
    AllReduceOp: "a replica collective: the step's epilogue charges it with "
                 "collective_cycles",
}


def cost_rule(op: ir.Operation) -> CostRule | None:
    """The rule of an ipu op, None for an exempt op or an op of another dialect; an
    error naming the op when an ipu op has neither."""
    kind = op_class(op)
    if kind is None:
        return None
    rule = COST_RULES.get(kind)
    if rule is None and kind not in COST_EXEMPT:
        raise Error(f"the cost model has no rule for '{op.name}' ({kind.__name__}): add "
                    "one to COST_RULES, or the reason it costs nothing to COST_EXEMPT, in "
                    "poptorch/runtime/machine/cost.py", type="runtime")
    return rule


def op_proportion(op: ir.Operation | ir.OpView, proportion: float | None) -> float:
    """The available memory proportion for `op`: its own `ipu.available_memory`
    (poptorch.set_available_memory), else `proportion`, else the default 0.6."""
    op = op.operation
    if "ipu.available_memory" in op.attributes:
        return ir.FloatAttr(op.attributes["ipu.available_memory"]).value
    return DEFAULT_AVAILABLE_MEMORY if proportion is None else proportion


def op_cost(op: ir.Operation | ir.OpView, machine: Machine = GC200,
            proportion: float | None = None, *, io_tiles: int = 0) -> OpCost:
    """The plan of one ipu op on one IPU (module docstring; formulas: `cost_families`).

    `proportion` is the IPU's available memory proportion (Options
    .setAvailableMemoryProportion, default 0.6); `io_tiles` are kept out of compute.
    """
    op = op.operation
    rule = cost_rule(op)
    if rule is None:
        return OpCost()
    plan = Plan(op, machine, machine.compute_tiles(io_tiles), op_proportion(op, proportion))
    if plan.out_shapes and all(0 in shape for shape in plan.out_shapes):
        return OpCost()  # empty results: no work (cost_families: zero-size work)
    return rule(plan)


class CostMemo:
    """`op_cost`, computed once per (op, machine, proportion, io_tiles): a compiled
    module's timeline and memory estimate ask for every op's cost, and training's
    timeline again with the step's epilogue (a third of an LSTM's warm-cache compile).
    Keep it no longer than the module it has seen, which must not change meanwhile."""

    def __init__(self) -> None:
        self._costs: dict[tuple, OpCost] = {}

    def __call__(self, op: ir.Operation | ir.OpView, machine: Machine = GC200,
                 proportion: float | None = None, *, io_tiles: int = 0) -> OpCost:
        key = (op.operation, machine, proportion, io_tiles)
        cost = self._costs.get(key)
        if cost is None:
            cost = self._costs[key] = op_cost(op, machine, proportion, io_tiles=io_tiles)
        return cost


def op_cycles(op: ir.Operation | ir.OpView, machine: Machine = GC200) -> int:
    """Cycles of one ipu op on one IPU with the default available memory proportion."""
    return op_cost(op, machine).cycles
