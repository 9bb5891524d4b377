"""The benchmark's outputs: a JSON file, readable tables per section with a target column,
and the plots (`plot.py`)."""

from __future__ import annotations

import json
import os

import bert_compile
import breakdown
import memory
import multi_ipu
import overhead
import plot
from tabulate import tabulate

# issue 27's targets: poptorch / torch eager, a step or an inference
RATIO_TARGET = 1.0          # at batch 32 and 256
BATCH1_TARGET = 1.25        # at batch 1
WARM_TARGET = 20.0          # cold compile / warm-cache compile (the synthetic models)
MATMUL_TARGET = 0.70        # poptorch FLOP/s / NumPy matmul FLOP/s


def _mark(ok: bool) -> str:
    return "yes" if ok else "no"


def ratio_target(batch: int) -> float:
    return BATCH1_TARGET if batch == 1 else RATIO_TARGET


def _ms(row: dict, key: str) -> str:
    return f"{row[key] * 1e3:.3f}" if key in row else "-"


def _speed(rows: list[dict]) -> str:
    table = []
    for r in rows:
        ratio = r.get("poptorch_ratio")
        if "inductor_s" in r:
            inductor = f"{r['inductor_ratio']:.2f}"
        else:
            inductor = "n/a" if "inductor_error" in r else "-"
        table.append([r["model"], r["batch"], _ms(r, "torch_s"), _ms(r, "poptorch_s"),
                      f"{ratio:.2f}" if ratio else "error",
                      _mark(ratio <= ratio_target(r["batch"])) if ratio else "no",
                      _ms(r, "inductor_s"), inductor])
    notes = [f"- {r['model']} b={r['batch']}: {side} {r[side + '_error']}"
             for r in rows for side in ("poptorch", "inductor") if side + "_error" in r]
    return tabulate(table, ["model", "batch", "eager ms", "poptorch ms", "ratio", "target",
                            "inductor ms", "inductor ratio"], tablefmt="github") + \
        ("\n" + "\n".join(sorted(set(notes))) if notes else "")


def _speed_sections(results: dict, out: list[str]) -> None:
    head = (f"median wall time of one call, medians of interleaved blocks; ratio = "
            f"poptorch / eager, target <= {BATCH1_TARGET} at batch 1 and <= {RATIO_TARGET} "
            "at 32 and 256; inductor = torch.compile beside them (ratio to eager)")
    for key, title in (("inference", "Inference, bench models"),
                       ("training", "Training step, bench models"),
                       ("zoo_inference", "Inference, model zoo"),
                       ("zoo_training", "Training step, model zoo")):
        if results.get(key):
            out.append(f"{title}: {head}")
            out.append(_speed(results[key]))


def _overhead(o: dict, out: list[str]) -> None:
    out.append(f"Per-call overhead: a model of one add at batch 1, median us a call; target "
               f"poptorch <= {overhead.TARGET_US:.0f} us")
    out.append(tabulate([[f"{o['torch_us']:.1f}", f"{o['poptorch_us']:.1f}",
                          f"{o['ratio']:.2f}", _mark(o["poptorch_us"] <= overhead.TARGET_US)]],
                        ["eager us", "poptorch us", "ratio", "target"], tablefmt="github"))
    out.append(f"Where a poptorch call's host time goes (cProfile over {o['profile_calls']} "
               f"calls, {o['profile_total_us']:.0f} us a call under the profiler; top "
               "functions by own time)")
    out.append(tabulate([[p["function"], f"{p['calls']:g}", f"{p['own_us']:.1f}",
                          f"{p['share']:.0%}", f"{p['cumulative_us']:.1f}"]
                         for p in o["profile"]],
                        ["function", "calls/call", "own us", "share", "cumulative us"],
                        tablefmt="github"))


def _breakdown(rows: list[dict], out: list[str]) -> None:
    out.append(f"Where a call's time goes at batch {breakdown.BATCH}, ms a call (mean of "
               f"{breakdown.CALLS} calls): poptorch by kernel kind (timers on the program's "
               "kernels; program = its own Python, executor = the rest of the call), eager "
               "by aten op kind (torch.profiler self CPU time; other = unprofiled time "
               "less the ops')")
    table = [[r["model"], r["mode"], f"{sum(r['poptorch'].values()) * 1e3:.2f}",
              *(f"{r['poptorch'][k] * 1e3:.2f}" for k in breakdown.POPTORCH_KINDS),
              f"{sum(r['eager'].values()) * 1e3:.2f}",
              *(f"{r['eager'][k] * 1e3:.2f}" for k in breakdown.EAGER_KINDS)]
             for r in rows]
    out.append(tabulate(table, ["model", "mode", "poptorch",
                                *breakdown.POPTORCH_KINDS, "eager",
                                *(f"eager {k}" for k in breakdown.EAGER_KINDS)],
                        tablefmt="github"))


def _multi(rows: list[dict], out: list[str]) -> None:
    out.append(f"Multi-IPU cost: a run over several IPUs against the single-IPU run of the "
               f"same micro-batches ({multi_ipu.MICRO_BATCH} samples each) a call; target "
               f"ratio <= {multi_ipu.TARGET}")
    table = []
    for r in rows:
        if "ratio" in r:
            cells = [_ms(r, "multi_s"), _ms(r, "single_s"), f"{r['ratio']:.2f}",
                     _mark(r["ratio"] <= multi_ipu.TARGET)]
        else:
            cells = ["-", "-", r.get("skipped") or r.get("error", ""), "-"]
        table.append([r["mode"], r["model"], r["run"], r["total_batch"], *cells])
    out.append(tabulate(table, ["mode", "model", "run", "total batch", "multi ms",
                                "single ms", "ratio", "target"], tablefmt="github"))


def _compile(results: dict, out: list[str]) -> None:
    rows = []
    for name, r in results.items():
        for kind in ("cold", "warm"):
            phases = ", ".join(f"{phase} {seconds * 1e3:.0f}"
                               for phase, seconds in r[kind]["phases"].items())
            rows.append([name, kind, f"{r[kind]['seconds']:.3f}", phases,
                         f"{r['speedup']:.1f}x" if kind == "warm" else "",
                         _mark(r["speedup"] >= WARM_TARGET) if kind == "warm" else ""])
    out.append(f"Compile latency, bench models (fresh processes, micro-batch 32, median of "
               f"{next(iter(results.values()))['repeats']}); phases in ms; target warm >= "
               f"{WARM_TARGET:.0f}x faster")
    out.append(tabulate(rows, ["model", "cache", "seconds", "phases (ms)", "speed-up",
                               "target"], tablefmt="github"))


def _bert_target(r: dict) -> str:
    targets = bert_compile.TARGETS
    if r["mode"] == "inference" and r["layers"] == 12:
        return _mark(r["wrap_to_result_s"] <= targets["inference12"])
    if r["mode"] == "pipelined" and r["layers"] == 12:
        return _mark(r["wrap_to_result_s"] <= targets["pipelined12"])
    if r["mode"] == "cached warm":
        return _mark(r["wrap_to_result_s"] <= targets["warm_over_construction"])
    return "-"


def _bert(b: dict, out: list[str]) -> None:
    t = bert_compile.TARGETS
    out.append("Compile, BERT-base shaped (hidden 768, 12 heads, sequence 128, micro-batch "
               "1), one fresh process each: seconds; wrap = inferenceModel/trainingModel to "
               f"the first result; targets: 12-layer inference <= {t['inference12']} s, "
               f"pipelined training <= {t['pipelined12']} s, warm cache hit <= "
               f"{t['warm_over_construction'] * 1e3:.0f} ms after construction, growth "
               "at most linear in depth")
    rows = []
    for r in b["rows"]:
        if "error" in r:
            rows.append([r["mode"], r["layers"], "-", "-", "-", "-", "-", "-", r["error"][:90],
                         "-"])
            continue
        rest = ", ".join(f"{k} {v:.2f}" for k, v in r["phases"].items() if v >= 0.05)
        rows.append([r["mode"], r["layers"], f"{r['construction_s']:.2f}",
                     f"{r['wrap_to_result_s']:.2f}",
                     f"{r['wrap_to_result_cpu_s']:.2f}" if "wrap_to_result_cpu_s" in r else "-",
                     f"{r['trace_s']:.2f}",
                     f"{r['compile_s'] - r['trace_s']:.2f}", f"{r['first_call_s']:.2f}",
                     rest, _bert_target(r)])
    out.append(tabulate(rows, ["mode", "layers", "construction", "wrap to result",
                               "wrap to result, CPU", "trace",
                               "compile", "first call", "compile phases", "target"],
                        tablefmt="github"))
    growth = "; ".join(f"{mode} {step} layers x{ratio:.2f} of x{depth:g} ({_mark(ratio <= depth)})"
                       for mode, steps in bert_compile.growth(b["rows"]).items()
                       for step, (ratio, depth) in steps.items())
    if growth:
        out.append("Growth with depth (wrap to result, against the growth of the layer "
                   f"count; target at most linear): {growth}")


def _memory(rows: list[dict], out: list[str]) -> None:
    out.append(f"Peak memory: RSS a run adds after imports, fresh process per side, MB; "
               f"target ratio <= {memory.TARGET}")
    table = [[r["mode"], r["model"], r["batch"],
              *([f"{r['torch_mb']:.1f}", f"{r['poptorch_mb']:.1f}", f"{r['ratio']:.2f}",
                 _mark(r["ratio"] <= memory.TARGET)] if "ratio" in r
                else ["-", "-", r.get("error", ""), "-"])] for r in rows]
    out.append(tabulate(table, ["mode", "model", "batch", "eager MB", "poptorch MB", "ratio",
                                "target"], tablefmt="github"))


def tables(results: dict) -> str:
    out: list[str] = []
    _speed_sections(results, out)
    if results.get("overhead"):
        _overhead(results["overhead"], out)
    if results.get("breakdown"):
        _breakdown(results["breakdown"], out)
    if results.get("multi_ipu"):
        _multi(results["multi_ipu"], out)
    if results.get("compile"):
        _compile(results["compile"], out)
    if results.get("bert_compile"):
        _bert(results["bert_compile"], out)
    if results.get("memory"):
        _memory(results["memory"], out)
    m = results.get("matmul")
    if m:
        out.append(f"Matmul-heavy model: {m['flops_per_call'] / 1e9:.2f} GFLOP a call; "
                   f"target > {MATMUL_TARGET:.0%} of NumPy's matmul")
        out.append(tabulate([[f"{m['poptorch_gflops']:.1f}", f"{m['numpy_gflops']:.1f}",
                              f"{m['fraction_of_numpy']:.0%}",
                              _mark(m["fraction_of_numpy"] > MATMUL_TARGET)]],
                            ["poptorch GFLOP/s", "NumPy GFLOP/s", "fraction", "target"],
                            tablefmt="github"))
    machine = results.get("machine", {})
    end = results.get("load_average_end")
    out.append(f"Machine: {plot.describe(machine)}"
               + (f", {end[0]:.1f} at the end" if end else "")
               + f"; run {results.get('seconds', 0):.0f} s"
               + (" (--quick)" if results.get("quick") else ""))
    return "\n\n".join(out) + "\n"


def write(results: dict, directory: str) -> dict[str, str]:
    """Write results.json, results.txt and the plots into `directory`."""
    os.makedirs(directory, exist_ok=True)
    paths = {"json": os.path.join(directory, "results.json"),
             "table": os.path.join(directory, "results.txt")}
    with open(paths["json"], "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    with open(paths["table"], "w", encoding="utf-8") as f:
        f.write(tables(results))
    paths.update(plot.write(results, directory, RATIO_TARGET, BATCH1_TARGET))
    return paths
