"""pytest configuration of the model zoo: `zoo` is importable and every test here is
marked `zoo` (`pytest -m "not zoo"` leaves the tier out)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.zoo)
