"""What running a spec example needs besides its own code (issue 24): the `Entry` of the
per-example table (its context, its patches, its check, an xfail for a feature being
built) and the helpers checks share.

The spec's snippets assume the imports of its full listings (`torch`, `poptorch`,
`numpy`, `nn`, `F`): PRELUDE gives every example those. Doctest fragments of the API
reference that annotate a model (`with poptorch.Block(...): layer()`) are statements of
a model's forward mixed with the options code around it: `forward_model` runs the
former in `SpecModel.forward`, where `layer()`/`layerN()` applies the model's next
Linear layer to the activation, and the latter at the top level.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import torch

import poptorch

PRELUDE = """\
import numpy
import torch
import torch.nn as nn
import torch.nn.functional as F
import poptorch
"""

SPEC_MODEL = '''\
class SpecModel(torch.nn.Module):
    """The model a fragment annotates: each layer() applies the next Linear(4, 4)."""

    def __init__(self):
        super().__init__()
        self.linears = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(6))

    def forward(self, x):
        acts = [x]

        def layer(*_):
            acts.append(torch.relu(self.linears[len(acts) - 1](acts[-1])))
            return acts[-1]

        layer1 = layer2 = layer3 = layer4 = layer
{body}
        return acts[-1]
'''


@dataclass(frozen=True)
class Patch:
    """A string replacement on the extracted source, and why it is needed."""

    old: str
    new: str
    reason: str


@dataclass(frozen=True)
class Entry:
    """How to run one example and check its result.

    `check(ns, out)` gets the namespace the example ran in and what it printed, and
    raises when the result is not what the spec says. `context` runs before the
    example (definitions the text assumes), after the examples named in `after` (keys
    of examples whose definitions this one continues). `xfail` names the feature being
    built that the example needs (a strict xfail). `forward` runs the fragment's model
    statements in SpecModel.forward (see the module docstring). `raises` is the
    exception type and message fragment the example itself must raise. `python` is
    False for an example that is not Python (a config file, a shell line): the check
    uses its source (`ns["__source__"]`)."""

    check: Callable[[dict, str], None]
    context: str = ""
    patches: tuple[Patch, ...] = ()
    after: tuple[str, ...] = ()
    xfail: str | None = None
    forward: bool = False
    raises: tuple[type, str] | None = None
    python: bool = True


def apply(source: str, patches: tuple[Patch, ...]) -> str:
    """The source with each patch applied; a patch whose text is missing is an error
    (the spec changed: the table must be looked at again)."""
    for patch in patches:
        if source.count(patch.old) != 1:
            raise AssertionError(f"patch target {patch.old!r} is not once in the example "
                                 f"({patch.reason})")
        source = source.replace(patch.old, patch.new)
    return source


def forward_model(source: str) -> str:
    """The fragment with its forward statements (`with` blocks and what they hold,
    `poptorch.Block.useAutoId()`) moved into SpecModel.forward, the rest after it."""
    top, body = [], []
    lines = source.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith(("with ", "poptorch.Block.useAutoId")):
            body.append(line)
            index += 1
            while index < len(lines) and lines[index].startswith(" "):
                body.append(lines[index])
                index += 1
        else:
            top.append(line)
            index += 1
    model = SPEC_MODEL.format(body=textwrap.indent("\n".join(body), " " * 8))
    return model + "\n" + "\n".join(top) + "\n"


def close(actual, expected, **tolerances) -> None:
    """Numbers against PyTorch on CPU."""
    torch.testing.assert_close(actual, expected, **tolerances)


def run_inference(model: torch.nn.Module, opts: poptorch.Options | None,
                  *inputs: torch.Tensor, **tolerances):
    """Run `model` on the IPU with `opts` and compare with the CPU; the IPU's output."""
    model.eval()
    wrapped = poptorch.inferenceModel(model, opts or poptorch.Options())
    out = wrapped(*inputs)
    close(out, model(*inputs), **tolerances)
    wrapped.destroy()
    return out


def run_blocks(ns: dict, device_iterations: int, opts: poptorch.Options | None = None):
    """SpecModel as the fragment annotated it, with the fragment's `opts` (or `opts`)
    and `device_iterations` micro-batches of 2, against the CPU."""
    torch.manual_seed(0)
    options = opts or ns.get("opts") or poptorch.Options()
    options.deviceIterations(device_iterations)
    return run_inference(ns["SpecModel"](), options, torch.randn(2 * device_iterations, 4))


def printed_tensors(out: str) -> list[str]:
    """The `tensor(...)` reprs an example printed, one per print."""
    return [line for line in out.splitlines() if line.startswith("tensor(")]
