"""poptorch-mlir's benchmarks against PyTorch on CPU: `make bench` runs this.

Sections (all by default):
  inference, training  the bench models (models.py) at batch 1, 32, 256 against torch
                       eager, torch.compile (inductor) beside them at batch 32
  zoo                  the real-model zoo (zoo.py), inference and training step
  overhead             a one-add model at batch 1, and a host profile of a call
  breakdown            where a call's time goes at batch 32, poptorch against eager, by
                       kind of work (products, convolutions, kernels, host)
  multi_ipu            pipelined, sharded and replicated runs against one IPU
  compile              the bench models' compile, cold and with a warm executable cache
  memory               peak RSS against eager's, fresh processes
  matmul               a matmul-heavy model's FLOP/s against NumPy's matmul
  bert_compile         BERT-base shaped models at 2-24 layers, wrap to first result
Results go to DIR/results.json, DIR/results.txt and DIR/ratio_vs_batch.{html,png},
rewritten after each section (a stopped run keeps what it measured).

    .venv/bin/python bench/run.py [--out bench/out] [--quick] [--sections inference,...]
        [--models mlp,...] [--zoo-models resnet18,...] [--bert-layers 2,6,12,24]
        [--no-inductor]
"""

from __future__ import annotations

import argparse
import os
import time

import bert_compile
import breakdown
import compile_latency
import harness
import matmul
import memory
import multi_ipu
import overhead
import report
import throughput
import zoo
from models import SPECS

import poptorch

SECTIONS = ("inference", "training", "zoo", "overhead", "breakdown", "multi_ipu", "compile",
            "memory", "matmul", "bert_compile")
# the zoo's large models make few, long calls: fewer blocks of at least 4 calls a side
ZOO_TIMING = {"least": 4, "rounds": 4}
MULTI_IPU_ZOO = ("bert",)
MEMORY_BATCH = 32
MEMORY_ZOO = ("resnet18", "bert")


def _log(message: str) -> None:
    print(message, flush=True)


def _speed_line(section: str, row: dict) -> str:
    parts = [f"{section} {row['model']} batch {row['batch']}: eager "
             f"{row['torch_s'] * 1e3:.3f} ms"]
    for side in ("poptorch", "inductor"):
        if f"{side}_s" in row:
            parts.append(f"{side} {row[side + '_s'] * 1e3:.3f} ms "
                         f"({row[side + '_ratio']:.2f}x)")
        elif f"{side}_error" in row:
            parts.append(f"{side} failed: {row[side + '_error']}")
    return ", ".join(parts)


def _speed(specs: list, key: str, train: bool, args, timing: dict) -> list[dict]:
    rows = []
    for spec in specs:
        batches = spec.training_batches if train else spec.inference_batches
        with_inductor = spec.inductor_training if train else spec.inductor_inference
        for size in batches:
            if args.quick and size > 32:
                continue
            row = throughput.measure(spec, size, train, inductor=size in with_inductor
                                     and not args.no_inductor, **timing)
            rows.append(row)
            _log(_speed_line(key, row))
    return rows


def run(args) -> dict:
    sections, quick = args.sections, args.quick
    results: dict = {"machine": harness.machine(), "quick": quick}
    start = time.perf_counter()

    def save() -> None:
        results["seconds"] = time.perf_counter() - start
        results["load_average_end"] = os.getloadavg()
        report.write(results, args.out)

    specs = [SPECS[name] for name in args.models]
    zoo_specs = [zoo.SPECS[name] for name in args.zoo_models]
    for section, train in (("inference", False), ("training", True)):
        if section in sections:
            results[section] = _speed(specs, section, train, args, {})
            save()
    if "zoo" in sections:
        for key, train in (("zoo_inference", False), ("zoo_training", True)):
            results[key] = _speed(zoo_specs, key, train, args, ZOO_TIMING)
            save()
    if "overhead" in sections:
        results["overhead"] = o = overhead.measure()
        _log(f"overhead: eager {o['torch_us']:.1f} us, poptorch {o['poptorch_us']:.1f} us")
        save()
    if "breakdown" in sections:
        results["breakdown"] = []
        for train in (False, True):
            for spec in specs + zoo_specs:
                row = breakdown.measure(spec, train)
                results["breakdown"].append(row)
                _log(f"breakdown {row['mode']} {spec.name}: poptorch "
                     f"{sum(row['poptorch'].values()) * 1e3:.1f} ms, eager "
                     f"{sum(row['eager'].values()) * 1e3:.1f} ms")
                save()
    if "multi_ipu" in sections:
        results["multi_ipu"] = []
        chosen = specs + [zoo.SPECS[n] for n in MULTI_IPU_ZOO if n in args.zoo_models]
        for train in (False, True):
            for spec in chosen:
                for mode in multi_ipu.MODES:
                    row = multi_ipu.measure(spec, mode, train)
                    results["multi_ipu"].append(row)
                    _log(f"multi-IPU {row['mode']} {spec.name} {mode}: " + (
                        f"{row['ratio']:.2f}x" if "ratio" in row
                        else row.get("skipped") or row.get("error")))
                    save()
    if "compile" in sections and args.models:
        compile_latency.warm_up(args.models[0])
        results["compile"] = {}
        for name in args.models:
            row = compile_latency.measure(name, 1 if quick else 3)
            results["compile"][name] = row
            _log(f"compile {name}: cold {row['cold']['seconds']:.3f} s, warm "
                 f"{row['warm']['seconds']:.3f} s, {row['speedup']:.1f}x")
            save()
    if "memory" in sections:
        results["memory"] = []
        names = args.models + [n for n in MEMORY_ZOO if n in args.zoo_models]
        for train in (False, True):
            for name in names:
                row = memory.measure(name, MEMORY_BATCH, train)
                results["memory"].append(row)
                _log(f"memory {row['mode']} {name}: " + (
                    f"eager {row['torch_mb']:.0f} MB, poptorch {row['poptorch_mb']:.0f} MB"
                    if "ratio" in row else row["error"]))
                save()
    if "matmul" in sections:
        results["matmul"] = matmul.measure()
        _log(f"matmul: {results['matmul']['fraction_of_numpy']:.0%} of NumPy's FLOP/s")
        save()
    if "bert_compile" in sections:
        results["bert_compile"] = bert_compile.measure(tuple(args.bert_layers), _log)
        save()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out"))
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated, from {', '.join(SECTIONS)}")
    parser.add_argument("--models", default=",".join(SPECS))
    parser.add_argument("--zoo-models", default=",".join(zoo.SPECS))
    parser.add_argument("--bert-layers", default=None,
                        help="comma-separated encoder layer counts (default 2,6,12,24; "
                             "--quick: 2,6)")
    parser.add_argument("--no-inductor", action="store_true",
                        help="leave torch.compile out (its compiles take 10-135 s each)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: shorter timing budgets, batches up to 32, no "
                             "inductor, one compile repeat, BERT at 2 and 6 layers")
    args = parser.parse_args()
    args.sections = args.sections.split(",")
    args.models = [m for m in args.models.split(",") if m]
    args.zoo_models = [m for m in args.zoo_models.split(",") if m]
    unknown = (sorted(set(args.sections) - set(SECTIONS))
               + sorted(set(args.models) - set(SPECS))
               + sorted(set(args.zoo_models) - set(zoo.SPECS)))
    if unknown:
        parser.error(f"unknown sections or models: {', '.join(unknown)}")
    if args.bert_layers:
        args.bert_layers = [int(n) for n in args.bert_layers.split(",")]
    else:
        args.bert_layers = bert_compile.QUICK_LAYERS if args.quick else bert_compile.LAYERS
    if args.quick:
        harness.BUDGET = 0.3
        args.no_inductor = True
    poptorch.setLogLevel("WARN")
    results = run(args)
    paths = report.write(results, args.out)
    print()
    print(report.tables(results))
    print("wrote " + ", ".join(paths.values()))


if __name__ == "__main__":
    main()
