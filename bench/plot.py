"""Plots of the ratio to torch eager against batch size, one line per model, inference and
training apart, with the targets and the machine the figures come from: a self-contained
plotly HTML page and a static PNG (matplotlib)."""

from __future__ import annotations

import os

import matplotlib
import plotly.graph_objects as go
from plotly.subplots import make_subplots

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)

SECTIONS = (("inference", "inference", "bench"), ("training", "training", "bench"),
            ("zoo_inference", "inference", "zoo"), ("zoo_training", "training", "zoo"))


def describe(machine: dict) -> str:
    """One line: CPU, cores, library versions and threads."""
    if not machine:
        return "unknown machine"
    blas = ", ".join(f"{p.get('internal_api')} {p.get('version')} ({p.get('num_threads')} "
                     "threads)" for p in machine.get("thread_pools", []))
    return (f"{machine.get('cpu')}, {machine.get('cores')} cores; torch "
            f"{machine.get('torch')} ({machine.get('torch_threads')} threads), NumPy "
            f"{machine.get('numpy')}; {blas}; Python {machine.get('python')}"
            + (f"; load average {machine['load_average'][0]:.1f} at the start"
               if "load_average" in machine else ""))


def _lines(results: dict) -> list[tuple[str, str, list[int], list[float]]]:
    """(mode, label, batches, ratios) per model and section with a poptorch ratio."""
    lines = []
    for key, mode, group in SECTIONS:
        rows = [r for r in results.get(key, []) if "poptorch_ratio" in r]
        for name in dict.fromkeys(r["model"] for r in rows):
            mine = [r for r in rows if r["model"] == name]
            label = name if group == "bench" else f"{name} (zoo)"
            lines.append((mode, label, [r["batch"] for r in mine],
                          [r["poptorch_ratio"] for r in mine]))
    return lines


def write(results: dict, directory: str, target: float, batch1_target: float
          ) -> dict[str, str]:
    """ratio_vs_batch.html and .png in `directory` (none without speed rows)."""
    lines = _lines(results)
    if not lines:
        return {}
    title = "poptorch-mlir (IPU machine model) against torch eager on CPU"
    machine = describe(results.get("machine", {}))
    paths = {"plot": os.path.join(directory, "ratio_vs_batch.html"),
             "png": os.path.join(directory, "ratio_vs_batch.png")}
    batches = sorted({b for _, _, bs, _ in lines for b in bs})
    targets = [batch1_target if b == 1 else target for b in batches]

    figure = make_subplots(rows=1, cols=2, subplot_titles=("inference", "training step"))
    for mode, label, xs, ys in lines:
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"{label} {mode}",
                                    line={"dash": "dash" if "(zoo)" in label else "solid"}),
                         row=1, col=1 if mode == "inference" else 2)
    for col in (1, 2):
        figure.add_trace(go.Scatter(x=batches, y=targets, mode="lines", name="target",
                                    line={"color": "black", "dash": "dot"},
                                    showlegend=col == 1), row=1, col=col)
        figure.update_xaxes(title_text="batch size", type="log", row=1, col=col)
        figure.update_yaxes(title_text="wall time ratio (poptorch / eager)", type="log",
                            row=1, col=col)
    figure.update_layout(title={"text": f"{title}<br><sub>{machine}</sub>"})
    figure.write_html(paths["plot"], include_plotlyjs=True)

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    for ax, mode in zip(axes, ("inference", "training"), strict=True):
        for line_mode, label, xs, ys in lines:
            if line_mode == mode:
                ax.plot(xs, ys, marker="o", label=label,
                        linestyle="--" if "(zoo)" in label else "-")
        ax.plot(batches, targets, color="black", linestyle=":", label="target")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.set_title(mode if mode == "inference" else "training step")
        ax.set_xlabel("batch size")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("wall time ratio (poptorch / eager), log scale")
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    axes[1].legend(handles.values(), handles.keys(), fontsize=8, loc="upper left",
                   bbox_to_anchor=(1.01, 1))
    fig.suptitle(f"{title}\n{machine}", fontsize=9)
    fig.tight_layout()
    fig.savefig(paths["png"], dpi=110)
    plt.close(fig)
    return paths
