"""Inputs the model updates in place (`x += 1`, `x[0:2] = 0`, `torch.add(a, b, out=x)`):
after each call, their new values are copied into the user's tensors, as PopTorch does.

The program returns each updated input's new value per micro-batch, after the buffers'
updates (`capture.Captured.mutated_inputs`, `joint.TrainingCaptured.mutated_inputs`).
A call's input holds every micro-batch of the call (deviceIterations x
gradientAccumulation x replica input groups, laid out as `batches.stacked_inputs`
reads them), so the value written back is the whole updated input in that layout,
whatever `Options.outputMode` says of the outputs; replicas that share an input group
computed the same update, and the first of them gives it. The copy casts to the user's
dtype (an int64 input, narrowed to int32 on the way in, is int64 again) and goes to the
user's own tensor, also when poptorch streamed a copy of it (`capture.given_tensor`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from poptorch._executor import batches
from poptorch._frontend import capture
from poptorch.options import Options


def combine(per_step: list[list[np.ndarray]], options: Options, flat: list[Any],
            indices: list[int]) -> list[np.ndarray]:
    """Each updated input's value over the call: the results of each program step start
    with the (replicas, micro-batch, ...) arrays of the flat inputs `indices` (of
    `flat`, the call's inputs)."""
    if not indices:
        return []
    slices = batches.replica_slices(options)
    # the first replica reading each input group's slice
    first = [int(np.flatnonzero(slices == group)[0]) for group in range(slices.max() + 1)]
    values = []
    for k, index in enumerate(indices):
        stacked = np.stack([np.asarray(step[k]) for step in per_step])
        # (steps, groups, micro-batch, ...) is the layout of the call's input
        values.append(stacked[:, first].reshape(flat[index].shape))
    return values


def write_back(flat: list[Any], indices: list[int], values: list[np.ndarray]) -> None:
    """Copy each updated input's new value into the user's tensor (the flat input
    `indices[i]`), in its dtype."""
    with torch.no_grad():
        for index, value in zip(indices, values, strict=True):
            target = capture.given_tensor(flat[index])
            # (a 0-d input comes back with its one element in a 1-d array)
            target.copy_(torch.from_numpy(np.ascontiguousarray(value)).reshape(target.shape))
