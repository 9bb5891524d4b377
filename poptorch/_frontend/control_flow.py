"""Import of torch's control-flow higher-order ops as `scf.for` / `scf.if` regions.

`poptorch.for_loop` and `poptorch.cond` (`poptorch._ops.control_flow`) trace their
bodies into subgraphs of `torch.ops.higher_order.while_loop` / `cond`, which torch-mlir's
`FxImporter` imports as private functions before the graph that uses them. torch-mlir
(20261001) has no importer for `cond` and imports `while_loop` as an unbounded
`torch.prim.Loop` whose body calls drop the loop's extra operands (invalid IR), so
`ControlFlowImporter` replaces both:

- `while_loop` whose condition is `counter < N` (what `poptorch.for_loop` builds) ->
  `scf.for %i = 0 to N step 1 iter_args(...)`, whose region calls the body function once
  per iteration with the carried values and the lifted operands; the condition function
  is deleted. Any other condition is a data-dependent loop, a clear error.
- `cond` -> `scf.if` on the one element of the boolean condition, each region calling
  its branch's function.

Why upstream `scf` rather than an ipu op: IRDL binds a variadic operand or result list
to one type (`dialects/ipu.py`), and a loop's carried values or a branch's results have
different shapes. The regions hold builtin tensors (`torch_c` casts around the calls,
which fold away once the functions are lowered), and each op keeps the HOP node's
location, so `ipu-import-annotations` places it like any op of the model.
"""

from __future__ import annotations

import re

import torch
from torch_mlir import ir

from poptorch.errors import Error

from .model_code import user_line

FOR_LOOP = "poptorch.for_loop"


def _trip_count(gm: torch.fx.GraphModule) -> int | None:
    """N when the condition graph is `lt(first argument, N)`, else None."""
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    first = next(n for n in gm.graph.nodes if n.op == "placeholder")
    if len(nodes) != 1 or nodes[0].target is not torch.ops.aten.lt.Scalar:
        return None
    lhs, rhs = nodes[0].args
    return rhs if lhs is first and isinstance(rhs, int) else None


class ControlFlowImporter:
    """`GraphNodeImporter` handlers of the `while_loop` and `cond` HOPs (mixed into
    `capture.AnnotatingNodeImporter`)."""

    def _function(self, node: torch.fx.Node) -> str:
        gm = getattr(node.graph.owning_module, node.target)
        return self.fx_importer._graph_module_to_func_name[id(gm)]

    def _builtin(self, loc, values: list[ir.Value]) -> list[ir.Value]:
        return [ir.Operation.create(
            "torch_c.to_builtin_tensor", results=[self._builtin_type(v.type)], operands=[v],
            loc=loc).result for v in values]

    def _builtin_type(self, vtensor: ir.Type) -> ir.Type:
        # !torch.vtensor<[2,4],f32> -> tensor<2x4xf32>, through a cast op's inference
        shape, dtype = str(vtensor).removeprefix("!torch.vtensor<[").rstrip(">").split("],")
        dtype = {"si64": "i64", "si32": "i32", "si8": "i8", "ui8": "i8", "si16": "i16"} \
            .get(dtype, dtype)
        dims = "x".join([*filter(None, shape.split(",")), dtype])
        return ir.Type.parse(f"tensor<{dims}>", self._c)

    def _call_in(self, block: ir.Block, loc, callee: str, operands, types) -> None:
        """In `block`: cast `operands` to torch, call @callee, yield its results."""
        with ir.InsertionPoint(block):
            torch_values = [ir.Operation.create(
                "torch_c.from_builtin_tensor", results=[t], operands=[v], loc=loc).result
                if isinstance(v.type, ir.RankedTensorType) else v
                for v, t in operands]
            call = ir.Operation.create(
                "func.call", attributes={"callee": ir.FlatSymbolRefAttr.get(callee)},
                results=types, operands=torch_values, loc=loc)
            ir.Operation.create("scf.yield", operands=self._builtin(loc, list(call.results)),
                                loc=loc)

    def _bind(self, node: torch.fx.Node, loc, results: list[ir.Value],
              types: list[ir.Type]) -> None:
        values = [ir.Operation.create("torch_c.from_builtin_tensor", results=[t],
                                      operands=[r], loc=loc).result
                  for r, t in zip(results, types, strict=True)]
        self._multi_result_nodes.add(node)
        for index, value in enumerate(values):
            self.bind_node_value(node, value, index)

    def _import_hop_while_loop(self, loc, node: torch.fx.Node, hop) -> None:
        cond_node, body_node, carried, lifted = node.args
        loc = self._annotated(loc, node)
        count = _trip_count(getattr(node.graph.owning_module, cond_node.target))
        if count is None:
            raise Error("a while loop whose condition depends on the data is not "
                        "supported; use poptorch.for_loop with a fixed count",
                        type="capture", location=user_line(node))
        types = [self._cc.value_info_to_type(v) for v in node.meta["val"]]
        with loc:
            index = ir.IndexType.get()
            bounds = [ir.Operation.create(
                "arith.constant", results=[index],
                attributes={"value": ir.IntegerAttr.get(index, n)}).result
                for n in (0, count, 1)]
            inits = self._builtin(loc, [self._import_argument(loc, v) for v in carried])
            outer = [self._import_argument(loc, v) for v in lifted]
            loop = ir.Operation.create(
                "scf.for", results=[v.type for v in inits], operands=[*bounds, *inits],
                regions=1)
            block = loop.regions[0].blocks.append(index, *[v.type for v in inits])
        operands = [*zip(block.arguments[1:], types, strict=True),
                    *[(v, v.type) for v in outer]]
        self._call_in(block, loc, self._function(body_node), operands, types)
        self._bind(node, loc, list(loop.results), types)
        self._erase_function(self._function(cond_node))

    def _import_hop_cond(self, loc, node: torch.fx.Node, hop) -> None:
        predicate, then_node, else_node, operands = node.args
        loc = self._annotated(loc, node)
        types = [self._cc.value_info_to_type(v) for v in node.meta["val"]]
        with loc:
            flag = self._builtin(loc, [self._import_argument(loc, predicate)])[0]
            element = ir.Operation.create(
                "tensor.extract", results=[ir.IntegerType.get_signless(1)],
                operands=[flag]).result
            values = [self._import_argument(loc, v) for v in operands]
            branch = ir.Operation.create(
                "scf.if", results=[self._builtin_type(t) for t in types],
                operands=[element], regions=2)
            blocks = [branch.regions[i].blocks.append() for i in range(2)]
        for block, body in zip(blocks, (then_node, else_node), strict=True):
            self._call_in(block, loc, self._function(body), [(v, v.type) for v in values],
                          types)
        self._bind(node, loc, list(branch.results), types)

    def _erase_function(self, name: str) -> None:
        """Drop the function @name (a for loop's condition, replaced by its trip count)."""
        for op in self.fx_importer._m.body.operations:
            if op.operation.name == "func.func" and \
                    ir.StringAttr(op.attributes["sym_name"]).value == name:
                op.operation.erase()
                return


def drop_dynamo_marks(gm: torch.fx.GraphModule) -> None:
    """Remove the `_torchdynamo_disable*` entries torch's tracing leaves in nodes'
    `meta["custom"]` (we read only our `ipu.*` ones). Tracing a control-flow HOP's
    body records them with other values on the same placeholders, and torch's
    `run_decompositions` then fails ("Mismatch in custom metadata for key
    _torchdynamo_disable_method")."""
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            custom = node.meta.get("custom")
            if custom:
                for key in [k for k in custom if k.startswith("_torchdynamo_disable")]:
                    del custom[key]


# How torch's tracing of a HOP body names a module the body reaches through closures:
# L['args'][1].__closure__[0].cell_contents.(...).cell_contents.layer, the last cell
# being the model (`self`)
_CLOSURE_PATH = re.compile(r"^L\['args'\]\[\d+\](\.__closure__\[\d+\]\.cell_contents)+\.")


def body_module_path(path: str) -> str:
    """A module path from `nn_module_stack`, with the closure chain torch's tracing of a
    for_loop or cond body puts before it removed (`layer`, as outside the body)."""
    return _CLOSURE_PATH.sub("", path)
