"""Compile latency, cold and with a warm executable cache, by phase.

Each measurement is a fresh Python process, as a user restarting a script sees it: the
time of `model.compile(x)` alone, imports excluded. "cold" compiles into an empty cache
directory; "warm" compiles the same model in a new process with that directory. Both
report `compiled.timings`, grouped here into the phases: fingerprint (the cache key),
capture (torch.export), import (torch-mlir's FX importer), conversion (torch-mlir's
backend pipeline and our torch-to-ipu conversion), passes (every other pipeline step),
jit (Python source generated and compiled), cache read (a hit: read, verify and parse
the entry, then the JIT) and install (memory estimate, weight upload, the simulated
timeline). Each child runs one full garbage collection before it starts the clock: the
objects torch's imports and the model made (365k of them, measured) otherwise leave a full
collection pending that lands in the window by chance (177-210 ms here). A first
unmeasured pair writes Python's bytecode caches, as any first run on
a machine does (the children run with bytecode writing on, whatever the sandbox says).

    .venv/bin/python bench/compile_latency.py [--repeats 3] [--models transformer]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[3])
import torch, poptorch
from models import batch, make

opts = poptorch.Options().showCompilationProgressBar(False).enableExecutableCaching(
    sys.argv[1])
model = poptorch.inferenceModel(make(sys.argv[2]).eval(), opts)
x, _ = batch(sys.argv[2], 32)
gc.collect()
start = time.perf_counter()
model.compile(x)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "timings": model._compiled.timings,
                  "checksum": float(model(x).double().sum())}))
"""
_CONVERSION = ("torchdynamo-export-to-torch-backend-pipeline", "torch-func-backend-type-conversion",
               "ipu-convert-torch-to-ipu", "torch-finalizing-backend-type-conversion")
PHASES = ("fingerprint", "capture", "import", "conversion", "passes", "jit", "cache read",
          "install")


def phases(timings: dict[str, float], total: float) -> dict[str, float]:
    """`compiled.timings` grouped into PHASES, plus 'other' (the rest of `total`)."""
    grouped = dict.fromkeys(PHASES, 0.0)
    for name, seconds in timings.items():
        if name in grouped:
            grouped[name] += seconds
        elif name in _CONVERSION:
            grouped["conversion"] += seconds
        else:
            grouped["passes"] += seconds
    grouped["other"] = max(0.0, total - sum(grouped.values()))
    return {name: seconds for name, seconds in grouped.items() if seconds}


def _compile_once(cache: str, model: str) -> dict:
    # bytecode caching as on a user's machine (a sandbox may turn it off): compiling
    # Python sources is a once-per-installation cost, not a per-compile one
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", _CHILD, cache, model, _HERE],
                          capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"compiling {model} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["phases"] = phases(result.pop("timings"), result["seconds"])
    return result


def measure(model: str, repeats: int) -> dict:
    """Median cold and warm compile seconds of `model` (micro-batch 32), with each phase's
    median."""
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            runs["cold"].append(_compile_once(cache, model))
            runs["warm"].append(_compile_once(cache, model))
        if runs["cold"][-1]["checksum"] != runs["warm"][-1]["checksum"]:
            raise AssertionError(f"{model}: the warm and cold programs' results differ")
    result: dict = {"repeats": repeats}
    for kind, done in runs.items():
        names = {name for run in done for name in run["phases"]}
        result[kind] = {"seconds": statistics.median(run["seconds"] for run in done),
                        "all_seconds": [run["seconds"] for run in done],
                        "phases": {name: statistics.median(run["phases"].get(name, 0.0)
                                                           for run in done)
                                   for name in PHASES + ("other",) if name in names}}
    result["speedup"] = result["cold"]["seconds"] / result["warm"]["seconds"]
    return result


def warm_up(model: str) -> None:
    """One unmeasured pair: writes the bytecode caches of every module involved."""
    with tempfile.TemporaryDirectory() as cache:
        _compile_once(cache, model)
        _compile_once(cache, model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="transformer")
    args = parser.parse_args()
    names = args.models.split(",")
    warm_up(names[0])
    for name in names:
        result = measure(name, args.repeats)
        print(name, json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
