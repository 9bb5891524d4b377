"""The kernel module: one emitter per kind of group (`EMITTERS`, keyed by `Kind`) writes
each group's function, and `kernel_module` puts the distinct ones in one MLIR module.

An emitter says how a group's function is written (`function`), which inputs and outputs
it has when they are not the group's values (`io`), which of its loops calls on several
threads share (`split`: `FusedKernel` cuts big calls), and what the program calls on
top of the compiled function (`call`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from poptorch.runtime.jit.codegen.fusion import elementwise, window
from poptorch.runtime.jit.codegen.fusion.group import Group, Kind


@dataclass(frozen=True)
class Emitter:
    """How groups of one kind become kernel functions and calls (`FusedKernel`'s)."""

    function: Callable[[str, Group], str]
    io: Callable[[Group], tuple[list, list] | None]
    split: Callable[[Group], tuple[int, int]]
    call: Callable[[Any, Group], Any]


def _own_io(group: Group) -> None:
    """The function's inputs and outputs are the group's values."""
    return None


def _compiled(kernel, group: Group):
    """The program calls the compiled function itself."""
    return kernel


EMITTERS: dict[Kind, Emitter] = {
    Kind.ELEMENTWISE: Emitter(elementwise.function, _own_io, elementwise.split, _compiled),
    Kind.WINDOW: Emitter(window.function, window.io, window.split, window.call),
}


def kernel_module(groups: list[Group]) -> tuple[str, list[int]]:
    """The kernel module of `groups` and each group's function number: function
    `fused_<i>` for the i-th distinct kernel (an LSTM's steps share one)."""
    functions: dict[str, int] = {}
    numbers = []
    for group in groups:
        text = EMITTERS[group.kind].function("NAME", group)
        numbers.append(functions.setdefault(text, len(functions)))
    body = [text.replace("@NAME(", f"@fused_{i}(", 1) for text, i in functions.items()]
    return "module {\n" + "\n".join(body) + "\n}\n", numbers
