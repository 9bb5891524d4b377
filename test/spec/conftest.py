"""The spec examples' helpers (extract, harness, the tables) and the model zoo's
`import_torchvision` import by name from their folders."""

import os
import sys

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "models"))
