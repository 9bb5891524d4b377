"""Which models hold which devices of the simulated IPU-POD64 (spec 11.1 useIpuId, 4.11.4).

Device IDs are `gc-info -l`'s (`poptorch.runtime.machine.system.device_ipus`): 0..63 single
IPUs, then the multi-IPU devices. A model needs one device of exactly (IPUs the compiled
model uses) x replicationFactor IPUs. Attaching takes the device `Options.useIpuId`
names, or else the first free device of that size; its IPUs are held (process-wide,
thread-safe) until the model detaches, is destroyed or is garbage collected.

IPUs in use are an error, or with POPTORCH_WAIT_FOR_IPU=1 a wait until they are
released. Wrapped models are often kept alive only by reference cycles, so a busy
device is looked at again after one `gc.collect()` before refusing or waiting.

`DeviceLease` is the collaborator PoplarExecutor holds for this (`executor._device`): the
device a model holds, whether the options let it attach (ConnectionType.Never, an
offline target), the fault of a call that failed mid-run (an injected fault,
`poptorch.runtime.machine.faults`) and the refusal to run until it is recovered. The
executor says when to attach and what the device state of a call is (`DeviceLease.run`
takes its snapshot and restore).
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from poptorch._logging import logger
from poptorch.enums import ConnectionType
from poptorch.errors import Error, RecoverableError, UnrecoverableError
from poptorch.options import Options
from poptorch.options.categories import env_flag
from poptorch.runtime.machine import faults
from poptorch.runtime.machine.system import (
    DEVICE_SIZES,
    GC200,
    IPUS_IN_SYSTEM,
    device_ipus,
    devices_of_size,
)

WAIT_VARIABLE = "POPTORCH_WAIT_FOR_IPU"

T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True, eq=False)
class Lease:
    """A device held by a model: its ID, its IPUs and who holds it."""

    device_id: int
    ipus: range
    holder: str


def describe(device_id: int) -> str:
    """`device 65 (IPUs 2-3)`."""
    ipus = device_ipus(device_id)
    if len(ipus) == 1:
        return f"device {device_id} (IPU {ipus.start})"
    return f"device {device_id} (IPUs {ipus.start}-{ipus[-1]})"


def _id_range(ids: range) -> str:
    return str(ids.start) if len(ids) == 1 else f"{ids.start}..{ids[-1]}"


def _plural(count: int, what: str) -> str:
    return f"{count} {what}" if count == 1 else f"{count} {what}s"


class _Registry:
    """IPU -> the lease holding it, under one condition variable."""

    def __init__(self) -> None:
        # re-entrant: a finalizer run by the garbage collector inside a locked region of
        # the same thread may release a lease
        self._changed = threading.Condition(threading.RLock())
        self._held: dict[int, Lease] = {}

    def _take(self, candidates: range | list[int], holder: str) -> Lease | None:
        for device_id in candidates:
            ipus = device_ipus(device_id)
            if not any(ipu in self._held for ipu in ipus):
                lease = Lease(device_id, ipus, holder)
                for ipu in ipus:
                    self._held[ipu] = lease
                return lease
        return None

    def release(self, lease: Lease) -> None:
        with self._changed:
            for ipu in lease.ipus:
                if self._held.get(ipu) is lease:
                    del self._held[ipu]
            self._changed.notify_all()

    def holders(self, device_id: int) -> list[Lease]:
        """The leases holding IPUs of `device_id`, in IPU order."""
        with self._changed:
            found = [self._held.get(ipu) for ipu in device_ipus(device_id)]
        return list(dict.fromkeys(lease for lease in found if lease is not None))

    def acquire(self, candidates: list[int], holder: str, busy: Callable[[], str]) -> Lease:
        """The first free device of `candidates`, after one garbage collection if none
        is; then the error `busy()` says, or with POPTORCH_WAIT_FOR_IPU=1 a wait."""
        for attempt in range(2):
            with self._changed:
                lease = self._take(candidates, holder)
            if lease is not None:
                return lease
            if attempt == 0:
                gc.collect()  # unreachable models release their devices
        if not env_flag(WAIT_VARIABLE):
            raise Error(busy(), type="device")
        logger.info("waiting for %s (%s=1)",
                    f"{describe(candidates[0])} to be released" if len(candidates) == 1
                    else f"a device of {_plural(len(device_ipus(candidates[0])), 'IPU')} to "
                    "be free", WAIT_VARIABLE)
        with self._changed:
            while (lease := self._take(candidates, holder)) is None:
                self._changed.wait()
        return lease


_REGISTRY = _Registry()
release = _REGISTRY.release
holders = _REGISTRY.holders


def ipus_needed(model_ipus: int, replicas: int) -> str | None:
    """None if a device has `model_ipus` x `replicas` IPUs, else why not."""
    total = model_ipus * replicas
    if total in DEVICE_SIZES:
        return None
    sizes = ", ".join(map(str, DEVICE_SIZES[:-1])) + f" or {DEVICE_SIZES[-1]}"
    return (f"the model needs {_plural(total, 'IPU')} ({_plural(model_ipus, 'IPU')} x "
            f"replicationFactor({replicas})), but the devices of the simulated IPU-POD64 "
            f"have {sizes} IPUs; change the replication factor (or the IPUs the model is "
            f"placed on) so that their product is one of these, at most {IPUS_IN_SYSTEM}")


def attach(model_ipus: int, replicas: int, ipu_id: int | None, holder: str) -> Lease:
    """Hold a device for a model using `model_ipus` IPUs per replica: `ipu_id`'s (from
    useIpuId) or the first free one of the right size."""
    if (why := ipus_needed(model_ipus, replicas)) is not None:
        raise Error(why, type="device")
    total = model_ipus * replicas
    right_size = devices_of_size(total)
    need = (f"the model needs {_plural(total, 'IPU')} ({_plural(model_ipus, 'IPU')} x "
            f"replicationFactor({replicas}))")
    if ipu_id is None:
        def all_busy() -> str:
            return (f"no device of {_plural(total, 'IPU')} is free (IDs "
                    f"{_id_range(right_size)}): {need}; detach or destroy another model "
                    f"(detachFromDevice() or destroy()), or set {WAIT_VARIABLE}=1 to wait "
                    "until one is free")
        return _REGISTRY.acquire(list(right_size), holder, all_busy)
    size = len(device_ipus(ipu_id))
    if size != total:
        raise Error(f"useIpuId({ipu_id}): {describe(ipu_id)} has {_plural(size, 'IPU')}, "
                    f"but {need}; use a device ID with {_plural(total, 'IPU')} "
                    f"({_id_range(right_size)}), or no useIpuId to take a free one",
                    type="device")

    def device_busy() -> str:
        others = " and ".join(f"the {lease.holder} model on {describe(lease.device_id)}"
                              for lease in holders(ipu_id)) or "another model"
        return (f"useIpuId({ipu_id}): {describe(ipu_id)} is in use by {others}; detach or "
                "destroy that model (detachFromDevice() or destroy()), use another device "
                f"of {_plural(total, 'IPU')} ({_id_range(right_size)}), or set "
                f"{WAIT_VARIABLE}=1 to wait until it is free")
    return _REGISTRY.acquire([ipu_id], holder, device_busy)


class DeviceLease:
    """The device one wrapped model holds, and the fault that keeps it from running.

    Given by the executor: the options (when attaching), the IPUs one replica of the
    compiled model uses, the model's name for messages, and, for a call, its number of
    steps and its device-state snapshot and restore. Holds: `lease` (None when detached),
    `fault` (the RecoverableError / UnrecoverableError of the last failed call) and the
    injected fault striking the current call. The IPUs are released by `release()` or
    when this object is garbage collected.
    """

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.fault: Error | None = None
        self._finalizer: weakref.finalize | None = None  # releases the IPUs when collected
        self._strike: faults.Strike | None = None  # the injected fault failing this call

    @property
    def attached(self) -> bool:
        return self.lease is not None

    def attach(self, options: Options, model_ipus: int, holder: str) -> None:
        """Hold a device for `model_ipus` IPUs x the replication factor (useIpuId's, or a
        free one), unless the options or a fault say not to."""
        if options.connection_type == ConnectionType.Never:
            offline = (f" (useOfflineIpuTarget({options.offline_ipu_version}) sets it)"
                       if options.offline_ipu_version else "")
            raise Error("the options say never to attach to an IPU: connectionType("
                        f"poptorch.ConnectionType.Never){offline}; the model compiles but "
                        "cannot run here: export it with compileAndExport() and load the file "
                        "where it will run, or use connectionType(poptorch.ConnectionType."
                        "Always) or OnDemand", type="device")
        if options.offline_ipu_version not in (None, GC200.version):
            raise Error(f"the model was compiled for an offline Mk{options.offline_ipu_version}"
                        f" target (useOfflineIpuTarget({options.offline_ipu_version})), but the "
                        "simulated IPU-POD64 has Mk2 GC200 IPUs; compile it with "
                        "useOfflineIpuTarget(2) or without an offline target to run it",
                        type="device")
        self.check_recoverable(attaching=True)
        lease = attach(model_ipus, options.replication_factor, options.ipu_id, holder)
        self.lease = lease
        self._finalizer = weakref.finalize(self, release, lease)

    def release(self) -> None:
        """Give the IPUs back (detach); a RecoverableError is recovered from."""
        if self._finalizer is not None:
            self._finalizer()
        self.lease = self._finalizer = None
        if isinstance(self.fault, RecoverableError):
            self.fault = None

    def close(self) -> None:
        """destroy(): release the IPUs and forget any fault."""
        self.release()
        self.fault = None

    def check_recoverable(self, attaching: bool = False) -> None:
        """Refuse to run (or attach) after a fault, saying how to recover."""
        fault = self.fault
        if isinstance(fault, UnrecoverableError):
            raise Error(f"this model's {fault.location} failed with an unrecoverable error, so "
                        f"it cannot {'attach' if attaching else 'run'} again: take the machine "
                        "out of operation; copyWeightsToHost() still gives the weights of the "
                        "last completed call, and destroy() releases the model",
                        type="executor")
        if isinstance(fault, RecoverableError) and not attaching:
            raise Error(f"this model's last call failed ({fault.recovery_action} on "
                        f"{fault.location}) and it cannot run until it is recovered: detach "
                        "and reattach it (detachFromDevice(); attachToDevice()), then run the "
                        "call again", type="executor")

    def run(self, steps: int, holder: str, call: Callable[[], T],
            snapshot: Callable[[], S], restore: Callable[[S], None]) -> T:
        """`call()`, one call of `steps` program steps on the held device; if it fails
        mid-run, `restore(snapshot())` puts the device state back as it was before, and
        a RecoverableError / UnrecoverableError is kept as the fault."""
        self._strike = faults.begin_call(self.lease.ipus, steps, holder)
        saved = snapshot()
        try:
            return call()
        except BaseException as err:
            restore(saved)
            if isinstance(err, RecoverableError | UnrecoverableError):
                self.fault = err
            raise
        finally:
            self._strike = None

    def fail_if_struck(self, step: int, holder: str) -> None:
        """Before program step `step`: fail here if an injected fault says so."""
        if self._strike is not None and step == self._strike.step:
            raise self._strike.error(holder)
