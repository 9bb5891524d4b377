"""The JIT's Python for the control-flow ops of a program: `scf.for`, `scf.if`, and the
scalars they read (`arith.constant` bounds, `tensor.extract` of a condition).

`scf.for` becomes a Python `for` over `range(lb, ub, step)`, its carried values
variables that the loop's `scf.yield` reassigns: the body is written once, whatever the
trip count. `scf.if` becomes `if`/`else`, each branch ending by assigning the op's
results. Ops inside a region are written one per line by the program's own `statement`
(no fusion, no in-place reuse of operands: those are decided for a function's top
block), indented under the loop or branch.
"""

from __future__ import annotations

from collections.abc import Callable

from torch_mlir import ir

ValueName = Callable[[ir.Value], str]
Statement = Callable[[ir.OpView, ValueName], str]


def _block(block: ir.Block, statement: Statement, value_name: ValueName,
           targets: list[str]) -> list[str]:
    """The lines of a region's block; its `scf.yield` assigns `targets`."""
    lines = []
    for op in block.operations:
        if op.operation.name == "scf.yield":
            if targets:
                values = ", ".join(value_name(v) for v in op.operands)
                lines.append(f"{', '.join(targets)}, = {values},")
        elif op.operation.name in REGION_OPS:
            lines += REGION_OPS[op.operation.name](op, statement, value_name)
        else:
            lines.append(statement(op, value_name))
    return ["    " + line for line in lines] or ["    pass"]


def _for(op: ir.OpView, statement: Statement, value_name: ValueName) -> list[str]:
    lb, ub, step, *inits = (value_name(v) for v in op.operands)
    block = op.regions[0].blocks[0]
    carried = [value_name(a) for a in block.arguments[1:]]
    lines = [f"{', '.join(carried)}, = {', '.join(inits)},"] if carried else []
    lines.append(f"for {value_name(block.arguments[0])} in range({lb}, {ub}, {step}):")
    lines += _block(block, statement, value_name, carried)
    if carried:
        lines.append(f"{', '.join(value_name(r) for r in op.results)}, = "
                     f"{', '.join(carried)},")
    return lines


def _if(op: ir.OpView, statement: Statement, value_name: ValueName) -> list[str]:
    results = [value_name(r) for r in op.results]
    lines = [f"if {value_name(op.operands[0])}:"]
    lines += _block(op.regions[0].blocks[0], statement, value_name, results)
    if op.regions[1].blocks:
        lines.append("else:")
        lines += _block(op.regions[1].blocks[0], statement, value_name, results)
    return lines


def _constant(op: ir.OpView, statement: Statement, value_name: ValueName) -> list[str]:
    return [f"{value_name(op.results[0])} = {ir.IntegerAttr(op.attributes['value']).value}"]


def _extract(op: ir.OpView, statement: Statement, value_name: ValueName) -> list[str]:
    source, *indices = (value_name(v) for v in op.operands)
    return [f"{value_name(op.results[0])} = {source}[({''.join(i + ', ' for i in indices)})]"]


# op name -> the lines of Python that run it
REGION_OPS: dict[str, Callable[[ir.OpView, Statement, ValueName], list[str]]] = {
    "scf.for": _for,
    "scf.if": _if,
    "arith.constant": _constant,
    "tensor.extract": _extract,
}


def nested_ops(op: ir.OpView) -> list[ir.Operation]:
    """The ops in `op`'s regions, at any depth (they run where `op` runs: the fusion of
    the function's top block must not move a value they read after it)."""
    found = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found += [inner.operation, *nested_ops(inner)]
    return found


def control_statement(op: ir.OpView, statement: Statement, value_name: ValueName) -> str:
    """The Python of a control-flow op (`REGION_OPS`) in a function's top block: lines
    after the first carry the function body's indent."""
    return "\n    ".join(REGION_OPS[op.operation.name](op, statement, value_name))
