"""ipu-import-annotations: poptorch annotations carried in locations become op attributes.

The frontend records `poptorch.Block` and friends in fused-location metadata
(`loc(fused<{ipu.block = "A"}>["model.py":12:8])`), because locations survive
torch-mlir's decompositions and canonicalisations where attributes do not (see
notes/FRONTEND.md). This pass copies every `ipu.*` entry of that metadata onto the op
as a discardable attribute, which later passes (stage and IPU assignment) read.
"""

from __future__ import annotations

from torch_mlir import ir

from .registry import Option, Pass, register

PREFIX = "ipu."
# Annotations whose value type is fixed; others are copied as they are.
STRING_KEYS = ("ipu.block",)


def collect(loc: ir.Location, found: dict[str, list[ir.Attribute]]) -> None:
    """Gather `ipu.*` metadata entries in `loc`, outermost first, into `found`."""
    if isinstance(loc, ir.FusedLoc):
        md = loc.metadata.maybe_downcast() if loc.metadata is not None else None
        if isinstance(md, ir.DictAttr):
            for named in md:
                if named.name.startswith(PREFIX):
                    found.setdefault(named.name, []).append(named.attr)
        for inner in loc.locations:
            collect(inner, found)
    elif isinstance(loc, ir.NameLoc):
        collect(loc.child_loc, found)
    elif isinstance(loc, ir.CallSiteLoc):
        collect(loc.callee, found)
        collect(loc.caller, found)


def annotate(op: ir.Operation, key: str, attr: ir.Attribute) -> None:
    """Add `key = attr` to the fused-location metadata of `op`, where `collect` finds it
    (this pass then puts it on the ops `op` becomes)."""
    loc = op.location
    entries, inner = {}, [loc]
    if isinstance(loc, ir.FusedLoc):
        md = loc.metadata.maybe_downcast() if loc.metadata is not None else None
        if isinstance(md, ir.DictAttr):
            entries, inner = {n.name: n.attr for n in md}, list(loc.locations)
    entries[key] = attr
    op.location = ir.Location.fused(inner, metadata=ir.DictAttr.get(entries, op.context),
                                    context=op.context)


def strip(loc: ir.Location) -> ir.Location:
    """`loc` without `ipu.*` metadata (other metadata is kept)."""
    if isinstance(loc, ir.FusedLoc):
        inner = [strip(sub) for sub in loc.locations]
        md = loc.metadata.maybe_downcast() if loc.metadata is not None else None
        if isinstance(md, ir.DictAttr):
            kept = {n.name: n.attr for n in md if not n.name.startswith(PREFIX)}
            md = ir.DictAttr.get(kept) if kept else None
        return ir.Location.fused(inner, metadata=md)
    if isinstance(loc, ir.NameLoc):
        return ir.Location.name(loc.name_str, strip(loc.child_loc))
    if isinstance(loc, ir.CallSiteLoc):
        return ir.Location.callsite(strip(loc.callee), [strip(loc.caller)])
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
