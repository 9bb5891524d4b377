"""Fixed per-call overhead: a model of one add at batch 1, poptorch's microseconds a call
against torch eager's, and where a poptorch call's host time goes.

The profile is cProfile's over CALLS calls after the timing: the functions with the most
own time (time in the function itself, not in what it calls), per call, with their
cumulative time. cProfile's hooks slow each Python call, so the profile's total is
higher than the timed figure: read its shares, not its sum.
"""

from __future__ import annotations

import cProfile
import os
import pstats

import torch
from harness import pair
from throughput import options

import poptorch

CALLS = 2000
TOP = 15
TARGET_US = 150.0


class OneAdd(torch.nn.Module):
    """x + 1."""

    def forward(self, x):
        return x + 1


def _where(key: tuple[str, int, str]) -> str:
    path, line, name = key
    if path == "~":
        return name  # a builtin
    parts = path.split(os.sep)
    for top in ("poptorch", "runtime", "passes", "torch", "numpy"):
        if top in parts:
            parts = parts[len(parts) - 1 - parts[::-1].index(top):]
            break
    else:
        parts = parts[-2:]
    return f"{'/'.join(parts)}:{line} {name}"


def measure(**timing) -> dict[str, object]:
    """Median microseconds of a call, poptorch and eager, and the host profile."""
    model = OneAdd().eval()
    x = torch.randn(1, 8)
    ipu = poptorch.inferenceModel(OneAdd().eval(), options())
    if not torch.equal(ipu(x), model(x)):
        raise AssertionError("one add: poptorch and torch disagree")

    def eager():
        with torch.no_grad():
            return model(x)

    ipu_s, torch_s, repeats = pair(lambda: ipu(x), eager, **timing)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(CALLS):
        ipu(x)
    profile.disable()
    ipu.destroy()
    stats = pstats.Stats(profile)
    total = sum(entry[2] for entry in stats.stats.values())
    top = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:TOP]
    return {"poptorch_us": ipu_s * 1e6, "torch_us": torch_s * 1e6, "ratio": ipu_s / torch_s,
            "repeats": repeats, "profile_calls": CALLS,
            "profile_total_us": total / CALLS * 1e6,
            "profile": [{"function": _where(key), "calls": entry[1] / CALLS,
                         "own_us": entry[2] / CALLS * 1e6, "share": entry[2] / total,
                         "cumulative_us": entry[3] / CALLS * 1e6}
                        for key, entry in top]}
