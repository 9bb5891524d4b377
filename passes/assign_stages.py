"""ipu-assign-stages: blocks -> pipeline stages and IPUs, as `ipu.stage = #ipu.stage<s, i>`.

Reads the `ipu.block` / `ipu.ipu_id` annotations that poptorch.Block, BlockFunction and
BeginBlock leave on every op (spec 4.4.1) and gives each annotated op its stage and IPU:
from an explicit `stages` map (poptorch.Stage: "A=0:0,B=1:1", block=stage:ipu), or by
AutoStage (`auto-stage=same-as-ipu`, the default: stage = ipu; `auto-increment`: a new
stage per block in program order). Checks from the spec: with a pipeline, stage ids
must ascend in program order; a stage may not name a block that does not exist; once
blocks are used, every computing op must be in one. A pipeline's consecutive blocks on
one IPU are then one stage, as PopTorch merges them (stages renumbered 0, 1, ... at each
change of IPU).
"""

from __future__ import annotations

import re

from torch_mlir import ir

from poptorch.dialects import stage_attr
from poptorch.dialects.ipu import i64
from poptorch.dialects.placement import NEUTRAL, producer

from .registry import ID, MAX_ID, Option, Pass, register


def _block_of(op: ir.Operation) -> tuple[str, int | None] | None:
    """(block key, ipu id) of an annotated op, or None."""
    attrs = op.attributes
    block = attrs["ipu.block"].value if "ipu.block" in attrs else None
    ipu = None
    if "ipu.ipu_id" in attrs:
        raw = attrs["ipu.ipu_id"]
        ipu = raw.value if isinstance(raw, ir.IntegerAttr) else raw.value
    if block is None and ipu is None:
        return None
    return (block if block is not None else f"ipu{ipu}"), ipu


@register
class AssignStages(Pass):
    argument = "ipu-assign-stages"
    description = "Give every op in a block its pipeline stage and IPU (#ipu.stage)"
    options = (
        Option("stages", str, "", "Explicit stages as block=stage:ipu,... (poptorch.Stage)",
               item=rf"[^=,:{{}}\s]+={ID}(?::{ID}(?::{ID})?)?",
               item_help="block=stage[:ipu[:phase]] items (e.g. A=0:0,B=1:1)",
               item_max=MAX_ID),
        Option("auto-stage", str, "same-as-ipu",
               "Without stages: same-as-ipu or auto-increment (poptorch.AutoStage)"),
        Option("pipelined", bool, True, "Check that stage ids ascend (PipelinedExecution)"),
        Option("auto-round-num-ipus", bool, False,
               "Allow a number of IPUs that is not a power of two (autoRoundNumIPUs)"),
        Option("phase-ipus", str, "", "The IPUs of each Phase as phase=ipu/ipu,... "
                                      "(Phase.ipus), checked against its stages",
               item=rf"{ID}={ID}(?:/{ID})*",
               item_help="phase=ipu/ipu/... items (e.g. 0=0/1,1=2/3)", item_max=MAX_ID),
        Option("parallel-phased", bool, False,
               "Check ParallelPhasedExecution's rule: even phases on even IPUs"),
    )

    def run(self, module: ir.Operation) -> None:
        annotated = [(op, _block_of(op)) for op in self.walk(module)]
        if not any(block for _, block in annotated):
            return
        for op, block in annotated:
            if (block is None and not op.name.startswith(NEUTRAL)
                    and "ipu.backward" not in op.attributes):
                raise self.error(op, f"'{op.name}' is outside every Block; once a model uses "
                                     "blocks, put every layer inside a poptorch.Block or "
                                     "after a poptorch.BeginBlock")
        self.phases: dict[str, int] = {}
        placement = self._placement([(op, b) for op, b in annotated if b is not None])
        self._check_ipus(module, placement)
        keys = {op: block[0] for op, block in annotated if block is not None}
        _inherit_backward([op for op, block in annotated if block is None
                           and "ipu.backward" in op.attributes], keys,
                          {op: n for n, (op, _) in enumerate(annotated)})
        for op, key in keys.items():
            op.attributes["ipu.stage"] = stage_attr(*placement[key])
            if key in self.phases:
                op.attributes["ipu.phase"] = i64(self.phases[key])

    def _check_ipus(self, module: ir.Operation, placement) -> None:
        """Power-of-two IPU counts and the phased strategies' rules."""
        used = max(ipu for _, ipu in placement.values()) + 1
        if used & (used - 1) and not self.auto_round_num_ipus:
            last = next(k for k, (_, ipu) in placement.items() if ipu == used - 1)
            raise self.error(self.first_op.get(last, module),
                             f"the model uses {used} IPUs, which is not a power of 2; IPUs "
                             f"are reserved in powers of 2: place the blocks on "
                             f"{1 << used.bit_length()} IPUs or set "
                             "Options.autoRoundNumIPUs(True)")
        stages_of: dict[int, set[int]] = {}
        for key, phase in self.phases.items():
            stages_of.setdefault(phase, set()).add(placement[key][0])
            ipu = placement[key][1]
            if self.parallel_phased and phase % 2 != ipu % 2:
                parity = "even" if phase % 2 == 0 else "odd"
                raise self.error(self.first_op.get(key, module),
                                 f"ParallelPhasedExecution runs {parity} phases on {parity} "
                                 f"IPUs, but block '{key}' of phase {phase} is on IPU {ipu}; "
                                 f"move it to an {parity} IPU")
        for item in filter(None, self.phase_ipus.split(",")):
            phase, _, ipus = item.partition("=")
            count, stages = len(ipus.split("/")), len(stages_of.get(int(phase), ()))
            if count != stages:
                where = next((self.first_op[k] for k, p in self.phases.items()
                              if p == int(phase) and k in self.first_op), module)
                raise self.error(where, f"phase {phase} has {_plural(stages, 'stage')} but its "
                                        f"ipus() lists {_plural(count, 'IPU')}; give one IPU "
                                        "per stage of the Phase")

    def _placement(self, annotated) -> dict[str, tuple[int, int]]:
        """block key -> (stage, ipu), checked."""
        order: list[str] = []
        first_op: dict[str, ir.Operation] = {}
        ipus: dict[str, int] = {}
        self.first_op = first_op
        # program order is that of the forward computation: canonicalize hoists
        # constants to the top, and the backward runs the blocks in reverse
        ranked = sorted(annotated, key=lambda item: not _computes_forward(item[0]))
        for op, (key, ipu) in ranked:
            if key not in first_op:
                order.append(key)
                first_op[key] = op
            if ipu is not None:
                ipus[key] = self._ipu(op, key, ipu)
        if self.stages:
            placement = self._explicit(order, first_op)
        elif self.auto_stage == "auto-increment":
            placement = {key: (n, ipus.get(key, 0)) for n, key in enumerate(order)}
        elif self.auto_stage == "same-as-ipu":
            placement = {key: (ipus.get(key, 0), ipus.get(key, 0)) for key in order}
        else:
            raise self.error(first_op[order[0]], f"auto-stage must be same-as-ipu or "
                                                 f"auto-increment, got '{self.auto_stage}'")
        if self.pipelined:
            for earlier, later in zip(order, order[1:], strict=False):
                if placement[later][0] < placement[earlier][0]:
                    raise self.error(
                        first_op[later],
                        f"stage ids must ascend in PipelinedExecution: block '{later}' "
                        f"(stage {placement[later][0]}) runs after block '{earlier}' (stage "
                        f"{placement[earlier][0]}); use AutoStage.AutoIncrement or give "
                        "later blocks higher stages")
            if not self.phases:
                placement = _merge_consecutive(order, placement)
        return placement

    def _explicit(self, order, first_op) -> dict[str, tuple[int, int]]:
        placement = {}
        for item in self.stages.split(","):
            name, _, where = item.partition("=")
            stage, _, where = where.partition(":")
            ipu, _, phase = where.partition(":")
            if phase:
                self.phases[name] = int(phase)
            if name not in first_op:
                raise self.error(first_op[order[0]],
                                 f"Unknown Block '{name}': a Stage names it, but it does "
                                 f"not exist; the model's blocks are {', '.join(order)}")
            placement[name] = (int(stage), int(ipu or stage))
        missing = [key for key in order if key not in placement]
        if missing:
            raise self.error(first_op[missing[0]], f"block '{missing[0]}' is in no Stage; add "
                                                   "it to one")
        return placement

    def _ipu(self, op: ir.Operation, key: str, ipu) -> int:
        """The IPU of an `ipu.ipu_id` annotation (poptorch.Block's ipu_id): an id from 0
        to MAX_ID, as in the `stages` option (the schedule keeps state per IPU)."""
        if isinstance(ipu, int) and not isinstance(ipu, bool):
            number = ipu
        elif re.fullmatch(r"[0-9]{1,19}", str(ipu)):
            number = int(str(ipu))
        else:
            raise self.error(op, f"ipu_id '{ipu}' is not an IPU number")
        if not 0 <= number <= MAX_ID:
            raise self.error(op, f"block '{key}' has ipu_id {number}, but IPU ids go from 0 to "
                                 f"{MAX_ID}; give its poptorch.Block (or BeginBlock, "
                                 "BlockFunction) an ipu_id in that range")
        return number


def _merge_consecutive(order: list[str], placement: dict[str, tuple[int, int]]
                       ) -> dict[str, tuple[int, int]]:
    """Pipeline stages as PopTorch counts them: a new stage each time the IPU changes in
    program order, consecutive blocks on one IPU being one stage (spec 4.4.2, "If two
    consecutive blocks/stages use the same IPU, PopTorch will merge them into a single
    block/stage"; PopTorch's CompilerImpl::numPipelineStages is the IPU switches + 1).
    Graphcore's BERT puts each layer in its own block with AutoIncrement: 3 layers on an
    IPU are one stage, not three that would each stash and synchronise."""
    merged: dict[str, tuple[int, int]] = {}
    stage, previous = -1, None
    for key in order:
        ipu = placement[key][1]
        if ipu != previous:
            stage, previous = stage + 1, ipu
        merged[key] = (stage, ipu)
    return merged


def _computes_forward(op: ir.Operation) -> bool:
    return not op.name.startswith(NEUTRAL) and "ipu.backward" not in op.attributes


def _inherit_backward(ops: list[ir.Operation], keys: dict[ir.Operation, str],
                      position: dict[ir.Operation, int]) -> None:
    """Give unannotated backward ops the block of the op feeding them that comes last in
    program order (a sum of gradients from several stages runs after all of them), or,
    with no such producer, of an op they feed; until every one has a block (or none can
    get one)."""
    todo = list(ops)
    while todo:
        left = []
        for op in todo:
            producers = [p for p in map(producer, op.operands)
                         if p is not None and p in keys and not p.name.startswith(NEUTRAL)]
            users = [use.owner.operation for r in op.results for use in r.uses]
            if producers:
                keys[op] = keys[max(producers, key=position.__getitem__)]
            else:
                key = next((keys[n] for n in users if n in keys), None)
                if key is None:
                    left.append(op)
                    continue
                keys[op] = key
        if len(left) == len(todo):
            return
        todo = left


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
