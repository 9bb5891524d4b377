"""Tied weights: one tensor registered under several names is one device variable.

A module may hold the same parameter (or buffer) under several names: GPT-2's token
embedding `transformer.wte.weight` is its unembedding `lm_head.weight`, and any layer
can be assigned another's weight. torch's captures give each name of a parameter its
own graph input (`aot_export_joint_with_descriptors` lists them with
`named_parameters(remove_duplicate=False)`, `torch.export` too), so the joint graph
computes one gradient per name and the executor would hold one array per name.
`merge_tied` makes such inputs one: the first name, as `named_parameters()` (which
removes duplicates) gives it, keeps its placeholder, whose uses replace the others'.
The training capture then sums the names' gradients into the one variable's gradient
(`sum_gradients`), so the optimizer steps it once; the executor uploads, updates and
copies back one array under that name, and the host model's tensor, being the same
object under every name, gets the trained value under all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch.export.graph_signature import InputKind


def aliases(named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, str]:
    """{alias: first name} for every tensor of `named` (name, tensor pairs listed with
    duplicates, in `named_parameters(remove_duplicate=False)` order) that is listed
    under several names."""
    first: dict[int, str] = {}
    found: dict[str, str] = {}
    for name, tensor in named:
        if tensor is None:
            continue
        owner = first.setdefault(id(tensor), name)
        if owner != name:
            found[name] = owner
    return found


def merge_tied(graph: torch.fx.Graph, placeholders: Sequence[tuple[torch.fx.Node, str]],
               alias_of: Mapping[str, str]) -> set[torch.fx.Node]:
    """Replace each alias's placeholder by the first name's and erase it.

    `placeholders` pairs the graph's weight placeholders with the weight names they
    hold; returns the erased ones. A kept placeholder is then named
    `alias_of.get(name, name)`: an alias whose first name has no placeholder of its own
    stands for it."""
    node_of: dict[str, torch.fx.Node] = {}
    for node, name in placeholders:
        node_of.setdefault(alias_of.get(name, name), node)
    erased = set()
    for node, name in placeholders:
        kept = node_of[alias_of.get(name, name)]
        if kept is not node:
            node.replace_all_uses_with(kept)
            graph.erase_node(node)
            erased.add(node)
    return erased


def sum_gradients(graph: torch.fx.Graph, grads: Sequence[torch.fx.Node],
                  before: torch.fx.Node) -> torch.fx.Node:
    """One node summing the gradients one tied weight gets under its names, before
    `before` (the graph's output).

    Each sum is made where the last computed of its operands is: it takes that node's
    annotations (`meta["custom"]`: block, IPU, backward) and source location, so in a
    pipeline the sum is in the backward stage of the earliest block using the weight
    and the other stages' gradients are copied to it (`ipu.copy`), as for a weight
    that one module uses twice (autograd's own sum, which ipu-assign-stages places in
    the block of its last computed operand)."""
    order = {node: index for index, node in enumerate(graph.nodes)}
    ordered = sorted(grads, key=order.__getitem__, reverse=True)  # computed last first
    total = ordered[0]
    for grad in ordered[1:]:
        with graph.inserting_before(before):
            added = graph.call_function(torch.ops.aten.add.Tensor, (total, grad))
        added.meta = {key: ordered[0].meta[key] for key in KEPT_META
                      if key in ordered[0].meta}
        added.meta["val"] = ordered[0].meta["val"]  # one tensor: one shape and dtype
        total = added
    return total


# node metadata a node poptorch adds to a joint graph takes from a neighbour (a gradient
# sum from its last computed operand)
KEPT_META = ("custom", "partitioner_tag", "stack_trace", "nn_module_stack")


def module_aliases(model: torch.nn.Module, prefix: str = "") -> dict[str, str]:
    """{alias: first name} of `model`'s tied parameters and of its tied buffers, names
    without `prefix` (a wrapper's attribute)."""
    def named(items):
        return [(name.removeprefix(prefix), tensor) for name, tensor in items]

    return {**aliases(named(model.named_parameters(remove_duplicate=False))),
            **aliases(named(model.named_buffers(remove_duplicate=False)))}


def merge_exported(program: torch.export.ExportedProgram,
                   model: torch.nn.Module) -> tuple[set[int], dict[str, str]]:
    """`merge_tied` on a torch.export program of `model`, in place: returns the indices
    of the input specs whose placeholders were erased and {alias: first name}."""
    alias_of = module_aliases(model)
    if not alias_of:
        return set(), alias_of
    graph = program.graph_module.graph
    nodes = [node for node in graph.nodes if node.op == "placeholder"]
    specs = program.graph_signature.input_specs
    weights = [(node, spec.target) for node, spec in zip(nodes, specs, strict=True)
               if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER)]
    erased = merge_tied(graph, weights, alias_of)
    program.graph_module.recompile()
    return {index for index, node in enumerate(nodes) if node in erased}, alias_of
