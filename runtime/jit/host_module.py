"""The module the host runs for a program that recomputes: its stages inlined into its
entry, its recomputed values read from the forward ops that computed them first.

The machine model charges a multi-IPU program as the IPUs run it, from the compiled
module: stage by stage, inter-IPU copies over the links, backward stages recomputing
their forward activations (`ipu-recompute`). The host need not repeat that work: one
micro-batch runs all stages in order anyway, so the JIT compiles a copy of the module
where

- each `func.call` of a stage (`ipu.stage`) in the entry is replaced by the stage's ops;
- an `ipu.copy` between IPUs is its operand (its kernel returns it unchanged);
- an op tagged `ipu.recomputed` is replaced by the earlier op it is a clone of (the same
  op, attributes other than placement, operands and result types): the recompute pass
  clones only ops that compute the same values again, a random draw's clone sharing
  its seed modifier (ops that run user code or print are kept). Ops computing the same
  (each stage clones the constants it reads) count as one operand.

A transformer layer pipelined over 2 IPUs recomputed its attention block and first
feed-forward product in the backward stage: 1.40x the CPU time of the one-IPU step of
the same micro-batches (bench/multi_ipu.py's training), 1.05x with this module.

The numbers are the forward's: bit for bit those of the stage-by-stage program for
models whose fused elementwise kernels do not reduce (test_host_module.py) and for the
bench MLP, CNN with batch norm and LSTM. A fused kernel's reduction is vectorised with
reassociation, so its bits can depend on what else the kernel stores, and with the
recomputation gone the forward kernels store the values the backward reads: the bench
transformer layer's and BERT's numbers move, their logits by at most 6e-8 over two
pipelined training steps. Programs
that recompute nothing (sharded, phased, inference, `useRecomputation(False)`) run as
they are. A module with stochastic rounding runs as it is too: each rounding draws
from the device's generator, so its recomputations are not the forward's bits.
"""

from __future__ import annotations

from collections import Counter

from torch_mlir import ir

from poptorch.dialects.creation import RandomNormalOp, RandomUniformOp
from poptorch.dialects.custom import CustomOp, HostCallOp
from poptorch.dialects.placement import PLACEMENT, symbol_table
from poptorch.dialects.structure import (
    AllReduceOp,
    CopyOp,
    HostLoadOp,
    HostStoreOp,
    PrintOp,
    RemoteLoadOp,
    RemoteStoreOp,
)
from poptorch.passes.recompute import SEED_MODIFIER

# attributes saying where an op runs or why it is there, not what it computes
_TAGS = frozenset((*PLACEMENT, "ipu.phase", "ipu.kind", "ipu.backward", "ipu.recomputed"))
RECOMPUTED = "ipu.recomputed"
# ops that are never the same as another: they run user code, print, move data or reduce
# over replicas (their recomputations run too)
_UNIQUE = frozenset(op.OPERATION_NAME for op in (
    CustomOp, HostCallOp, PrintOp, HostLoadOp, HostStoreOp, RemoteLoadOp, RemoteStoreOp,
    AllReduceOp))
# draws that are the same only with the same seed modifier (`ipu-recompute`)
_RANDOM = frozenset(op.OPERATION_NAME for op in (RandomNormalOp, RandomUniformOp))


def _stage_call(op: ir.Operation) -> bool:
    return op.name == "func.call" and "ipu.stage" in op.attributes


def needs_host_module(module: ir.Operation, entry: str) -> bool:
    """Whether the host runs a module of its own: when `module` recomputes values (its
    entry, or the stages it calls), without stochastic rounding (module docstring).
    Other multi-IPU programs run as they are, stage by stage: inlining them saves little
    and can change the bits of fused reductions (module docstring)."""
    if "ipu.stochastic_rounding" in module.attributes:
        return False
    table = symbol_table(module)
    block = table[entry].regions[0].blocks[0]
    called = {_callee(op.operation) for op in block.operations if _stage_call(op.operation)}
    bodies = [block] + [table[name].regions[0].blocks[0] for name in called]
    return any(RECOMPUTED in op.attributes for body in bodies for op in body.operations)


def stage_results(module: ir.Operation, entry: str) -> frozenset[int]:
    """The entry's results (by index) that a stage call returns."""
    block = symbol_table(module)[entry].regions[0].blocks[0]
    returned = list(block.operations)[-1]
    return frozenset(n for n, value in enumerate(returned.operands)
                     if isinstance(value.owner, ir.Operation | ir.OpView)
                     and _stage_call(value.owner.operation))


def host_module(module: ir.Operation, entry: str) -> ir.Operation:
    """A copy of `module` (a detached `builtin.module` the caller erases) as the host runs
    it (module docstring)."""
    copy = module.clone()
    functions = symbol_table(copy)
    block = functions[entry].regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    calls = Counter(_callee(op) for op in ops if _stage_call(op))
    for op in ops:
        if _stage_call(op):  # stages are called only by the entry (ipu-outline-stages)
            name = _callee(op)
            calls[name] -= 1
            _inline(op, functions[name], last=calls[name] == 0)
        elif op.name == CopyOp.OPERATION_NAME:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
    _reuse_forward(block)
    return copy


def _callee(call: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def _inline(call: ir.Operation, callee: ir.Operation, last: bool) -> None:
    """Replace `call` by the body of `callee`: moved there from `callee`, which is then
    erased, at its `last` call, else a clone's."""
    body = callee if last else callee.clone()
    block = body.regions[0].blocks[0]
    for argument, operand in zip(block.arguments, call.operands, strict=True):
        argument.replace_all_uses_with(operand)
    ops = [op.operation for op in block.operations]
    returned = ops.pop()
    for op in ops:
        op.move_before(call)
    for result, value in zip(call.results, returned.operands, strict=True):
        result.replace_all_uses_with(value)
    call.erase()
    body.erase()


def _reuse_forward(block: ir.Block) -> None:
    """Replace each recomputed op by the earlier op computing the same (module docstring).
    Ops computing the same as an earlier one count as one operand, but stay apart:
    equal constants (fusion takes a constant read only by its group as a literal) and
    the same op on them (BERT's attention mask, selected by each stage from the copied
    padding mask, while a recomputed product reads the one of the first stage)."""
    seen: dict[tuple, ir.Operation] = {}
    same: dict[ir.Value, ir.Value] = {}  # a result -> the first equal op's
    for op in list(block.operations):
        op = op.operation
        if len(op.regions) or op.name in _UNIQUE or (
                op.name in _RANDOM and SEED_MODIFIER not in op.attributes):
            continue
        key = (op.name,
               tuple((name, attr) for name, attr in op.attributes.items() if name not in _TAGS),
               tuple(same.get(v, v) for v in op.operands), tuple(r.type for r in op.results))
        earlier = seen.get(key)
        if earlier is None:
            if RECOMPUTED not in op.attributes:
                seen[key] = op
        elif RECOMPUTED in op.attributes:
            for mine, theirs in zip(op.results, earlier.results, strict=True):
                mine.replace_all_uses_with(theirs)
            op.erase()
        else:
            same.update(zip(op.results, earlier.results, strict=True))
