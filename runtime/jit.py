"""JIT: an ipu-dialect module becomes Python source calling NumPy kernels, compiled once.

Each function of the module turns into a Python function; each op into one line
`v7 = ipu_matmul(v3, v5)` calling the registered kernel with the op's static
arguments as literals (arrays and other non-literal values live in a constants list
`C`). The source is kept on the `Program` (`program.source`) so a user can read or dump
exactly what runs.
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.errors import Error

from .heap import keep_freed_memory
from .kernels import load_all


@dataclass
class Program:
    """A compiled module: `run(*args)` calls its entry function."""

    source: str
    run: Callable[..., tuple]
    constants: list[Any] = field(repr=False)
    result_ranks: tuple[int, ...] = ()


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name)


class _Codegen:
    def __init__(self) -> None:
        self.kernels = load_all()
        self.constants: list[Any] = []
        self.used: dict[str, str] = {}  # op name -> Python name of its kernel
        self.lines: list[str] = []

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
        params = ", ".join(value_name(a) for a in block.arguments)
        self.lines.append(f"def {name}({params}):")
        for op in block.operations:
            self.lines.append("    " + self.statement(op, value_name))
        self.lines.append("")

    def statement(self, op: ir.OpView, value_name) -> str:
        name = op.operation.name
        args = [value_name(v) for v in op.operands]
        if name == "func.return":
            return f"return ({', '.join(args)}{',' if len(args) == 1 else ''})"
        if name == "func.call":
            callee = _identifier(op.attributes["callee"].value)
            call = f"{callee}({', '.join(args)})"
        else:
            k = self.kernels.get(name)
            if k is None:
                raise Error(f"no kernel implements '{name}'", type="runtime",
                            location=str(op.location))
            static = k.static(op)
            pyname = self.used.setdefault(name, _identifier(name))
            kwargs = [f"{key}={self.literal(v)}" for key, v in static.items()]
            dead = self.reusable_operand(op) if k.takes_out else None
            if dead is not None:
                kwargs.append(f"out={value_name(dead)}")
            call = f"{pyname}({', '.join(args + kwargs)})"
        results = [value_name(r) for r in op.results]
        if not results:
            return call
        if name == "func.call" and len(results) == 1:
            return f"{results[0]}, = {call}"
        return f"{', '.join(results)} = {call}"

    def fresh(self, name: str) -> bool:
        """Whether the kernel of op `name` returns new arrays that alias no operand."""
        k = self.kernels.get(name)
        return k is not None and k.fresh

    def reusable_operand(self, op: ir.OpView) -> ir.Value | None:
        """An operand whose array this op may overwrite with its result: of the result's
        type, owned (`owned`), and read by nothing after this op (its other readers are
        earlier ops of fresh-array kernels, which keep no reference to it). The kernel
        still checks shapes at run time: leading replica axes are not in the types."""
        result = op.results[0].type if len(op.results) == 1 else None
        this = op.operation
        here = self.position[this]
        for value in op.operands:
            if value.type != result or not self.owned(value):
                continue
            users = [use.owner.operation for use in value.uses]
            # read once by this op; every other reader an earlier op of this block
            if users.count(this) == 1 and all(
                    user == this or (self.position.get(user, here) < here
                                     and self.fresh(user.name)) for user in users):
                return value
        return None

    def owned(self, value: ir.Value) -> bool:
        """Only `value` refers to its array: a fresh-array kernel made it, or it is a view
        (reshape, permute, slice) of an owned array that nothing else reads."""
        while not isinstance(value.owner, ir.Block):
            if self.fresh(value.owner.name):
                return True
            k = self.kernels.get(value.owner.name)
            if k is None or not k.view:
                return False
            source = value.owner.operands[0]
            if len(list(source.uses)) != 1:
                return False
            value = source
        return False


def compile_module(module: ir.Module, entry: str = "main") -> Program:
    """Generate, compile and load the Python program of `module`."""
    keep_freed_memory()
    gen = _Codegen()
    for op in module.body.operations:
        if op.operation.name == "func.func" and op.regions[0].blocks:
            gen.function(op)
    header = ['"""Generated by poptorch-mlir from the ipu dialect: one line per ipu op."""', ""]
    header += [f"{py} = K[{name!r}].fn" for name, py in sorted(gen.used.items())]
    source = "\n".join(header + [""] + gen.lines)
    filename = f"<poptorch-jit-{id(gen)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"K": gen.kernels, "C": gen.constants, "np": np}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    func = next(op for op in module.body.operations
                if op.operation.name == "func.func"
                and op.attributes["sym_name"].value == entry)
    ranks = tuple(t.rank for t in ir.FunctionType(func.attributes["function_type"].value).results)
    return Program(source, namespace[_identifier(entry)], gen.constants, ranks)
