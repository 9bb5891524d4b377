"""What each ipu op means to the memory estimate (`MEMORY_RULES`, keyed by op class), and
the vertex code and state of a function's ops (`code_bytes`).

A `MemoryRule` says what the op's results are and whether it runs code:

- `ALLOCATES`: its results are new activations, live from the op to their last use, and
  it runs a compute set (vertex code and state, `code_bytes`). The honest rule of almost
  every op: the estimate knows nothing more of an op than its results and, injected by
  the caller, its cost rule's `temporary_bytes` (which every op has; 0 for the cost
  model's exemptions).
- `VIEW`: PopTorch lowers the op to a Poplar tensor view (`reshape`, `dimShuffle`,
  `broadcast`, `slice`, `poplar::concat`; graphcore/poptorch,
  poptorch_compiler/lower_to_poplar/ops/Reshapes.cpp and TensorOps.cpp): its result
  allocates nothing and keeps its operands' buffers alive; no code.
- `CONSTANT`: its result is a weight (in the binary, always live); no code. A splat
  constant (every element the same: the zeros torch's backward starts a sum from) is
  one value, not a dense tensor: Poplar makes it with `graph.addConstant` of a single
  value; we count that element once on each tile the tensor would spread over
  (`constant_bytes`).

`MEMORY_EXEMPT` names the op classes the estimate deliberately leaves out, with the
reason (none today): their results take no buffer and they run no code. Ops of other
dialects (`func.call` inside a function, the torch/builtin casts) allocate their results
and run no code here (`OTHER_DIALECTS`); `func.return` ends a function's liveness walk.
An ipu op with neither a rule nor an exemption is an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from torch_mlir import ir

from poptorch.dialects import convolution, convolution_backward, indexing, op_class, optimizer
from poptorch.dialects import reduction as reductions
from poptorch.dialects import slicing as slicing_ops
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
from poptorch.dialects.linear import MatMulOp
from poptorch.dialects.matmul_serialization import SerializedMatMulOp
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
from poptorch.runtime.machine.system import spread, value_bytes


@dataclass(frozen=True)
class MemoryRule:
    """What an op's results are to the liveness walk, and whether it runs code."""

    results: str  # "activations" (new buffers) | "views" (its operands') | "weights"
    code: bool  # vertex code and state on the tiles it runs on (`code_bytes`)


ALLOCATES = MemoryRule("activations", code=True)
VIEW = MemoryRule("views", code=False)
CONSTANT = MemoryRule("weights", code=False)
OTHER_DIALECTS = MemoryRule("activations", code=False)

MEMORY_RULES: dict[type, MemoryRule] = {
    **dict.fromkeys((*UNARY_OPS.values(), *BINARY_OPS.values(), *COMPARE_OPS.values(),
                     SelectOp, CastOp), ALLOCATES),
    MatMulOp: ALLOCATES,
    SerializedMatMulOp: ALLOCATES,
    CtcBeamSearchDecoderOp: ALLOCATES,  # its temporary: one slice's (cost_serialized)
    **dict.fromkeys((
        convolution.ConvOp, convolution.ConvTransposeOp, convolution.MaxPoolOp,
        convolution.MaxPoolWithIndicesOp, convolution.AvgPoolOp,
        convolution.AdaptiveMaxPoolOp, convolution.AdaptiveAvgPoolOp, convolution.PadOp,
        convolution.UpsampleNearestOp), ALLOCATES),
    **dict.fromkeys((
        convolution_backward.ConvWeightGradOp, convolution_backward.MaxPoolGradOp,
        convolution_backward.AvgPoolGradOp, convolution_backward.AdaptiveAvgPoolGradOp,
        convolution_backward.AdaptiveMaxPoolWithIndicesOp), ALLOCATES),
    **dict.fromkeys((
        indexing.GatherOp, indexing.IndexSelectOp, indexing.IndexOp, indexing.IndexPutOp,
        indexing.ScatterOp, indexing.SortOp, indexing.FlipOp, indexing.DiagonalOp,
        indexing.SliceUpdateOp, indexing.EmbeddingBagOp), ALLOCATES),
    **dict.fromkeys((
        reductions.ReduceOp, reductions.ArgMaxOp, reductions.ArgMinOp,
        reductions.CumsumOp, reductions.CumprodOp), ALLOCATES),
    **dict.fromkeys((
        optimizer.SgdStepOp, optimizer.SgdMomentumStepOp, optimizer.AdamStepOp,
        optimizer.RmspropStepOp, optimizer.LambStepOp), ALLOCATES),
    **dict.fromkeys((slicing_ops.DynamicSliceOp, slicing_ops.DynamicUpdateOp), ALLOCATES),
    IotaOp: ALLOCATES,
    RandomUniformOp: ALLOCATES,
    RandomNormalOp: ALLOCATES,
    ConstantOp: CONSTANT,
    **dict.fromkeys((ReshapeOp, PermuteOp, BroadcastOp, SliceOp, ConcatOp), VIEW),
    # Structure ops: their results (a tensor received from another IPU, the host or
    # Streaming Memory, a reduced tensor, nop's and print's copies; neither of the last
    # two is a Poplar view) are new buffers, and each runs a program on the IPU.
    **dict.fromkeys((CopyOp, HostLoadOp, HostStoreOp, AllReduceOp, RemoteStoreOp,
                     RemoteLoadOp, NopOp, PrintOp), ALLOCATES),
    # user code: a custom op's results are new buffers and it runs a compute set; a
    # host call's results arrive from the host into new buffers
    **dict.fromkeys((CustomOp, HostCallOp), ALLOCATES),
}

MEMORY_EXEMPT: dict[type, str] = {}


def memory_rule(op: ir.Operation) -> MemoryRule | None:
    """The rule of `op` (`OTHER_DIALECTS` for an op of another dialect), None for an
    exempt ipu op; an error naming an ipu op with neither."""
    kind = op_class(op)
    if kind is None:
        return OTHER_DIALECTS
    rule = MEMORY_RULES.get(kind)
    if rule is None and kind not in MEMORY_EXEMPT:
        raise Error(f"the memory estimate has no rule for '{op.name}' ({kind.__name__}): "
                    "add one to MEMORY_RULES, or the reason it is left out to "
                    "MEMORY_EXEMPT, in poptorch/runtime/machine/op_memory.py",
                    type="runtime")
    return rule


# Code and vertex state per op, per tile the op runs on. Graphcore publishes no per-op
# figure (a compiled Poplar profile's memory report is the measurement to replace them);
# what each figure is based on:
# - VERTEX_FIELD_BYTES: each operand and result is one vertex field, a `SPAN` vector: a
#   32-bit pointer and a 32-bit element count, as poplibs' assembly codelets read them
#   (graphcore/poplibs lib/popops/codelets/asm/ScaledAdd2D_float.S, VERTEX_COMMON: the
#   pointer and the size of field A at state words 0 and 1, `VERTEX_DATA_A_OFFSET` /
#   `VERTEX_DATA_A_SIZE_OFFSET`, and each SPAN edge as two ld32step words). A field laid
#   out ONE_PTR or SHORT_SPAN (20-bit pointer and 12-bit count, CommonPoplibsMacros.h.S)
#   takes 4: 8 is the larger layout.
# - CONTROL_BYTES_PER_OP: an assumption, 16 supervisor instructions of 4 bytes (the
#   IPU's instructions are 32 bits, paired into 64-bit bundles: Graphcore's Tile Vertex
#   ISA document, and the `{...}` pairs of poplibs' assembly codelets) to run the op's
#   compute set on a tile: its sync, the call, the workers' start with their vertex
#   state, the exchange's send and receive set-up.
# - CODELET_BYTES: an assumption sized on poplibs' hand-written codelets: their 195
#   assembly files (graphcore/poplibs lib/*/codelets/asm/*.S) hold a median of 99
#   instructions (quartiles 45 and 158), 396 bytes at 4 bytes an instruction, and an op
#   runs one to a few codelets (a matmul: the AMP partials vertex, the partials'
#   reduction, the output cast); 1 KiB is 2.6 median codelet files, on every tile the
#   op runs on.
VERTEX_FIELD_BYTES = 8
CONTROL_BYTES_PER_OP = 64
CODELET_BYTES = 1024


def is_splat(op: ir.Operation) -> bool:
    """An `ipu.constant` whose elements are all the same value."""
    value = op.attributes["value"]
    return isinstance(value, ir.DenseElementsAttr) and value.is_splat


def constant_bytes(op: ir.Operation, tiles: int) -> int:
    """Bytes of an `ipu.constant`: its whole tensor, or for a splat one element on each
    tile the tensor spreads over (module docstring)."""
    result = op.results[0]
    if is_splat(op):
        element = value_bytes(result) // max(1, math.prod(ir.ShapedType(result.type).shape))
        return element * tiles_of(value_bytes(result), tiles)
    return value_bytes(result)


def tiles_of(nbytes: int, tiles: int) -> int:
    """Tiles a tensor of `nbytes` spreads over: at least 128 bytes a tile, from tile 0 up
    (poplibs' linear tile mapping, `system.spread`)."""
    return spread(nbytes, 1, tiles)


def on_tile(nbytes: int, tiles: int) -> int:
    """Bytes of the tensor on its first (fullest) tile."""
    return math.ceil(nbytes / tiles_of(nbytes, tiles))


def outline_signature(op: ir.Operation) -> tuple:
    """What makes two ops the same compute set once outlined: the op, its operand and
    result types, its attributes other than placement (`ipu.*`: the block, stage, IPU,
    recomputation marks)."""
    named = (op.attributes[i] for i in range(len(op.attributes)))
    attributes = tuple(sorted((a.name, str(a.attr)) for a in named
                              if not a.name.startswith("ipu.")))
    return (op.name, tuple(str(v.type) for v in (*op.operands, *op.results)), attributes)


def code_bytes(ops: Sequence[ir.Operation], tiles: int) -> tuple[int, int]:
    """(bytes on the IPU, bytes on tile 0) of vertex code and state for `ops`: per
    distinct op (`outline_signature`: PopART outlines repeated identical parts of the
    graph into one subgraph called where each was, graphcore/popart SessionOptions
    `enableOutlining`, on by default, so BERT's identical layers share their compute
    sets, vertex state and control code; so do a forward op and its recomputation)
    whose rule runs code, per tile its largest tensor spreads over, one vertex field
    per operand and result and the control code; per distinct op name, its codelet on
    the tiles it runs on (constants above)."""
    total = first = 0
    codelets: dict[str, int] = {}
    outlined: set[tuple] = set()
    for op in ops:
        rule = memory_rule(op)
        if rule is None or not rule.code:
            continue
        signature = outline_signature(op)
        if signature in outlined:
            continue
        outlined.add(signature)
        values = [*op.operands, *op.results]
        spread_over = tiles_of(max((value_bytes(v) for v in values), default=0), tiles)
        per_tile = VERTEX_FIELD_BYTES * len(values) + CONTROL_BYTES_PER_OP
        total += spread_over * per_tile
        first += per_tile
        codelets[op.name] = max(codelets.get(op.name, 0), spread_over)
    return (total + CODELET_BYTES * sum(codelets.values()),
            first + CODELET_BYTES * len(codelets))
