"""poptorch.distributed: PopDist's calls, for scripts launched by poptorch-run or torchrun.

Graphcore's PopDist library tells a script started by PopRun which instance (process)
it is, how many there are and how many replicas each drives; `popdist.poptorch.Options()`
turns that into a `poptorch.Options`. Here the launcher is `poptorch-run`
(poptorch.tools.run, built on torch.distributed.run) or plain `torchrun`, and the
environment they export is the source of truth:

- RANK and WORLD_SIZE (torchrun's): this instance's index and the number of instances;
- POPTORCH_NUM_REPLICAS (poptorch-run's --num-replicas): the replicas of all instances
  together; under plain torchrun, where it is unset, each instance drives one replica
  (export it beside torchrun to give each WORLD_SIZE-th of them);
- POPTORCH_IPUS_PER_REPLICA (poptorch-run's --ipus-per-replica): 1 when unset.

The calls keep PopDist's names (camelCase), as the scripts written for PopDist call
them. A call that needs the environment outside it, or a variable that does not hold a
valid value, is a `poptorch.Error` saying how to launch. `Options` (poptorch.distributed
.options) is imported on first use: it subclasses `poptorch.Options`, whose import
pulls in torch, and a script that only asks for its rank should not wait for that.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from typing import Any

from poptorch.errors import Error
from poptorch.runtime.machine.system import DEVICE_SIZES, IPUS_IN_SYSTEM, devices_of_size

__all__ = [
    "Options", "checkNumIpusPerReplica", "execute_on_instances", "getDeviceId",
    "getInstanceIndex", "getNumInstances", "getNumIpusPerReplica", "getNumLocalReplicas",
    "getNumTotalReplicas", "getReplicaIndexOffset", "getReplicationFactor", "init",
    "isPopdistEnvSet",
]

# what poptorch-run exports beside torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*
NUM_REPLICAS_VAR = "POPTORCH_NUM_REPLICAS"
IPUS_PER_REPLICA_VAR = "POPTORCH_IPUS_PER_REPLICA"

LAUNCH_HINT = ("launch the script with poptorch-run --num-instances N --num-replicas R "
               "script.py (or torchrun --nproc-per-node N script.py), or use "
               "poptorch.Options and Options.Distributed.configureProcessId() to run "
               "without a launcher")


def _error(message: str) -> Error:
    return Error(message, type="distributed")


def _int_var(name: str, minimum: int) -> int:
    """The integer in environment variable `name`, at least `minimum`."""
    text = os.environ[name]
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise _error(f"environment variable {name} must be an integer >= {minimum}, got "
                     f"{text!r}; {LAUNCH_HINT}")
    return value


def isPopdistEnvSet() -> bool:  # noqa: N802 - PopDist's names
    """True when a launcher started this process: poptorch-run or torchrun (WORLD_SIZE
    and RANK are set)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def _require(call: str) -> None:
    if not isPopdistEnvSet():
        raise _error(f"popdist.{call}(): this process was not started by poptorch-run or "
                     f"torchrun (WORLD_SIZE and RANK are not set); {LAUNCH_HINT}")


def getNumInstances() -> int:  # noqa: N802
    """Number of instances (processes) the launcher started, on all hosts."""
    _require("getNumInstances")
    return _int_var("WORLD_SIZE", 1)


def getInstanceIndex() -> int:  # noqa: N802
    """Index of this instance, 0 to getNumInstances() - 1."""
    _require("getInstanceIndex")
    count, index = _int_var("WORLD_SIZE", 1), _int_var("RANK", 0)
    if index >= count:
        raise _error(f"environment variable RANK ({index}) must be smaller than WORLD_SIZE "
                     f"({count}); {LAUNCH_HINT}")
    return index


def getNumTotalReplicas() -> int:  # noqa: N802
    """Replicas of all instances together: poptorch-run's --num-replicas, or one per
    instance under plain torchrun."""
    _require("getNumTotalReplicas")
    instances = getNumInstances()
    if NUM_REPLICAS_VAR not in os.environ:
        return instances
    total = _int_var(NUM_REPLICAS_VAR, 1)
    if total % instances:
        raise _error(f"{NUM_REPLICAS_VAR}={total} replicas cannot be shared out evenly "
                     f"over WORLD_SIZE={instances} instances; launch with a number of "
                     f"replicas that is a multiple of {instances}")
    return total


def getNumLocalReplicas() -> int:  # noqa: N802
    """Replicas this instance drives: getNumTotalReplicas() / getNumInstances()."""
    _require("getNumLocalReplicas")
    return getNumTotalReplicas() // getNumInstances()


def getReplicationFactor() -> int:  # noqa: N802
    """The replicationFactor of this instance's Options: getNumLocalReplicas()."""
    _require("getReplicationFactor")
    return getNumLocalReplicas()


def getReplicaIndexOffset() -> int:  # noqa: N802
    """Global index of this instance's first replica: the instances before it drive
    getNumLocalReplicas() each."""
    _require("getReplicaIndexOffset")
    return getInstanceIndex() * getNumLocalReplicas()


def getNumIpusPerReplica() -> int:  # noqa: N802
    """IPUs one replica uses: poptorch-run's --ipus-per-replica (1 when unset)."""
    _require("getNumIpusPerReplica")
    if IPUS_PER_REPLICA_VAR not in os.environ:
        return 1
    return _int_var(IPUS_PER_REPLICA_VAR, 1)


def checkNumIpusPerReplica(ipus_per_replica: int) -> bool:  # noqa: N802
    """Whether `ipus_per_replica` is the launcher's getNumIpusPerReplica()."""
    return ipus_per_replica == getNumIpusPerReplica()


def getDeviceId(ipus_per_replica: int | None = None) -> int:  # noqa: N802
    """The device (as `gc-info -l` numbers them, see Options.useIpuId) this instance
    attaches to: of getNumLocalReplicas() x `ipus_per_replica` IPUs (default
    getNumIpusPerReplica()), the instances sharing out the devices of that size of the
    simulated IPU-POD64 in index order (instance i takes the (i mod count)-th: the
    instances past one POD's worth are on another POD)."""
    _require("getDeviceId")
    if ipus_per_replica is None:
        ipus_per_replica = getNumIpusPerReplica()
    if isinstance(ipus_per_replica, bool) or not isinstance(ipus_per_replica, int) or \
            ipus_per_replica < 1:
        raise _error(f"getDeviceId: ipus_per_replica must be an integer >= 1, got "
                     f"{ipus_per_replica!r}")
    local = getNumLocalReplicas()
    ids = devices_of_size(local * ipus_per_replica)
    if not ids:
        sizes = ", ".join(map(str, DEVICE_SIZES))
        raise _error(f"each instance drives {local} replicas x {ipus_per_replica} IPUs per "
                     f"replica = {local * ipus_per_replica} IPUs, but the devices of the "
                     f"simulated IPU-POD64 have {sizes} IPUs; launch with --num-replicas "
                     f"and --ipus-per-replica whose product per instance is one of these, at "
                     f"most {IPUS_IN_SYSTEM}")
    return ids[getInstanceIndex() % len(ids)]


def init() -> None:
    """Check the launcher's environment (PopDist's popdist.init()): every variable
    holds a valid value; an Error saying what is wrong otherwise."""
    _require("init")
    getInstanceIndex()
    getNumLocalReplicas()
    getNumIpusPerReplica()


def execute_on_instances(instances: Iterable[int], function: Callable[..., Any],
                         *args: Any, **kwargs: Any) -> Any:
    """Call `function(*args, **kwargs)` on the instances whose index is in `instances`
    (such as {0}, to write a checkpoint once) and return its result; None elsewhere."""
    _require("execute_on_instances")
    wanted = set(instances)
    count = getNumInstances()
    if bad := [i for i in wanted if isinstance(i, bool) or not isinstance(i, int)
               or not 0 <= i < count]:
        raise _error(f"execute_on_instances: instances must be indices 0 to {count - 1} of "
                     f"the {count} instances, got {', '.join(sorted(map(repr, bad)))}")
    if getInstanceIndex() in wanted:
        return function(*args, **kwargs)
    return None


def __getattr__(name: str) -> Any:
    if name == "Options":
        # start-up cost: poptorch.options imports torch (3.0 s, against 0.04 s for this
        # module, measured with `python -c "import poptorch.options"`)
        value = importlib.import_module("poptorch.distributed.options").Options
        globals()[name] = value
        return value
    raise AttributeError(f"module 'poptorch.distributed' has no attribute '{name}'")
