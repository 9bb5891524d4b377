"""pytest configuration: test/api is importable (for the `numerics` helper)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
