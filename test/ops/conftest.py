"""pytest configuration: the harness modules of test/ops are importable."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
