"""Peak memory (RSS) of a run against torch eager's for the same model and batch.

Each side runs in a fresh Python process that imports the same modules (torch,
poptorch, the bench's models and, for a zoo model, torchvision and transformers), takes
its resident set size as the baseline and resets the kernel's peak (writing 5 to
/proc/self/clear_refs: otherwise the imports' own transient peak hides a small model's
run), then builds the model and makes CALLS calls (inference, or training steps with SGD
and momentum); the figure is the peak (VmHWM) after them minus the baseline: what the
run added. Where the peak cannot be reset, the baseline is `ru_maxrss` after imports.
poptorch's side includes its compile. The sides run one after the other, each once (a
process's peak RSS moves little between runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CALLS = 3
TARGET = 1.5
_HERE = os.path.dirname(os.path.abspath(__file__))
_CHILD = r"""
import gc, json, resource, sys

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

sys.path.insert(0, sys.argv[1])
side, name, size, train = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
import torch, poptorch
import models, throughput
specs = dict(models.SPECS)
if name not in specs:
    import zoo
    specs.update(zoo.SPECS)
spec = specs[name]
gc.collect()
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    baseline, peak_of = status("VmRSS"), lambda: status("VmHWM")
except OSError:
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_of = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
model = spec.loss(spec.make()) if train else spec.make()
model.train(train)
x, labels = spec.inputs(size)
args = (x, labels) if train else (x,)
if side == "poptorch":
    ipu = throughput.wrap(model, throughput.options(), train)
    call = lambda: ipu(*args)
else:
    call = throughput.eager_call(model, args, train)
for _ in range(int(sys.argv[6])):
    call()
peak = peak_of()
print(json.dumps({"baseline_kb": baseline, "peak_kb": peak}))
"""


def _run(side: str, name: str, size: int, train: bool) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, _HERE, side, name, str(size),
                           "1" if train else "0", str(CALLS)],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{side} {name}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(name: str, size: int, train: bool) -> dict[str, object]:
    """Megabytes the run added to each side's peak RSS, and their ratio."""
    row: dict[str, object] = {"mode": "training" if train else "inference", "model": name,
                              "batch": size}
    try:
        for side in ("torch", "poptorch"):
            result = _run(side, name, size, train)
            row[f"{side}_baseline_mb"] = result["baseline_kb"] / 1024
            row[f"{side}_mb"] = (result["peak_kb"] - result["baseline_kb"]) / 1024
        row["ratio"] = row["poptorch_mb"] / max(row["torch_mb"], 1e-3)
    except RuntimeError as error:
        row["error"] = str(error)[:200]
    return row
