"""Compile latency of the transformer encoder layer, cold and with a warm executable cache.

Each measurement is a fresh Python process (as a user restarting a script would see it):
the time of `model.compile(x)` alone, imports excluded. "cold" compiles into an empty
cache directory (capture, import, passes, JIT, machine model, and writing the entry);
"warm" compiles the same model in a new process with that directory (fingerprint, read
and verify the entry, parse the module, JIT, machine model); "again" is a second model
compiled in the cold process, which hits the entry the first one wrote. The median of `--repeats`
pairs is reported, with each phase of the first cold compile. A first unmeasured pair
writes Python's bytecode caches, as any first run on a machine does.

    .venv/bin/python bench/compile_cache.py [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, sys, time, torch, poptorch
torch.manual_seed(0)

class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1,
                                                      batch_first=True)

    def forward(self, x):
        return self.layer(x)

opts = poptorch.Options().showCompilationProgressBar(False).enableExecutableCaching(
    sys.argv[1])
model = poptorch.inferenceModel(Encoder(), opts)
x = torch.randn(2, 16, 64)
start = time.perf_counter()
model.compile(x)
seconds = time.perf_counter() - start
out = model(x)
again = poptorch.inferenceModel(Encoder(), opts)  # a second compile in this process
start = time.perf_counter()
again.compile(x)
print(json.dumps({"seconds": seconds, "phases": model._compiled.timings,
                  "again": time.perf_counter() - start,
                  "checksum": float(out.double().sum())}))
"""


def _compile_once(cache: str) -> dict:
    # bytecode caching as on a user's machine (a sandbox may turn it off): compiling
    # Python sources is a once-per-installation cost, not a per-compile one
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", _CHILD, cache], capture_output=True,
                          text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    cold, warm, again, phases = [], [], [], None
    with tempfile.TemporaryDirectory() as cache:  # writes the bytecode of every module
        _compile_once(cache)
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            first = _compile_once(cache)
            second = _compile_once(cache)
        assert first["checksum"] == second["checksum"], "warm and cold results differ"
        cold.append(first["seconds"])
        again.append(first["again"])
        warm.append(second["seconds"])
        phases = phases or first["phases"]
    result = {"model": "TransformerEncoderLayer(64, 4, 128), input (2, 16, 64)",
              "repeats": args.repeats, "cold_s": statistics.median(cold),
              "warm_s": statistics.median(warm), "cold_all_s": cold, "warm_all_s": warm,
              "speedup": statistics.median(cold) / statistics.median(warm),
              "same_process_warm_s": statistics.median(again),
              "same_process_speedup": statistics.median(cold) / statistics.median(again),
              "cold_phases_s": phases}
    print(f"{'compile':<8} {'median s':>9}  runs")
    print(f"{'cold':<8} {result['cold_s']:>9.3f}  {', '.join(f'{s:.3f}' for s in cold)}")
    print(f"{'warm':<8} {result['warm_s']:>9.3f}  {', '.join(f'{s:.3f}' for s in warm)}")
    print(f"{'again':<8} {result['same_process_warm_s']:>9.3f}  "
          f"{', '.join(f'{s:.3f}' for s in again)}  (a second compile in the cold process)")
    print(f"warm cache is {result['speedup']:.1f}x faster than a cold compile "
          f"({result['same_process_speedup']:.1f}x in the same process)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
