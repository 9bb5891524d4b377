"""The machine model's figures through PopTorch's API (spec 11.1 and PoplarExecutor):
cycleCount, the latencies, getPerfCounters, logCycleCount, the IPU target, available
memory, IO tiles, the out-of-memory error, and the profile report of enableProfiling /
POPLAR_ENGINE_OPTIONS with Channel tracepoints."""

import json
import os

import pytest
import torch

import poptorch
from poptorch import _logging
from poptorch.runtime.machine.system import GC2, GC200


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x, y):
        return self.fc(x) + y


def run_two_inputs(opts=None, iterations=4):
    opts = opts or poptorch.Options()
    opts.deviceIterations(iterations)
    model = poptorch.inferenceModel(TwoInputs(), opts)
    model(torch.ones(2 * iterations, 16), torch.ones(2 * iterations, 16))
    return model


@pytest.mark.parametrize("method, what", [
    ("cycleCount", "cycle count"), ("getLatency", "latency"),
    ("getComputeLatency", "compute latency"), ("getHostIpuLatency", "host-IPU latency"),
    ("getIpuHostLatency", "IPU-host latency"), ("getPerfCounters", "perf counters")])
def test_figures_need_a_run(method, what):
    model = poptorch.inferenceModel(TwoInputs())
    with pytest.raises(poptorch.Error) as err:
        getattr(model, method)()
    assert err.value.message == f"the model must run before its {what} is known; call it first"
    model.compile(torch.ones(2, 16), torch.ones(2, 16))
    with pytest.raises(poptorch.Error):
        getattr(model, method)()  # compiled is not run


def test_cycle_count_latencies_and_perf_counter_shapes():
    model = run_two_inputs(iterations=4)
    timeline = model.getTimeline()
    assert model.cycleCount() == timeline.total_cycles > 0
    counters = model.getPerfCounters()
    assert set(counters) == {"input", "input_complete", "output", "output_complete"}
    assert [len(c) for c in counters["input"]] == [4, 4]  # 2 inputs x 4 iterations
    assert [len(c) for c in counters["output_complete"]] == [4]  # 1 output x 4 iterations
    for i in range(4):
        first_in = min(c[i] for c in counters["input"])
        last_in = max(c[i] for c in counters["input_complete"])
        assert first_in < last_in <= counters["output"][0][i] < counters["output_complete"][0][i]
    latency, compute = model.getLatency(), model.getComputeLatency()
    host_ipu, ipu_host = model.getHostIpuLatency(), model.getIpuHostLatency()
    for low, high, mean in (latency, compute, host_ipu, ipu_host):
        assert 0 < low <= mean <= high
    # the round trip holds the input transfers, the compute and the output transfer
    assert latency[0] == pytest.approx(host_ipu[0] + compute[0] + ipu_host[0], rel=1e-9)
    seconds = [counters["output_complete"][0][i] - counters["input"][0][i] for i in range(4)]
    assert latency == pytest.approx((min(seconds), max(seconds), sum(seconds) / 4))


def test_log_cycle_count_at_debug(capsys):
    level = _logging.logger.level
    poptorch.setLogLevel("DEBUG")
    try:
        model = run_two_inputs(poptorch.Options().logCycleCount(True))
        model(torch.ones(8, 16), torch.ones(8, 16))
    finally:
        _logging.logger.setLevel(level)
    lines = [line for line in capsys.readouterr().out.splitlines() if "IPU cycles" in line]
    assert [line.split("[DEBUG] ")[1] for line in lines] == [
        f"Total number of IPU cycles: {model.cycleCount()}"] * 2


def test_no_cycle_log_without_the_option(capsys):
    level = _logging.logger.level
    poptorch.setLogLevel("DEBUG")
    try:
        run_two_inputs()
    finally:
        _logging.logger.setLevel(level)
    assert "IPU cycles" not in capsys.readouterr().out


def test_offline_ipu_target_selects_the_machine():
    mk1 = poptorch.inferenceModel(TwoInputs(), poptorch.Options().useOfflineIpuTarget(1))
    mk1.compile(torch.ones(2, 16), torch.ones(2, 16))
    mk2 = poptorch.inferenceModel(TwoInputs())
    mk2.compile(torch.ones(2, 16), torch.ones(2, 16))
    assert mk1.getTimeline().machine is GC2 and mk2.getTimeline().machine is GC200
    assert mk1.getMemoryEstimate().ipus[0].available == 1216 * 256 * 1024
    assert mk2.getMemoryEstimate().ipus[0].available == 1472 * 624 * 1024
    assert poptorch.ipuHardwareVersion() == mk2.getTimeline().machine.version == 2


class BigMatMul(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(1024, 1024, bias=False)

    def forward(self, x):
        return self.fc(x)


def test_available_memory_proportion_trades_memory_for_cycles():
    def compiled(proportion):
        opts = poptorch.Options()
        if proportion is not None:
            opts.setAvailableMemoryProportion({"IPU0": proportion})
        model = poptorch.inferenceModel(BigMatMul(), opts)
        model.compile(torch.ones(512, 1024))
        return (model.getTimeline().total_cycles,
                model.getMemoryEstimate().ipus[0].classes["temporary"])

    default, low = compiled(None), compiled(0.001)
    assert compiled(0.6) == default
    assert low[0] > default[0] and low[1] < default[1]


def test_io_tiles_take_memory_from_compute_tiles():
    model = poptorch.inferenceModel(TwoInputs(), poptorch.Options())
    model.compile(torch.ones(2, 16), torch.ones(2, 16))
    opts = poptorch.Options()
    opts.TensorLocations.numIOTiles(32)
    io = poptorch.inferenceModel(TwoInputs(), opts)
    io.compile(torch.ones(2, 16), torch.ones(2, 16))
    assert (model.getMemoryEstimate().ipus[0].available
            - io.getMemoryEstimate().ipus[0].available) == 32 * 624 * 1024


class Wide(torch.nn.Module):
    """320 MiB of weights in 4 layers of 80 MiB: too much for one Mk1 IPU (304 MiB)."""

    def __init__(self, blocks):
        super().__init__()
        layers = [torch.nn.Linear(4096, 5120, bias=False) for _ in range(4)]
        for layer in layers:
            layer.weight.requires_grad_(False)
        for index in range(4):
            if blocks:
                layers[index] = poptorch.BeginBlock(layers[index], ipu_id=index * blocks // 4)
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)[:, :4096]
        return x


def test_out_of_memory_through_the_api_and_fits_after_begin_block():
    """Acceptance (issue 6) on the Mk1 target, which keeps the weights small: the
    compile refuses the model on one IPU, and it fits split over 2 or 4 IPUs."""
    opts = poptorch.Options().useOfflineIpuTarget(1)
    with pytest.raises(poptorch.Error) as err:
        poptorch.inferenceModel(Wide(0), opts).compile(torch.ones(1, 4096))
    assert err.value.type == "out_of_memory"
    message = err.value.message
    assert message.startswith("out of memory on IPU 0: the model needs ")
    assert "but the IPU has 318,767,104 bytes (304.0 MiB)" in message
    assert "largest tensors: layers.0.weight (weights, 83,886,080 bytes)" in message
    assert "split the model over more IPUs with poptorch.BeginBlock" in message
    for ipus in (2, 4):
        opts = poptorch.Options().useOfflineIpuTarget(1).deviceIterations(ipus)
        model = poptorch.inferenceModel(Wide(ipus), opts)
        model.compile(torch.ones(ipus, 4096))
        memory = model.getMemoryEstimate()
        assert sorted(memory.ipus) == list(range(ipus))
        for ipu in memory.ipus.values():
            assert ipu.classes["weights"] == 4 // ipus * 83_886_080
            assert ipu.total < ipu.available
        model.destroy()


def read_trace(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_enable_profiling_writes_the_report_named_by_model_name(tmp_path):
    opts = poptorch.Options().enableProfiling(str(tmp_path)).modelName("mlp")
    run_two_inputs(opts)
    trace = read_trace(tmp_path / "mlp" / "profile.json")
    names = {e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert "IPU 0" in names
    kinds = {e.get("cat") for e in trace["traceEvents"] if e["ph"] == "X"}
    assert {"compute", "host_load", "host_store"} <= kinds
    assert os.path.getsize(tmp_path / "mlp" / "profile.html") > 1_000_000  # plotly inline


def test_no_report_without_profiling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    run_two_inputs()
    assert os.listdir(tmp_path) == []


def test_poplar_engine_options_and_channel_tracepoints(tmp_path, monkeypatch):
    from poptorch.profiling import Channel, _recorder

    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps(
        {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "reports")}))
    _recorder.clear()
    channel = Channel("MyApp")
    with channel.tracepoint("first call"):
        model = run_two_inputs(poptorch.Options().enableProfiling(str(tmp_path / "ignored")))
    with channel.tracepoint("after the run"):
        pass
    model.destroy()  # rewrites the report with the tracepoints recorded since the run
    trace = read_trace(tmp_path / "reports" / "inference" / "profile.json")
    spans = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "MyApp"}
    assert spans == {"first call", "after the run"}
    assert not (tmp_path / "ignored").exists()
    _recorder.clear()


def test_bad_poplar_engine_options_is_an_error_at_the_run(monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "{autoReport.all: true}")
    with pytest.raises(poptorch.Error) as err:
        run_two_inputs()
    assert err.value.message.startswith("POPLAR_ENGINE_OPTIONS is not valid JSON")


def test_a_recompiled_model_drops_its_old_report_writer(tmp_path):
    """The previous compilation's report must not be rewritten over the new one when
    the interpreter exits."""
    model = run_two_inputs(poptorch.Options().enableProfiling(str(tmp_path)))
    old = model._figures.report
    assert old is not None and old.alive
    model.compile(torch.ones(8, 16), torch.ones(8, 16))
    assert not old.alive and model._figures.report is None
    with pytest.raises(poptorch.Error):
        model.cycleCount()  # recompiled, not run yet
    model(torch.ones(8, 16), torch.ones(8, 16))
    assert model._figures.report.alive
