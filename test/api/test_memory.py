"""The per-IPU memory estimate (runtime/memory.py) of compiled models, checked against
byte counts by hand, and the out-of-memory error: 4 x Linear(8192, 8192) (1 GiB of f32
weights) does not fit one GC200 (1472 tiles x 624 KiB = 897 MiB) and fits on 2 or 4.

Code bytes follow the documented assumption of the estimate: per op and per tile its
largest tensor spreads over (128-byte grains), 8 bytes per operand and result and 64 of
control code, plus a 1 KiB codelet per distinct op on the tiles it uses.
"""

import gc
import json
import math
import re

import pytest
import torch
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.errors import Error
from poptorch.runtime.machine.liveness import liveness, local_names
from poptorch.runtime.machine.memory import ArgInfo, Location, Locations, estimate
from poptorch.runtime.machine.system import GC200, Machine

F32 = 4
AVAILABLE = 1472 * 624 * 1024  # GC200 compute tiles x memoryBytesPerTile


def code(*ops: tuple[str, int, int]) -> int:
    """Vertex code and state by hand: ops as (name, operands + results, tiles)."""
    tiles: dict[str, int] = {}
    total = 0
    for name, fields, spread in ops:
        total += spread * (8 * fields + 64)
        tiles[name] = max(tiles.get(name, 0), spread)
    return total + 1024 * sum(tiles.values())


def arguments(compiled, slots: int = 0) -> list[ArgInfo]:
    trainable = set(getattr(compiled.captured, "trainable", ()))
    return [ArgInfo(a.name, a.kind, a.name in trainable, slots if a.name in trainable else 0)
            for a in compiled.captured.arguments]


def memory(executor, slots: int = 0, machine: Machine = GC200, **options):
    """The estimate the executor's compile-time check makes (args from the capture,
    gradients named by the training capture's results, stash from the timeline)."""
    compiled = executor._compiled
    with make_context():
        module = ir.Module.parse(compiled.module_text)
        return estimate(module, machine, arguments(compiled, slots),
                        results=getattr(compiled.captured, "results", ()),
                        stash_bytes=compiled.timeline.stash_bytes, **options)


def classes(estimate_, ipu: int) -> dict[str, int]:
    return {c: b for c, b in estimate_.ipus[ipu].classes.items() if b}


def small(blocks: bool = False):
    """Linear(4, 8) -> ReLU -> Linear(8, 2) on a batch of 2; blocks: the second Linear
    on IPU 1 (2 device iterations, the pipeline's minimum)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opts = poptorch.Options()
    if blocks:
        model[2] = poptorch.BeginBlock(model[2], ipu_id=1)
        opts.deviceIterations(2)
    ipu = poptorch.inferenceModel(model, opts)
    ipu.compile(torch.rand(4 if blocks else 2, 4))
    return ipu


# 0.weight 8x4, 0.bias 8, 2.weight 2x8, 2.bias 2 (f32)
W0, B0, W2, B2 = 32 * F32, 8 * F32, 16 * F32, 2 * F32
ROW8 = 2 * 8 * F32  # a 2x8 activation


@pytest.fixture(scope="module")
def one_ipu():
    return small()


def test_one_ipu_by_hand(one_ipu):
    mem = memory(one_ipu)
    # matmul 2x8 and add 2x8 are live together (the add reads the matmul); the
    # transposed weights are views; every tensor fits one 128-byte grain: one tile.
    ops = code(("ipu.matmul", 3, 1), ("ipu.add", 3, 1), ("ipu.relu", 2, 1),
               ("ipu.matmul", 3, 1), ("ipu.add", 3, 1))
    assert ops == 3504
    assert classes(mem, 0) == {"weights": W0 + B0 + W2 + B2, "activations": 2 * ROW8,
                               "code": ops, "io": 2 * 4 * F32}
    ipu0 = mem.ipus[0]
    assert (ipu0.total, ipu0.available, ipu0.off_chip) == (232 + 128 + 3504 + 32, AVAILABLE, 0)
    assert (ipu0.per_tile_mean, ipu0.per_tile_max) == (math.ceil(3896 / 1472), 3896)
    assert [(t.name, t.cls, t.bytes) for t in ipu0.largest] == [
        ("0.weight", "weights", 128), ("2.weight", "weights", 64),
        ("ipu.matmul %1 in @main", "activations", 64), ("ipu.add %2 in @main", "activations", 64),
        ("0.bias", "weights", 32)]
    mem.check()


def test_to_dict_is_json(one_ipu):
    data = json.loads(json.dumps(memory(one_ipu).to_dict()))
    ipu0 = data["ipus"]["0"]
    assert ipu0["total"] == 3896 and ipu0["available"] == AVAILABLE and ipu0["phase"] is None
    assert ipu0["classes"]["weights"] == 232 and ipu0["per_tile"] == {"mean": 3, "max": 3896}
    assert ipu0["largest"][0] == {"name": "0.weight", "class": "weights", "bytes": 128}
    assert (data["off_chip_bytes"], data["tiles"], data["memory_bytes_per_tile"]) == (
        0, 1472, 624 * 1024)


def test_temporary_and_io_tiles(one_ipu):
    mem = memory(one_ipu, io_tiles=32,
                 temporary=lambda op, ipu: 1000 if op.name == "ipu.matmul" else 0)
    ipu0 = mem.ipus[0]
    # the fullest moment is the second matmul's: its scratch with the 2x8 relu output it
    # reads and its 2x2 result (the first matmul has only its 2x8 result alive), not the
    # add's peak of activations (2 x 2x8) with no scratch
    assert classes(mem, 0) == {"weights": 232, "activations": ROW8 + 2 * 2 * F32,
                               "temporary": 1000, "code": 3504, "io": 2 * 4 * F32}
    assert ipu0.peaks["activations"] == 2 * ROW8 and ipu0.peaks["temporary"] == 1000
    assert ipu0.available == (1472 - 32) * 624 * 1024
    # the matmul's tensors fit one grain: its scratch is on tile 0 too
    assert ipu0.total == ipu0.per_tile_max == 232 + 80 + 1000 + 3504 + 32


def test_two_ipus_put_each_block_on_its_ipu():
    mem = memory(small(blocks=True))
    assert classes(mem, 0) == {"weights": W0 + B0, "activations": 2 * ROW8, "io": 2 * 4 * F32,
                               "code": code(("ipu.matmul", 3, 1), ("ipu.add", 3, 1),
                                            ("ipu.relu", 2, 1))}
    # IPU 1: the copied 2x8 activation is live from the start until the matmul, whose
    # 2x2 result is live with it.
    assert classes(mem, 1) == {"weights": W2 + B2, "activations": ROW8 + 2 * 2 * F32,
                               "code": code(("ipu.matmul", 3, 1), ("ipu.add", 3, 1))}
    assert [(t.name, t.bytes) for t in mem.ipus[1].largest[:2]] == [
        ("2.weight", 64), ("%arg1 of @main_stage1 (copied from IPU 0)", 64)]


def test_tensor_locations_move_weights_off_chip(one_ipu):
    off = memory(one_ipu, locations=Locations(weights=Location(on_chip=False)))
    # every weight lives in Streaming Memory; the largest is loaded around its use
    assert off.ipus[0].classes["weights"] == W0
    assert off.ipus[0].off_chip == off.off_chip_bytes == W0 + B0 + W2 + B2
    assert off.ipus[0].largest[0].name == "0.weight (loaded from Streaming Memory)"
    # minElementsForOffChip(16): the biases (8 and 2 elements) stay on chip
    some = memory(one_ipu, locations=Locations(
        weights=Location(on_chip=False, min_elements_off_chip=16)))
    assert some.ipus[0].classes["weights"] == B0 + B2 + W0
    assert some.off_chip_bytes == W0 + W2


def test_replicated_tensor_sharding_divides_weights(one_ipu):
    rts = Locations(weights=Location(replicated_sharding=True, min_elements_rts=16))
    sharded = memory(one_ipu, replicas=4, locations=rts)
    # each replica keeps a quarter of the 32- and 16-element weights, the biases whole,
    # and gathers the largest weight to use it
    assert sharded.ipus[0].classes["weights"] == W0 // 4 + W2 // 4 + B0 + B2 + W0
    assert sharded.ipus[0].largest[0].name == "0.weight (gathered from replicas)"
    assert memory(one_ipu, replicas=1, locations=rts).ipus[0].classes["weights"] == 232
    # PopART's default minimum (8192 elements) leaves these small weights whole
    default = Locations(weights=Location(replicated_sharding=True))
    assert memory(one_ipu, replicas=4, locations=default).ipus[0].classes["weights"] == 232


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = poptorch.BeginBlock(torch.nn.Linear(4, 8), ipu_id=0)
        self.fc2 = poptorch.BeginBlock(torch.nn.Linear(8, 2), ipu_id=1)

    def forward(self, x, target):
        y = self.fc2(torch.relu(self.fc1(x)))
        return y, torch.nn.functional.mse_loss(y, target)


@pytest.fixture(scope="module")
def adam():
    """A 2-IPU pipeline (GPipe over 3 micro-batches of 2) trained with Adam."""
    torch.manual_seed(0)
    model = TwoLayers()
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(3)
    opts.setExecutionStrategy(poptorch.PipelinedExecution().setSchedule(
        poptorch.PipelineSchedule.FillMainFlush).useRecomputation(False))  # not the defaults
    ipu = poptorch.trainingModel(model, opts, torch.optim.Adam(model.parameters(), lr=0.01))
    ipu.compile(torch.rand(6, 4), torch.rand(6, 2))
    return ipu


# fc1.weight 8x4, fc1.bias 8 on IPU 0; fc2.weight 2x8, fc2.bias 2 on IPU 1
FC1, FC2 = (32 + 8) * F32, (16 + 2) * F32


def test_training_adds_gradients_and_adams_two_slots(adam):
    mem = memory(adam, slots=2)
    # IPU 0: forward stage 0 and backward stage 2. Its 2x8 forward output and its 2x4
    # host input x (fc1's weight gradient reads it) wait for the backward stage: 3
    # micro-batches stashed. Stage 2's fullest moment is its last op:
    # the 2x8 masked gradient (read by the bias gradient's sum) and the weight gradients
    # it returns (8x4 and 1x8, the "gradients" class, alive to the end of the stage) at
    # once; earlier, the received 2x8 gradient, the 2x8 relu mask (1 byte an element)
    # and the masked gradient make the activations' own peak. One 0-d constant.
    assert classes(mem, 0) == {
        "weights": FC1 + F32, "activations": ROW8, "stash": 3 * (ROW8 + 2 * 4 * F32),
        "optimizer": 2 * FC1, "gradients": FC1, "io": 2 * 4 * F32,
        "code": mem.ipus[0].classes["code"]}
    assert mem.ipus[0].peaks["activations"] == ROW8 + 2 * 8 + ROW8
    # IPU 1: the fused last forward / first backward stage; the loss's two 0-d
    # constants (its square is an ipu.square, with no exponent constant); the target
    # and the loss seed stream in. Fullest at the weight gradient's matmul: the copied
    # 2x8 input, the 2x2 output, the 0-d loss, the 2x2 output gradient and its 2x8
    # input gradient, with the 2x8 weight gradient; the 2-element bias gradient comes
    # after the input is dead.
    assert classes(mem, 1) == {
        "weights": FC2 + 2 * F32, "activations": ROW8 + 4 * F32 + F32 + 4 * F32 + ROW8,
        "optimizer": 2 * FC2, "gradients": 16 * F32, "io": 2 * 2 * F32 + F32,
        "code": mem.ipus[1].classes["code"]}
    assert mem.ipus[1].peaks["gradients"] == FC2
    assert [t.name for t in mem.ipus[0].largest[:2]] == [
        "stashed activations (IPU 0)", "fc1.weight (optimizer state x2)"]
    assert ("ipu.matmul %4 in @main_stage2", "gradients") in [
        (t.name, t.cls) for t in mem.ipus[0].largest]


def test_gradient_accumulation_keeps_accumulators(adam):
    mem = memory(adam, slots=2, accumulate=True)
    # accumulators (one per weight) are the gradients; each micro-batch's weight
    # gradients are activations again: IPU 0's 8x4 matmul and 1x8 sum are live with the
    # masked gradient, IPU 1's 8x2 matmul joins its peak.
    assert mem.ipus[0].classes["gradients"] == FC1
    assert mem.ipus[0].classes["activations"] == ROW8 + 32 * F32 + 8 * F32
    assert mem.ipus[1].classes["activations"] == 164 + 16 * F32
    assert "fc1.weight (accumulator)" in [t.name for t in mem.ipus[0].largest]
    off = memory(adam, slots=2, accumulate=True,
                 locations=Locations(accumulators=Location(on_chip=False)))
    assert off.ipus[0].classes["gradients"] == 32 * F32  # fc1.weight's, loaded to update
    assert off.ipus[0].off_chip == FC1


def test_optimizer_state_off_chip_and_sharded(adam):
    off = memory(adam, slots=2, locations=Locations(optimizer=Location(on_chip=False)))
    assert off.ipus[0].classes["optimizer"] == 2 * 32 * F32  # fc1.weight's two slots
    assert off.ipus[0].off_chip == 2 * FC1 and off.off_chip_bytes == 2 * (FC1 + FC2)
    rts = Locations(optimizer=Location(replicated_sharding=True, min_elements_rts=10))
    sharded = memory(adam, slots=2, replicas=2, locations=rts)
    # fc1.weight's state (32 elements) is halved, updated as a shard; fc1.bias (8) is not
    assert sharded.ipus[0].classes["optimizer"] == 2 * 32 * F32 // 2 + 2 * 8 * F32


def test_activations_off_chip_move_the_stash(adam):
    mem = memory(adam, slots=2, locations=Locations(activations=Location(on_chip=False)))
    assert mem.ipus[0].classes["stash"] == 0
    assert mem.ipus[0].off_chip == 3 * (ROW8 + 2 * 4 * F32)  # the 2x8 output and 2x4 x
    # the backward stage restores its stashed input: it is live from its start, with the
    # received gradient, until the relu mask is made (then the mask and the masked
    # gradient join the received one); the fullest moment is still the stage's end
    assert mem.ipus[0].peaks["activations"] == ROW8 + ROW8 + 2 * 8
    assert mem.ipus[0].classes["activations"] == ROW8


class Phased(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 32)
        self.b = torch.nn.Linear(32, 64)

    def forward(self, x):
        with poptorch.Block("A"):
            x = torch.relu(self.a(x))
        with poptorch.Block("B"):
            return self.b(x)


def test_phased_weights_count_in_their_phase():
    strategy = poptorch.SerialPhasedExecution(poptorch.Phase(poptorch.Stage("A")),
                                              poptorch.Phase(poptorch.Stage("B")))
    strategy.phase(0).ipus(0)
    strategy.phase(1).ipus(0)
    ipu = poptorch.inferenceModel(Phased(), poptorch.Options().setExecutionStrategy(strategy))
    ipu.compile(torch.rand(2, 32))
    mem = memory(ipu)
    a, b = (32 * 32 + 32) * F32, (64 * 32 + 64) * F32
    ipu0 = mem.ipus[0]
    # phase 1 holds b's weights (larger than a's), its 2x64 matmul and add, and phase 0's
    # 2x32 output kept on chip (Liveness.AlwaysLive) for it; the input streamed in phase 0
    assert ipu0.phase == 1
    assert {c: v for c, v in ipu0.classes.items() if v and c != "code"} == {
        "weights": b, "activations": 2 * 2 * 64 * F32, "stash": 2 * 32 * F32}
    assert ipu0.off_chip == mem.off_chip_bytes == a + b


def test_liveness_views_keep_their_source_alive():
    with make_context():
        module = ir.Module.parse("""
        func.func @f(%x: tensor<4x8xf32>) -> tensor<32xf32> {
          %0 = "ipu.relu"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
          %1 = "ipu.reshape"(%0) : (tensor<4x8xf32>) -> tensor<32xf32>
          %2 = "ipu.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
          %3 = "ipu.reshape"(%2) : (tensor<4x8xf32>) -> tensor<32xf32>
          %4 = "ipu.add"(%1, %3) : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
          return %4 : tensor<32xf32>
        }""")
        func = module.body.operations[0].operation
        peak = liveness(func)
        # %0 lives through its view %1 until the add: three 128-byte buffers at once
        assert peak.bytes == 3 * 128
        assert [name() for _, _, name in peak.tensors("activations", "live")] == [
            "ipu.relu %0 in @f", "ipu.exp %2 in @f", "ipu.add %4 in @f"]
        # the argument copied in is live from the start; the returned value excluded
        assert liveness(func, {0: "copied from IPU 1"}, {0}).bytes == 3 * 128


# ---- the out-of-memory error --------------------------------------------------------
BIG = 8192
BIG_WEIGHT, BIG_BIAS = BIG * BIG * F32, BIG * F32  # 256 MiB, 32 KiB


def test_one_gib_of_weights_needs_two_or_four_ipus():
    """One model, compiled on 1, 2 and 4 IPUs (weights uninitialised: only their size
    matters; each executor is destroyed before the next uploads its 1 GiB). On one IPU
    the compile's own check refuses it, before uploading anything."""
    model = torch.nn.Sequential(*[torch.nn.utils.skip_init(torch.nn.Linear, BIG, BIG)
                                  for _ in range(4)])
    results = {}
    for ipus in (1, 2, 4):
        for n in range(1, 4):
            poptorch.removeBlocks(model[n])
            if ipus > 1:
                poptorch.BeginBlock(model[n], ipu_id=n * ipus // 4)
        ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(ipus))
        if ipus == 1:
            with pytest.raises(Error) as info:
                ipu.compile(torch.zeros(4 * ipus, BIG))
            continue
        ipu.compile(torch.zeros(4 * ipus, BIG))
        results[ipus] = memory(ipu)
        ipu.destroy()
        del ipu
        gc.collect()

    # by hand: 4 weights and biases; two 4x8192 activations live at once (the second
    # matmul's operand and result, with its temporary memory); the 4x8192
    # input; code: the matmuls spread over all 1472 tiles (their 256 MiB weight), the
    # adds over 4x8192x4 / 128 = 1024 tiles, once for the four identical layers
    # (PopART's outlining shares their compute sets); plus the matmuls' temporary memory
    # (the cost model's plan, pinned in test_cost_model)
    act = 4 * BIG * F32
    ops = code(("ipu.matmul", 3, 1472), ("ipu.add", 3, 1024))
    needed = 4 * (BIG_WEIGHT + BIG_BIAS) + 2 * act + ops + act
    assert needed == 1_077_700_608 - 3 * (1472 + 1024) * (8 * 3 + 64) \
        and AVAILABLE == 940_572_672
    assert info.value.type == "out_of_memory"
    message = info.value.message
    temporary = int(re.search(r"temporary ([\d,]+)", message).group(1).replace(",", ""))
    total = needed + temporary
    assert message == (
        f"out of memory on IPU 0: the model needs {total:,} bytes ({total / 2**20:.1f} MiB) "
        "but the IPU has 940,572,672 bytes (897.0 MiB) on its compute tiles; by class at its "
        "fullest moment (ipu.matmul %4 in @main): "
        f"weights 1,073,872,896, activations 262,144, temporary {temporary:,}, code "
        f"{ops:,}, io 131,072; largest tensors: "
        "0.weight (weights, 268,435,456 bytes); 1.weight (weights, 268,435,456 bytes); "
        "2.weight (weights, 268,435,456 bytes); 3.weight (weights, 268,435,456 bytes); "
        "input 0 (io, 131,072 bytes). To fit, split the model over more IPUs with "
        "poptorch.BeginBlock or a poptorch.PipelinedExecution, move tensors to Streaming "
        "Memory with Options.TensorLocations (TensorLocationSettings().useOnChipStorage("
        "False)), shard weights and optimizer state over replicas with "
        "TensorLocationSettings().useReplicatedTensorSharding(True), or use lower "
        "precision (model.half())")

    for ipus in (2, 4):
        results[ipus].check()
        layers = 4 // ipus
        for ipu, mem in results[ipus].ipus.items():
            assert mem.classes["weights"] == layers * (BIG_WEIGHT + BIG_BIAS), (ipus, ipu)
            assert mem.total < mem.available
        assert sorted(results[ipus].ipus) == list(range(ipus))


def test_every_ipu_out_of_memory_is_named():
    tiny = Machine(tilesPerIPU=2, memoryBytesPerTile=1024)
    mem = memory(small(blocks=True), machine=tiny)
    with pytest.raises(Error) as info:
        mem.check()
    message = info.value.message
    needed = mem.ipus[0].total
    assert message.startswith(
        f"out of memory on IPU 0: the model needs {needed:,} bytes ({needed / 2**20:.1f} MiB) "
        "but the IPU has 2,048 bytes (0.0 MiB) on its compute tiles (IPU 1 also out of "
        "memory); by class at its fullest moment (ipu.add %2 in @main_stage0): weights 160, "
        "activations 128, code ")


def test_bad_arguments():
    with make_context():
        module = ir.Module.parse("""
        func.func @main(%w: tensor<2xf32>, %x: tensor<2xf32>) -> tensor<2xf32> {
          %0 = "ipu.add"(%w, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
          return %0 : tensor<2xf32>
        }""")
        w, x = ArgInfo("w", "parameter"), ArgInfo("x", "input")
        with pytest.raises(Error, match=r"^@main has 2 arguments but 1 ArgInfo were given; "
                                        "describe every argument, in order$"):
            estimate(module, GC200, [w])
        with pytest.raises(Error, match=r"^argument 1 \(x\) has the unknown kind 'output'$"):
            estimate(module, GC200, [w, ArgInfo("x", "output")])
        with pytest.raises(Error, match=r"^replicas must be at least 1, got 0$"):
            estimate(module, GC200, [w, x], replicas=0)
        with pytest.raises(Error, match=r"^io_tiles must be between 0 and 1471 on a 1472-tile "
                                        "IPU, got 1472$"):
            estimate(module, GC200, [w, x], io_tiles=1472)
        assert classes(estimate(module, GC200, [w, x]), 0)["io"] == 8


def test_value_names_are_mlir_printers():
    """The memory estimate names values as MLIR's printer does in a function's local
    scope (counted, since an AsmState verifies every op first): arguments, single
    results, an op's several results (`%n#i`), and ops without results skipped."""
    text = """
    func.func @main(%x: tensor<1x2x4x4xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
      %0 = "ipu.relu"(%y) : (tensor<8xf32>) -> tensor<8xf32>
      %p:2 = "ipu.max_pool_with_indices"(%x) {kernel = array<i64: 2, 2>,
          strides = array<i64: 2, 2>, padding = array<i64: 0, 0>,
          dilations = array<i64: 1, 1>, ceil_mode = false}
          : (tensor<1x2x4x4xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xi32>)
      "ipu.remote_store"(%0) {ipu = 0 : i64} : (tensor<8xf32>) -> ()
      %1 = "ipu.neg"(%0) : (tensor<8xf32>) -> tensor<8xf32>
      return %1 : tensor<8xf32>
    }"""
    with make_context():
        module = ir.Module.parse(text)
        func = module.body.operations[0]
        names = local_names(func)
        state = ir.AsmState(func, use_local_scope=True)
        block = func.regions[0].blocks[0]
        values = [*block.arguments, *(r for op in block.operations for r in op.results)]
        assert [names[v] for v in values] == [v.get_name(state) for v in values] == [
            "%arg0", "%arg1", "%0", "%1#0", "%1#1", "%2"]
