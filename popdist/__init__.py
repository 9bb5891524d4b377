"""popdist: PopDist's module name, so that scripts written for PopRun and PopDist run
unchanged under poptorch-run (or torchrun).

`import popdist` gives PopDist's calls (isPopdistEnvSet, getInstanceIndex,
getNumInstances, getNumTotalReplicas, getNumLocalReplicas, ..., init,
execute_on_instances) and `import popdist.poptorch` its `Options`; both are
`poptorch.distributed`'s, which documents them.
"""

from poptorch.distributed import (
    checkNumIpusPerReplica,
    execute_on_instances,
    getDeviceId,
    getInstanceIndex,
    getNumInstances,
    getNumIpusPerReplica,
    getNumLocalReplicas,
    getNumTotalReplicas,
    getReplicaIndexOffset,
    getReplicationFactor,
    init,
    isPopdistEnvSet,
)

__all__ = [
    "checkNumIpusPerReplica", "execute_on_instances", "getDeviceId", "getInstanceIndex",
    "getNumInstances", "getNumIpusPerReplica", "getNumLocalReplicas", "getNumTotalReplicas",
    "getReplicaIndexOffset", "getReplicationFactor", "init", "isPopdistEnvSet",
]
