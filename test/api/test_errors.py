"""poptorch's exception types carry the attributes the spec names (4.3)."""

import pytest

import poptorch


def test_error_attributes():
    err = poptorch.Error("bad shape", type="compiler", location="model.py:3")
    assert (err.message, err.type, err.location) == ("bad shape", "compiler", "model.py:3")
    assert str(err) == "model.py:3: bad shape"
    assert str(poptorch.Error("plain")) == "plain"


def test_recoverable_error_needs_a_known_action():
    err = poptorch.RecoverableError("link down", recovery_action="LINK_RESET")
    assert isinstance(err, poptorch.Error) and err.recovery_action == "LINK_RESET"
    with pytest.raises(ValueError, match="recovery_action must be one of IPU_RESET"):
        poptorch.RecoverableError("x", recovery_action="REBOOT")


def test_unrecoverable_error_is_an_error():
    assert issubclass(poptorch.UnrecoverableError, poptorch.Error)
