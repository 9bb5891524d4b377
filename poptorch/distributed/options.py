"""popdist.poptorch.Options: a `poptorch.Options` set up from the launcher's environment.

As PopDist's, it sets `replicationFactor(getNumLocalReplicas())`,
`Distributed.configureProcessId(getInstanceIndex(), getNumInstances())` and
`useIpuId(getDeviceId(ipus_per_replica))`, then refuses the calls that would contradict
the launcher (useIpuId, replicationFactor and Distributed's configureProcessId,
setEnvVarNames, disable): those numbers are changed on poptorch-run's command line.
"""

from __future__ import annotations

import os
from typing import Any

from poptorch.distributed import (
    IPUS_PER_REPLICA_VAR,
    LAUNCH_HINT,
    getDeviceId,
    getInstanceIndex,
    getNumInstances,
    getNumIpusPerReplica,
    getNumLocalReplicas,
    getNumTotalReplicas,
    isPopdistEnvSet,
)
from poptorch.errors import Error
from poptorch.options import Options as _Options
from poptorch.options.categories import _DistributedOptions

__all__ = ["Options"]


def _refused(call: str, why: str) -> Error:
    return Error(f"Cannot call `{call}` with popdist.poptorch.Options: {why}", type="options")


_PROCESSES = ("the launcher sets the process id and count (RANK, WORLD_SIZE); change "
              "poptorch-run's --num-instances, or use poptorch.Options to set them yourself")


class _LauncherDistributedOptions(_DistributedOptions):
    """Options.Distributed whose process id and count come from the launcher."""

    _locked = False

    def configureProcessId(self, process_id: int, num_processes: int  # noqa: N802
                           ) -> _DistributedOptions:
        if self._locked:
            raise _refused("Distributed.configureProcessId", _PROCESSES)
        return super().configureProcessId(process_id, num_processes)

    def setEnvVarNames(self, var_num_processes: str, var_process_id: str  # noqa: N802
                       ) -> _DistributedOptions:
        if self._locked:
            raise _refused("Distributed.setEnvVarNames", _PROCESSES)
        return super().setEnvVarNames(var_num_processes, var_process_id)

    def disable(self) -> _DistributedOptions:
        if self._locked:
            raise _refused("Distributed.disable", _PROCESSES)
        return super().disable()


class Options(_Options):
    """A poptorch.Options for one instance of a poptorch-run (or torchrun) launch.

    `ipus_per_replica` is the IPUs one replica of the model uses (default: poptorch-run's
    --ipus-per-replica, else 1; when the launcher sets it, the two must agree); with the
    local replicas it sizes the device this instance attaches to, which must fit the
    compiled model. Other keyword arguments go to poptorch.Options.
    """

    _locked = False

    def __init__(self, ipus_per_replica: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isPopdistEnvSet():
            raise Error("popdist.poptorch.Options: this process was not started by "
                        "poptorch-run or torchrun (WORLD_SIZE and RANK are not set); "
                        f"{LAUNCH_HINT}", type="options")
        if ipus_per_replica is None:
            ipus_per_replica = getNumIpusPerReplica()
        elif IPUS_PER_REPLICA_VAR in os.environ and ipus_per_replica != getNumIpusPerReplica():
            raise Error(f"popdist.poptorch.Options(ipus_per_replica={ipus_per_replica!r}) "
                        f"differs from the launcher's {getNumIpusPerReplica()} (IPUs per "
                        f"replica, {IPUS_PER_REPLICA_VAR}, poptorch-run's --ipus-per-replica);"
                        f" launch with --ipus-per-replica {ipus_per_replica!r} or pass the "
                        "same number to both", type="options")
        self.replicationFactor(getNumLocalReplicas())
        self.useIpuId(getDeviceId(ipus_per_replica))
        self._distributed = _LauncherDistributedOptions()
        self._distributed.configureProcessId(getInstanceIndex(), getNumInstances())
        self._distributed._locked = True
        self._locked = True

    def replicationFactor(self, replication_factor: int) -> _Options:  # noqa: N802
        if self._locked:
            raise _refused("replicationFactor", (
                f"the launcher sets it: each of the {getNumInstances()} instances drives "
                f"{getNumLocalReplicas()} of the {getNumTotalReplicas()} replicas; change "
                "poptorch-run's --num-replicas (the total) instead"))
        return super().replicationFactor(replication_factor)

    def useIpuId(self, ipu_id: int) -> _Options:  # noqa: N802
        if self._locked:
            raise _refused("useIpuId", (
                f"the launcher gives this instance device {self.ipu_id} (popdist."
                "getDeviceId()); size it with ipus_per_replica and poptorch-run's "
                "--num-replicas and --ipus-per-replica instead"))
        return super().useIpuId(ipu_id)
