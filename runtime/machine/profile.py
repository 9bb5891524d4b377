"""The profile report: `write_report` turns a simulated run (`Timeline.to_dict()`), the
memory estimate and host tracepoints into `<directory>/<name>/profile.json` and
`<directory>/<name>/profile.html`.

profile.json is the Chrome Trace Event Format, JSON object form ("traceEvents",
"displayTimeUnit", "otherData"), which ui.perfetto.dev and chrome://tracing open. It is
written with the standard library's `json`: the `perfetto` package only builds Perfetto's
protobuf format, which chrome://tracing does not read, and offers no JSON writer; the
small JSON trace packages on PyPI are unmaintained, and the format is a list of flat
dictionaries.
- One process per IPU ("IPU 0", ...; `process_name` / `process_sort_index` metadata), one
  thread per track: "Compute" (stage tasks as complete "X" events named by the stage
  function; args: micro-batch, step, stage, phase, cycles; a `breakdown` of compute /
  sync / exchange cycles becomes child slices in Poplar's BSP superstep order, laid end
  to end from the task's start), "Phases" (one slice per phase of a step, from its first
  event's start to its last event's end), "IPU-Links" (copy), "Streaming Memory"
  (remote_load / remote_store), "Host I/O" (host_load / host_store), "Step" (sync,
  all_reduce, optimizer), and a track named after any other kind; transfers the IO
  tiles run (an event's `tiles` = "io": overlapped host streams, useIOTilesToLoad/Store)
  go on a track of their own beside it, "Host I/O (IO tiles)", "Streaming Memory (IO
  tiles)". Slices of one thread
  must nest (Trace Event Format; Perfetto drops overlapping ones), so a track whose
  events overlap, such as two copies in flight, spreads over lanes "IPU-Links",
  "IPU-Links 2", ...
- Timestamps are microseconds of simulated time, cycles / clock_hz x 1e6, each boundary
  rounded to a whole nanosecond so that children end exactly where their parent does.
- Memory, when given: counter ("C") events per IPU, "Memory (bytes)" by tensor class and
  "Available memory (bytes)", at the start and the end of the run (the estimate is a
  peak, not a function of time).
- Host tracepoints (`poptorch.profiling.Channel`) in a "Host" process, one thread per
  channel and Python thread. Their time base is the host's wall clock, microseconds from
  the first tracepoint, and is not aligned with the simulated IPU time: the simulation
  has no wall-clock start. The process label and "otherData" say so.

profile.html is one self-contained page (plotly.js inline; no network): the timeline as
a Gantt chart (one row per IPU and track, bars coloured by kind, hover with name,
micro-batch and cycles), memory per IPU by tensor class as stacked bars against the
available bytes, the headline figures and the largest tensors.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go

from poptorch.errors import Error

TRACKS = {"compute": "Compute", "phase": "Phases", "copy": "IPU-Links",
          "remote_load": "Streaming Memory", "remote_store": "Streaming Memory",
          "host_load": "Host I/O", "host_store": "Host I/O", "sync": "Step",
          "all_reduce": "Step", "optimizer": "Step", "reduce_scatter": "Step",
          "all_gather": "Step"}
TRACK_ORDER = ["Compute", "Phases", "IPU-Links", "Streaming Memory", "Host I/O", "Step"]
BSP_ORDER = ["compute", "sync", "exchange"]  # Poplar's superstep: compute, sync, exchange
COLOURS = {  # D3's category20 palette, one colour per known kind
    "compute": "#1f77b4", "phase": "#c7c7c7", "copy": "#ff7f0e", "remote_load": "#2ca02c",
    "remote_store": "#98df8a", "host_load": "#9467bd", "host_store": "#c5b0d5",
    "sync": "#7f7f7f", "all_reduce": "#d62728", "optimizer": "#e377c2"}
CLASS_COLOURS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2",
                 "#ff9da6", "#9d755d", "#bab0ac"]  # Vega's tableau10 palette
EXTRA_COLOURS = ["#8c564b", "#bcbd22", "#17becf", "#aec7e8", "#ff9896", "#dbdb8d"]
FILES = {"trace": "profile.json", "html": "profile.html"}


@dataclass
class _Slice:
    kind: str
    name: str
    start: int  # cycles
    end: int
    args: dict = field(default_factory=dict)
    children: list[tuple[str, int, int]] = field(default_factory=list)


def _slice(event: dict) -> _Slice:
    """A timeline event as a slice; `breakdown` parts laid end to end in BSP order."""
    start, end = int(event.get("start", 0)), int(event.get("end", 0))
    args = {"cycles": end - start}
    for key in ("micro_batch", "step", "stage", "phase", "stream", "tiles"):
        if event.get(key) is not None:
            args[key] = event[key]
    result = _Slice(str(event.get("kind", "unknown")), str(event.get("name", "")), start,
                    end, args)
    breakdown = event.get("breakdown") or {}
    at = start
    for part in [*BSP_ORDER, *sorted(set(breakdown) - set(BSP_ORDER))]:
        cycles = breakdown.get(part)
        if isinstance(cycles, int | float) and cycles > 0:
            args[f"{part}_cycles"] = cycles
            stop = min(end, at + int(cycles))
            result.children.append((part, at, stop))
            at = stop
    return result


def _phases(events: list[dict]) -> list[_Slice]:
    """One slice per (step, phase) of an IPU: its events' span."""
    spans: dict[tuple[int, int], list[int]] = {}
    for event in events:
        if event.get("phase") is not None:
            key = (int(event.get("step", 0)), int(event["phase"]))
            span = spans.setdefault(key, [event["start"], event["end"]])
            span[0], span[1] = min(span[0], event["start"]), max(span[1], event["end"])
    return [_Slice("phase", f"phase {phase}", start, end, {"step": step, "phase": phase})
            for (step, phase), (start, end) in sorted(spans.items())]


def _lanes(slices: list[_Slice]) -> list[list[_Slice]]:
    """Greedy interval partitioning: each slice on the first lane free at its start."""
    lanes: list[list[_Slice]] = []
    for piece in sorted(slices, key=lambda s: (s.start, -s.end)):
        lane = next((lane for lane in lanes if lane[-1].end <= piece.start), None)
        if lane is None:
            lanes.append(lane := [])
        lane.append(piece)
    return lanes


def _tracks(ipu: dict) -> list[tuple[str, list[_Slice]]]:
    """(track label, slices) of one IPU, in TRACK_ORDER then other kinds by name."""
    events = ipu.get("events", [])
    grouped: dict[str, list[_Slice]] = {}
    for piece in [*map(_slice, events), *_phases(events)]:
        track = TRACKS.get(piece.kind, piece.kind)
        if piece.args.get("tiles") == "io":  # transfers the IO tiles run: a track of their own
            track = f"{track} (IO tiles)"
        grouped.setdefault(track, []).append(piece)
    order = sorted(grouped, key=lambda t: (TRACK_ORDER.index(t.removesuffix(" (IO tiles)"))
                                           if t.removesuffix(" (IO tiles)") in TRACK_ORDER
                                           else len(TRACK_ORDER), t))
    return [(track if n == 0 else f"{track} {n + 1}", lane)
            for track in order for n, lane in enumerate(_lanes(grouped[track]))]


class _Clock:
    """Cycles to trace microseconds, through whole nanoseconds."""

    def __init__(self, clock_hz: float) -> None:
        self.clock_hz = clock_hz

    def ns(self, cycles: int) -> int:
        return round(cycles * 1e9 / self.clock_hz)

    def span(self, start: int, end: int) -> dict:
        begin = self.ns(start)
        return {"ts": begin / 1000, "dur": (self.ns(end) - begin) / 1000}


def _meta(pid: int, tid: int, kind: str, value: object) -> dict:
    key = "name" if kind.endswith("_name") else "sort_index"
    return {"ph": "M", "pid": pid, "tid": tid, "name": kind, "args": {key: value}}


def _ipu_ids(timeline: dict, memory: dict | None) -> list[str]:
    ids = set(timeline.get("ipus", {})) | set((memory or {}).get("ipus", {}))
    return sorted(ids, key=lambda i: (len(i), i))


def trace_events(timeline: dict, memory: dict | None = None,
                 tracepoints: list[dict] | None = None) -> list[dict]:
    """The report's Chrome Trace Event Format events (see the module docstring)."""
    clock = _Clock(float(timeline.get("clock_hz", 1e9)))
    end = int(timeline.get("total_cycles", 0))
    out: list[dict] = []
    ipus = _ipu_ids(timeline, memory)
    for pid, ipu in enumerate(ipus, start=1):
        out += [_meta(pid, 0, "process_name", f"IPU {ipu}"),
                _meta(pid, 0, "process_sort_index", pid)]
        for tid, (label, lane) in enumerate(_tracks(timeline.get("ipus", {}).get(ipu, {})),
                                            start=1):
            out += [_meta(pid, tid, "thread_name", label),
                    _meta(pid, tid, "thread_sort_index", tid)]
            for piece in lane:
                out.append({"ph": "X", "pid": pid, "tid": tid, "name": piece.name,
                            "cat": piece.kind, **clock.span(piece.start, piece.end),
                            "args": piece.args})
                out += [{"ph": "X", "pid": pid, "tid": tid, "name": part, "cat": "breakdown",
                         **clock.span(start, stop), "args": {"cycles": stop - start}}
                        for part, start, stop in piece.children]
        info = (memory or {}).get("ipus", {}).get(ipu)
        if info:
            classes = {k: int(v) for k, v in info.get("classes", {}).items()}
            for ts in sorted({0, clock.ns(end) / 1000}):
                out.append({"ph": "C", "pid": pid, "tid": 0, "ts": ts,
                            "name": "Memory (bytes)", "args": classes})
                if "available" in info:
                    out.append({"ph": "C", "pid": pid, "tid": 0, "ts": ts,
                                "name": "Available memory (bytes)",
                                "args": {"available": int(info["available"])}})
    if tracepoints:
        out += _host_events(tracepoints, len(ipus) + 1)
    return out


HOST_TIME_BASE = ("host wall clock, microseconds from the first tracepoint; not aligned "
                  "with the simulated IPU time")


def _host_events(tracepoints: list[dict], pid: int) -> list[dict]:
    origin = min(t["start_ns"] for t in tracepoints)
    out = [_meta(pid, 0, "process_name", "Host (wall clock)"),
           _meta(pid, 0, "process_sort_index", pid),
           {"ph": "M", "pid": pid, "tid": 0, "name": "process_labels",
            "args": {"labels": HOST_TIME_BASE}}]
    threads: dict[tuple[str, object], int] = {}
    for point in sorted(tracepoints, key=lambda t: (t["start_ns"], -t["end_ns"])):
        key = (point.get("channel", ""), point.get("thread"))
        if key not in threads:
            threads[key] = tid = len(threads) + 1
            thread = point.get("thread_name", "")
            label = key[0] if thread in ("", "MainThread") else f"{key[0]} ({thread})"
            out += [_meta(pid, tid, "thread_name", label),
                    _meta(pid, tid, "thread_sort_index", tid)]
        start = point["start_ns"] - origin
        out.append({"ph": "X", "pid": pid, "tid": threads[key], "name": point["name"],
                    "cat": point.get("channel", ""), "ts": start / 1000,
                    "dur": (point["end_ns"] - point["start_ns"]) / 1000,
                    "args": {"channel": point.get("channel", ""),
                             "depth": point.get("depth", 0)}})
    return out


def _headline(timeline: dict) -> dict:
    keys = ("schedule", "micro_batches", "steps", "total_cycles", "total_seconds",
            "idle_fraction", "clock_hz", "ipu_version")
    return {key: timeline[key] for key in keys if key in timeline}


def _headline_rows(timeline: dict) -> list[list[object]]:
    """The headline figures as table rows, with units."""
    formats = {"total_cycles": "{:,}", "total_seconds": "{:.6g} s", "idle_fraction": "{:.1%}",
               "clock_hz": "{:,.0f} Hz"}
    rows = [[key.replace("_", " "), formats.get(key, "{}").format(value)]
            for key, value in _headline(timeline).items()]
    ipus = timeline.get("ipus", {})
    busy = sum(info.get("busy_cycles", 0) for info in ipus.values())
    return [*rows, ["IPUs", len(ipus)], ["compute cycles (all IPUs)", f"{busy:,}"]]


def write_report(directory: str, name: str, timeline: dict, memory: dict | None,
                 tracepoints: list[dict] | None = None,
                 options: dict | None = None) -> dict[str, str]:
    """Write `<directory>/<name>/profile.json` and `profile.html`; returns their paths
    ("trace", "html") and the folder ("directory")."""
    folder = os.path.join(directory, name)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise Error(f"cannot write the profile report to {folder}: {error.strerror}; set "
                    "enableProfiling(dir) or autoReport.directory to a writable directory",
                    type="profiling") from None
    paths = {key: os.path.join(folder, file) for key, file in FILES.items()}
    other = {"report": name, **_headline(timeline), "options": options or {},
             "memory": memory or {}}
    if tracepoints:
        other["host_time_base"] = HOST_TIME_BASE
    trace = {"traceEvents": trace_events(timeline, memory, tracepoints),
             "displayTimeUnit": "ns", "otherData": other}
    with open(paths["trace"], "w") as file:
        json.dump(trace, file, separators=(",", ":"), default=str)
    with open(paths["html"], "w") as file:
        file.write(report_html(name, timeline, memory, options))
    return {"directory": folder, **paths}


def _colour(kind: str, extra: dict[str, str]) -> str:
    if kind not in COLOURS and kind not in extra:
        extra[kind] = EXTRA_COLOURS[len(extra) % len(EXTRA_COLOURS)]
    return COLOURS.get(kind) or extra[kind]


def _odd(micro_batch: object) -> bool:
    return isinstance(micro_batch, int) and micro_batch % 2 == 1


def _gantt(timeline: dict) -> go.Figure:
    """One horizontal bar trace per kind: base = start, length = duration, in us; odd
    micro-batches lighter, so that back-to-back tasks stay apart."""
    clock_us = float(timeline.get("clock_hz", 1e9)) / 1e6
    rows: list[str] = []
    bars: dict[str, list[tuple]] = {}
    for ipu in _ipu_ids(timeline, None):
        for label, lane in _tracks(timeline.get("ipus", {}).get(ipu, {})):
            rows.append(row := f"IPU {ipu} · {label}")
            for s in lane:
                bars.setdefault(s.kind, []).append(
                    (row, s.start / clock_us, (s.end - s.start) / clock_us, s.name,
                     s.args.get("micro_batch", ""), s.end - s.start, s.start,
                     s.args.get("step", "")))
    figure = go.Figure()
    extra: dict[str, str] = {}
    for kind, items in bars.items():
        row, base, length, *custom = zip(*items, strict=True)
        figure.add_trace(go.Bar(
            y=list(row), base=np.array(base), x=np.array(length), orientation="h",
            name=kind, marker={"color": _colour(kind, extra), "line": {"width": 0},
                               "opacity": [0.7 if _odd(mb) else 1.0 for mb in custom[1]]},
            customdata=np.array(list(zip(*custom, strict=True)), dtype=object),
            hovertemplate=("<b>%{customdata[0]}</b> (" + kind + ")<br>micro-batch "
                           "%{customdata[1]}, step %{customdata[4]}<br>%{customdata[2]} "
                           "cycles from cycle %{customdata[3]}<extra></extra>")))
    figure.update_layout(
        title="Timeline (simulated)", barmode="overlay", bargap=0.25,
        height=140 + 26 * max(len(rows), 1), template="plotly_white",
        xaxis_title="time (µs)", legend_title="kind", margin={"l": 10, "r": 10, "t": 50},
        yaxis={"categoryorder": "array", "categoryarray": rows, "autorange": "reversed"})
    return figure


def _memory_figure(memory: dict) -> go.Figure:
    ipus = memory.get("ipus", {})
    labels = [f"IPU {i}" for i in _ipu_ids({}, memory)]
    infos = [ipus[i] for i in _ipu_ids({}, memory)]
    classes = list(dict.fromkeys(c for info in infos for c in info.get("classes", {})))
    figure = go.Figure()
    for n, cls in enumerate(classes):
        figure.add_trace(go.Bar(x=labels, y=[info.get("classes", {}).get(cls, 0)
                                             for info in infos],
                                name=cls, marker_color=CLASS_COLOURS[n % len(CLASS_COLOURS)]))
    used = max((sum(info.get("classes", {}).values()) for info in infos), default=0)
    available = [info["available"] for info in infos if "available" in info]
    title = "Memory per IPU by tensor class"
    if available and max(available) > 4 * used:  # the bars would be too thin to see
        title += f" (available: {_bytes(max(available))} per IPU, off this scale)"
    elif available:
        figure.add_trace(go.Scatter(
            x=labels, y=[info.get("available") for info in infos], name="available",
            mode="markers", marker={"symbol": "line-ew-open", "size": 60, "color": "#d62728",
                                    "line": {"width": 3, "color": "#d62728"}}))
    figure.update_layout(title=title, barmode="stack",
                         template="plotly_white", yaxis_title="bytes", height=420,
                         margin={"l": 10, "r": 10, "t": 50})
    return figure


def _table(header: list[str], rows: list[list[object]]) -> str:
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row)
                    + "</tr>" for row in rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>"


def _bytes(n: int) -> str:
    return f"{n:,} B ({n / 2**20:.2f} MiB)"


def report_html(name: str, timeline: dict, memory: dict | None,
                options: dict | None = None) -> str:
    """The self-contained report page (see the module docstring)."""
    config = {"displaylogo": False, "responsive": True}
    parts = [_gantt(timeline).to_html(full_html=False, include_plotlyjs=True, config=config,
                                      div_id="timeline")]
    summary = _table(["figure", "value"], _headline_rows(timeline))
    if memory and memory.get("ipus"):
        parts.append(_memory_figure(memory).to_html(full_html=False, include_plotlyjs=False,
                                                    config=config, div_id="memory"))
        per_ipu = [[f"IPU {i}", _bytes(info.get("total", sum(info.get("classes", {}).values()))),
                    _bytes(info["available"]) if "available" in info else "",
                    _bytes(info["off_chip"]) if "off_chip" in info else "",
                    info.get("per_tile", {}).get("mean", ""),
                    info.get("per_tile", {}).get("max", "")]
                   for i, info in ((i, memory["ipus"][i]) for i in _ipu_ids({}, memory))]
        largest = sorted(((t.get("bytes", 0), i, t.get("name", ""), t.get("class", ""))
                          for i, info in memory["ipus"].items()
                          for t in info.get("largest", [])), reverse=True)[:20]
        parts.append("<h2>Memory per IPU</h2>" + _table(
            ["IPU", "used", "available", "off chip", "per tile mean (B)", "per tile max (B)"],
            per_ipu))
        parts.append("<h2>Largest tensors</h2>" + _table(
            ["IPU", "tensor", "class", "bytes"],
            [[f"IPU {i}", tensor, cls, f"{size:,}"] for size, i, tensor, cls in largest]))
    else:
        parts.append("<p>No memory estimate for this run.</p>")
    if options:
        parts.append("<h2>Options</h2>" + _table(
            ["option", "value"], [[k, json.dumps(v, default=str)] for k, v in options.items()]))
    title = html.escape(f"poptorch profile: {name}")
    style = ("body{font-family:sans-serif;margin:1em 2em}table{border-collapse:collapse;"
             "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"<style>{style}</style></head><body><h1>{title}</h1>{summary}"
            + "".join(parts) + "</body></html>")
