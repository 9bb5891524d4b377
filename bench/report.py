"""The benchmark's outputs: a JSON file, readable tables and a plot of the ratio to torch
eager against batch size (plotly, one self-contained HTML file)."""

from __future__ import annotations

import json
import os

from tabulate import tabulate

# The targets on a 2-core machine.
RATIO_TARGET = 1.5          # poptorch / torch eager at micro-batch 32 and 256
REPLICATION_TARGET = 0.20   # R replicas of b against one replica of R*b
WARM_TARGET = 20.0          # cold compile / warm-cache compile
MATMUL_TARGET = 0.70        # poptorch FLOP/s / NumPy matmul FLOP/s


def _mark(ok: bool) -> str:
    return "yes" if ok else "MISSED"


def tables(results: dict) -> str:
    out = []
    for section in ("inference", "training"):
        rows = [[r["model"], r["batch"], f"{r['torch_s'] * 1e3:.3f}",
                 f"{r['poptorch_s'] * 1e3:.3f}", f"{r['ratio']:.2f}",
                 _mark(r["ratio"] <= RATIO_TARGET) if r["batch"] >= 32 else "-"]
                for r in results.get(section, [])]
        if rows:
            out.append(f"{section.capitalize()}: poptorch (machine model) against torch eager, "
                       f"median wall time of one call; target ratio <= {RATIO_TARGET} at "
                       "batch 32 and 256")
            out.append(tabulate(rows, ["model", "batch", "torch ms", "poptorch ms", "ratio",
                                       "target"], tablefmt="github"))
    rows = [[r["mode"], r["model"], r["replicas"], r["batch"],
             f"{r['replicated_s'] * 1e3:.3f}", f"{r['one_replica_s'] * 1e3:.3f}",
             f"{r['overhead'] * 100:+.1f}%", _mark(r["overhead"] < REPLICATION_TARGET)]
            for r in results.get("replication", [])]
    if rows:
        out.append(f"Replication: R replicas of micro-batch b against one replica of R*b; "
                   f"target overhead < {REPLICATION_TARGET:.0%}")
        out.append(tabulate(rows, ["mode", "model", "R", "b", "R x b ms", "1 x Rb ms",
                                   "overhead", "target"], tablefmt="github"))
    compile_rows = []
    for name, r in results.get("compile", {}).items():
        for kind in ("cold", "warm"):
            phases = ", ".join(f"{phase} {seconds * 1e3:.0f}"
                               for phase, seconds in r[kind]["phases"].items())
            compile_rows.append([name, kind, f"{r[kind]['seconds']:.3f}", phases,
                                 f"{r['speedup']:.1f}x" if kind == "warm" else "",
                                 _mark(r["speedup"] >= WARM_TARGET) if kind == "warm" else ""])
    if compile_rows:
        out.append(f"Compile latency (fresh processes, micro-batch 32, median of "
                   f"{next(iter(results['compile'].values()))['repeats']}); phases in ms; "
                   f"target warm >= {WARM_TARGET:.0f}x faster")
        out.append(tabulate(compile_rows, ["model", "cache", "seconds", "phases (ms)",
                                           "speed-up", "target"], tablefmt="github"))
    m = results.get("matmul")
    if m:
        out.append(f"Matmul-heavy model: {m['flops_per_call'] / 1e9:.2f} GFLOP a call; "
                   f"target > {MATMUL_TARGET:.0%} of NumPy's matmul")
        out.append(tabulate([[f"{m['poptorch_gflops']:.1f}", f"{m['numpy_gflops']:.1f}",
                              f"{m['fraction_of_numpy']:.0%}",
                              _mark(m["fraction_of_numpy"] > MATMUL_TARGET)]],
                            ["poptorch GFLOP/s", "NumPy GFLOP/s", "fraction", "target"],
                            tablefmt="github"))
    return "\n\n".join(out) + "\n"


def plot(results: dict, path: str) -> None:
    """Ratio to torch eager against micro-batch size, one line per model and mode."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for section, dash in (("inference", "solid"), ("training", "dash")):
        rows = results.get(section, [])
        for name in dict.fromkeys(r["model"] for r in rows):
            mine = [r for r in rows if r["model"] == name]
            figure.add_trace(go.Scatter(
                x=[r["batch"] for r in mine], y=[r["ratio"] for r in mine],
                mode="lines+markers", name=f"{name} {section}", line={"dash": dash}))
    figure.add_hline(y=RATIO_TARGET, line_dash="dot",
                     annotation_text=f"target {RATIO_TARGET}x")
    figure.add_hline(y=1.0, line_color="grey")
    figure.update_layout(title="poptorch-mlir machine model against torch eager on CPU",
                         xaxis={"title": "micro-batch size", "type": "log"},
                         yaxis={"title": "wall time ratio (poptorch / torch)"})
    figure.write_html(path, include_plotlyjs=True)


def write(results: dict, directory: str) -> dict[str, str]:
    """Write results.json, results.txt and ratio_vs_batch.html into `directory`."""
    os.makedirs(directory, exist_ok=True)
    paths = {"json": os.path.join(directory, "results.json"),
             "table": os.path.join(directory, "results.txt"),
             "plot": os.path.join(directory, "ratio_vs_batch.html")}
    with open(paths["json"], "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    with open(paths["table"], "w", encoding="utf-8") as f:
        f.write(tables(results))
    if results.get("inference") or results.get("training"):
        plot(results, paths["plot"])
    else:
        del paths["plot"]
    return paths
