"""Overlapped host I/O (spec 11.3 set_overlap_for_input / set_overlap_for_output,
OverlapMode, TensorLocations.numIOTiles): the numbers are the CPU's, the marked streams
run on the IO tiles on the timeline, overlapping compute, and PopTorch's errors."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from numerics import assert_close

import poptorch

ACC = poptorch.OverlapMode.OverlapAccumulationLoop
LOOPS = poptorch.OverlapMode.OverlapDeviceIterationLoop


class Scale(torch.nn.Module):
    """Transfers and compute of the same order: an elementwise chain on a wide input."""

    def __init__(self, mode=None, out_mode=None):
        super().__init__()
        self.mode, self.out_mode = mode, out_mode

    def forward(self, x):
        if self.mode is not None:
            x = poptorch.set_overlap_for_input(x, self.mode)
        for _ in range(6):
            x = torch.tanh(x) * 1.5 + 0.25
        if self.out_mode is not None:
            x = poptorch.set_overlap_for_output(x, self.out_mode)
        return x


class Deep(torch.nn.Module):
    """Compute dominates: a narrow input, then eight 512 x 512 products."""

    def __init__(self, mode=None):
        super().__init__()
        self.mode = mode
        self.up = torch.nn.Linear(16, 512)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(512, 512) for _ in range(8))

    def forward(self, x):
        if self.mode is not None:
            x = poptorch.set_overlap_for_input(x, self.mode)
        x = self.up(x)
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x.sum(dim=1)


def options(io_tiles: int | None = 32, iterations: int = 8) -> poptorch.Options:
    opts = poptorch.Options().deviceIterations(iterations)
    opts.setExecutionStrategy(poptorch.ShardedExecution())
    if io_tiles:
        opts.TensorLocations.numIOTiles(io_tiles)
    return opts


def host_events(timeline, kind):
    return [e for e in timeline.events[0] if e.kind == kind]


def test_marked_streams_run_on_io_tiles_and_match_the_cpu():
    torch.manual_seed(0)
    x = torch.randn(4 * 2 * 8, 1024)
    opts = options(iterations=4).replicationFactor(2)
    model = poptorch.inferenceModel(Scale(ACC, ACC), opts)
    assert_close(model(x), Scale()(x), rtol=1e-5, atol=1e-5)
    timeline = model.getTimeline()
    assert {e.tiles for e in host_events(timeline, "host_load")} == {"io"}
    assert {e.tiles for e in host_events(timeline, "host_store")} == {"io"}
    plain = poptorch.inferenceModel(Scale(), options(None, iterations=4).replicationFactor(2))
    plain(x)
    assert {e.tiles for e in host_events(plain.getTimeline(), "host_load")} == {"compute"}


def test_overlap_hides_transfers_behind_compute():
    x = torch.randn(8 * 64, 1024)
    plain = poptorch.inferenceModel(Scale(), options(None))
    plain(x)
    marked = poptorch.inferenceModel(Scale(ACC, ACC), options())
    marked(x)
    before, after = plain.getTimeline(), marked.getTimeline()
    # the 8 iterations' loads and stores no longer wait for compute, nor it for them
    assert after.total_cycles < 0.8 * before.total_cycles
    compute = host_events(after, "compute")
    transfers = host_events(after, "host_load") + host_events(after, "host_store")
    load = {e.micro_batch: e for e in host_events(after, "host_load")}
    assert load[1].start < compute[0].end  # iteration 1's input arrives while 0 computes
    # every iteration's compute runs while the link moves another one's data
    assert all(any(t.start < c.end and c.start < t.end and t.micro_batch != c.micro_batch
                   for t in transfers) for c in compute)
    # the IO tiles alone (no marks) overlap nothing: only fewer compute tiles
    io_only = poptorch.inferenceModel(Scale(), options())
    io_only(x)
    assert io_only.getTimeline().total_cycles >= before.total_cycles
    assert marked.getHostIpuLatency()[2] > 0.0


def test_io_tiles_slow_a_compute_bound_model():
    torch.manual_seed(1)
    model = Deep()
    x = torch.randn(8 * 64, 16)
    plain = poptorch.inferenceModel(model, options(None))
    plain(x)
    marked_model = copy.deepcopy(model)
    marked_model.mode = ACC
    marked = poptorch.inferenceModel(marked_model, options(192))
    assert_close(marked(x), model(x), rtol=1e-4, atol=1e-4)
    before, after = plain.getTimeline(), marked.getTimeline()
    # 192 of 1472 tiles do I/O: every product runs on fewer tiles, and the small input's
    # transfer hidden does not make up for it
    assert after.busy_cycles[0] > before.busy_cycles[0]
    assert before.total_cycles < after.total_cycles < 1.2 * before.total_cycles


class Trained(torch.nn.Module):
    def __init__(self, mode=None):
        super().__init__()
        self.mode = mode
        self.lin = torch.nn.Linear(256, 4)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, labels):
        if self.mode is not None:
            x = poptorch.set_overlap_for_input(x, self.mode)
        out = self.lin(x)
        loss = self.loss(out, labels)
        if self.mode is not None:
            loss = poptorch.set_overlap_for_output(loss, self.mode)
        return loss


def train(mode, x, labels):
    torch.manual_seed(2)
    model = Trained(mode)
    opts = options(32 if mode else None, iterations=2).outputMode(poptorch.OutputMode.All)
    opts.Training.gradientAccumulation(3)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    losses = ipu(x, labels)
    ipu.copyWeightsToHost()
    return ipu, losses, model.lin.weight.detach().clone()


@pytest.mark.parametrize("mode", [ACC, LOOPS])
def test_training_with_overlap_computes_what_it_computes_without(mode):
    x, labels = torch.randn(2 * 3 * 4, 256), torch.randint(0, 4, (2 * 3 * 4,))
    _, plain_losses, plain_weight = train(None, x, labels)
    ipu, losses, weight = train(mode, x, labels)
    assert_close(losses, plain_losses)
    assert_close(weight, plain_weight)
    timeline = ipu.getTimeline()
    compute = host_events(timeline, "compute")
    first_load_step1 = next(e for e in host_events(timeline, "host_load")
                            if e.step == 1 and e.micro_batch == 0)
    last_compute_step0 = [e for e in compute if e.step == 0][-1]
    # the device iteration loop overlaps too: step 1's first input during step 0
    if mode == LOOPS:
        assert first_load_step1.start < last_compute_step0.end
    else:
        assert first_load_step1.start >= last_compute_step0.end


def test_errors_of_the_options_overlap_needs():
    x = torch.randn(8, 4)
    with pytest.raises(poptorch.Error, match=r"^Overlapped IO is not supported with "
                       r"poptorch.PipelinedExecution. If you are using only one IPU, please "
                       r"switch to poptorch.ShardedExecution. \(set_overlap_for_input/output "
                       r"marks input0\)$"):
        poptorch.inferenceModel(Scale(ACC))(x)
    with pytest.raises(poptorch.Error, match=r"^No IO tiles allocated. You must allocate at "
                       r"least 32 IO tiles using poptorch.Options\(\).TensorLocations."
                       r"numIOTiles. \(set_overlap_for_input/output marks input0, output0\)$"):
        poptorch.inferenceModel(Scale(ACC, LOOPS), options(None, 1))(x)
    model = Trained(ACC)
    opts = options(iterations=1)
    with pytest.raises(poptorch.Error, match=r"^Unsupported output mode for overlapped IO. "
                       r"Please switch output mode to poptorch.OutputMode.All or "
                       r"poptorch.OutputMode.Sum. .* \(the output mode is Final\)$"):
        poptorch.trainingModel(model, opts)(torch.randn(8, 256), torch.zeros(8, dtype=torch.long))


def test_errors_of_misuse():
    with pytest.raises(poptorch.Error, match=r"^set_overlap_for_input: mode must be a "
                       r"poptorch.OverlapMode .*got 1$"):
        poptorch.set_overlap_for_input(torch.ones(2), 1)
    with pytest.raises(poptorch.Error, match=r"^You may only set overlap for torch.tensor "
                       r"outputs. <class 'int'> is not supported.$"):
        poptorch.set_overlap_for_output([torch.ones(2), 3], ACC)
    pair = poptorch.set_overlap_for_input({"a": torch.ones(2), "b": (torch.zeros(1),)}, ACC)
    assert pair["a"].tolist() == [1.0, 1.0] and pair["b"][0].tolist() == [0.0]

    class NotOnInput(torch.nn.Module):
        def forward(self, x):
            y = x + 1
            return poptorch.set_overlap_for_input(y, ACC)

    with pytest.raises(poptorch.Error, match=r"^.*test_overlapped_io.py:\d+: poptorch.set_overlap"
                       r"_for_input applied on a node which is not a tensor input to the model"):
        poptorch.inferenceModel(NotOnInput(), options(iterations=1))(torch.ones(2))

    class ReturnedTwice(torch.nn.Module):
        def forward(self, x):
            y = x + 1
            return y, poptorch.set_overlap_for_output(y, ACC)

    with pytest.raises(poptorch.Error, match=r"^.*test_overlapped_io.py:\d+: poptorch.set_overlap"
                       r"_for_output cannot be used with a tensor that is returned twice"):
        poptorch.inferenceModel(ReturnedTwice(), options(iterations=1))(torch.ones(2))


class Phased(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(256, 256) for _ in range(3))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            with poptorch.Block(f"b{i}"):
                x = torch.relu(layer(x))
        return x


def phased(io: bool, x: torch.Tensor):
    torch.manual_seed(3)
    model = Phased()
    opts = poptorch.Options()
    opts.setExecutionStrategy(poptorch.SerialPhasedExecution(
        *[poptorch.Stage(f"b{i}") for i in range(3)]).setTensorsLiveness(
        poptorch.Liveness.OffChipAfterEachPhase))
    if io:
        opts.TensorLocations.numIOTiles(64)
        opts.TensorLocations.setWeightLocation(
            poptorch.TensorLocationSettings().useOnChipStorage(False).useIOTilesToLoad(True))
        opts.TensorLocations.setActivationLocation(
            poptorch.TensorLocationSettings().useIOTilesToLoad(True).useIOTilesToStore(True))
    ipu = poptorch.inferenceModel(model, opts)
    assert_close(ipu(x), model(x), rtol=1e-4, atol=1e-4)
    return ipu.getTimeline()


def test_io_tiles_load_and_store_streaming_memory():
    x = torch.randn(2048, 256)
    before, after = phased(False, x), phased(True, x)
    streaming = ("remote_load", "remote_store")
    assert {e.tiles for e in before.events[0] if e.kind in streaming} == {"compute"}
    assert {e.tiles for e in after.events[0] if e.kind in streaming} == {"io"}
    compute = [e for e in after.events[0] if e.kind == "compute"]
    # off the compute tiles, phase 0's activations are stored while phase 1's weights
    # load... and a weight of phase 0 loads while the input arrives
    assert any(s.start < c.end and c.start < s.end for s in after.events[0]
               if s.kind in streaming for c in compute + host_events(after, "host_load"))
    assert not any(s.start < c.end and c.start < s.end for s in before.events[0]
                   if s.kind in streaming for c in host_events(before, "compute"))
    assert after.total_cycles < before.total_cycles


def test_io_tiles_to_load_without_io_tiles_is_an_error():
    opts = options(None, 1)
    opts.TensorLocations.setActivationLocation(
        poptorch.TensorLocationSettings().useIOTilesToStore(True))
    with pytest.raises(poptorch.Error, match=r"^No IO tiles allocated. You must allocate at "
                       r"least 32 IO tiles using poptorch.Options\(\).TensorLocations."
                       r"numIOTiles. \(activation_location: useIOTilesToStore\(True\)\)$"):
        poptorch.inferenceModel(Scale(), opts)(torch.ones(2, 4))


def test_io_tile_transfers_have_their_own_track_in_the_profile(tmp_path):
    opts = options(iterations=2).enableProfiling(str(tmp_path)).modelName("overlap")
    model = poptorch.inferenceModel(Scale(ACC), opts)
    model(torch.randn(8, 64))
    model.destroy()
    with open(tmp_path / "overlap" / "profile.json") as file:
        events = json.load(file)["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e.get("name") == "thread_name" and e["pid"] == 1}
    loads = [e for e in events if e.get("cat") == "host_load"]
    stores = [e for e in events if e.get("cat") == "host_store"]
    assert {threads[e["tid"]] for e in loads} == {"Host I/O (IO tiles)"}
    assert {e["args"]["tiles"] for e in loads} == {"io"}
    assert {threads[e["tid"]] for e in stores} == {"Host I/O"}  # output0 is not marked
