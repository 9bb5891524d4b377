"""The planner's candidate boundaries and the model's segments between them.

Candidates are submodules a stage may begin at (`poptorch.BeginBlock`): by default the
children of the model's outermost `torch.nn.ModuleList`s, the repeated layers of a
transformer (`bert.encoder.layer.3`, GPT-2's `transformer.h.3`), or the names the user
gives. One forward pass on the CPU, with a forward pre-hook on each candidate, puts them
in the order the model runs them and checks that each runs exactly once (a module that
runs twice or never cannot begin a stage), and notes whether any module runs before the
first candidate (then that prefix, such as the embeddings, is a segment of its own and
may be a stage on its own).

Also here: the Python expression of a module in the code a user writes
(`model.bert.encoder.layer[3]`), and the inputs of a compile with other options (the
example's first micro-batch repeated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from poptorch.errors import Error


@dataclass(frozen=True)
class Segments:
    """The candidates in the order the model runs them, and whether modules run before
    the first one (a prefix segment)."""

    candidates: tuple[str, ...]
    prefix: bool

    @property
    def count(self) -> int:
        return len(self.candidates) + (1 if self.prefix else 0)

    def begins(self, segment: int) -> str | None:
        """The candidate segment `segment` begins at (None: the prefix)."""
        index = segment - (1 if self.prefix else 0)
        return self.candidates[index] if index >= 0 else None


def default_candidates(model: torch.nn.Module) -> list[str]:
    """Children of the outermost ModuleLists, in module order."""
    names: list[str] = []
    lists = [name for name, m in model.named_modules() if isinstance(m, torch.nn.ModuleList)]
    for name in lists:
        if any(name.startswith(f"{outer}.") for outer in lists if outer != name):
            continue
        names += [f"{name}.{child}" if name else child
                  for child, _ in model.get_submodule(name).named_children()]
    return names


def check_names(model: torch.nn.Module, candidates: Any) -> list[str]:
    """The candidates the user gave, checked to be submodule names."""
    if not isinstance(candidates, list | tuple) or not candidates or \
            not all(isinstance(c, str) for c in candidates):
        raise Error(f"plan_pipeline: candidates must be a non-empty list of submodule names "
                    f"(as model.named_modules() gives them), got {candidates!r}",
                    type="planner")
    modules = dict(model.named_modules())
    for name in candidates:
        if not name or name not in modules:
            raise Error(f"plan_pipeline: candidates: the model has no submodule {name!r}; "
                        "use names from model.named_modules(), such as "
                        f"{next((n for n in modules if n), 'layers.0')!r}", type="planner")
    if len(set(candidates)) != len(candidates):
        raise Error(f"plan_pipeline: candidates name a submodule twice: {list(candidates)}",
                    type="planner")
    return list(candidates)


def order(model: torch.nn.Module, candidates: Sequence[str], args: tuple) -> Segments:
    """Run the model once on the CPU to order the candidates and find the prefix."""
    calls: list[str] = []
    leaves_before = [0]
    inside = {name: model.get_submodule(name) for name in candidates}
    owned = {id(m) for c in inside.values() for m in c.modules()}

    def called(name: str):
        def hook(*_):
            calls.append(name)
        return hook

    def leaf(module, *_):
        if not calls and id(module) not in owned and not list(module.children()):
            leaves_before[0] += 1

    hooks = [m.register_forward_pre_hook(called(n)) for n, m in inside.items()]
    hooks += [m.register_forward_pre_hook(leaf) for m in model.modules()]
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for hook in hooks:
            hook.remove()
    for name in candidates:
        runs = calls.count(name)
        if runs != 1:
            raise Error(f"plan_pipeline: candidate {name!r} runs {runs} times in the model's "
                        "forward; a stage can only begin at a module that runs once; leave "
                        "it out of candidates", type="planner")
    return Segments(tuple(calls), leaves_before[0] > 0)


def expression(name: str, root: str = "model") -> str:
    """`bert.encoder.layer.3` -> `model.bert.encoder.layer[3]`."""
    text = root
    for part in name.split("."):
        text += f"[{part}]" if part.isdigit() else f".{part}"
    return text


def micro_batch(args: tuple, rows: int, name: str) -> tuple:
    """The first micro-batch of each tensor argument (`rows` of its leading dimension
    make one call's micro-batches)."""
    out = []
    for index, arg in enumerate(args):
        if isinstance(arg, torch.Tensor) and arg.dim() > 0:
            if arg.shape[0] % rows:
                raise Error(f"plan_pipeline: example argument {index} has {arg.shape[0]} rows, "
                            f"not a multiple of the {rows} micro-batches one call of the "
                            f"model takes with these options ({name}); pass the inputs of "
                            "one call of the wrapped model", type="planner")
            arg = arg[:arg.shape[0] // rows]
        out.append(arg)
    return tuple(out)


def repeated(micro: tuple, times: int) -> tuple:
    """The inputs of a call taking `times` micro-batches."""
    return tuple(torch.cat([a] * times) if isinstance(a, torch.Tensor) and a.dim() > 0
                 else a for a in micro)
