"""poptorch-mlir's benchmarks against PyTorch on CPU: `make bench` runs this.

Sections (all by default): inference and training time of the model zoo at micro-batch
1, 32 and 256 against torch eager; replication scaling; compile latency cold and with a
warm executable cache, by phase; a matmul-heavy model's FLOP/s against NumPy's matmul.
Results go to DIR/results.json, DIR/results.txt and DIR/ratio_vs_batch.html.

    .venv/bin/python bench/run.py [--out bench/out] [--quick] [--sections inference,...]
"""

from __future__ import annotations

import argparse
import os
import time

import compile_latency
import harness
import matmul
import report
import throughput
from models import MODELS

import poptorch

SECTIONS = ("inference", "training", "replication", "compile", "matmul")
BATCHES = (1, 32, 256)
REPLICAS = (1, 2, 4, 8, 16)
REPLICA_BATCH = 16


def _log(message: str) -> None:
    print(message, flush=True)


def run(sections: list[str], models: list[str], quick: bool) -> dict:
    results: dict = {"machine": harness.machine(), "quick": quick}
    for section in ("inference", "training"):
        if section in sections:
            measure = getattr(throughput, section)
            results[section] = []
            for name in models:
                for size in BATCHES:
                    row = {"model": name, "batch": size, **measure(name, size)}
                    results[section].append(row)
                    _log(f"{section} {name} batch {size}: torch {row['torch_s'] * 1e3:.3f} ms, "
                         f"poptorch {row['poptorch_s'] * 1e3:.3f} ms, {row['ratio']:.2f}x")
    if "replication" in sections:
        results["replication"] = []
        for train in (False, True):
            for name in models:
                for replicas in REPLICAS:
                    row = {"mode": "training" if train else "inference", "model": name,
                           "replicas": replicas, "batch": REPLICA_BATCH,
                           **throughput.replication(name, REPLICA_BATCH, replicas, train)}
                    results["replication"].append(row)
                    _log(f"replication {row['mode']} {name} R={replicas}: "
                         f"{row['overhead'] * 100:+.1f}%")
    if "compile" in sections:
        compile_latency.warm_up(models[0])
        results["compile"] = {}
        for name in models:
            row = compile_latency.measure(name, 1 if quick else 3)
            results["compile"][name] = row
            _log(f"compile {name}: cold {row['cold']['seconds']:.3f} s, warm "
                 f"{row['warm']['seconds']:.3f} s, {row['speedup']:.1f}x")
    if "matmul" in sections:
        results["matmul"] = matmul.measure()
        _log(f"matmul: {results['matmul']['fraction_of_numpy']:.0%} of NumPy's FLOP/s")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out"))
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated, from {', '.join(SECTIONS)}")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--quick", action="store_true",
                        help="shorter timing budgets and one compile repeat (a smoke run)")
    args = parser.parse_args()
    sections = args.sections.split(",")
    models = args.models.split(",")
    unknown = sorted(set(sections) - set(SECTIONS)) + sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"unknown sections or models: {', '.join(unknown)}")
    if args.quick:
        harness.BUDGET = 0.3
    poptorch.setLogLevel("WARN")
    start = time.perf_counter()
    results = run(sections, models, args.quick)
    results["seconds"] = time.perf_counter() - start
    paths = report.write(results, args.out)
    print()
    print(report.tables(results))
    print("wrote " + ", ".join(paths.values()))


if __name__ == "__main__":
    main()
