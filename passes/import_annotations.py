"""ipu-import-annotations: poptorch annotations carried in locations become op attributes.

The frontend records `poptorch.Block` and friends in fused-location metadata
(`loc(fused<{ipu.block = "A"}>["model.py":12:8])`), because locations survive
torch-mlir's decompositions and canonicalisations where attributes do not (see
notes/FRONTEND.md). This pass copies every `ipu.*` entry of that metadata onto the op
as a discardable attribute, which later passes (stage and IPU assignment) read.
"""

from __future__ import annotations

from collections.abc import Iterator

from torch_mlir import ir

from .registry import Option, Pass, register

PREFIX = "ipu."
CALL_KEY = "torch.call"  # the torch call an op came from (not an annotation)
# Annotations whose value type is fixed; others are copied as they are.
STRING_KEYS = ("ipu.block",)


def children(loc: ir.Location) -> list[ir.Location]:
    """The locations `loc` is made of: a name's child, a call site's callee then caller,
    a fused location's parts in order (as MLIR searches them for a file location)."""
    if isinstance(loc, ir.FusedLoc):
        return list(loc.locations)
    if isinstance(loc, ir.NameLoc):
        return [loc.child_loc]
    if isinstance(loc, ir.CallSiteLoc):
        return [loc.callee, loc.caller]
    return []


# Locations nest as deep as the input does, far deeper than Python's recursion limit
# when the input names its locations (`#loc2 = loc(callsite(#loc1 at ...))`): the walks
# below keep their own stack (as poptorch/tools/diagnostics.py does).

def _metadata(loc: ir.Location) -> ir.DictAttr | None:
    """The dictionary metadata of a fused location, or None."""
    if not isinstance(loc, ir.FusedLoc) or loc.metadata is None:
        return None
    md = loc.metadata.maybe_downcast()
    return md if isinstance(md, ir.DictAttr) else None


def _entries(loc: ir.Location) -> Iterator[ir.NamedAttribute]:
    """The metadata entries of the fused locations in `loc`, outermost first."""
    todo = [loc]
    while todo:
        loc = todo.pop()
        yield from _metadata(loc) or ()
        todo.extend(reversed(children(loc)))


def collect(loc: ir.Location, found: dict[str, list[ir.Attribute]]) -> None:
    """Gather `ipu.*` metadata entries in `loc`, outermost first, into `found`."""
    for named in _entries(loc):
        if named.name.startswith(PREFIX):
            found.setdefault(named.name, []).append(named.attr)


def called_as(loc: ir.Location) -> str | None:
    """The torch call the user wrote that an op came from (`torch.nonzero`), recorded
    by the importer as `torch.call` metadata (poptorch/_frontend/op_names.py), or None."""
    return next((ir.StringAttr(named.attr).value for named in _entries(loc)
                 if named.name == CALL_KEY), None)


def unsupported(op: ir.Operation | ir.OpView, reason: str) -> str:
    """The message for an op nothing lowers: the torch call the user wrote, when it is
    known, then the torch-dialect op it became (`'torch.cdist' (torch.aten._cdist_forward)`)."""
    name = op.name if op.name != "torch.operator" else op.attributes["name"].value
    call = called_as(op.location)
    what = f"'{call}' ({name})" if call else f"'{name}'"
    return f"unsupported op {what}: {reason}"


def annotate(op: ir.Operation, key: str, attr: ir.Attribute) -> None:
    """Add `key = attr` to the fused-location metadata of `op`, where `collect` finds it
    (this pass then puts it on the ops `op` becomes)."""
    loc = op.location
    entries, inner = {}, [loc]
    md = _metadata(loc)
    if md is not None:
        entries, inner = {n.name: n.attr for n in md}, children(loc)
    entries[key] = attr
    op.location = ir.Location.fused(inner, metadata=ir.DictAttr.get(entries, op.context),
                                    context=op.context)


def strip(loc: ir.Location) -> ir.Location:
    """`loc` without `ipu.*` metadata (other metadata is kept)."""
    todo: list[tuple[ir.Location, bool]] = [(loc, False)]
    done: list[ir.Location] = []  # rebuilt locations, children before their parent
    while todo:
        loc, children_done = todo.pop()
        parts = children(loc)
        if parts and not children_done:
            todo.append((loc, True))
            todo.extend((part, False) for part in reversed(parts))
            continue
        rebuilt = done[len(done) - len(parts):]
        del done[len(done) - len(parts):]
        done.append(_rebuild(loc, rebuilt))
    return done[0]


def _rebuild(loc: ir.Location, parts: list[ir.Location]) -> ir.Location:
    """`loc` made of the stripped `parts` (its `children`), without `ipu.*` metadata."""
    if isinstance(loc, ir.FusedLoc):
        md = loc.metadata.maybe_downcast() if loc.metadata is not None else None
        if isinstance(md, ir.DictAttr):
            kept = {n.name: n.attr for n in md if not n.name.startswith(PREFIX)}
            md = ir.DictAttr.get(kept) if kept else None
        return ir.Location.fused(parts, metadata=md)
    if isinstance(loc, ir.NameLoc):
        return ir.Location.name(loc.name_str, parts[0])
    if isinstance(loc, ir.CallSiteLoc):
        return ir.Location.callsite(parts[0], [parts[1]])
    return loc


@register
class ImportAnnotations(Pass):
    argument = "ipu-import-annotations"
    description = (
        "Copy poptorch annotations (ipu.block, ...) from location metadata to op attributes"
    )
    options = (
        Option("strip-metadata", bool, False,
               "Remove the copied annotations from the locations afterwards"),
    )

    def run(self, module: ir.Operation) -> None:
        for op in self.walk(module):
            self.import_into(op)

    def import_into(self, op: ir.Operation) -> None:
        found: dict[str, list[ir.Attribute]] = {}
        collect(op.location, found)
        for key, values in found.items():
            value = values[0]
            if key in STRING_KEYS and not isinstance(value, ir.StringAttr):
                raise self.error(op, f"annotation '{key}' must be a string, got {value}")
            others = sorted({str(v) for v in values[1:] if v != value})
            if others:
                self.warn(op, f"op combines code annotated {key} = {value} and "
                              f"{', '.join(others)}; it keeps {value}")
            if key not in op.attributes:
                op.attributes[key] = value
        if found and self.strip_metadata:
            op.location = strip(op.location)
