"""Host tracing (PopTorch's PVTI_OPTIONS, spec 4.11.2 / 4-features "PopVision System
Analyser"): PopTorch's host phases as tracepoints of the "poptorch" channel, written
with the device timeline in the same Chrome/Perfetto trace; nothing when off."""

from __future__ import annotations

import json
import os

import pytest
import torch

import poptorch
from poptorch import profiling

COMPILE_STEPS = {"capture", "import", "ipu-mark-overlapped-io", "ipu-convert-torch-to-ipu",
                 "ipu-schedule", "jit", "machine model", "weight upload"}
CALL_STEPS = {"input preparation", "run", "output copy"}


@pytest.fixture(autouse=True)
def fresh_recorder():
    profiling._recorder.clear()
    yield
    profiling._recorder.clear()


def trace_of(directory: str, name: str) -> list[dict]:
    with open(os.path.join(directory, name, "profile.json")) as file:
        return json.load(file)["traceEvents"]


def within(child: dict, parent: dict) -> bool:
    return (parent["ts"] <= child["ts"] + 1e-3
            and child["ts"] + child["dur"] <= parent["ts"] + parent["dur"] + 1e-3)


def test_host_phases_share_the_trace_with_the_device_timeline(tmp_path, monkeypatch):
    monkeypatch.setenv("PVTI_OPTIONS", json.dumps({"enable": "true",
                                                   "directory": str(tmp_path)}))
    model = poptorch.inferenceModel(torch.nn.Linear(8, 4),
                                    poptorch.Options().deviceIterations(2))
    model(torch.randn(4, 8))
    model(torch.randn(4, 8))
    model.destroy()  # rewrites the report with the second call's phases
    events = trace_of(str(tmp_path), "inference")
    host = [e for e in events if e.get("cat") == "poptorch"]
    names = [e["name"] for e in host]
    assert COMPILE_STEPS <= set(names) and CALL_STEPS <= set(names)
    assert names.count("call") == 2 and names.count("compile") == 1
    assert names.count("run") == 4  # one per device iteration, per call
    # the device's events are in the same file, in the IPU's process
    assert {"compute", "host_load", "host_store"} <= {e.get("cat") for e in events}
    compile_phase = next(e for e in host if e["name"] == "compile")
    calls = [e for e in host if e["name"] == "call"]
    for event in host:
        assert event["dur"] >= 0
        if event["name"] in COMPILE_STEPS:
            assert event["args"]["depth"] == 1 and within(event, compile_phase)
        if event["name"] in CALL_STEPS:
            assert event["args"]["depth"] == 1 and any(within(event, c) for c in calls)
    # the compile steps run one after the other, within the compile phase
    steps = sorted((e for e in host if e["name"] in COMPILE_STEPS), key=lambda e: e["ts"])
    for before, after in zip(steps, steps[1:], strict=False):
        assert before["ts"] + before["dur"] <= after["ts"] + 1e-3
    assert sum(e["dur"] for e in steps) <= compile_phase["dur"] + 1e-3
    assert calls[0]["ts"] + calls[0]["dur"] <= calls[1]["ts"]


def test_training_phases_and_weight_download(tmp_path, monkeypatch):
    monkeypatch.setenv("PVTI_OPTIONS", f'{{"enable":"true","directory":"{tmp_path}"}}')
    class Fit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.lin(x).abs().mean()

    ipu = poptorch.trainingModel(Fit(), poptorch.Options().modelName("fit"))
    ipu(torch.randn(3, 4))
    ipu.copyWeightsToHost()
    names = [e["name"] for e in profiling._recorder.events() if e["channel"] == "poptorch"]
    assert {"compile", "capture", "jit", "weight upload", "call", "input preparation",
            "run", "output copy", "weight download"} <= set(names)
    assert os.path.exists(os.path.join(tmp_path, "fit", "profile.json"))


def test_off_records_nothing_and_shares_one_no_op_phase(monkeypatch):
    monkeypatch.delenv("PVTI_OPTIONS", raising=False)
    model = poptorch.inferenceModel(torch.nn.Linear(8, 4))
    model(torch.randn(2, 8))
    assert not [e for e in profiling._recorder.events() if e["channel"] == "poptorch"]
    monkeypatch.setenv("PVTI_OPTIONS", '{"enable":"false"}')
    model(torch.randn(2, 8))
    assert not profiling._recorder.events()
    monkeypatch.delenv("PVTI_OPTIONS")
    # off, every phase is one shared no-op context behind a flag (what it costs a call
    # is measured by `make bench`, not asserted here: timings are no test)
    assert profiling.host_phase("run") is profiling.host_phase("call")


@pytest.mark.parametrize("value, message", [
    ("enable", r"^PVTI_OPTIONS is not valid JSON \(Expecting value at character 0\): "
               r"'enable'; set it to a JSON object"),
    ('["enable"]', r"^PVTI_OPTIONS must be a JSON object, got '\[\"enable\"\]'"),
    ('{"enable":"yes"}', r'^PVTI_OPTIONS sets "enable" to "yes"; use "true" or "false"$'),
    ('{"enable":"true","dir":"x"}', r'^PVTI_OPTIONS sets "dir", which host tracing does not '
                                    r"know; its options are enable, directory$"),
    ('{"enable":"true","directory":3}', r'^PVTI_OPTIONS sets "directory" to 3; use a path'),
])
def test_bad_pvti_options(monkeypatch, value, message):
    monkeypatch.setenv("PVTI_OPTIONS", value)
    with pytest.raises(poptorch.Error, match=message):
        poptorch.inferenceModel(torch.nn.Linear(2, 2))(torch.ones(1, 2))
