"""Replica-grouped weights (spec 4.4.3): `replicaGrouping()` on a wrapped model's
parameter, and how the executors lay such a weight out over the replicas.

A grouped parameter's host tensor has one slice per replica group along a new leading
dimension; the model is captured with the slice's shape, and on the device the weight
is a (replicas, ...) array in which each replica holds its group's slice, so the
kernels see it as one more per-replica operand. Training reduces its gradient only
within each group and steps each group's slice (and optimizer state) on its own.

Over several processes (`Options.Distributed`) the groups are of the whole run's
replicas, processes x replicationFactor, process p's replicas being p x
replicationFactor onwards: the host tensor has a slice per group of the run, the
device array is the run's (replicas, ...) in every process, and a process's programs
read its own replicas' rows (`ReplicaGrouping.local`).

The groupings are kept per executor in `PoplarExecutor.per_replica_params`, name ->
(comm_group_type, shards, variable_retrieval_mode), as PopTorch keeps them: the same
module wrapped by `trainingModel` and then `inferenceModel` is grouped on each wrapper.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import torch

from poptorch._executor.model_copy import shallow_copy
from poptorch._frontend import capture
from poptorch.enums import CommGroupType, VariableRetrievalMode
from poptorch.errors import Error
from poptorch.options import Options


class GroupedExecutor(Protocol):
    """What replica grouping reads and writes of a wrapped model (`PoplarExecutor`)."""

    per_replica_params: dict[str, tuple[CommGroupType, int, VariableRetrievalMode]]

    @property
    def model(self) -> torch.nn.Module: ...

    @property
    def options(self) -> Options: ...

    def isCompiled(self) -> bool: ...  # noqa: N802 - PopTorch's name


@dataclass(frozen=True)
class ReplicaGrouping:
    """How one parameter is shared: `groups` slices over `replicas` replicas."""

    comm_group_type: CommGroupType
    shards: int  # replicas per group (Consecutive, Orthogonal)
    retrieval: VariableRetrievalMode
    replicas: int  # the run's: processes x replicationFactor
    first: int = 0  # this process's first replica
    own: int | None = None  # this process's replicas (None: all of them)

    def local(self, array: np.ndarray) -> np.ndarray:
        """The rows of this process's replicas in a (replicas, ...) array."""
        if self.own is None or self.own == self.replicas:
            return array
        return array[self.first:self.first + self.own]

    @property
    def size(self) -> int:
        """Replicas per group (NoGrouping: 1; `shards` is ignored, as the spec says)."""
        return 1 if self.comm_group_type == CommGroupType.NoGrouping else self.shards

    @property
    def groups(self) -> int:
        return self.replicas // self.size

    def group_of(self) -> np.ndarray:
        """For each replica, the index of its group (the slice it holds)."""
        r = np.arange(self.replicas)
        if self.comm_group_type == CommGroupType.Orthogonal:
            return r % self.groups  # {0, m, 2m, ...}, {1, m+1, ...}: m = groups
        return r // self.size

    def first_replicas(self) -> np.ndarray:
        """The first replica of each group, whose value stands for the group's."""
        return np.unique(self.group_of(), return_index=True)[1]

    def replica_group(self) -> tuple[str, int]:
        """(kind, size) of `#ipu.replica_group` for reducing within the groups."""
        if self.comm_group_type == CommGroupType.NoGrouping:
            return "no_grouping", 0
        return self.comm_group_type.name.lower(), self.size


def _describe(comm_group_type: CommGroupType, shards: int) -> str:
    return f"replicaGrouping(CommGroupType.{comm_group_type.name}, {shards})"


def check(name: str, comm_group_type: Any, shards: Any, variable_retrieval_mode: Any,
          options: Options) -> ReplicaGrouping | None:
    """The grouping `replicaGrouping(...)` asks for on parameter `name` over the run's
    replicas (`run_replicas`), or an Error naming what to change; None for
    CommGroupType.All, which has no effect (spec)."""
    replicas, processes = run_replicas(options), options.Distributed.numProcesses
    where = f"{name}.replicaGrouping"
    if not isinstance(comm_group_type, CommGroupType):
        raise Error(f"{where}: comm_group_type must be a poptorch.CommGroupType (All, "
                    f"Consecutive, Orthogonal, NoGrouping), got {comm_group_type!r}",
                    type="options")
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise Error(f"{where}: shards (the number of replicas in each group) must be an "
                    f"int >= 1, got {shards!r}", type="options")
    if not isinstance(variable_retrieval_mode, VariableRetrievalMode):
        raise Error(f"{where}: variable_retrieval_mode must be a "
                    f"poptorch.VariableRetrievalMode (OnePerGroup, AllReplicas), got "
                    f"{variable_retrieval_mode!r}", type="options")
    if comm_group_type == CommGroupType.All:
        return None
    grouping = ReplicaGrouping(comm_group_type, shards, variable_retrieval_mode, replicas)
    if replicas % grouping.size:
        total = f"replicationFactor({replicas})" if processes == 1 else (
            f"the {replicas} replicas of {processes} processes x replicationFactor("
            f"{replicas // processes})")
        raise Error(f"{where}: shards={shards} replicas per group does not divide "
                    f"{total}; use a factor of {replicas}", type="options")
    return grouping


def run_replicas(options: Options) -> int:
    """The replicas of the whole run: every process's replicationFactor."""
    return options.replication_factor * options.Distributed.numProcesses


def check_host_shape(name: str, tensor: torch.Tensor, grouping: ReplicaGrouping) -> None:
    """A grouped parameter holds one slice per group along its first dimension (or one
    per replica, as AllReplicas retrieval leaves it)."""
    groups = grouping.groups
    if tensor.dim() == 0 or tensor.shape[0] not in (groups, grouping.replicas):
        raise Error(
            f"parameter {name} has shape {list(tensor.shape)}, but "
            f"{_describe(grouping.comm_group_type, grouping.shards)} with "
            f"replicationFactor({grouping.replicas}) makes {groups} replica groups: give "
            f"{name} a first dimension of {groups}, one slice per group", type="executor")


def to_replicas(array: np.ndarray, grouping: ReplicaGrouping) -> np.ndarray:
    """A host value, one slice per group (or per replica, as AllReplicas retrieval wrote
    it: each group then takes its first replica's), as the (replicas, ...) device array."""
    if array.shape[0] == grouping.replicas and grouping.groups != grouping.replicas:
        array = array[grouping.first_replicas()]
    return np.ascontiguousarray(array[grouping.group_of()])


def to_host(array: np.ndarray, grouping: ReplicaGrouping) -> np.ndarray:
    """The (replicas, ...) device array as `copyWeightsToHost` returns it: OnePerGroup,
    (groups, ...) from each group's first replica; AllReplicas, (replicas, ...)."""
    if grouping.retrieval == VariableRetrievalMode.AllReplicas:
        return np.array(array)
    return np.array(array[grouping.first_replicas()])


def device_array(tensor: torch.Tensor, grouping: ReplicaGrouping | None) -> np.ndarray:
    """The device array of a host weight (narrowed to 32 bits, a copy); a replica-grouped
    one as (replicas, ...)."""
    array = capture.narrow(tensor.detach()).cpu().numpy().copy()
    return array if grouping is None else to_replicas(array, grouping)


def per_group(groupings: dict[str, ReplicaGrouping], name: str, value: np.ndarray
              ) -> np.ndarray:
    """A device value of weight `name` with one entry per replica group ((groups,
    ...), the groups' first replicas) if it is grouped; else unchanged."""
    if name in groupings:
        return value[groupings[name].first_replicas()]
    return value


def per_replica(groupings: dict[str, ReplicaGrouping], name: str, value: np.ndarray
                ) -> np.ndarray:
    """The inverse of `per_group`: each replica gets its group's entry."""
    if name in groupings:
        return value[groupings[name].group_of()]
    return value


def write_to_host(model: torch.nn.Module, groupings: dict[str, ReplicaGrouping],
                  arrays: dict[str, np.ndarray]) -> None:
    """Write the replica-grouped parameters' device `arrays` into the host `model`, as
    their VariableRetrievalMode asks: OnePerGroup writes (groups, ...), in place;
    AllReplicas replaces the parameter's data by (replicas, ...), one value per replica
    (uploading such a tensor again gives each group its first replica's)."""
    for name, group in groupings.items():
        host = model.get_parameter(name)
        value = torch.from_numpy(to_host(arrays[name], group)).to(host.dtype)
        if value.shape == host.shape:
            host.copy_(value)
        else:
            host.data = value


def per_replica_model(model: torch.nn.Module, groupings: dict[str, ReplicaGrouping]
                      ) -> torch.nn.Module:
    """`model` with each grouped parameter replaced by one group's slice, for capture:
    the program is the per-replica one, and the executor feeds every replica its own."""
    if not groupings:
        return model
    clone = shallow_copy(model)
    for name in groupings:
        owner, _, attr = name.rpartition(".")
        module = clone.get_submodule(owner)
        param = module._parameters[attr]
        module._parameters[attr] = torch.nn.Parameter(param.detach()[0].clone(),
                                                      param.requires_grad)
    return clone


class GroupingMethod:
    """`param.replicaGrouping(comm_group_type, shards, variable_retrieval_mode)`: records
    the grouping on the executor the parameter was read through. Pickling or copying
    the parameter keeps the method but not the executor it belonged to."""

    def __init__(self, executor: GroupedExecutor | None, name: str) -> None:
        self._executor = weakref.ref(executor) if executor is not None else None
        self._name = name

    def __call__(self, comm_group_type: CommGroupType, shards: int,
                 variable_retrieval_mode: VariableRetrievalMode) -> None:
        executor = self._executor() if self._executor is not None else None
        if executor is None:
            raise Error(f"{self._name}.replicaGrouping: the parameter belongs to no live "
                        "wrapped model; wrap the model with poptorch.inferenceModel or "
                        "trainingModel, keep the wrapper, and call replicaGrouping on its "
                        "parameter", type="executor")
        if executor.isCompiled():
            raise Error(f"{self._name}.replicaGrouping was called after the model was "
                        "compiled; call it before the first call or compile(), or wrap the "
                        "model again", type="executor")
        check(self._name, comm_group_type, shards, variable_retrieval_mode, executor.options)
        executor.per_replica_params[self._name] = (comm_group_type, shards,
                                                   variable_retrieval_mode)

    def __reduce__(self):
        return GroupingMethod, (None, self._name)


def attach(executor: GroupedExecutor, name: str, param: torch.nn.Parameter) -> None:
    """Give `param` a `replicaGrouping` method bound to `executor` (PopTorch's API)."""
    param.replicaGrouping = GroupingMethod(executor, name)


def resolve(executor: GroupedExecutor) -> dict[str, ReplicaGrouping]:
    """The executor's groupings, checked against the options and host shapes (compile
    time: the replication factor may have changed since replicaGrouping was called)."""
    options = executor.options
    replicas, own = run_replicas(options), options.replication_factor
    groupings = {}
    for name, entry in executor.per_replica_params.items():
        try:
            param = executor.model.get_parameter(name)
        except AttributeError:
            raise Error(f"per_replica_params names {name!r}, which is not a parameter of the "
                        "model; use a name from model.named_parameters()",
                        type="executor") from None
        grouping = check(name, *entry, options)
        if grouping is not None:
            check_host_shape(name, param, grouping)
            if own != replicas:
                grouping = replace(grouping, first=options.Distributed.processId * own, own=own)
            groupings[name] = grouping
    return groupings
