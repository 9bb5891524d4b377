"""Issue 6 item 4: the profile report (Chrome-trace JSON and the self-contained HTML page),
`poptorch.profiling.Channel` and the profiling settings (enableProfiling,
POPLAR_ENGINE_OPTIONS, modelName).

Trace timestamps are checked against a calculation by hand: at clock_hz = 1e9 a cycle is
a nanosecond, so a slice from cycle 1500 to 4000 has ts 1.5 and dur 2.5 (microseconds).
The last test is the acceptance check: the report of a 4-IPU pipelined training run opens
in headless Chromium with no console errors and the screenshot shows the timeline.
"""

import json
import os
import re
import shutil
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import poptorch
from poptorch import profiling
from poptorch.profiling import Channel, profile_settings
from poptorch.runtime.machine.profile import HOST_TIME_BASE, trace_events, write_report

MEMORY = {"ipus": {str(ipu): {
    "available": 1000_000, "total": 1200_000,
    "classes": {"weights": 4096 * (ipu + 1), "activations": 2048, "stash": 1024 * ipu,
                "optimizer": 8192, "gradients": 4096, "temporary": 512, "code": 65536},
    "per_tile": {"mean": 60, "max": 410},
    "largest": [{"name": f"layers.{ipu}.weight", "class": "weights", "bytes": 4096},
                {"name": f"layers.{ipu}.bias", "class": "weights", "bytes": 64}]}
    for ipu in range(4)}}


def event(kind, name, start, end, micro_batch=0, step=0, **extra):
    return {"kind": kind, "name": name, "micro_batch": micro_batch, "start": start,
            "end": end, "step": step, **extra}


TIMELINE = {
    "schedule": "phased", "micro_batches": 2, "steps": 1, "total_cycles": 9000,
    "total_seconds": 9e-6, "idle_fraction": 0.25, "clock_hz": 1e9,
    "ipus": {
        "0": {"busy_cycles": 4000, "stash_bytes": 0, "events": [
            event("host_load", "main", 0, 500, stream="input0"),
            event("compute", "main_stage0", 500, 2500, stage=0, phase=0,
                  breakdown={"compute": 1200, "exchange": 300, "sync": 500}),
            event("compute", "main_stage0", 2500, 4500, micro_batch=1, stage=0, phase=0),
            event("remote_store", "main_stage0", 4500, 5000, phase=0),
            event("all_reduce", "main", 8000, 8600),
            event("optimizer", "main", 8600, 9000)]},
        "1": {"busy_cycles": 3000, "stash_bytes": 256, "events": [
            event("copy", "main_stage1", 2500, 3000, stage=1, phase=1),
            event("copy", "main_stage1", 2700, 3100, micro_batch=1, stage=1, phase=1),
            event("compute", "main_stage1", 5000, 8000, stage=1, phase=1),
            event("tile_fault", "main", 8000, 8100)]},
    },
}


def by_ph(events, ph):
    return [e for e in events if e["ph"] == ph]


def names(events, kind):
    """{(pid, tid): name} of the process_name / thread_name metadata."""
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == kind}


def check_well_formed(events):
    """Every event has its fields; X slices of a thread nest (in whole nanoseconds, as
    Perfetto reads them) and every thread has a name."""
    threads = names(events, "thread_name")
    for e in events:
        assert {"ph", "pid", "tid", "name"} <= set(e), e
        if e["ph"] in ("X", "C"):
            assert isinstance(e["ts"], int | float) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and (e["pid"], e["tid"]) in threads, e
    by_thread = {}
    for e in by_ph(events, "X"):
        start = round(e["ts"] * 1000)
        by_thread.setdefault((e["pid"], e["tid"]), []).append(
            (start, start + round(e["dur"] * 1000)))
    for spans in by_thread.values():
        stack = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], "a slice overlaps its parent's end"
            stack.append(end)


# ---- profile.json ------------------------------------------------------------------------
def test_trace_of_a_timeline_by_hand():
    events = trace_events(TIMELINE, MEMORY)
    check_well_formed(events)
    processes = names(events, "process_name")
    assert [processes[pid, 0] for pid in (1, 2, 3, 4)] == ["IPU 0", "IPU 1", "IPU 2", "IPU 3"]
    assert names(events, "thread_name") == {
        (1, 1): "Compute", (1, 2): "Phases", (1, 3): "Streaming Memory", (1, 4): "Host I/O",
        (1, 5): "Step", (2, 1): "Compute", (2, 2): "Phases", (2, 3): "IPU-Links",
        (2, 4): "IPU-Links 2", (2, 5): "tile_fault"}
    slices = {(e["pid"], e["tid"], e["name"], e["ts"]): e for e in by_ph(events, "X")}
    first = slices[1, 1, "main_stage0", 0.5]
    assert (first["cat"], first["dur"]) == ("compute", 2.0)
    assert first["args"] == {"cycles": 2000, "micro_batch": 0, "step": 0, "stage": 0,
                             "phase": 0, "compute_cycles": 1200, "sync_cycles": 500,
                             "exchange_cycles": 300}
    # the breakdown in BSP order: compute 500-1700, sync 1700-2200, exchange 2200-2500
    parts = [(e["name"], e["ts"], e["dur"]) for e in by_ph(events, "X")
             if e["cat"] == "breakdown"]
    assert parts == [("compute", 0.5, 1.2), ("sync", 1.7, 0.5), ("exchange", 2.2, 0.3)]
    assert slices[1, 2, "phase 0", 0.5]["dur"] == 4.5  # phase 0 on IPU 0: 500 to 5000
    assert slices[1, 4, "main", 0.0]["args"]["stream"] == "input0"
    # the second copy overlaps the first: it goes to the second lane
    assert slices[2, 3, "main_stage1", 2.5]["dur"] == 0.5
    assert slices[2, 4, "main_stage1", 2.7]["args"]["micro_batch"] == 1
    assert slices[2, 5, "main", 8.0]["cat"] == "tile_fault"


def test_trace_counts_one_slice_per_timeline_event():
    events = trace_events(TIMELINE)
    for pid, ipu in ((1, "0"), (2, "1")):
        timeline_slices = [e for e in by_ph(events, "X") if e["pid"] == pid
                           and e["cat"] not in ("breakdown", "phase")]
        assert len(timeline_slices) == len(TIMELINE["ipus"][ipu]["events"])
    assert not by_ph(events, "C")


def test_memory_counters_per_ipu_by_class():
    events = trace_events(TIMELINE, MEMORY)
    counters = by_ph(events, "C")
    assert len(counters) == 4 * 2 * 2  # 4 IPUs x (by class, available) x (start, end)
    for pid in (1, 2, 3, 4):
        mine = [c for c in counters if c["pid"] == pid]
        assert sorted({c["ts"] for c in mine}) == [0, 9.0]
        classes = [c["args"] for c in mine if c["name"] == "Memory (bytes)"]
        assert classes == [MEMORY["ipus"][str(pid - 1)]["classes"]] * 2
        assert [c["args"] for c in mine if c["name"] == "Available memory (bytes)"] == [
            {"available": 1000_000}] * 2


def test_memory_with_missing_keys(tmp_path):
    memory = {"ipus": {"0": {"classes": {"weights": 10}}, "1": {}}}
    events = trace_events(TIMELINE, memory)
    assert [c["args"] for c in by_ph(events, "C")] == [{"weights": 10}] * 2
    with open(write_report(str(tmp_path), "training", TIMELINE, memory)["html"]) as file:
        assert "Largest tensors" in file.read()


def test_host_tracepoints_in_their_own_process():
    points = [
        {"channel": "MyApp", "name": "outer", "start_ns": 10_000, "end_ns": 50_000,
         "thread": 1, "thread_name": "MainThread", "depth": 0},
        {"channel": "MyApp", "name": "inner", "start_ns": 20_000, "end_ns": 30_000,
         "thread": 1, "thread_name": "MainThread", "depth": 1},
        {"channel": "Loader", "name": "load", "start_ns": 15_000, "end_ns": 16_500,
         "thread": 2, "thread_name": "worker", "depth": 0}]
    events = trace_events(TIMELINE, None, points)
    check_well_formed(events)
    assert names(events, "process_name")[3, 0] == "Host (wall clock)"
    labels = [e["args"]["labels"] for e in events if e["name"] == "process_labels"]
    assert labels == [HOST_TIME_BASE]
    assert names(events, "thread_name")[3, 1] == "MyApp"
    assert names(events, "thread_name")[3, 2] == "Loader (worker)"
    host = [(e["tid"], e["name"], e["ts"], e["dur"]) for e in by_ph(events, "X")
            if e["pid"] == 3]
    assert host == [(1, "outer", 0.0, 40.0), (2, "load", 5.0, 1.5), (1, "inner", 10.0, 10.0)]


def test_write_report_files(tmp_path):
    paths = write_report(str(tmp_path), "inference", TIMELINE, MEMORY, [],
                         {"deviceIterations": 2})
    assert paths == {"directory": str(tmp_path / "inference"),
                     "trace": str(tmp_path / "inference" / "profile.json"),
                     "html": str(tmp_path / "inference" / "profile.html")}
    with open(paths["trace"]) as file:
        trace = json.load(file)
    assert trace["displayTimeUnit"] == "ns"
    assert trace["otherData"]["total_cycles"] == 9000
    assert trace["otherData"]["options"] == {"deviceIterations": 2}
    check_well_formed(trace["traceEvents"])
    with open(paths["html"]) as file:
        page = file.read()
    assert not re.search(r"<script[^>]*\bsrc\s*=", page)
    assert not re.search(r"<link[^>]*\bhref\s*=", page)
    assert not re.search(r"@import|url\(\s*['\"]?https?:", page)
    assert "layers.3.weight" in page and "25.0%" in page and "deviceIterations" in page
    assert "1,200,000 B (1.14 MiB)" in page  # used: the estimate's total


def test_write_report_to_a_file_path_is_an_error(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(poptorch.Error) as info:
        write_report(str(tmp_path / "taken"), "training", TIMELINE, None)
    assert info.value.message == (
        f"cannot write the profile report to {tmp_path}/taken/training: Not a directory; set "
        "enableProfiling(dir) or autoReport.directory to a writable directory")


# ---- poptorch.profiling.Channel ----------------------------------------------------------
@pytest.fixture
def recorder():
    profiling._recorder.clear()
    yield profiling._recorder
    profiling._recorder.clear()


def test_tracepoints_record_names_and_nesting(recorder):
    channel = poptorch.profiling.Channel("MyApp")
    with channel.tracepoint("outer"):
        with channel.tracepoint("inner"):
            pass
    with pytest.raises(ValueError), channel.tracepoint("failing"):
        raise ValueError("recorded all the same")
    events = recorder.events()
    assert [(e["channel"], e["name"], e["depth"]) for e in events] == [
        ("MyApp", "inner", 1), ("MyApp", "outer", 0), ("MyApp", "failing", 0)]
    inner, outer, failing = events
    assert outer["start_ns"] <= inner["start_ns"] <= inner["end_ns"] <= outer["end_ns"]
    assert outer["end_ns"] <= failing["start_ns"]
    assert inner["thread_name"] == "MainThread"
    recorder.clear()
    assert recorder.events() == []


class Model:
    def __init__(self):
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.step(x) * 2

    def step(self, x):
        return x + 1

    @staticmethod
    def helper(x):
        return -x

    @classmethod
    def build(cls):
        return cls()


def test_instrument_an_object(recorder):
    model = Model()
    channel = Channel("Model")
    assert channel.instrument(model, "forward", "step") is model
    channel.instrument(model, "forward")  # twice: still one tracepoint per call
    assert model.forward(3) == 8 and model.calls == 1
    assert [(e["name"], e["depth"]) for e in recorder.events()] == [
        ("Model.step", 1), ("Model.forward", 0)]
    assert Model().forward(1) == 4 and len(recorder.events()) == 2  # the class is unchanged


def test_instrument_a_class(recorder):
    class Local(Model):
        pass

    Channel("Cls").instrument(Local, "step", "helper", "build")
    assert Local.helper(2) == -2 and Local().step(1) == 2
    assert isinstance(Local.build(), Local)
    assert [e["name"] for e in recorder.events()] == ["Local.helper", "Local.step",
                                                      "Local.build"]


def test_tracepoints_from_threads(recorder):
    channel = Channel("Workers")

    def work():
        with channel.tracepoint("outer"), channel.tracepoint("inner"):
            pass

    threads = [threading.Thread(target=work, name=f"worker{n}") for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events = recorder.events()
    assert len(events) == 16
    assert sorted(e["depth"] for e in events) == [0] * 8 + [1] * 8
    assert {e["thread_name"] for e in events} == {f"worker{n}" for n in range(8)}


def test_channel_errors():
    with pytest.raises(poptorch.Error) as info:
        Channel("")
    assert info.value.message == "a profiling Channel needs a non-empty string name, got ''"
    channel = Channel("App")
    with pytest.raises(poptorch.Error) as info:
        channel.instrument(Model(), "backward")
    assert info.value.message == ("Model.backward does not exist; instrument takes the names "
                                  "of Model's methods")
    with pytest.raises(poptorch.Error) as info:
        channel.instrument(Model(), "calls")
    assert info.value.message == ("Model.calls is not a method; instrument takes the names "
                                  "of Model's methods")
    with pytest.raises(poptorch.Error) as info:
        channel.instrument(Model())
    assert info.value.message == ("instrument needs the names of one or more methods to "
                                  "wrap, e.g. channel.instrument(model, \"forward\")")
    with pytest.raises(poptorch.Error) as info:
        channel.tracepoint(None)
    assert info.value.message == "a tracepoint needs a non-empty string name, got None"


# ---- profiling settings ------------------------------------------------------------------
def settings(env, profile_dir=None, model_name=None, monkeypatch=None):
    if env is None:
        monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    else:
        monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", env)
    return profile_settings(profile_dir, model_name, "training")


def test_profile_settings(monkeypatch):
    def check(env, profile_dir=None, model_name=None):
        return settings(env, profile_dir, model_name, monkeypatch)

    assert check(None) is None
    assert check(None, "out") == ("out", "training")
    assert check(None, "", "bert") == (".", "bert")
    assert check('{"autoReport.all":"true"}') == (".", "training")
    assert check('{"autoReport.all":"true","autoReport.directory":"./tommyFlowers"}',
                 "out") == ("./tommyFlowers", "training")  # the variable wins
    assert check('{"autoReport.all":"false"}', "out") is None
    assert check('{"autoReport.all":"false","autoReport.outputExecutionProfile":"true"}'
                 ) == (".", "training")
    assert check('{"autoReport.all":"true","autoReport.outputExecutionProfile":"false"}'
                 ) is None
    assert check('{"autoReport.directory":"/profile/output"}') is None
    assert check('{"autoReport.directory":"/profile/output"}', "out") == (
        "/profile/output", "training")
    assert check('{"autoReport.all":true}') == (".", "training")
    assert check("  ", "out") == ("out", "training")


@pytest.mark.parametrize("env, message", [
    ('{"autoReport.all":"true"',
     "POPLAR_ENGINE_OPTIONS is not valid JSON (Expecting ',' delimiter at character 24): "
     "'{\"autoReport.all\":\"true\"'; set it to a JSON object such as "
     "'{\"autoReport.all\":\"true\"}'"),
    ('["autoReport.all"]',
     "POPLAR_ENGINE_OPTIONS must be a JSON object of engine options, got "
     "'[\"autoReport.all\"]'; for example '{\"autoReport.all\":\"true\"}'"),
    ('{"autoReport.all":"yes"}',
     'POPLAR_ENGINE_OPTIONS sets "autoReport.all" to "yes"; use "true" or "false"'),
    ('{"autoReport.all":"true","autoReport.directory":3}',
     'POPLAR_ENGINE_OPTIONS sets "autoReport.directory" to 3; use a path string'),
])
def test_profile_settings_errors(monkeypatch, env, message):
    with pytest.raises(poptorch.Error) as info:
        settings(env, None, None, monkeypatch)
    assert (info.value.message, info.value.type) == (message, "options")


# ---- acceptance: a 4-IPU pipelined training run in headless Chromium ----------------------
CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


class PipelinedModel(torch.nn.Module):
    """Four Linear layers, BeginBlock on IPUs 0..3; the loss on the last IPU."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(*[
            poptorch.BeginBlock(torch.nn.Linear(32, 32), ipu_id=n) for n in range(4)])

    def forward(self, x, target):
        out = self.layers(x)
        return out, F.mse_loss(out, target)


def pipelined_training_report(directory) -> tuple[str, dict]:
    """Train one step of a 4-IPU pipeline (gradient accumulation 8) with
    `enableProfiling`; returns the report page's path and the timeline."""
    torch.manual_seed(0)
    opts = poptorch.Options().enableProfiling(str(directory))
    opts.Training.gradientAccumulation(8)
    model = PipelinedModel()
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.01))
    ipu(torch.randn(8 * 4, 32), torch.randn(8 * 4, 32))
    return os.path.join(directory, "training", "profile.html"), ipu.getTimeline().to_dict()


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium check skipped: no chromium "
                    "on PATH or at /usr/bin/chromium (install Debian's chromium package)")
def test_report_of_pipelined_training_opens_in_headless_chromium(tmp_path):
    sync_playwright = pytest.importorskip(
        "playwright.sync_api", reason="playwright (the test extra) is not installed"
    ).sync_playwright
    from PIL import Image

    page_path, timeline = pipelined_training_report(tmp_path)
    assert set(timeline["ipus"]) == {"0", "1", "2", "3"}
    bars = sum(len(ipu["events"]) for ipu in timeline["ipus"].values())
    problems, requests = [], []
    screenshot = tmp_path / "profile.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: m.type == "error" and problems.append(m.text))
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("request", lambda request: requests.append(request.url))
            page.goto(f"file://{page_path}")
            page.wait_for_selector("#timeline .main-svg")
            page.wait_for_selector("#memory .main-svg")
            drawn = page.locator("#timeline g.point").count()
            box = page.locator("#timeline").bounding_box()
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    assert problems == []
    assert [url for url in requests if not url.startswith("file://")] == []
    assert drawn == bars  # one SVG bar per timeline event (no phases in this run)
    shutil.copyfile(screenshot, "/tmp/profile_screenshot.png")
    image = Image.open(screenshot).convert("RGB")
    chart = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["width"]),
                        int(box["y"] + box["height"])))
    pixels = np.asarray(chart, dtype=np.int16)
    coloured = (pixels.max(axis=2) - pixels.min(axis=2) > 60).mean()  # bars, not grey/white
    assert coloured > 0.03
