"""Compile time of Hugging Face BERT-base shaped models, from wrapping to the first result.

BERT-base's shape (hidden 768, 12 heads, intermediate 3072, vocabulary 30522) at 2, 6,
12 and 24 encoder layers, random weights, a 10-class sequence classifier over 128
tokens, micro-batch 1; inference, and a training step with SGD and momentum. Each
measurement is a fresh Python process, imports excluded (a first unmeasured child
writes the bytecode caches, as `compile_latency` does); the child times the model's
construction, then `poptorch.inferenceModel`/`trainingModel`, `compile` and the first
call, and reports `compiled.timings` in `compile_latency`'s phases: capture is the
trace (torch.export), the rest the compile. Wrap to result is also given as the
process's CPU time (all its threads), which a loaded host inflates far less than wall
time.

Single-IPU training keeps weights and optimizer state in Streaming Memory
(`TensorLocations`, `useOnChipStorage(False)`): BERT-base's weights, gradients and
momentum (1.4 GB at 12 layers, measured) do not fit one IPU's 897 MiB. The pipelined
run splits 12 layers over 4 IPUs (embeddings and 3 layers a stage, gradient
accumulation 7), on chip. The warm run compiles the 12-layer inference model again in a
new process with the cold run's `enableExecutableCaching` directory. The model's class
lives in a file (`zoo.BertClassifier`): the cache fingerprints a model's source, and a
class defined in `python -c` has none (the cache is then not used).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from compile_latency import phases

LAYERS = (2, 6, 12, 24)
QUICK_LAYERS = (2, 6)
TARGETS = {"inference12": 3.0, "pipelined12": 10.0, "warm_over_construction": 0.050}
_HERE = os.path.dirname(os.path.abspath(__file__))
_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
layers, mode, cache = int(sys.argv[2]), sys.argv[3], sys.argv[4]
import torch, poptorch
import transformers
from zoo import BertClassifier

gc.collect()
start = time.perf_counter()
torch.manual_seed(0)
config = transformers.BertConfig(hidden_size=768, num_hidden_layers=layers,
                                 num_attention_heads=12, intermediate_size=3072,
                                 max_position_embeddings=512, num_labels=10)
model = BertClassifier(config)
built = time.perf_counter()
opts = poptorch.Options().showCompilationProgressBar(False)
if cache:
    opts.enableExecutableCaching(cache)
train = mode != "inference"
count = 1
if mode == "pipelined":
    count = 7
    for n in (1, 2, 3):
        poptorch.BeginBlock(model.model.bert.encoder.layer[layers * n // 4], f"b{n}", ipu_id=n)
    opts.Training.gradientAccumulation(count)
elif train:
    off_chip = poptorch.TensorLocationSettings().useOnChipStorage(False)
    opts.TensorLocations.setWeightLocation(off_chip).setOptimizerLocation(off_chip)
generator = torch.Generator().manual_seed(1)
ids = torch.randint(0, config.vocab_size, (count, 128), generator=generator)
labels = torch.randint(0, 10, (count,), generator=generator)
args = (ids, labels) if train else (ids,)
wrap, cpu = time.perf_counter(), time.process_time()
if train:
    ipu = poptorch.trainingModel(model.train(), opts,
                                 poptorch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9))
else:
    ipu = poptorch.inferenceModel(model.eval(), opts)
ipu.compile(*args)
compiled = time.perf_counter()
out = ipu(*args)
done, cpu = time.perf_counter(), time.process_time() - cpu
print(json.dumps({"construction_s": built - start, "wrap_to_result_s": done - wrap,
                  "wrap_to_result_cpu_s": cpu,
                  "compile_s": compiled - wrap, "first_call_s": done - compiled,
                  "timings": ipu._compiled.timings}))
"""


def _child(layers: int, mode: str, cache: str = "") -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", _CHILD, _HERE, str(layers), mode, cache],
                          capture_output=True, text=True, env=env)
    if done.returncode:
        lines = done.stderr.strip().splitlines()
        return {"layers": layers, "mode": mode,
                "error": (lines[-1] if lines else f"exit {done.returncode}")[:300]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    grouped = phases(result.pop("timings"), result["compile_s"])
    result["trace_s"] = grouped.pop("capture", 0.0)
    result["phases"] = grouped
    return {"layers": layers, "mode": mode, **result}


def measure(layers: tuple[int, ...], log=print) -> dict[str, object]:
    """The depth sweep (inference and training), the pipelined training and the warm
    executable-cache hit, each one fresh process."""
    _child(layers[0], "inference")  # bytecode caches
    rows = []
    for mode in ("inference", "training"):
        for depth in layers:
            rows.append(_child(depth, mode))
            log(_line(rows[-1]))
    depth = 12 if 12 in layers else max(layers)
    rows.append(_child(depth, "pipelined"))
    log(_line(rows[-1]))
    with tempfile.TemporaryDirectory() as cache:
        cold = _child(depth, "inference", cache)
        warm = _child(depth, "inference", cache)
    for row, kind in ((cold, "cached cold"), (warm, "cached warm")):
        row["mode"] = kind
        rows.append(row)
        log(_line(row))
    return {"rows": rows, "growth": growth(rows)}


def growth(rows: list[dict]) -> dict[str, dict[str, list[float]]]:
    """Per mode and pair of consecutive depths measured, [seconds ratio, depth ratio]
    of wrap to result: growth is at most linear where the first is at most the second."""
    out: dict[str, dict[str, list[float]]] = {}
    for mode in ("inference", "training"):
        times = {r["layers"]: r["wrap_to_result_s"] for r in rows
                 if r["mode"] == mode and "error" not in r}
        depths = sorted(times)
        out[mode] = {f"{a}->{b}": [times[b] / times[a], b / a]
                     for a, b in zip(depths, depths[1:], strict=False)}
    return out


def _line(row: dict) -> str:
    if "error" in row:
        return f"bert-base {row['layers']} layers {row['mode']}: {row['error']}"
    return (f"bert-base {row['layers']} layers {row['mode']}: construction "
            f"{row['construction_s']:.2f} s, wrap to first result "
            f"{row['wrap_to_result_s']:.2f} s (trace {row['trace_s']:.2f} s)")
