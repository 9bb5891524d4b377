"""ipu-outline-stages: each stage's ops move into a `func.func` that the function calls.

After ipu-assign-stages every computing op carries `ipu.stage = #ipu.stage<s, i>`. This
pass groups a function's ops by stage and IPU, moves each group into
`func.func private @<fn>_stage<s>` tagged with the same attribute, and replaces it with
one `func.call` carrying the tag, so that later passes (copies between IPUs, the
schedules) and the machine model see stages as units.

In training (ops tagged `ipu.backward` by the frontend), backward ops run in their own
stages on the same IPU as their forward ops: the backward of forward stage s is
pipeline stage 2*L - s, L being the last forward stage, so the last forward stage and
the first backward stage are one fused stage (spec 4.4.2, Fig. 4.2); with
`separate-backward` it is 2*L + 1 - s and no stage is fused. Stage calls and
functions then carry `ipu.kind = "forward" | "backward" | "forward_backward"`.

With `pipelined` (the default) calls are emitted in ascending stage order, one per
stage. A value flowing from a later stage into an earlier one cannot be scheduled: that
is an error naming the two stages (the spec's example of blocks "1" and "2" placed on
IPUs 1 and 0 with AutoStage.SameAsIpu). Without it (phased and sharded execution),
stages are emitted in program order and a stage whose ops need another stage's work in
between is split into several calls (`@main_stage2`, `@main_stage2_1`): the spec's
f-string ParallelPhasedExecution example has two stages of one phase feeding each
other.
Constants used by a stage are cloned into it rather than passed in.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects import stage_attr
from poptorch.dialects.creation import ConstantOp, IotaOp
from poptorch.dialects.placement import functions, placement, producer, str_attribute, symbol

from .registry import Option, Pass, register
from .stages import backward_ops

# ops cloned into every stage that uses them rather than passed between stages
CLONED = (ConstantOp.OPERATION_NAME, IotaOp.OPERATION_NAME, "torch.constant.", "arith.constant")


@register
class OutlineStages(Pass):
    argument = "ipu-outline-stages"
    description = "Move each stage's ops into a func.func called with func.call"
    options = (
        Option("separate-backward", bool, False,
               "Keep the last forward stage and the first backward stage apart (phased "
               "execution with useSeparateBackwardPhase)"),
        Option("pipelined", bool, True,
               "One call per stage, in ascending stage order (PipelinedExecution); off, a "
               "stage is split into several calls where other stages' work must come "
               "between its parts (phased and sharded execution)"),
    )

    def run(self, module: ir.Operation) -> None:
        self.module = module
        for func in functions(module):
            if "ipu.stage" in func.attributes:
                continue  # already a stage
            ops = [op.operation for op in func.regions[0].blocks[0].operations]
            if any(placement(op) is not None for op in ops):
                self._outline(func, ops)

    def _outline(self, func: ir.Operation, ops: list[ir.Operation]) -> None:
        body, terminator = ops[:-1], ops[-1]
        backward = backward_ops(body)
        forward_stages = [placement(op)[0] for op in body
                          if placement(op) is not None and op not in backward]
        last = max(forward_stages, default=0)
        groups: dict[tuple[int, int, int], list[ir.Operation]] = {}
        kinds: dict[tuple[int, int, int], set[str]] = {}
        group_of: dict[ir.Operation, tuple[int, int, int]] = {}
        segments: list[tuple[int, int, int]] = []  # creation order (pipelined=false)
        current: dict[tuple[int, int], tuple[int, int, int]] = {}
        for op in body:
            if op.name.startswith(CLONED):
                continue  # cloned into every stage that reads it, whatever its block
            where = placement(op)
            if where is None:
                raise self.error(op, f"'{op.name}' has no ipu.stage while other ops of "
                                     f"@{symbol(func)} have one; run ipu-assign-stages first")
            stage, ipu = where
            if op in backward:
                stage = 2 * last + self.separate_backward - stage
            key = (stage, ipu, 0)
            if not self.pipelined:
                key = self._segment(op, (stage, ipu), current, segments, group_of)
            groups.setdefault(key, []).append(op)
            kinds.setdefault(key, set()).add("backward" if op in backward else "forward")
            group_of[op] = key
        order = sorted(groups) if self.pipelined else segments
        self._check_order(order, groups, group_of)
        for op in self.walk(func)[1:]:  # the function carries the stage from here on
            if "ipu.stage" in op.attributes:
                del op.attributes["ipu.stage"]
        training = bool(backward)
        results: dict[ir.Value, ir.Value] = {}  # value of a stage -> result of its call
        for key in order:
            kind = "forward_backward" if len(kinds[key]) == 2 else next(iter(kinds[key]))
            self._make_stage(func, terminator, key, groups[key], group_of, results,
                             kind if training else None)
        for op in reversed(body):  # constants now cloned into the stages
            if op.name.startswith(CLONED) and all(not list(r.uses) for r in op.results):
                op.erase()

    @staticmethod
    def _segment(op, where, current, segments, group_of) -> tuple[int, int, int]:
        """The segment of its stage that `op` joins: the stage's latest one if that comes
        after every segment `op` reads from, else a new one, last in the order."""
        needed = max((segments.index(group_of[p]) for p in map(producer, op.operands)
                      if p is not None and p in group_of), default=-1)
        key = current.get(where)
        if key is None or segments.index(key) < needed:
            key = (*where, 0 if key is None else key[2] + 1)
            current[where] = key
            segments.append(key)
        return key

    def _check_order(self, order, groups, group_of) -> None:
        rank = {key: n for n, key in enumerate(order)}
        for key in order:
            for op in groups[key]:
                for _, _, value in reads(op):
                    made_by = producer(value)
                    if made_by is None or made_by not in group_of:
                        continue
                    source = group_of[made_by]
                    if rank[source] > rank[key]:
                        block = str_attribute(op, "ipu.block", "?")
                        raise self.error(
                            op, f"'{op.name}' in stage {key[0]} (block '{block}', IPU "
                                f"{key[1]}) uses a value computed later, in stage {source[0]} "
                                f"on IPU {source[1]}; stage ids must ascend in program "
                                "order: give this block a later stage (for example with "
                                "AutoStage.AutoIncrement)")

    def _make_stage(self, func, terminator, key, group, group_of, results, kind) -> None:
        members = set(group)
        inputs: list[ir.Value] = []
        cloned: list[ir.Operation] = []
        for op in group:
            for _, _, value in reads(op):
                made_by = producer(value)
                if made_by is not None and made_by in members:
                    continue
                if made_by is not None and made_by.name.startswith(CLONED):
                    if made_by not in cloned:
                        cloned.append(made_by)
                elif value not in inputs:
                    inputs.append(value)
        outputs = [r for op in group for r in op.results
                   if any(top_level(use.owner.operation) not in members for use in r.uses)]
        stage, ipu, segment = key
        name = (f"{symbol(func)}_stage{stage}" + (f"_ipu{ipu}" if _shared(key, group_of) else "")
                + (f"_{segment}" if segment else ""))
        attrs = {"ipu.stage": stage_attr(stage, ipu)}
        if kind is not None:
            attrs["ipu.kind"] = ir.StringAttr.get(kind)
        phase = next((op.attributes["ipu.phase"] for op in group
                      if "ipu.phase" in op.attributes), None)
        if phase is not None:
            attrs["ipu.phase"] = phase
        in_types = [v.type for v in inputs]
        out_types = [v.type for v in outputs]
        # the call, in main, just before the terminator
        with ir.InsertionPoint(terminator), terminator.location:
            call = ir.Operation.create(
                "func.call", results=out_types,
                operands=[results.get(v, v) for v in inputs],
                attributes={"callee": ir.FlatSymbolRefAttr.get(name), **attrs})
        # the function, after the caller
        with ir.InsertionPoint(self.module.regions[0].blocks[0]), func.location:
            fn_type = ir.FunctionType.get(in_types, out_types)
            stage_fn = ir.Operation.create(
                "func.func", regions=1,
                attributes={"sym_name": ir.StringAttr.get(name),
                            "function_type": ir.TypeAttr.get(fn_type),
                            "sym_visibility": ir.StringAttr.get("private"), **attrs})
        block = stage_fn.regions[0].blocks.append(
            *in_types, arg_locs=[v.location if isinstance(v, ir.OpResult) else func.location
                                 for v in inputs])
        with ir.InsertionPoint(block):
            clones = {}
            for constant in cloned:
                clone = constant.clone()
                clones.update(zip(constant.results, clone.results, strict=True))
            for op in group:
                op.detach_from_parent()
                ir.InsertionPoint(block).insert(op)
            with terminator.location:
                ir.Operation.create("func.return", operands=outputs)
        replacements = dict(zip(inputs, block.arguments, strict=True)) | clones
        for op in group:
            for reader, n, value in reads(op):
                if value in replacements:
                    reader.operands[n] = replacements[value]
        for value, result in zip(outputs, call.results, strict=True):
            results[value] = result
            for use in list(value.uses):
                owner = use.owner.operation
                # moved ops get new Python wrappers (hashed apart): compare parents, by ==
                if not top_level(owner).parent == stage_fn:
                    owner.operands[use.operand_number] = result


def top_level(op: ir.Operation) -> ir.Operation:
    """`op`, or the op of a function's body whose regions (a loop's body, a branch) hold
    it."""
    while op.parent is not None and op.parent.name != "func.func":
        op = op.parent
    return op


def reads(op: ir.Operation) -> list[tuple[ir.Operation, int, ir.Value]]:
    """(reader, operand number, value) of each value `op` reads: its operands, and those
    that ops in its regions read from outside it (a loop body's weights)."""
    found = [(op, n, v) for n, v in enumerate(op.operands)]
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found += [(reader, n, v) for reader, n, v in reads(inner.operation)
                          if not _within(v, op)]
    return found


def _within(value: ir.Value, op: ir.Operation) -> bool:
    """Whether `value` is defined inside a region of `op`."""
    owner = value.owner
    parent = owner.owner if isinstance(owner, ir.Block) else owner.operation.parent
    while parent is not None and parent.name != "func.func":
        if parent == op:
            return True
        parent = parent.parent
    return False


def _shared(key: tuple[int, int], group_of) -> bool:
    """Whether another group has the same stage number on another IPU."""
    return any(k[0] == key[0] and k[1] != key[1] for k in set(group_of.values()))
