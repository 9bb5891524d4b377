"""What the timeline reads from a module, in plain Python: @main's stage calls,
transfers and other ops as a graph of `TaskNode`s, the stage functions' costs and the
task order (`TaskGraph`; the input contract is in the `timeline` module docstring).

A call result read by a later call on the same IPU is stashed (`stash_users`) unless it
is a partial weight gradient that a backward stage only adds into a gradient @main
returns, with gradient accumulation (micro-batches > 1): a weight used by two stages
of one IPU (BERT's tied word embedding, read by the embeddings and the MLM decoder)
gets a partial gradient from each. PopART adds every gradient into its accumulator as
soon as it is computed (graphcore/popart, `AccumulateOp` after each gradient,
willow/src/transforms/autodiff and the optimizer decomposition `SGD1Decompose` /
`AdamDecompose`), so the first partial is accumulated in its own stage and waits for
nothing (`_accumulated_partials`). A value received by `ipu.copy`, or a micro-batch's
host input, that several calls on one IPU read (a stage input the backward stage reads
again) is stashed too, held by its first reader (`_hold_received`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import NamedTuple

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.placement import (
    int_attribute,
    placement,
    str_attribute,
    symbol_table,
)
from poptorch.dialects.structure import CopyOp, RemoteLoadOp, RemoteStoreOp
from poptorch.errors import Error
from poptorch.runtime.machine.control_flow import REGION_OPS, region_cost
from poptorch.runtime.machine.cost import OpCost, op_cost
from poptorch.runtime.machine.system import Machine, value_bytes


class Transfer(NamedTuple):
    """How the timeline charges a transfer op of @main: its node kind, the attribute
    naming the IPU it occupies, and the machine's cycles for (its bytes, the op, the
    program's IPUs)."""

    kind: str
    ipu: str
    cycles: Callable[[Machine, int, ir.Operation, int], int]


def _copy_cycles(machine: Machine, nbytes: int, op: ir.Operation, ipus: int) -> int:
    """An `ipu.copy` over the IPU-Links between its src_ipu and dst_ipu."""
    return machine.copy_cycles(nbytes, int_attribute(op, "src_ipu"),
                               int_attribute(op, "dst_ipu"), ipus)


def _streaming_cycles(machine: Machine, nbytes: int, op: ir.Operation, ipus: int) -> int:
    return machine.streaming_cycles(nbytes)


# The transfer ops of @main (the cost model exempts them: cost.COST_EXEMPT).
TRANSFERS: dict[type, Transfer] = {
    CopyOp: Transfer("copy", "dst_ipu", _copy_cycles),
    RemoteLoadOp: Transfer("remote_load", "ipu", _streaming_cycles),
    RemoteStoreOp: Transfer("remote_store", "ipu", _streaming_cycles),
}

Source = tuple[int, int]  # (node, result number) of an operand; (-1, n): @main argument n
ARG = -1


@dataclass
class TaskNode:
    """An op of @main: a stage call, a transfer, or anything else (passes readiness on)."""

    kind: str  # "call" | "copy" | "remote_load" | "remote_store" | "other"
    inputs: list[Source]
    ipu: int = 0  # the call's IPU, the copy's destination, the load's or store's IPU
    cycles: int = 0  # the transfer's time (a call's is in `cost`)
    bytes: int = 0  # the transfer's bytes
    name: str = ""  # a call's callee
    call: int = -1  # a call's index k among the calls of @main
    stage: int | None = None  # a call's ipu.stage
    phase: int | None = None  # a call's ipu.phase
    cost: OpCost = field(default_factory=OpCost)
    # per value a call holds for later calls of its micro-batch: its results, then the
    # values it received (by `ipu.copy`, or from the host) that a later call on its IPU
    # reads (`_hold_received`)
    result_bytes: list[int] = field(default_factory=list)
    stash_users: list[set[int]] = field(default_factory=list)  # per value: calls k reading it
    stash_inputs: set[tuple[int, int]] = field(default_factory=set)  # (k, value) it reads
    reads: list[int] = field(default_factory=list)  # @main arguments a call reads


class TaskGraph:
    """What the simulation reads from the module, in plain Python."""

    def __init__(self, module: ir.Module, machine: Machine, micro_batches: int,
                 proportions: dict[int, float], io_tiles: int,
                 cost: Callable[..., OpCost] = op_cost, inputs: Collection[int] = ()) -> None:
        self.machine, self.proportions, self.io_tiles = machine, proportions, io_tiles
        self.inputs = frozenset(inputs)  # @main arguments streamed from the host a micro-batch
        self.cost = cost
        self.functions = symbol_table(module.operation)
        if "main" not in self.functions:
            raise Error("the module has no func.func @main to simulate", type="runtime")
        self.main = self.functions["main"]
        self.block = self.main.regions[0].blocks[0]
        self.costs: dict[tuple[str, int], OpCost] = {}
        self._copies: dict[int, list[int]] = {}  # `_received_copies` of each node
        attrs = self.main.attributes
        self.schedule = (ir.StringAttr(attrs["ipu.schedule"]).value
                         if "ipu.schedule" in attrs else "single")
        flat = list(ir.DenseI64ArrayAttr(attrs["ipu.tasks"])) if "ipu.tasks" in attrs else None
        self.tasks = None if flat is None else list(zip(flat[::2], flat[1::2], strict=True))
        self.nodes: list[TaskNode] = []
        self.calls: list[TaskNode] = []  # the k-th stage call of @main
        self.stores: list[TaskNode] = []
        self.returns: list[Source] = []
        self.arg_bytes = [value_bytes(a) for a in self.block.arguments]
        if self.tasks is None:
            self.micro_batches = micro_batches
            self._whole_main()
        else:
            self.micro_batches = int_attribute(
                self.main, "ipu.micro_batches",
                1 + max((mb for _, mb in self.tasks), default=0))
            if micro_batches not in (1, self.micro_batches):
                raise Error(f"the module's schedule runs {self.micro_batches} micro-batches a "
                            f"step, not {micro_batches}", type="runtime")
            self._read_main()
            self._check_tasks()
        self.result_bytes = [value_bytes(v) for v in self._return_op().operands]

    def _return_op(self) -> ir.OpView:
        return list(self.block.operations)[-1]

    def function_cost(self, name: str, ipu: int) -> OpCost:
        """The plan of one call of @name on `ipu`: its ops and the functions it calls."""
        if (name, ipu) not in self.costs:
            if name not in self.functions:
                raise Error(f"@main calls @{name}, which the module does not define",
                            type="runtime")
            self.costs[name, ipu] = self.ops_cost(
                self.functions[name].regions[0].blocks[0].operations, ipu)
        return self.costs[name, ipu]

    def ops_cost(self, ops, ipu: int) -> OpCost:
        total = OpCost()
        for op in ops:
            if op.operation.name == "func.call":
                total += self.function_cost(
                    ir.FlatSymbolRefAttr(op.attributes["callee"]).value, ipu)
            elif op.operation.name in REGION_OPS:  # a loop or branch: its regions' ops
                total += region_cost(op, lambda ops: self.ops_cost(ops, ipu), self.machine,
                                     self.machine.compute_tiles(self.io_tiles))
            else:
                total += self.cost(op, self.machine, self.proportions.get(ipu),
                                 io_tiles=self.io_tiles)
        return total

    def _whole_main(self) -> None:
        """No schedule: @main is one task on IPU 0 reading every argument."""
        ops = list(self.block.operations)
        call = TaskNode("call", [], 0, name="main", call=0, cost=self.ops_cost(ops[:-1], 0),
                     reads=list(range(len(self.arg_bytes))))
        self.nodes.append(call)
        self.calls.append(call)
        self.returns = [(0, j) for j in range(len(ops[-1].operands))]
        self.tasks = [(0, mb) for mb in range(self.micro_batches)]

    def _read_main(self) -> None:
        index: dict[ir.Operation, int] = {}
        # call -> argument -> the call's results (as @main's sources) it is added into
        partials: dict[int, dict[int, set[Source]]] = {}

        def source(v: ir.Value) -> Source:
            if isinstance(v, ir.OpResult):
                return index[v.owner.operation], ir.OpResult(v).result_number
            return ARG, ir.BlockArgument(v).arg_number

        ipus = 1 + max((placement(op.operation)[1] for op in self.block.operations
                        if op.operation.name == "func.call"
                        and "ipu.stage" in op.attributes), default=0)
        for op in self.block.operations:
            name = op.operation.name
            inputs = [source(v) for v in op.operands]
            if name == "func.return":
                self.returns = inputs
                continue
            if name == "func.call" and "ipu.stage" in op.attributes:
                callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                stage, ipu = placement(op.operation)
                node = TaskNode("call", inputs, ipu, name=callee, call=len(self.calls),
                             stage=stage, phase=int_attribute(op.operation, "ipu.phase"),
                             result_bytes=[value_bytes(r) for r in op.results],
                             stash_users=[set() for _ in op.results])
                node.cost = self.function_cost(callee, node.ipu)
                self.calls.append(node)
                if self.micro_batches > 1 and str_attribute(op, "ipu.kind") == "backward":
                    partials[node.call] = {  # this node's index is len(self.nodes)
                        k: {(len(self.nodes), j) for j in into}
                        for k, into in self._accumulated_partials(callee).items()}
            elif (transfer := TRANSFERS.get(op_class(op.operation))) is not None:
                nbytes = value_bytes(op.operands[0])
                node = TaskNode(transfer.kind, inputs,
                                int_attribute(op.operation, transfer.ipu),
                                transfer.cycles(self.machine, nbytes, op.operation, ipus),
                                bytes=nbytes)
                if node.kind == "remote_store":
                    self.stores.append(node)
            else:
                node = TaskNode("other", inputs)
            index[op.operation] = len(self.nodes)
            self.nodes.append(node)
        for call in self.calls:
            call.reads = sorted(set().union(*(self.arguments(s) for s in call.inputs)))
            for k, s in enumerate(call.inputs):
                into = partials.get(call.call, {}).get(k)
                if into and into <= set(self.returns):
                    continue  # added into its accumulator where it was computed
                for producer, result in self._direct_producers(s):
                    if producer.ipu == call.ipu:
                        producer.stash_users[result].add(call.call)
                        call.stash_inputs.add((producer.call, result))
        self._hold_received()

    def _hold_received(self) -> None:
        """A value received by `ipu.copy`, or a host input of the micro-batch (`inputs`),
        read by several calls on one IPU (a forward stage's input that its backward stage
        reads again: recomputation starts from it) is kept there, per micro-batch, from
        the first of them to the last: PopART stashes every tensor a later pipeline stage
        on the same IPU reads, the IpuCopy's destination and the streamed input included
        (graphcore/popart, willow/src/transforms/pipeline.cpp, the stash candidates).
        The first reader (in @main's order, the forward stage) holds it as an extra
        value."""
        # ("copy", node) or ("input", @main argument), and the IPU -> (holder, value)
        held: dict[tuple[str, int, int], tuple[TaskNode, int]] = {}
        for call in self.calls:
            for s in call.inputs:
                received = [(("copy", n, call.ipu), self.nodes[n].bytes)
                            for n in self._received_copies(s) if self.nodes[n].ipu == call.ipu]
                if s[0] == ARG and s[1] in self.inputs:
                    received.append((("input", s[1], call.ipu), self.arg_bytes[s[1]]))
                for key, nbytes in received:
                    if key not in held:
                        held[key] = (call, len(call.result_bytes))
                        call.result_bytes.append(nbytes)
                        call.stash_users.append(set())
                        continue
                    holder, index = held[key]
                    if holder is not call:
                        holder.stash_users[index].add(call.call)
                        call.stash_inputs.add((holder.call, index))

    def _received_copies(self, source: Source) -> list[int]:
        """The `ipu.copy` nodes feeding `source` directly or through ops other than calls
        and transfers."""
        if source[0] == ARG:
            return []
        node = self.nodes[source[0]]
        if node.kind == "copy":
            return [source[0]]
        if node.kind != "other":
            return []
        if source[0] not in self._copies:  # once a node: a diamond of ops is walked once
            found = dict.fromkeys(n for s in node.inputs for n in self._received_copies(s))
            self._copies[source[0]] = list(found)
        return self._copies[source[0]]

    def _accumulated_partials(self, callee: str) -> dict[int, set[int]]:
        """Argument k -> the results of `callee` it is only added into (by one `ipu.add`
        whose result the function only returns), for the arguments that are."""
        block = self.functions[callee].regions[0].blocks[0]
        found = {}
        for k, arg in enumerate(block.arguments):
            uses = list(arg.uses)
            if len(uses) != 1 or uses[0].owner.name != "ipu.add":
                continue
            total = uses[0].owner.results[0]
            users = [u.owner for u in total.uses]
            if users and all(u.name == "func.return" for u in users):
                found[k] = {u.operand_number for u in total.uses}
        return found

    def _direct_producers(self, source: Source) -> list[tuple[TaskNode, int]]:
        """The call results feeding `source` through no copy or Streaming Memory."""
        if source[0] == ARG:
            return []
        node = self.nodes[source[0]]
        if node.kind == "call":
            return [(node, source[1])]
        if node.kind == "other":
            return [p for s in node.inputs for p in self._direct_producers(s)]
        return []

    def producers(self, source: Source) -> set[int]:
        """The calls (k) whose results reach `source` by any path."""
        if source[0] == ARG:
            return set()
        node = self.nodes[source[0]]
        if node.kind == "call":
            return {node.call}
        return set().union(*(self.producers(s) for s in node.inputs))

    def arguments(self, source: Source) -> set[int]:
        """The @main arguments reaching `source` through ops other than calls."""
        if source[0] == ARG:
            return {source[1]}
        node = self.nodes[source[0]]
        return set() if node.kind == "call" else set().union(
            *(self.arguments(s) for s in node.inputs))

    def holder(self, source: Source) -> int:
        """The IPU holding the value `source` (IPU 0 for host data)."""
        if source[0] == ARG:
            return 0
        node = self.nodes[source[0]]
        if node.kind == "other":
            return min((self.holder(s) for s in node.inputs), default=0)
        return node.ipu

    def _check_tasks(self) -> None:
        seen: set[tuple[int, int]] = set()
        for k, mb in self.tasks:
            if not 0 <= k < len(self.calls) or not 0 <= mb < self.micro_batches:
                raise Error(f"ipu.tasks names task ({k}, {mb}), but @main has "
                            f"{len(self.calls)} stage calls and {self.micro_batches} "
                            "micro-batches", type="runtime")
            if (k, mb) in seen:
                raise Error(f"ipu.tasks runs @{self.calls[k].name} on micro-batch {mb} "
                            "twice", type="runtime")
            seen.add((k, mb))
