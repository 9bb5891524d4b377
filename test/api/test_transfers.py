"""The machine model's transfers: syncs within and across IPUs, inter-IPU copies over the
IPU-Links of the ladder, the host link through the IPU-Gateway, collectives over replicas
(all-reduce; reduce-scatter and all-gather under replicated tensor sharding; GW-Links
between IPU-POD64s) and Streaming Memory around the optimizer update.

Figures are checked against the `Machine` fields' formulas written out by hand.
"""

import math

import pytest
import torch
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.machine.cost import op_cost
from poptorch.runtime.machine.system import GC200
from poptorch.runtime.machine.timeline import HostStreams, simulate

M = GC200
CLOCK = M.tileClockFrequency
LINK = 16e9 * 0.85  # one IPU-Link, one direction, at poplibs' efficiency
HOP = math.ceil(15e-9 * CLOCK)  # 20 cycles a hop of the ladder


def sync(ipus: int) -> int:
    """An external sync by hand: the internal one, then 15 ns a hop both ways over one
    hop plus one per four IPUs."""
    return 90 + math.ceil(2 * (1 + ipus // 4) * 15e-9 * CLOCK)


def test_internal_sync_per_bsp_step_and_external_syncs_grow_with_ipus():
    context = make_context()
    with context:
        module = ir.Module.parse("""
func.func @f(%a: tensor<64x256xf32>, %b: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %0 = "ipu.add"(%a, %b) : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  return %0 : tensor<64x256xf32>
}""")
        add = module.body.operations[0].regions[0].blocks[0].operations[0]
        assert op_cost(add).sync == M.globalSyncCycles == 90  # one BSP step on one IPU
    assert [M.external_sync_cycles(n) for n in (2, 4, 16, 64)] == [
        sync(2), sync(4), sync(16), sync(64)] == [130, 170, 290, 769]
    assert M.globalSyncCycles < M.external_sync_cycles(2) < M.external_sync_cycles(16)


def test_copies_are_charged_per_link_and_hop():
    n = 1 << 20
    rung = math.ceil(n * CLOCK / (4 * LINK))  # IPUs 0 and 1: a rung of 4 links
    rail = math.ceil(n * CLOCK / (2 * LINK))  # IPUs 0 and 2: the rails' 2 links
    assert M.link_route(0, 1) == (1, 4) and M.copy_cycles(n, 0, 1, 4) == sync(4) + rung + HOP
    assert M.link_route(0, 2) == (1, 2) and M.copy_cycles(n, 0, 2, 4) == sync(4) + rail + HOP
    # 0 -> 3: across the rung, then one rung down; 0 -> 6: three rungs down
    assert M.link_route(0, 3) == (2, 2) and M.copy_cycles(n, 0, 3, 4) == sync(4) + rail + 2 * HOP
    assert M.link_route(0, 6) == (3, 2)
    assert M.copy_cycles(n, 0, 2, 8) < M.copy_cycles(n, 0, 3, 8) < M.copy_cycles(n, 0, 6, 8)
    # a bigger copy costs its extra bytes over the links' bandwidth
    extra = M.copy_cycles(2 * n, 0, 2, 4) - M.copy_cycles(n, 0, 2, 4)
    assert extra == pytest.approx(n * CLOCK / (2 * LINK), abs=1)
    assert M.copy_cycles(n, 3, 3) == 0


def relay(dst: int) -> ir.Module:
    """A stage on IPU 0 whose result is copied to a stage on IPU `dst`."""
    t = "tensor<256x256xf32>"
    text = f"""
func.func private @s0(%x: {t}) -> {t} attributes {{ipu.stage = #ipu.stage<0 : i64, 0 : i64>}} {{
  %0 = "ipu.relu"(%x) : ({t}) -> {t}
  return %0 : {t}
}}
func.func private @s1(%x: {t}) -> {t} attributes {{ipu.stage = #ipu.stage<1 : i64, {dst} : i64>}} {{
  %0 = "ipu.relu"(%x) : ({t}) -> {t}
  return %0 : {t}
}}
func.func @main(%x: {t}) -> ({t}, {t}) attributes {{ipu.schedule = "gpipe",
    ipu.micro_batches = 1 : i64, ipu.tasks = array<i64: 0, 0, 1, 0>}} {{
  %0 = func.call @s0(%x) {{ipu.stage = #ipu.stage<0 : i64, 0 : i64>}} : ({t}) -> {t}
  %1 = "ipu.copy"(%0) {{src_ipu = 0 : i64, dst_ipu = {dst} : i64}} : ({t}) -> {t}
  %2 = func.call @s1(%1) {{ipu.stage = #ipu.stage<1 : i64, {dst} : i64>}} : ({t}) -> {t}
  return %2, %0 : {t}, {t}
}}"""
    with make_context():
        return ir.Module.parse(text)


@pytest.mark.parametrize("dst", [1, 3, 4])
def test_the_timeline_copies_over_the_route_of_the_program(dst):
    timeline = simulate(relay(dst))
    copy = next(e for e in timeline.events[dst] if e.kind == "copy")
    assert copy.end - copy.start == M.copy_cycles(256 * 256 * 4, 0, dst, dst + 1)


def test_host_transfers_at_the_gateway_figure_shared_by_its_ipus():
    nbytes = 256 * 256 * 4
    host = math.ceil(1.2e-6 * CLOCK) + math.ceil(nbytes * CLOCK / 12.5e9)  # 100 GbE RoCE
    assert M.host_cycles(nbytes) == host

    def stores(dst: int) -> dict:
        streams = HostStreams([(0, "x")], [(0, "out"), (1, "mid")])
        timeline = simulate(relay(dst), streams=streams)
        return {e.name: e for events in timeline.events.values() for e in events
                if e.kind == "host_store"}

    # IPU 0 stores its result ("mid") while IPU `dst` computes "out". IPU 3 shares IPU
    # 0's IPU-M2000 and its host link: its store waits; IPU 4 has a link of its own.
    same, other = stores(3), stores(4)
    assert same["out"].start == same["mid"].end
    assert other["out"].start < other["mid"].end
    assert {e.end - e.start for e in (*same.values(), *other.values())} == {host}


class Net(torch.nn.Module):
    """One 128 x 128 Linear (16384 weight elements, at least PopART's RTS minimum)."""

    def __init__(self, ipus: int = 1):
        super().__init__()
        self.fc1 = torch.nn.Linear(128, 128)
        self.fc2 = torch.nn.Linear(128, 128)
        if ipus > 1:
            self.fc2 = poptorch.BeginBlock(self.fc2, ipu_id=1)

    def forward(self, x, target):
        y = self.fc2(torch.relu(self.fc1(x)))
        return y, torch.nn.functional.mse_loss(y, target)


def train(opts: poptorch.Options, ipus: int = 1, steps: int = 2):
    torch.manual_seed(0)
    model = Net(ipus)
    ipu = poptorch.trainingModel(model, opts, torch.optim.Adam(model.parameters(), lr=1e-3))
    batch = opts.device_iterations * opts.replication_factor \
        * opts.Training.gradient_accumulation * 2
    ipu(torch.rand(batch, 128), torch.rand(batch, 128))
    return ipu.getTimeline()


def step_end(timeline, kind: str) -> list:
    return [e for events in timeline.events.values() for e in events
            if e.kind == kind and e.micro_batch is None]


WEIGHT = 128 * 128 * 4
BIAS = 128 * 4


def test_optimizer_state_off_chip_loads_and_stores_around_each_update():
    opts = poptorch.Options().deviceIterations(2)
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings().useOnChipStorage(False))
    timeline = train(opts)
    loads, stores = step_end(timeline, "remote_load"), step_end(timeline, "remote_store")
    # Adam's two slots of each of the four tensors, loaded and stored once a step
    expected = sorted([M.streaming_cycles(2 * WEIGHT)] * 2 + [M.streaming_cycles(2 * BIAS)] * 2)
    for step in (0, 1):
        assert sorted(e.end - e.start for e in loads if e.step == step) == expected
        assert sorted(e.end - e.start for e in stores if e.step == step) == expected
        update = next(e for e in step_end(timeline, "optimizer") if e.step == step)
        assert all(e.end <= update.start for e in loads if e.step == step)
        assert all(e.start >= update.end for e in stores if e.step == step)
        assert {e.tiles for e in loads + stores} == {"compute"}
    on_chip = train(poptorch.Options().deviceIterations(2))
    assert not step_end(on_chip, "remote_load")
    assert timeline.total_cycles == on_chip.total_cycles + 2 * 2 * sum(expected)


def test_io_tiles_load_optimizer_state_beside_the_gradient_reduction():
    opts = poptorch.Options().replicationFactor(2)
    opts.TensorLocations.numIOTiles(32)
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings().useOnChipStorage(False).useIOTilesToLoad(True)
        .useIOTilesToStore(True))
    timeline = train(opts)
    loads, reduce = step_end(timeline, "remote_load"), step_end(timeline, "all_reduce")
    assert {e.tiles for e in loads} == {"io"}
    first = min(e.start for e in loads if e.step == 0)
    assert first == next(e.start for e in reduce if e.step == 0)  # overlapping it


def test_replicated_tensor_sharding_reduce_scatters_and_all_gathers():
    opts = poptorch.Options().replicationFactor(4)
    plain = train(opts)
    assert {e.name for e in step_end(plain, "all_reduce")} == {"gradients"}
    assert not step_end(plain, "reduce_scatter")
    opts = poptorch.Options().replicationFactor(4)
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings().useReplicatedTensorSharding(True))
    sharded = train(opts)
    # the weights (16384 elements) are sharded; the biases (128) stay all-reduced
    scatter = step_end(sharded, "reduce_scatter")
    gather = step_end(sharded, "all_gather")
    reduce = step_end(sharded, "all_reduce")
    assert [e.end - e.start for e in scatter if e.step == 0] == [
        M.ring_cycles(2 * WEIGHT, 4, 1, phases=1)]
    assert [e.end - e.start for e in gather if e.step == 0] == [
        M.ring_cycles(2 * WEIGHT, 4, 1, phases=1)]
    assert [e.end - e.start for e in reduce if e.step == 0] == [
        M.collective_cycles(2 * BIAS, 4, 1)]
    update = next(e for e in step_end(sharded, "optimizer") if e.step == 0)
    assert scatter[0].end <= update.start and gather[0].start >= update.end
    # each replica updates a quarter of each weight
    full = next(e for e in step_end(plain, "optimizer") if e.step == 0)
    assert update.end - update.start < full.end - full.start


def test_pipelined_replicas_all_reduce_each_stage_with_its_peers():
    opts = poptorch.Options().replicationFactor(2)
    opts.Training.gradientAccumulation(3)
    timeline = train(opts, ipus=2)
    reduce = {e.end - e.start for e in step_end(timeline, "all_reduce") if e.step == 0}
    # IPU 0 with IPU 2 and IPU 1 with IPU 3: each ring over the rails, stride 2
    assert reduce == {M.collective_cycles(WEIGHT + BIAS, 2, 2)}
    step = math.ceil((WEIGHT + BIAS) / 2 * CLOCK / (2 * 2 * LINK)) + HOP + sync(4)
    assert M.collective_cycles(WEIGHT + BIAS, 2, 2) == 2 * step


def test_replicas_across_pods_pay_gw_link_bandwidth():
    n = 1 << 24
    # 32 replicas of 4 IPUs: 128 IPUs, two IPU-POD64s. Inside each pod a ring of 16
    # (rails shared by the 2 rings of a side), then the 1/16 shards cross the pods over
    # the GW-Links, 25 GB/s an IPU-Gateway shared by its 4 IPUs.
    inside = (math.ceil(n / 16 * CLOCK / (2 * 2 * LINK / 2)) + 2 * HOP + sync(64))
    across = math.ceil(n / 16 / 2 * CLOCK / (25e9 / 4)) + sync(128)
    assert M.collective_cycles(n, 32, 4) == 2 * 15 * inside + 2 * 1 * across
    # within one pod (16 replicas of 4) no GW-Link: cheaper per byte reduced
    assert M.collective_cycles(n, 16, 4) == 2 * 15 * (
        math.ceil(n / 16 * CLOCK / (2 * 2 * LINK / 2)) + 2 * HOP + sync(64))
    assert M.collective_cycles(n, 32, 4) > M.collective_cycles(n, 16, 4)
