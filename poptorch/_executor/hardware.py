"""Spec 11.2 helpers about the IPU hardware: here, the machine model is the hardware.

poptorch-mlir has no physical IPUs: every model runs on the NumPy model of an IPU-POD64
(`poptorch.runtime.machine.system.IPUS_IN_SYSTEM` GC200 IPUs). These helpers describe that
simulated system, so that code written for real IPUs ("if ipuHardwareIsAvailable(4):
...") takes the IPU path and gets the machine model's figures.
"""

from __future__ import annotations

from poptorch.errors import Error
from poptorch.runtime.machine.system import GC200, IPUS_IN_SYSTEM


def ipuHardwareIsAvailable(num_ipus: int = 1) -> bool:  # noqa: N802 - PopTorch's name
    """Whether the simulated system has `num_ipus` IPUs: True from 1 up to the 64 IPUs of
    the modelled IPU-POD64. No physical IPU is ever checked: the machine model stands in
    for the hardware. IPUs held by attached models still count: this says whether the
    IPUs exist, not whether they are free (`poptorch._executor.device`; POPTORCH_WAIT_FOR_IPU)."""
    if isinstance(num_ipus, bool) or not isinstance(num_ipus, int):
        raise Error(f"ipuHardwareIsAvailable: num_ipus must be an int, got {num_ipus!r}",
                    type="api")
    return 1 <= num_ipus <= IPUS_IN_SYSTEM


def ipuHardwareVersion() -> int:  # noqa: N802 - PopTorch's name
    """The IPU version of the simulated system: 2 (Mk2 GC200), the version of the default
    machine (`poptorch.runtime.machine.system.machine_for(2)`); offline targets of other
    versions come from Options.useOfflineIpuTarget."""
    return GC200.version
