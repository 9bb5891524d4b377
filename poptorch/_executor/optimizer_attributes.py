"""Unexpected optimizer attributes in setOptimizer (spec 11: relaxOptimizerAttributesChecks).

When the training model compiles, the attributes its optimizer has are recorded: the
names in `defaults`, in each param group and the optimizer's own public attributes.
A later `setOptimizer` with an optimizer that has others (`param_groups[0]["foo"]`, an
attribute PopTorch's optimizer does not read) cannot change the compiled program, so
they are ignored with a warning the first time each is seen, as in PopTorch
(`_optimizer_attributes.OptimizerAttrTracker`); `Options.relaxOptimizerAttributesChecks()`
sends the message to the debug channel instead.
"""

from __future__ import annotations

from typing import Any

import torch

from poptorch._logging import logger


def _attributes(optimizer: torch.optim.Optimizer) -> dict[str, set[str]]:
    """Attribute names by where they are: "default group variable", "group <n>
    attribute" and "optimizer attribute" (the words of PopTorch's messages)."""
    found = {"default group variable": set(optimizer.defaults)}
    for index, group in enumerate(optimizer.param_groups):
        found[f"group {index} attribute"] = set(group) - {"params"}
    found["optimizer attribute"] = {name for name in vars(optimizer)
                                    if not name.startswith("_")}
    return found


class AttributeTracker:
    """The optimizer attributes seen at compilation, and the messages already printed."""

    def __init__(self, optimizer: torch.optim.Optimizer, relax: bool) -> None:
        self.expected = _attributes(optimizer)
        self.kind = type(optimizer).__name__
        self.log = logger.debug if relax else logger.warning
        self.printed: set[str] = set()

    def check(self, optimizer: torch.optim.Optimizer) -> list[str]:
        """Report (once each) the attributes of `optimizer` not seen at compilation;
        returns the messages of this call."""
        messages = []
        for where, names in _attributes(optimizer).items():
            # a group added later is checked against group 0's attributes
            expected: Any = self.expected.get(where, self.expected.get("group 0 attribute"))
            extra = sorted(names - (expected or set()))
            if extra:
                messages.append(f"Ignoring unexpected {where} in {self.kind} optimizer: "
                                f"{extra}")
        for message in messages:
            if message not in self.printed:
                self.log(message)
                self.printed.add(message)
        return messages
