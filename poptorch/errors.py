"""PopTorch's exception types (spec 4.3): Error, RecoverableError, UnrecoverableError;
and OutOfMemoryError, the machine model's out-of-memory refusal with its figures."""

from __future__ import annotations

RECOVERY_ACTIONS = ("IPU_RESET", "LINK_RESET", "PARTITION_RESET", "FULL_RESET")


class Error(Exception):
    """An error from the compiler or the machine model.

    `message` is the error without context, `type` the part of the stack that raised
    it and its category (for example "compiler" or "ipu-opt"), `location` where it
    comes from (the user's `file:line` when the error is about their model).
    """

    def __init__(self, message: str, type: str = "poptorch", location: str = "") -> None:
        self.message = message
        self.type = type
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class RecoverableError(Error):
    """A transient failure; `recovery_action` says how to recover (spec 4.3.1)."""

    def __init__(self, message: str, recovery_action: str, type: str = "poptorch",
                 location: str = "") -> None:
        if recovery_action not in RECOVERY_ACTIONS:
            raise ValueError(
                f"recovery_action must be one of {', '.join(RECOVERY_ACTIONS)}, "
                f"got {recovery_action!r}"
            )
        self.recovery_action = recovery_action
        super().__init__(message, type, location)


class UnrecoverableError(Error):
    """A persistent failure: the machine should be taken out of operation (spec 4.3.2)."""


class OutOfMemoryError(Error):
    """The machine model's memory estimate does not fit (beyond PopTorch, whose
    compile reports PopART's memory_allocation_err as a poptorch.Error: named after
    torch.OutOfMemoryError). Its data, for code to read rather than parse the message:
    `ipus`, the IPUs out of memory in order; per such IPU the bytes it `needed`
    (`getMemoryEstimate()`'s `total`), the bytes `available` on its compute tiles, and
    the `classes` breakdown of the need at its fullest moment."""

    def __init__(self, message: str, needed: dict[int, int], available: dict[int, int],
                 classes: dict[int, dict[str, int]], type: str = "out_of_memory",
                 location: str = "") -> None:
        if set(needed) != set(available) or set(needed) != set(classes) or not needed:
            raise ValueError("needed, available and classes must name the same IPUs, "
                             "at least one")
        self.ipus = tuple(sorted(needed))
        self.needed = dict(needed)
        self.available = dict(available)
        self.classes = {ipu: dict(c) for ipu, c in classes.items()}
        super().__init__(message, type, location)

    def __reduce__(self):
        """Pickle with its data (a compile in another process raises it across)."""
        return (type(self), (self.message, self.needed, self.available, self.classes,
                             self.type, self.location))
