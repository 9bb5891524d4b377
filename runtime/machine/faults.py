"""Fault injection: the machine model fails a run as IPU hardware can (spec 4.3).

A fault has
- a kind: a `recovery_action` of `poptorch.RecoverableError` (IPU_RESET, LINK_RESET,
  PARTITION_RESET, FULL_RESET), or UNRECOVERABLE for `poptorch.UnrecoverableError`;
- `call` (>= 1, default 1): the call that fails, counting the calls of models whose
  device includes the faulty IPU, from when the fault is armed;
- `step` (>= 0, default 0): the program step (micro-batch, 0 to deviceIterations x
  gradientAccumulation - 1) of that call at which the IPU fails; earlier steps have run;
- `ipu` (0 to 63, default any): the IPU of the simulated IPU-POD64 that fails (the IPU
  IDs of `gc-info`); without one, the first IPU of whichever model runs.

An armed fault fires once. From Python:

    from poptorch.runtime.machine import faults

    with faults.inject("IPU_RESET", call=2, step=1):
        ...  # the second call fails at its micro-batch 1
    faults.arm("UNRECOVERABLE", ipu=3)  # armed until it fires or faults.clear()

From a script's environment, read when a call starts if its value changed since:

    POPTORCH_FAULT_INJECTION=LINK_RESET:call=3,step=2,ipu=0 python train.py

A bad value is a `poptorch.Error` naming the variable, at every call until it is fixed.

What the executor does (`poptorch/_executor.py`): the failing call leaves the device state
as it was before the call (weights, buffers, optimizer and loss-scaling state, the RNG).
After a RecoverableError the model stays attached but refuses to run until it is
detached and attached again (`detachFromDevice(); attachToDevice()`); then the call can be
run again and nothing is lost. After an UnrecoverableError the model refuses to run or
attach again; `copyWeightsToHost()` still gives the weights of the last completed call.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from poptorch.errors import RECOVERY_ACTIONS, Error, RecoverableError, UnrecoverableError
from poptorch.runtime.machine.system import IPUS_IN_SYSTEM

KINDS = (*RECOVERY_ACTIONS, "UNRECOVERABLE")
VARIABLE = "POPTORCH_FAULT_INJECTION"
_FORMAT = (f"expected KIND[:call=N,step=N,ipu=N] with KIND one of {', '.join(KINDS)}, "
           f"for example {VARIABLE}=IPU_RESET:call=2,step=1")


@dataclass(frozen=True)
class Fault:
    """An armed fault: which call and program step fail, on which IPU (None: any)."""

    kind: str
    call: int = 1
    step: int = 0
    ipu: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise Error(f"unknown fault kind {self.kind!r}; use one of {', '.join(KINDS)}",
                        type="fault_injection")
        for name, value, low in (("call", self.call, 1), ("step", self.step, 0),
                                 ("ipu", self.ipu, 0)):
            if value is None and name == "ipu":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise Error(f"fault {name} must be an int >= {low}, got {value!r}",
                            type="fault_injection")
        if self.ipu is not None and self.ipu >= IPUS_IN_SYSTEM:
            raise Error(f"fault ipu must be an IPU of the simulated IPU-POD64, 0 to "
                        f"{IPUS_IN_SYSTEM - 1}, got {self.ipu}", type="fault_injection")


@dataclass(frozen=True)
class Strike:
    """A fault failing the current call at program step `step` on IPU `ipu`."""

    kind: str
    call: int
    step: int
    ipu: int

    def error(self, model: str) -> Error:
        """The exception of the failure, for the `model` model."""
        where = (f"IPU {self.ipu} failed at program step {self.step} of this call of the "
                 f"{model} model (call {self.call} on this IPU since the fault was armed)")
        if self.kind == "UNRECOVERABLE":
            return UnrecoverableError(
                f"{where}: an injected unrecoverable fault (poptorch.runtime.machine.faults); take "
                "the machine out of operation for analysis and repair; the weights of the "
                "last completed call can still be copied to the host (copyWeightsToHost())",
                type="fault_injection", location=f"IPU {self.ipu}")
        return RecoverableError(
            f"{where}: an injected {self.kind} fault (poptorch.runtime.machine.faults); the "
            "call did not complete and the device state is as it was before it: detach and "
            "reattach the model (detachFromDevice(); attachToDevice()), then run the call again",
            self.kind, type="fault_injection", location=f"IPU {self.ipu}")


class _Switch:
    """The armed fault and the calls counted against it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fault: Fault | None = None
        self.calls = 0
        self.from_variable = False
        self.variable = ""  # the variable's value last read


_SWITCH = _Switch()


def arm(kind: str, call: int = 1, step: int = 0, ipu: int | None = None) -> Fault:
    """Arm a fault (replacing any armed one); it fires once."""
    fault = Fault(kind, call, step, ipu)
    with _SWITCH.lock:
        _SWITCH.fault, _SWITCH.calls, _SWITCH.from_variable = fault, 0, False
    return fault


def clear() -> None:
    """Disarm the armed fault, if any."""
    with _SWITCH.lock:
        _SWITCH.fault, _SWITCH.calls = None, 0


def armed() -> Fault | None:
    """The armed fault, or None."""
    with _SWITCH.lock:
        return _SWITCH.fault


@contextlib.contextmanager
def inject(kind: str, call: int = 1, step: int = 0, ipu: int | None = None
           ) -> Iterator[Fault]:
    """Arm a fault for the duration of the block (disarmed at its end if it did not fire)."""
    fault = arm(kind, call, step, ipu)
    try:
        yield fault
    finally:
        with _SWITCH.lock:
            if _SWITCH.fault is fault:
                _SWITCH.fault, _SWITCH.calls = None, 0


def parse(text: str) -> Fault:
    """The fault of a POPTORCH_FAULT_INJECTION value: KIND[:call=N,step=N,ipu=N]."""
    kind, colon, rest = text.strip().partition(":")
    if kind not in KINDS:
        raise Error(f"{VARIABLE}={text!r}: unknown fault kind {kind!r}; {_FORMAT}",
                    type="fault_injection")
    values: dict[str, int] = {}
    for item in rest.split(",") if colon else []:
        key, equals, value = item.strip().partition("=")
        if key not in ("call", "step", "ipu") or not equals:
            raise Error(f"{VARIABLE}={text!r}: {item.strip()!r} is not call=N, step=N or "
                        f"ipu=N; {_FORMAT}", type="fault_injection")
        if key in values:
            raise Error(f"{VARIABLE}={text!r}: {key} is given twice; {_FORMAT}",
                        type="fault_injection")
        if not re.fullmatch(r"[0-9]{1,9}", value.strip()):
            raise Error(f"{VARIABLE}={text!r}: {key} must be a whole number, got "
                        f"{value.strip()!r}; {_FORMAT}", type="fault_injection")
        values[key] = int(value)
    try:
        return Fault(kind, **values)
    except Error as err:
        raise Error(f"{VARIABLE}={text!r}: {err.message}; {_FORMAT}",
                    type="fault_injection") from None


def _read_variable() -> None:
    """Arm the variable's fault if its value changed (lock held)."""
    raw = os.environ.get(VARIABLE, "")
    if raw == _SWITCH.variable:
        return
    fault = parse(raw) if raw.strip() else None
    _SWITCH.variable = raw
    if fault is not None:
        _SWITCH.fault, _SWITCH.calls, _SWITCH.from_variable = fault, 0, True
    elif _SWITCH.from_variable:
        _SWITCH.fault, _SWITCH.calls = None, 0


def begin_call(ipus: range, steps: int, model: str) -> Strike | None:
    """Count a call of `steps` program steps running on `ipus`; the strike if the armed
    fault fails it (the fault is then spent)."""
    with _SWITCH.lock:
        _read_variable()
        fault = _SWITCH.fault
        if fault is None or (fault.ipu is not None and fault.ipu not in ipus):
            return None
        _SWITCH.calls += 1
        if _SWITCH.calls < fault.call:
            return None
        _SWITCH.fault, _SWITCH.calls = None, 0
    if fault.step >= steps:
        raise Error(f"the injected {fault.kind} fault is armed for program step {fault.step}, "
                    f"but this call of the {model} model has {steps} program steps (0 to "
                    f"{steps - 1}); it was disarmed: arm it for an earlier step",
                    type="fault_injection")
    return Strike(fault.kind, fault.call, fault.step,
                  fault.ipu if fault.ipu is not None else ipus.start)
