"""PopTorch's exception types (spec 4.3): Error, RecoverableError, UnrecoverableError."""

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
