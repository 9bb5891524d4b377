"""lit configuration: IR tests (.mlir) everywhere under test/, Python lit tests in test/python.

Substitutions: `ipu-opt` (this checkout's driver, run by the same interpreter as lit),
`FileCheck` (the Python `filecheck` package) and `%python`.
"""

import os
import shutil
import sys

import lit.formats

config.name = "poptorch-mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.test_source_root
# Run as `lit test`; pytest tests live in test/api, and examples/ holds no lit tests.
config.excludes = ["api", "examples", "__pycache__", ".venv", "build"]

bin_dir = os.path.dirname(sys.executable)
filecheck = shutil.which("filecheck", path=bin_dir) or shutil.which("filecheck")
if filecheck is None:
    lit_config.fatal("the 'filecheck' package is not installed in this environment")

config.environment["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
config.environment["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
config.substitutions.append(("%python", f'"{sys.executable}"'))
config.substitutions.append(("ipu-opt", f'"{sys.executable}" -m poptorch.tools.ipu_opt'))
config.substitutions.append(("FileCheck", f'"{filecheck}"'))
