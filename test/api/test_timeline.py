"""The per-IPU timeline of multi-IPU modules (the cost of single ops: test_cost_model.py).

Modules are written as MLIR text in the form the multi-IPU passes produce (stage
functions called from @main with #ipu.stage, ipu.copy between IPUs, the schedule pass's
ipu.schedule / ipu.micro_batches / ipu.tasks on @main). Timeline figures are checked
against a calculation by hand from the ops' costs and the `Machine` fields.
"""

import math

import pytest
from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.errors import Error
from poptorch.runtime.machine import GC200, op_cycles
from poptorch.runtime.timeline import simulate

M = GC200
TILES = M.tilesPerIPU
SYNC = M.globalSyncCycles


def parse(text: str) -> ir.Module:
    context = make_context()
    # ipu.remote_load / ipu.remote_store may not be registered yet (dialects/structure.py).
    context.allow_unregistered_dialects = True
    with context:
        return ir.Module.parse(text)


def matmul_cycles(m: int, k: int, n: int) -> int:
    """The cost model's cycles of one f32 (m x k) @ (k x n) (pinned in test_cost_model.py)."""
    module = parse(f"""
func.func @f(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %0 = "ipu.matmul"(%a, %b) : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %0 : tensor<{m}x{n}xf32>
}}""")
    with module.context:
        return op_cycles(module.body.operations[0].regions[0].blocks[0].operations[0])


def link_cycles(nbytes: int) -> int:
    return math.ceil(nbytes * M.tileClockFrequency / M.ipuLinkBandwidth)


def tasks_attr(tasks: list[tuple[int, int]]) -> str:
    return "array<i64: " + ", ".join(f"{k}, {mb}" for k, mb in tasks) + ">"


# An inference stage: `DEPTH` chained matmuls of an 8x1024 activation by 1024x1024 weights.
ROWS, WIDTH, DEPTH = 8, 1024, 8
ACT = f"tensor<{ROWS}x{WIDTH}xf32>"
WEIGHT = f"tensor<{WIDTH}x{WIDTH}xf32>"
STAGE_CYCLES = DEPTH * matmul_cycles(ROWS, WIDTH, WIDTH)
COPY_CYCLES = link_cycles(ROWS * WIDTH * 4)


def stage_fn(name: str, stage: int) -> str:
    body, value = [], "%x"
    for i in range(DEPTH):
        body.append(f'  %{i} = "ipu.matmul"({value}, %w) : ({ACT}, {WEIGHT}) -> {ACT}')
        value = f"%{i}"
    return (f"func.func private @{name}(%x: {ACT}, %w: {WEIGHT}) -> {ACT} attributes "
            f"{{ipu.stage = #ipu.stage<{stage} : i64, {stage} : i64>}} {{\n"
            + "\n".join(body) + f"\n  return {value} : {ACT}\n}}\n")


def inference_pipeline(stages: int, tasks: list[tuple[int, int]], schedule: str,
                       micro_batches: int) -> ir.Module:
    """`stages` identical stages on IPUs 0.., each result copied to the next IPU."""
    fns = "".join(stage_fn(f"stage{s}", s) for s in range(stages))
    args = ", ".join(f"%w{s}: {WEIGHT}" for s in range(stages))
    lines, value = [], "%x"
    for s in range(stages):
        lines.append(f"  %s{s} = func.call @stage{s}({value}, %w{s}) {{ipu.stage = "
                     f"#ipu.stage<{s} : i64, {s} : i64>}} : ({ACT}, {WEIGHT}) -> {ACT}")
        value = f"%s{s}"
        if s + 1 < stages:
            lines.append(f'  %c{s} = "ipu.copy"(%s{s}) {{src_ipu = {s} : i64, dst_ipu = '
                         f"{s + 1} : i64}} : ({ACT}) -> {ACT}")
            value = f"%c{s}"
    main = (f"func.func @main(%x: {ACT}, {args}) -> {ACT} attributes {{ipu.schedule = "
            f'"{schedule}", ipu.micro_batches = {micro_batches} : i64, ipu.tasks = '
            f"{tasks_attr(tasks)}}} {{\n" + "\n".join(lines) + f"\n  return {value} : {ACT}\n}}\n")
    return parse(fns + main)


def gpipe(stages: int, micro_batches: int) -> list[tuple[int, int]]:
    return [(k, mb) for mb in range(micro_batches) for k in range(stages)]


def test_gc200_figures():
    # The public figures DESIGN.md lists: 1472 tiles x 624 KiB, 1.33 GHz, 320 GB/s links.
    assert (M.IPUVersion, M.tilesPerIPU, M.memoryBytesPerTile) == ("ipu2", 1472, 638976)
    assert M.tileClockFrequency == 1.33e9 and M.numWorkerContexts == 6
    assert M.ipuLinks * 32e9 == M.ipuLinkBandwidth == 320e9
    # Peak AMP throughput: ~250 TFLOPS FP16 and ~62.5 TFLOPS FP32 (GC200 datasheet).
    fp16 = 2 * M.fp16AmpMacsPerCycle * M.tilesPerIPU * M.tileClockFrequency
    fp32 = 2 * M.fp32AmpMacsPerCycle * M.tilesPerIPU * M.tileClockFrequency
    assert abs(fp16 / 250e12 - 1) < 0.01 and abs(fp32 / 62.5e12 - 1) < 0.01


@pytest.mark.parametrize("micro_batches", [4, 8, 16])
def test_gpipe_inference_idle_fraction(micro_batches):
    p = 4
    timeline = simulate(inference_pipeline(p, gpipe(p, micro_batches), "gpipe", micro_batches))
    # Ramp-up and ramp-down: m + p - 1 stage times, plus one copy per hop on the way.
    assert timeline.total_cycles == (micro_batches + p - 1) * STAGE_CYCLES + (p - 1) * COPY_CYCLES
    assert timeline.busy_cycles == {ipu: micro_batches * STAGE_CYCLES for ipu in range(p)}
    expected = (p - 1) / (micro_batches + p - 1)
    assert abs(timeline.idle_fraction - expected) <= 0.05 * expected
    assert timeline.stash_bytes == {0: 0, 1: 0, 2: 0, 3: 0}


def test_steps_repeat_the_schedule_back_to_back():
    one = simulate(inference_pipeline(4, gpipe(4, 4), "gpipe", 4))
    three = simulate(inference_pipeline(4, gpipe(4, 4), "gpipe", 4), steps=3)
    assert three.total_cycles == 3 * one.total_cycles
    assert three.idle_fraction == pytest.approx(one.idle_fraction)
    assert [e.step for e in three.events[0] if e.micro_batch == 0] == [0, 1, 2]


def test_copies_add_their_link_time():
    timeline = simulate(inference_pipeline(2, gpipe(2, 1), "gpipe", 1))
    # 8x1024 f32 = 32768 bytes at 320 GB/s and 1.33 GHz: 136.2 -> 137 cycles.
    assert COPY_CYCLES == 137
    copy, compute = timeline.events[1]
    assert (copy.kind, copy.start, copy.end) == ("copy", STAGE_CYCLES, STAGE_CYCLES + 137)
    assert (compute.kind, compute.name, compute.start) == ("compute", "stage1", copy.end)
    assert timeline.total_cycles == 2 * STAGE_CYCLES + COPY_CYCLES


def test_sharded_keeps_one_ipu_busy_at_a_time():
    timeline = simulate(inference_pipeline(4, gpipe(4, 3), "sharded", 3))
    computes = sorted((e for events in timeline.events.values() for e in events
                       if e.kind == "compute"), key=lambda e: e.start)
    assert all(a.end <= b.start for a, b in zip(computes, computes[1:], strict=False))
    assert timeline.total_cycles == 3 * (4 * STAGE_CYCLES + 3 * COPY_CYCLES)
    assert timeline.idle_fraction > 0.75


# Two IPUs in training, as PopART pipelines it: forward stage 0 on IPU 0, the last forward
# stage fused with the first backward one on IPU 1, backward stage 0 on IPU 0. The forward
# activation %a waits on IPU 0 (its stash) until backward stage 0 reads it.
TRAINING = """
func.func private @fwd0(%x: tensor<16x64xf32>, %w: tensor<64x64xf32>)
    -> (tensor<16x64xf32>, tensor<16x64xf32>)
    attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  %y = "ipu.matmul"(%x, %w) : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %a = "ipu.relu"(%y) : (tensor<16x64xf32>) -> tensor<16x64xf32>
  return %a, %a : tensor<16x64xf32>, tensor<16x64xf32>
}
func.func private @fwd1_bwd1(%a: tensor<16x64xf32>, %w: tensor<64x64xf32>) -> tensor<16x64xf32>
    attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
  %y = "ipu.matmul"(%a, %w) : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %g = "ipu.matmul"(%y, %w) : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  return %g : tensor<16x64xf32>
}
func.func private @bwd0(%a: tensor<16x64xf32>, %g: tensor<16x64xf32>) -> tensor<16x64xf32>
    attributes {ipu.stage = #ipu.stage<2 : i64, 0 : i64>} {
  %d = "ipu.mul"(%a, %g) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  return %d : tensor<16x64xf32>
}
func.func @main(%x: tensor<16x64xf32>, %w0: tensor<64x64xf32>, %w1: tensor<64x64xf32>)
    -> tensor<16x64xf32> attributes {ipu.schedule = "SCHEDULE", ipu.micro_batches = 4 : i64,
                                     ipu.tasks = TASKS} {
  %a:2 = func.call @fwd0(%x, %w0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
      : (tensor<16x64xf32>, tensor<64x64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>)
  %c = "ipu.copy"(%a#1) {src_ipu = 0 : i64, dst_ipu = 1 : i64}
      : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %g = func.call @fwd1_bwd1(%c, %w1) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
      : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %d = "ipu.copy"(%g) {src_ipu = 1 : i64, dst_ipu = 0 : i64}
      : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %r = func.call @bwd0(%a#0, %d) {ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
      : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  return %r : tensor<16x64xf32>
}
"""
GPIPE_TRAINING = [(k, mb) for k in range(3) for mb in range(4)]
ONE_F_ONE_B = [(0, 0), (0, 1), (1, 0), (2, 0), (0, 2), (1, 1), (2, 1), (0, 3), (1, 2), (2, 2),
               (1, 3), (2, 3)]


def training(schedule: str, tasks: list[tuple[int, int]]) -> ir.Module:
    return parse(TRAINING.replace("SCHEDULE", schedule).replace("TASKS", tasks_attr(tasks)))


def test_gpipe_stashes_more_than_1f1b():
    activation = 16 * 64 * 4
    gpipe_timeline = simulate(training("gpipe", GPIPE_TRAINING))
    interleaved = simulate(training("1f1b", ONE_F_ONE_B))
    # GPipe runs the 4 forwards before any backward; 1F1B keeps at most 2 in flight.
    assert gpipe_timeline.stash_bytes == {0: 4 * activation, 1: 0}
    assert interleaved.stash_bytes == {0: 2 * activation, 1: 0}
    assert gpipe_timeline.busy_cycles == interleaved.busy_cycles


def test_remote_load_and_store_use_streaming_memory():
    module = parse("""
func.func private @phase0(%x: tensor<256x256xf32>) -> tensor<256x256xf32>
    attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  %0 = "ipu.relu"(%x) : (tensor<256x256xf32>) -> tensor<256x256xf32>
  return %0 : tensor<256x256xf32>
}
func.func @main(%x: tensor<256x256xf32>) -> tensor<256x256xf32> attributes {
    ipu.schedule = "phased", ipu.micro_batches = 1 : i64, ipu.tasks = array<i64: 0, 0, 1, 0>} {
  %w = "ipu.remote_load"(%x) {ipu = 0 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %0 = func.call @phase0(%w) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>, ipu.phase = 0 : i64}
      : (tensor<256x256xf32>) -> tensor<256x256xf32>
  "ipu.remote_store"(%0) {ipu = 0 : i64} : (tensor<256x256xf32>) -> ()
  %1 = func.call @phase0(%0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>, ipu.phase = 1 : i64}
      : (tensor<256x256xf32>) -> tensor<256x256xf32>
  return %1 : tensor<256x256xf32>
}
""")
    timeline = simulate(module)
    # 256 KiB at 16 GB/s and 1.33 GHz: 21790.7 -> 21791 cycles each way.
    stream = math.ceil(256 * 256 * 4 * M.tileClockFrequency / M.streamingMemoryBandwidth)
    assert stream == 21791
    # relu: 65536 floats over all 1472 tiles, 45 a tile, 8 for each of the 6 workers; PopLibs'
    # RELU float loop is 3 cycles per 2 elements: 4 loops x 3 cycles x 6 workers, one sync.
    assert math.ceil(65536 / TILES) == 45
    relu = math.ceil(math.ceil(45 / M.numWorkerContexts) / 2) * 3 * M.numWorkerContexts + SYNC
    assert relu == 72 + 500
    kinds = [(e.kind, e.start, e.end) for e in timeline.events[0]]
    assert kinds == [("remote_load", 0, stream), ("compute", stream, stream + relu),
                     ("remote_store", stream + relu, 2 * stream + relu),
                     ("compute", 2 * stream + relu, 2 * stream + 2 * relu)]
    assert timeline.busy_cycles == {0: 2 * relu}


def test_without_tasks_main_is_one_task_on_ipu_0():
    module = parse("""
func.func @main(%a: tensor<64x128xf32>, %b: tensor<128x256xf32>) -> tensor<64x256xf32> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
  return %0 : tensor<64x256xf32>
}
""")
    timeline = simulate(module, steps=2)
    cycles = matmul_cycles(64, 128, 256)
    assert timeline.total_cycles == 2 * cycles and timeline.idle_fraction == 0.0
    data = timeline.to_dict()
    assert data["schedule"] == "single" and data["total_cycles"] == 2 * cycles
    event = data["ipus"]["0"]["events"][1]
    assert {k: event[k] for k in ("kind", "name", "micro_batch", "start", "end", "step")} == {
        "kind": "compute", "name": "main", "micro_batch": 0, "start": cycles,
        "end": 2 * cycles, "step": 1}
    assert sum(event["breakdown"].values()) == cycles and event["stage"] is None


def test_task_order_before_its_producer_is_an_error():
    with pytest.raises(Error, match="runs @stage1 on micro-batch 0 before @stage0"):
        simulate(inference_pipeline(2, [(1, 0), (0, 0)], "gpipe", 1))
