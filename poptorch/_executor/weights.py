"""The device's copies of a wrapped model's weights and buffers (spec 4.2.3, 4.5).

`DeviceWeights` is the collaborator PoplarExecutor holds for them
(`executor._device_weights`): the NumPy array of each weight and buffer on the device
(a replica-grouped weight's as (replicas, ...), `replica_grouping.device_array`) and
whether the device changed buffers, or the optimizer changed weights, that the host has
not seen. The executor says which host tensors are the weights and when to upload or
write back (host-side changes reach the device only by an upload, as in PopTorch); calls
replace arrays, never write into them, so a copy of the dict is a snapshot of the device
state.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

import numpy as np
import torch

from poptorch import profiling
from poptorch._executor import replica_grouping as grouping


class DeviceWeights:
    """The device arrays of a model's weights and buffers (`arrays`, read by the program
    calls; replaced through `store_buffers` / `store_weights`)."""

    def __init__(self) -> None:
        # weight or buffer name -> its device array
        self.arrays: dict[str, np.ndarray] = {}
        self.buffers_dirty = False  # the device changed buffers the host has not seen
        self.weights_dirty = False  # the optimizer changed weights the host has not seen

    @property
    def dirty(self) -> bool:
        """The device holds weights or buffers newer than the host's."""
        return self.buffers_dirty or self.weights_dirty

    def clear(self) -> None:
        """Drop every device array (a new program, or destroy())."""
        self.arrays.clear()

    def _put(self, name: str, tensor: torch.Tensor,
             groupings: Mapping[str, grouping.ReplicaGrouping]) -> None:
        """Put a host weight on the device; a replica-grouped one as (replicas, ...)."""
        self.arrays[name] = grouping.device_array(tensor, groupings.get(name))

    def local_arrays(self, groupings: Mapping[str, grouping.ReplicaGrouping]
                     ) -> Mapping[str, np.ndarray]:
        """The arrays a program of this process reads: a replica-grouped weight's rows of
        its own replicas when the run has several processes (`ReplicaGrouping.local`)."""
        if not any(g.own is not None for g in groupings.values()):
            return self.arrays
        return {**self.arrays, **{name: g.local(self.arrays[name])
                                  for name, g in groupings.items() if name in self.arrays}}

    def upload(self, hosts: Iterable[tuple[str, torch.Tensor]],
               groupings: Mapping[str, grouping.ReplicaGrouping]) -> None:
        """Upload every (name, host tensor) of `hosts`; the device's buffers are the
        host's again (a "weight upload" host phase, PVTI_OPTIONS)."""
        with profiling.host_phase("weight upload"):
            for name, tensor in hosts:
                self._put(name, tensor, groupings)
        self.buffers_dirty = False

    def upload_some(self, hosts: Iterable[tuple[str, torch.Tensor]],
                    groupings: Mapping[str, grouping.ReplicaGrouping]) -> None:
        """Upload some host tensors (copyNamedBuffersToDevice); the others, and whether
        the device holds values the host has not seen, stay as they are."""
        for name, tensor in hosts:
            self._put(name, tensor, groupings)

    def store_buffers(self, values: Iterable[tuple[str, Any]], frozen: Container[str],
                      broadcast: bool) -> None:
        """The buffers (and parameters) a program step updated in place, except the
        `frozen` ones; with `broadcast` (Options.broadcastBuffers), replica 0's value
        for every replica."""
        for name, value in values:
            if name in frozen:
                continue
            value = np.asarray(value)
            if broadcast and value.ndim > self.arrays[name].ndim:
                value = value[0]
            self.arrays[name] = value
            self.buffers_dirty = True

    def store_weights(self, values: Iterable[tuple[str, np.ndarray]]) -> None:
        """The weights an optimizer step updated."""
        for name, value in values:
            self.arrays[name] = value
        self.weights_dirty = True

    def write_to_host(self, model: torch.nn.Module,
                      groupings: Mapping[str, grouping.ReplicaGrouping],
                      hosts: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Write the device arrays into the host: the replica-grouped parameters of
        `model` as their VariableRetrievalMode asks (`replica_grouping.write_to_host`),
        then each (name, host tensor) of `hosts` (replica 0's value of a per-replica
        array). The host is then up to date ("weight download" host phase)."""
        with torch.no_grad(), profiling.host_phase("weight download"):
            grouping.write_to_host(model, groupings, self.arrays)
            for name, host in hosts:
                value = self.arrays[name]
                if value.ndim > host.dim():  # per-replica buffers: replica 0's
                    value = value[0]
                host.copy_(torch.from_numpy(np.array(value)).to(host.dtype))
        self.buffers_dirty = self.weights_dirty = False

    def snapshot(self) -> tuple[dict[str, np.ndarray], bool, bool]:
        """What a call changes: the arrays (a copy of the dict is enough, see the module)
        and the dirty flags."""
        return dict(self.arrays), self.buffers_dirty, self.weights_dirty

    def restore(self, saved: tuple[dict[str, np.ndarray], bool, bool]) -> None:
        arrays, self.buffers_dirty, self.weights_dirty = saved
        self.arrays.clear()
        self.arrays.update(arrays)
