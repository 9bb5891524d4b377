"""JIT: an ipu-dialect module becomes Python source calling NumPy kernels, compiled once.

Each function of the module turns into a Python function; each op into one line
`v7 = ipu_matmul(v3, v5)` calling the registered kernel with the op's static
arguments as literals (arrays and other non-literal values live in a constants list
`C`). The source is kept on the `Program` (`program.source`) so a user can read or dump
exactly what runs.
"""

from __future__ import annotations

import linecache
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.data_movement import ConcatOp, PermuteOp
from poptorch.dialects.elementwise import BINARY_OPS
from poptorch.dialects.linear import MatMulOp
from poptorch.dialects.placement import symbol_table
from poptorch.dialects.types import numpy_dtype
from poptorch.errors import Error
from poptorch.runtime.jit.codegen.fusion.cache import groups_data, groups_from, read_index
from poptorch.runtime.jit.codegen.fusion.compiled import compile_kernels
from poptorch.runtime.jit.codegen.fusion.group import Group, Kind, row_strides
from poptorch.runtime.jit.codegen.fusion.grouping import find_groups
from poptorch.runtime.jit.codegen.fusion.window import WINDOWS, window_group
from poptorch.runtime.jit.control_flow import REGION_OPS, control_statement, nested_ops
from poptorch.runtime.jit.heap import keep_freed_memory
from poptorch.runtime.jit.hoist import (
    CONTIGUOUS,
    Hoisted,
    Prepared,
    has_weight_work,
    hoist_weights,
)
from poptorch.runtime.jit.host_module import host_module, needs_host_module, stage_results
from poptorch.runtime.jit.kernels import HELPERS, Kernel, kernel_of
from poptorch.runtime.jit.layouts import reshape_permutes, shared_reshapes, unmerged_products

# module attributes of ipu-precision that need every op run on its own
_UNFUSED = ("ipu.floating_point_exceptions", "ipu.stochastic_rounding")
# A transposed weight that matmuls of at least this many left-operand rows in all
# multiply by is copied once to a C-contiguous array (`shared_views`).
SHARED_WEIGHT_ROWS = 512
# sums and differences, which commute with a sum over replicas (`summands`)
_LINEAR = (BINARY_OPS["add"], BINARY_OPS["sub"])


@dataclass
class Program:
    """A compiled module: `run(*args)` calls its entry function."""

    source: str
    run: Callable[..., tuple]
    constants: list[Any] = field(repr=False)
    result_ranks: tuple[int, ...] = ()
    summed: frozenset[int] = frozenset()  # results returned reduced over replicas
    kernels: str = ""  # the MLIR of its fused elementwise kernels (`fusion`), if any
    # the names its source binds (kernels `K`, fused kernels `F`, its functions)
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name)


class _Codegen:
    def __init__(self, entry: str, summed: Mapping[int, str], replicas: int,
                 fuse: bool, index: dict | None = None) -> None:
        self.constants: list[Any] = []
        self.used: dict[str, str] = {}  # op (or helper) name -> Python name of its kernel
        self.bound: dict[str, Kernel] = {}  # op (or helper) name -> its kernel
        self.lines: list[str] = []
        self.entry, self.summed, self.replicas, self.fuse = entry, summed, replicas, fuse
        self.fused: dict[ir.Operation, str] = {}  # matmul -> reduction of its replica sum
        self.summing: set[ir.Operation] = set()  # the views, sums of such matmuls
        self.wrapped: dict[int, str] = {}  # this function's results to sum on return
        self.groups: list[Group] = []  # fused elementwise kernels, numbered program-wide
        self.contiguous: set[ir.Operation] = set()  # views copied where made (`shared_views`)
        self.index = index  # an earlier compile's groups (`cache.read_index`), if any
        self.found: list[list[dict]] = []  # each function's groups, as `groups_data`
        self.locate: Callable[[ir.Location], str] | None = None  # fp_check's, when on
        self.sum_on_return: frozenset[int] = frozenset()  # summed results never fused
        self.merged: dict[ir.Operation, ir.Operation] = {}  # permute -> reshape it reads
        self.unmerged: dict[ir.Operation, tuple] = {}  # matmul -> operands to take instead
        self.reshaped: dict[ir.Operation, ir.Value] = {}  # reshape -> the reshape it reads

    def literal(self, value: Any) -> str:
        if value is None or isinstance(value, bool | int | float | str | slice):
            return repr(value)
        if isinstance(value, tuple):
            inner = ", ".join(self.literal(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, np.dtype):
            return f"np.{value.name}"
        if isinstance(value, type) and issubclass(value, np.generic):
            return f"np.{np.dtype(value).name}"
        self.constants.append(value)
        return f"C[{len(self.constants) - 1}]"

    def function(self, func: ir.OpView) -> None:
        name = _identifier(ir.StringAttr(func.attributes["sym_name"]).value)
        block = func.regions[0].blocks[0]
        names: dict[ir.Value, str] = {}

        def value_name(v: ir.Value) -> str:
            if v not in names:
                names[v] = f"v{len(names)}"
            return names[v]

        self.position = {op.operation: index for index, op in enumerate(block.operations)}
        for index, op in enumerate(block.operations):  # a loop body reads where its loop is
            self.position.update((inner, index) for inner in nested_ops(op))
        self.links = self.chain_links(block)
        for link in self.links:  # a link's operands are read where its chain ends
            end = link
            while end in self.links:
                end = self.links[end]
            self.position[link] = self.position[end]
        self.wrapped = self.fuse_sums(block) if name == _identifier(self.entry) else {}
        emitted: dict[ir.Operation, int] = {}  # a group's last op -> the group's number
        skipped = set(self.links)
        groups = self.find_groups(block) if self.fuse else []
        ends = {group.last: self.position[group.last] for group in groups}
        for group in groups:
            emitted[group.last] = len(self.groups)
            self.groups.append(group)
            for op in group.ops:  # all run where the group's last op is
                self.position[op] = ends[group.last]
                skipped.add(op)
            for op in group.absorbed:  # read where the last group that computes it runs
                self.position[op] = max(self.position[op], ends[group.last])
                skipped.add(op)
            skipped.discard(group.last)
            if group.concat is not None:  # made by the group's kernel
                self.position[group.concat.owner.operation] = ends[group.last]
                skipped.add(group.concat.owner.operation)
        self.contiguous = self.shared_views(groups, block)
        # (a group's last op too: a reshape ending a group has no operand array to read)
        excluded = skipped | set(emitted) | self.summing | set(self.fused)
        self.merged = reshape_permutes(block, excluded, self.contiguous)
        self.unmerged = unmerged_products(
            block, excluded | self.contiguous | set(self.merged.values()))
        for permute, reshape in self.merged.items():  # the reshape runs with its permute
            self.position[reshape] = self.position[permute]
            skipped.add(reshape)
        for product, operands in self.unmerged.items():  # reshapes it no longer reads
            for value, source in zip(product.operands, operands, strict=True):
                if value != source:
                    self.position[value.owner.operation] = self.position[product]
                    skipped.add(value.owner.operation)
        self.reshaped = shared_reshapes(block, self.summing | set(self.links),
                                        skipped | set(self.merged.values()))
        params = ", ".join(value_name(a) for a in block.arguments)
        self.lines.append(f"def {name}({params}):")
        for op in block.operations:
            if op.operation in emitted:
                self.lines.append("    " + self.fused_call(emitted[op.operation], value_name))
            elif op.operation not in skipped:
                self.lines.append("    " + self.statement(op, value_name))
                if self.locate is not None and op.results and op.name != "func.call":
                    self.lines.append("    " + self.fp_check(op, value_name))
        self.lines.append("")

    def find_groups(self, block: ir.Block) -> list[Group]:
        """The fusion groups of this function: from the index entry of an earlier compile
        of this module when there is one that fits, else found."""
        if self.index is not None:
            try:
                data = self.index["functions"][len(self.found)]
                groups = groups_from(data, block)
                self.found.append(data)
                return groups
            except (ValueError, KeyError, TypeError, IndexError):
                self.index = None  # it does not fit: find them (and write it anew)
        groups = find_groups(block, self.position, self.summing)
        self.into_concat(groups, block)
        pools = [window_group(op.operation) for op in block.operations
                 if op_class(op) in WINDOWS and op.operation not in self.links]
        groups = sorted(groups + [g for g in pools if g is not None],
                        key=lambda g: self.position[g.last])
        self.found.append(groups_data(groups, block))
        return groups

    def into_concat(self, groups: list[Group], block: ir.Block) -> None:
        """A concatenation (a chain of `ipu.concat`, `chain_links`) of results of one
        group, of its shape and read by nothing else, is stored by the group's kernel:
        each result straight into its place (an LSTM's backward step concatenates its
        four gate gradients, 64 KB copied by a call per step)."""
        made = {v: g for g in groups if g.kind is Kind.ELEMENTWISE and not g.reduced
                for v in g.outputs}
        for op in block.operations:
            op = op.operation
            if op_class(op) is not ConcatOp or op in self.links:
                continue
            parts = self.operands(op.opview)
            group = made.get(parts[0])
            if group is None or group.concat is not None or len(set(parts)) != len(parts):
                continue
            members = set(group.ops)
            if any(made.get(v) is not group or tuple(v.type.shape) != group.shape
                   or sum(use.owner.operation not in members for use in v.uses) != 1
                   for v in parts):
                continue
            result = op.results[0]
            dim = int(op.attributes["dim"].value) % len(group.shape)
            step = group.shape[dim] * row_strides(tuple(result.type.shape))[dim]
            group.concat = result
            group.targets = {v: k * step for k, v in enumerate(parts)}
            group.outputs = [v for v in group.outputs if v not in group.targets] + [result]

    def shared_views(self, groups: list[Group], block: ir.Block) -> set[ir.Operation]:
        """Ops of view kernels (a permute, a reshape, a slice) whose result two or more
        kernel calls read: the view is copied to a C-contiguous array once where it is made,
        rather than by each kernel call (an LSTM's backward steps each read one step of
        the permuted gradient of its outputs: 17 copies of it a training step). So is a
        permute that matmuls of SHARED_WEIGHT_ROWS left-operand rows or more in all take as
        their right operand (an LSTM's transposed recurrent weight, once a step):
        OpenBLAS multiplies by a transposed view slower (on the development VM a (32, 128)
        x (128, 512) product took 514 us against 462), which repays the copy only over
        many rows (the bench LSTM's inference at batch 32, 16 steps: 12% less CPU time a
        call; at batch 1, 41% more)."""
        readers: dict[ir.Operation, int] = {}
        products: dict[ir.Operation, int] = {}
        for op in block.operations:
            if op_class(op) is not MatMulOp:
                continue
            owner = op.operands[1].owner
            if not isinstance(owner, ir.Block) and op_class(owner) is PermuteOp \
                    and owner.operation not in self.links:
                rows = math.prod(op.operands[0].type.shape[:-1])
                products[owner.operation] = products.get(owner.operation, 0) + rows
        for group in groups:
            for value in group.inputs:
                owner = value.owner
                if isinstance(owner, ir.Block):
                    continue
                k = kernel_of(owner)
                if k is not None and k.view and owner.operation not in self.links:
                    readers[owner.operation] = readers.get(owner.operation, 0) + 1
        return {op for op, n in readers.items() if n > 1} | {
            op for op, n in products.items() if n >= SHARED_WEIGHT_ROWS} | {
            op.operation for op in block.operations if CONTIGUOUS in op.attributes}

    def fused_call(self, number: int, value_name) -> str:
        group = self.groups[number]
        args = ", ".join(value_name(value) for value in group.inputs)
        results = ", ".join(value_name(v) for v in group.outputs)
        comma = "," if len(group.outputs) == 1 else ""
        ops = " ".join(op.name.removeprefix("ipu.") for op in group.ops)
        return f"{results}{comma} = fused_{number}({args})  # {ops}"

    def fuse_sums(self, block: ir.Block) -> dict[int, str]:
        """The entry's summed results: one made only of matmuls that nothing else reads
        (`summands`) is summed by those matmuls (`matmul_replica_sum`, put in `fused`);
        the others on return, which are returned here."""
        returned = list(block.operations)[-1]
        wrapped = {}
        for index, reduction in self.summed.items():
            matmuls = None if index in self.sum_on_return \
                else self.summands(returned.operands[index])
            if matmuls:
                self.fused.update(dict.fromkeys(matmuls, reduction))
            else:
                wrapped[index] = reduction
        return wrapped

    def summands(self, value: ir.Value) -> list[ir.Operation] | None:
        """The matmuls `value` is made of, when it is read once and is a matmul, a view
        of one (reshape, permute, slice) or a sum or difference of such values: the sum
        over replicas commutes with all of them (a recurrent weight's gradient adds one
        product per step). None otherwise."""
        owner = value.owner
        if isinstance(owner, ir.Block) or len(list(value.uses)) != 1:
            return None
        cls = op_class(owner)
        if cls is MatMulOp:
            return [owner.operation]
        k = kernel_of(owner)
        if k is not None and k.view:
            self.summing.add(owner.operation)
            return self.summands(owner.operands[0])
        if cls in _LINEAR and \
                owner.operands[0].type == owner.operands[1].type == value.type:
            self.summing.add(owner.operation)  # (kept out of fusion even if unused)
            lhs, rhs = (self.summands(v) for v in owner.operands)
            return lhs + rhs if lhs and rhs else None
        return None

    def chain_links(self, block: ir.Block) -> dict[ir.Operation, ir.Operation]:
        """Ops of `chains` kernels that are links of a longer chain, each mapped to the op
        that reads it: its one reader, of the same op and static arguments."""
        links = {}
        for op in block.operations:
            k = kernel_of(op)
            if k is None or not k.chains or len(op.results) != 1:
                continue
            uses = list(op.results[0].uses)
            if len(uses) != 1:
                continue
            reader = uses[0].owner
            if reader.name == op.operation.name and reader.operation.block == block \
                    and k.static(reader) == k.static(op):
                links[op.operation] = reader.operation
        return links

    def operands(self, op: ir.OpView) -> list[ir.Value]:
        """The op's operands, with those made by a link of its chain replaced by the
        link's own operands."""
        values = []
        for value in op.operands:
            owner = value.owner
            if not isinstance(owner, ir.Block) and owner.operation in self.links:
                values += self.operands(owner)
            else:
                values.append(value)
        return values

    def statement(self, op: ir.OpView, value_name) -> str:
        name = op.operation.name
        if name in REGION_OPS:
            return control_statement(op, self.statement, value_name)
        if op.operation in self.merged:  # the reshape's operand
            reshape = self.merged[op.operation]
            operands = [self.reshaped[reshape]] if reshape in self.reshaped \
                else self.operands(reshape.opview)
        elif op.operation in self.reshaped:
            operands = [self.reshaped[op.operation]]
        elif op.operation in self.unmerged:
            operands = list(self.unmerged[op.operation])
        else:
            operands = self.operands(op)
        args = [value_name(v) for v in operands]
        if name == "func.return":
            for index, reduction in self.wrapped.items():
                kernel = self.use("replica_sum", HELPERS["replica_sum"])
                args[index] = (f"{kernel}({args[index]}, reduction={reduction!r}, "
                               f"rank={op.operands[index].type.rank}, "
                               f"replicas={self.replicas})")
            return f"return ({', '.join(args)}{',' if len(args) == 1 else ''})"
        if name == "func.call":
            callee = _identifier(op.attributes["callee"].value)
            call = f"{callee}({', '.join(args)})"
        else:
            k = kernel_of(name)
            if k is None:
                raise Error(f"no kernel implements '{name}'", type="runtime",
                            location=str(op.location))
            static = k.static(op)
            called = k
            if op.operation in self.fused:
                name, called = "matmul_replica_sum", HELPERS["matmul_replica_sum"]
                static = {"reduction": self.fused[op.operation],
                          "rank": op.results[0].type.rank, "replicas": self.replicas,
                          **static}
            if op.operation in self.merged:
                reshape = self.merged[op.operation].opview
                name, called = "reshape_permute", HELPERS["reshape_permute"]
                static = {**kernel_of(reshape).static(reshape), **static}
                if reshape.operation in self.reshaped:
                    static["rank"] = self.reshaped[reshape.operation].type.rank
            elif op.operation in self.reshaped:
                static["rank"] = self.reshaped[op.operation].type.rank
            pyname = self.use(name, called)
            kwargs = [f"{key}={self.literal(v)}" for key, v in static.items()]
            stochastic = "ipu.stochastic_rounding" in op.attributes
            dead = self.reusable_operand(op) if k.takes_out and not stochastic else None
            if dead is not None:
                kwargs.append(f"out={value_name(dead)}")
            if stochastic:  # computed in f32, f16 results rounded (kernels/precision.py)
                args.insert(0, pyname)
                rounded = tuple(numpy_dtype(r.type.element_type) == np.float16
                                for r in op.results)
                kwargs.append(f"rounded={self.literal(rounded)}")
                pyname = self.use("stochastic_rounding", HELPERS["stochastic_rounding"])
            call = f"{pyname}({', '.join(args + kwargs)})"
        results = [value_name(r) for r in op.results]
        if not results:
            return call
        if op.operation in self.contiguous:
            call = f"np.ascontiguousarray({call})"
        if op.operation in self.unmerged:  # the product of the unmerged batch dims
            rank = self.unmerged[op.operation][0].type.rank
            shape = self.literal(tuple(op.results[0].type.shape))
            call = f"{self.use('ipu.reshape', kernel_of('ipu.reshape'))}({call}, " \
                f"rank={rank}, shape={shape})"
        if name == "func.call" and len(results) == 1:
            return f"{results[0]}, = {call}"
        return f"{', '.join(results)} = {call}"

    def fp_check(self, op: ir.OpView, value_name) -> str:
        """The line trapping an inf or NaN this op makes (Precision option)."""
        check = self.use("fp_check", HELPERS["fp_check"])
        operands = "".join(f"{value_name(v)}, " for v in self.operands(op))
        results = "".join(f"{value_name(r)}, " for r in op.results)
        where = self.locate(op.location)
        return f"{check}(({operands}), ({results}), {op.operation.name!r}, {where!r})"

    def use(self, name: str, kernel: Kernel) -> str:
        """The Python name the program calls `kernel` (of op or helper `name`) by."""
        self.bound.setdefault(name, kernel)
        return self.used.setdefault(name, _identifier(name))

    @staticmethod
    def fresh(op: ir.Operation) -> bool:
        """Whether the kernel of `op` returns new arrays that alias no operand."""
        k = kernel_of(op)
        return k is not None and k.fresh

    def reusable_operand(self, op: ir.OpView) -> ir.Value | None:
        """An operand whose array this op may overwrite with its result: of the result's
        type, owned (`owned`), and read by nothing after this op (its other readers are
        earlier ops of fresh-array kernels, which keep no reference to it). The kernel
        still checks shapes at run time: leading replica axes are not in the types."""
        result = op.results[0].type if len(op.results) == 1 else None
        this = op.operation
        if this.parent.name != "func.func":  # in a loop or branch (`control_flow`)
            return None
        here = self.position[this]
        for value in op.operands:
            if value.type != result or not self.owned(value):
                continue
            users = [use.owner.operation for use in value.uses]
            # read once by this op; every other reader an earlier op of this block
            if users.count(this) == 1 and all(
                    user == this or (self.position.get(user, here) < here
                                     and self.fresh(user)) for user in users):
                return value
        return None

    def owned(self, value: ir.Value) -> bool:
        """Only `value` refers to its array: a fresh-array kernel made it, or it is a view
        (reshape, permute, slice) of an owned array that nothing else reads."""
        while not isinstance(value.owner, ir.Block):
            if self.fresh(value.owner):
                return True
            k = kernel_of(value.owner)
            if k is None or not k.view:
                return False
            source = value.owner.operands[0]
            if len(list(source.uses)) != 1:
                return False
            value = source
        return False


def compile_module(module: ir.Module, entry: str = "main",
                   summed: Mapping[int, str] | None = None, replicas: int = 1,
                   fuse: bool = True, key: str | None = None,
                   locate: Callable[[ir.Location], str] = str,
                   weights: Collection[int] = (), persistent: bool = True) -> Program:
    """Generate, compile and load the Python program of `module`.

    `summed`: results of `entry` (by index) to return reduced over all `replicas` by
    "sum" or "mean", once, without their replica axis, as a training step's gradients
    are before the optimizer step (`ipu.all_reduce` over all replicas, then one
    replica's value). `fuse`: group elementwise ops into compiled kernels (`fusion`);
    without it every op is a NumPy kernel call. `key`: the module's printed text, when
    the caller has it: the executable cache directory then indexes the compiled
    kernels by it (`compiled.compile_kernels`). A module tagged by ipu-precision
    (floating-point exceptions, stochastic rounding) runs op by op, unfused; `locate`
    names an op's location in its floating-point exception. `weights`: the entry's
    arguments (by index) holding weights, buffers and tensor constants: the ops reading
    only those run in a function of their own, again only when one of them is a new
    array (`hoist`); `persistent`: they usually stay the same between calls (inference)."""
    keep_freed_memory()
    top = module.operation
    attrs = top.attributes
    unfused = any(name in attrs for name in _UNFUSED)  # run op by op, nothing hoisted
    fuse = fuse and not unfused
    host = needs_host_module(top, entry)
    weights = () if unfused else sorted(weights)
    if key is not None:  # what else decides the groups
        key = (f"{entry} {sorted((summed or {}).items())} {replicas}{' host' * host}"
               f" {weights} {persistent}\n{key}")
    gen = _Codegen(entry, summed or {}, replicas, fuse,
                   read_index(key) if key is not None and fuse else None)
    if host:  # results of stage calls were summed on return: the same bits still
        gen.sum_on_return = stage_results(top, entry) if summed else frozenset()
        top = host_module(top, entry)
    copied = host or bool(weights) and has_weight_work(top, entry, weights)
    if copied and not host:
        top = top.clone()  # the machine model reads the module as it is
    hoisted = hoist_weights(top, entry, weights, persistent, SHARED_WEIGHT_ROWS) \
        if copied and weights else None
    try:
        return _compiled(gen, top, entry, key, locate, hoisted)
    finally:
        if copied:
            top.erase()


def _compiled(gen: _Codegen, top: ir.Operation, entry: str, key: str | None,
              locate: Callable[[ir.Location], str], hoisted: Hoisted | None) -> Program:
    attrs = top.attributes
    if "ipu.floating_point_exceptions" in attrs:
        gen.locate = locate
    for op in top.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and op.regions[0].blocks:
            gen.function(op)
    header = ['"""Generated by poptorch-mlir from the ipu dialect: one line per ipu op, or per',
              'group of elementwise ops fused into one MLIR-compiled kernel (`fused_<i>`, as',
              'are max poolings, their gradients and convolutions\' windows)."""', ""]
    header += [f"{py} = K[{name!r}].fn" for name, py in sorted(gen.used.items())]
    header += [f"fused_{i} = F[{i}]" for i in range(len(gen.groups))]
    source = "\n".join(header + [""] + gen.lines)
    filename = f"<poptorch-jit-{id(gen)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    fused = compile_kernels(gen.groups, top.context, key, gen.found, gen.index) \
        if gen.groups else None
    namespace = {"K": gen.bound, "C": gen.constants, "np": np,
                 "F": fused.kernels if fused else []}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    func = symbol_table(top)[entry]
    ranks = tuple(t.rank for t in ir.FunctionType(func.attributes["function_type"].value).results)
    run = namespace[_identifier(entry)]
    if hoisted is not None:
        run = Prepared(run, namespace[_identifier(hoisted.prepare)], hoisted.weights)
    return Program(source, run, gen.constants, ranks,
                   frozenset(gen.summed), fused.ir if fused else "", namespace)
