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
from poptorch.runtime.machine.cost import op_cycles
from poptorch.runtime.machine.system import GC200
from poptorch.runtime.machine.timeline import HostStreams, simulate

M = GC200
TILES = M.tilesPerIPU
SYNC = M.globalSyncCycles


def parse(text: str) -> ir.Module:
    context = make_context()
    # ipu.remote_load / ipu.remote_store may not be registered yet (dialects/structure.py).
    context.allow_unregistered_dialects = True
    with context:
        return ir.Module.parse(text)


def matmul_cycles(m: int, k: int, n: int, computed_lhs: bool = False) -> int:
    """The cost model's cycles of one f32 (m x k) @ (k x n) (pinned in test_cost_model.py)
    of a weight argument by an argument, or by an op's result (`computed_lhs`: not
    pre-arranged, its slabs all exchanged)."""
    a, b, c = (f"tensor<{m}x{k}xf32>", f"tensor<{k}x{n}xf32>", f"tensor<{m}x{n}xf32>")
    module = parse(f"""
func.func @f(%a: {a}, %b: {b}) -> {c} {{
  %r = "ipu.relu"(%a) : ({a}) -> {a}
  %0 = "ipu.matmul"({"%r" if computed_lhs else "%a"}, %b) : ({a}, {b}) -> {c}
  return %0 : {c}
}}""")
    with module.context:
        return op_cycles(module.body.operations[0].regions[0].blocks[0].operations[1])


def copy_cycles(src: int, dst: int, ipus: int, nbytes: int) -> int:
    """An inter-IPU copy by hand: the external sync of `ipus` IPUs (one hop plus one per
    four IPUs, 15 ns each way), the bytes over the narrowest hop's links of the ladder
    (a rung: 4 links; the rails: 2) at 16 GB/s x 0.85 a link, and 15 ns a hop."""
    clock = M.tileClockFrequency
    if src // 2 == dst // 2:
        hops, links = 1, 4
    else:
        hops, links = (src % 2 != dst % 2) + abs(src // 2 - dst // 2), 2
    sync = SYNC + math.ceil(2 * (1 + ipus // 4) * 15e-9 * clock)
    return (sync + math.ceil(nbytes * clock / (links * 16e9 * 0.85))
            + math.ceil(hops * 15e-9 * clock))


def tasks_attr(tasks: list[tuple[int, int]]) -> str:
    return "array<i64: " + ", ".join(f"{k}, {mb}" for k, mb in tasks) + ">"


# An inference stage: `DEPTH` chained matmuls of an 8x1024 activation by 1024x1024 weights.
ROWS, WIDTH, DEPTH = 8, 1024, 8
ACT = f"tensor<{ROWS}x{WIDTH}xf32>"
WEIGHT = f"tensor<{WIDTH}x{WIDTH}xf32>"
# the first matmul takes the stage's argument, the others the previous one's result
STAGE_CYCLES = matmul_cycles(ROWS, WIDTH, WIDTH) \
    + (DEPTH - 1) * matmul_cycles(ROWS, WIDTH, WIDTH, computed_lhs=True)
COPY_CYCLES = copy_cycles(0, 1, 2, ROWS * WIDTH * 4)  # over a rung, 2 IPUs


def hop_copies(p: int) -> int:
    """The copies of a p-stage pipeline, each stage's result to the next IPU."""
    return sum(copy_cycles(s, s + 1, p, ROWS * WIDTH * 4) for s in range(p - 1))


def step_sync(ipus: int) -> int:
    """The external sync of `ipus` IPUs starting each step (as `copy_cycles`' sync)."""
    return SYNC + math.ceil(2 * (1 + ipus // 4) * 15e-9 * M.tileClockFrequency)


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
    # The public figures DESIGN.md lists: 1472 tiles x 624 KiB, 1.33 GHz, 320 GB/s links
    # (10 links, both directions).
    assert (M.IPUVersion, M.tilesPerIPU, M.memoryBytesPerTile) == ("ipu2", 1472, 638976)
    assert M.tileClockFrequency == 1.33e9 and M.numWorkerContexts == 6
    assert M.ipuLinks * 2 * M.ipuLinkBandwidth == 320e9
    # Peak AMP throughput: ~250 TFLOPS FP16 and ~62.5 TFLOPS FP32 (GC200 datasheet).
    fp16 = 2 * M.fp16AmpMacsPerCycle * M.tilesPerIPU * M.tileClockFrequency
    fp32 = 2 * M.fp32AmpMacsPerCycle * M.tilesPerIPU * M.tileClockFrequency
    assert abs(fp16 / 250e12 - 1) < 0.01 and abs(fp32 / 62.5e12 - 1) < 0.01


@pytest.mark.parametrize("micro_batches", [4, 8, 16])
def test_gpipe_inference_idle_fraction(micro_batches):
    p = 4
    timeline = simulate(inference_pipeline(p, gpipe(p, micro_batches), "gpipe", micro_batches))
    # Ramp-up and ramp-down: m + p - 1 stage times, plus one copy per hop on the way.
    total = step_sync(p) + (micro_batches + p - 1) * STAGE_CYCLES + hop_copies(p)
    assert timeline.total_cycles == total
    assert timeline.busy_cycles == {ipu: micro_batches * STAGE_CYCLES for ipu in range(p)}
    assert timeline.idle_fraction == pytest.approx(1 - micro_batches * STAGE_CYCLES / total)
    # The schedule's bubble (the span less the copies on its critical path) is GPipe's
    expected = (p - 1) / (micro_batches + p - 1)
    bubble = 1 - micro_batches * STAGE_CYCLES / (
        timeline.total_cycles - step_sync(p) - hop_copies(p))
    assert abs(bubble - expected) <= 0.03 * expected
    assert timeline.stash_bytes == {0: 0, 1: 0, 2: 0, 3: 0}


def test_steps_repeat_the_schedule_back_to_back():
    one = simulate(inference_pipeline(4, gpipe(4, 4), "gpipe", 4))
    three = simulate(inference_pipeline(4, gpipe(4, 4), "gpipe", 4), steps=3)
    assert three.total_cycles == 3 * one.total_cycles
    assert three.idle_fraction == pytest.approx(one.idle_fraction)
    assert [e.step for e in three.events[0] if e.micro_batch == 0] == [0, 1, 2]


def test_copies_add_their_link_time():
    timeline = simulate(inference_pipeline(2, gpipe(2, 1), "gpipe", 1))
    # 8x1024 f32 = 32768 bytes over a rung's 4 links at 16 GB/s x 0.85 and 1.33 GHz:
    # 801.1 -> 802 cycles; the 2-IPU sync 90 + 40; one 15 ns hop, 20.
    assert COPY_CYCLES == 90 + 40 + 802 + 20
    sync, copy, compute = timeline.events[1]
    assert (sync.kind, sync.start, sync.end) == ("sync", 0, step_sync(2))
    start = step_sync(2) + STAGE_CYCLES
    assert (copy.kind, copy.start, copy.end) == ("copy", start, start + COPY_CYCLES)
    assert (compute.kind, compute.name, compute.start) == ("compute", "stage1", copy.end)
    assert timeline.total_cycles == step_sync(2) + 2 * STAGE_CYCLES + COPY_CYCLES


def test_sharded_keeps_one_ipu_busy_at_a_time():
    timeline = simulate(inference_pipeline(4, gpipe(4, 3), "sharded", 3))
    computes = sorted((e for events in timeline.events.values() for e in events
                       if e.kind == "compute"), key=lambda e: e.start)
    assert all(a.end <= b.start for a, b in zip(computes, computes[1:], strict=False))
    assert timeline.total_cycles == step_sync(4) + 3 * (4 * STAGE_CYCLES + hop_copies(4))
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
    # 256 KiB at 16 GB/s and 1.33 GHz: 21790.7 -> 21791 cycles each way, after 0.6 us
    # (798 cycles: a PCIe DMA read of DRAM, system.PCIE_DMA_READ) of latency.
    stream = math.ceil(256 * 256 * 4 * M.tileClockFrequency / M.streamingMemoryBandwidth)
    stream += math.ceil(M.streamingMemoryLatency * M.tileClockFrequency)
    assert stream == 21791 + 798
    # relu: 65536 floats over all 1472 tiles, 45 a tile, 8 for each of the 6 workers; PopLibs'
    # RELU float loop is 3 cycles per 2 elements: 4 loops x 3 cycles x 6 workers, one sync.
    assert math.ceil(65536 / TILES) == 45
    relu = math.ceil(math.ceil(45 / M.numWorkerContexts) / 2) * 3 * M.numWorkerContexts + SYNC
    assert relu == 72 + 90
    kinds = [(e.kind, e.start, e.end) for e in timeline.events[0]]
    assert kinds == [("remote_load", 0, stream), ("compute", stream, stream + relu),
                     ("remote_store", stream + relu, 2 * stream + relu),
                     ("compute", 2 * stream + relu, 2 * stream + 2 * relu)]
    assert timeline.busy_cycles == {0: 2 * relu}
    assert [(e.stage, e.phase) for e in timeline.events[0] if e.kind == "compute"] == [
        (0, 0), (0, 1)]


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


# One IPU, no schedule: @main adds two streamed inputs and streams the sum back.
ADD_MAIN = """
func.func @main(%x: tensor<64x256xf32>, %y: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %0 = "ipu.OP"(%x, %y) : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  return %0 : tensor<64x256xf32>
}
"""
STREAMS = HostStreams(inputs=[(0, "x"), (1, "y")], outputs=[(0, "out")])
# 64 KiB over the host link: 1.2 us (1596 cycles) + 65536 B / 12.5 GB/s (6973.03 -> 6974).
HOST = 1596 + 6974
# add: 16384 floats on 512 tiles, 32 a tile, 6 for each worker, 3 loops of 1 cycle x 6
ADD = 18 + SYNC


def test_without_tasks_main_runs_once_per_micro_batch():
    timeline = simulate(parse(ADD_MAIN.replace("OP", "add")), steps=2, micro_batches=3)
    events = timeline.events[0]
    assert timeline.iterations == 6 and timeline.total_cycles == 6 * ADD
    assert [(e.step, e.micro_batch, e.start) for e in events] == [
        (step, mb, (3 * step + mb) * ADD) for step in range(2) for mb in range(3)]
    with pytest.raises(Error, match="the module's schedule runs 4 micro-batches a step, "
                                    "not 3"):
        simulate(inference_pipeline(2, gpipe(2, 4), "gpipe", 4), micro_batches=3)


def test_host_streams_pinned_on_one_ipu():
    assert M.host_cycles(64 * 256 * 4) == HOST
    timeline = simulate(parse(ADD_MAIN.replace("OP", "add")), micro_batches=2,
                        streams=STREAMS)
    # Per micro-batch: load x, load y, add, store; transfers use the compute tiles.
    iteration = 3 * HOST + ADD
    kinds = [(e.kind, e.name, e.stream, e.start, e.end) for e in timeline.events[0]][:4]
    assert kinds == [("host_load", "x", 0, 0, HOST), ("host_load", "y", 1, HOST, 2 * HOST),
                     ("compute", "main", None, 2 * HOST, 2 * HOST + ADD),
                     ("host_store", "out", 0, 2 * HOST + ADD, iteration)]
    assert timeline.total_cycles == 2 * iteration
    clock = M.tileClockFrequency
    counters = timeline.perf_counters()
    assert counters == {
        "input": [[0, iteration / clock], [HOST / clock, (iteration + HOST) / clock]],
        "input_complete": [[HOST / clock, (iteration + HOST) / clock],
                           [2 * HOST / clock, (iteration + 2 * HOST) / clock]],
        "output": [[(2 * HOST + ADD) / clock, (iteration + 2 * HOST + ADD) / clock]],
        "output_complete": [[iteration / clock, 2 * iteration / clock]]}
    latencies = timeline.latencies()
    for key, cycles in (("latency", iteration), ("compute", ADD), ("host_ipu", 2 * HOST),
                        ("ipu_host", HOST)):
        assert latencies[key] == pytest.approx((cycles / clock,) * 3)


def test_io_tiles_overlap_host_loads_with_compute():
    module = parse(ADD_MAIN.replace("OP", "pow"))  # PopLibs POWER: 312 cycles a float
    plain = simulate(module, micro_batches=4, streams=STREAMS)
    marked = HostStreams(STREAMS.inputs, STREAMS.outputs, dict.fromkeys(
        ("x", "y", "out"), "overlap_accumulation_loop"))  # set_overlap_for_input/output
    overlapped = simulate(module, micro_batches=4, streams=marked, io_tiles=32)
    computes = [e for e in overlapped.events[0] if e.kind == "compute"]
    loads = [e for e in overlapped.events[0] if e.kind == "host_load" and e.micro_batch == 1]
    # prefetched during mb 0 (64 KiB at 12.5 GB/s each, longer than the compute)
    assert all(computes[0].start <= load.start < computes[0].end for load in loads)
    assert overlapped.total_cycles < plain.total_cycles
    assert overlapped.busy_cycles == plain.busy_cycles  # 512 tiles either way
    unmarked = simulate(module, micro_batches=4, streams=STREAMS, io_tiles=32)
    assert unmarked.total_cycles == plain.total_cycles  # IO tiles alone overlap nothing


# Two IPUs of one IPU-Gateway, each loading a streamed input for its stage: stage1 (three
# PopLibs POWER passes, 312 cycles a float) outlasts stage0's loads and add.
T = "tensor<64x256xf32>"
SHARED_LINK = f"""
func.func private @stage0(%x: {T}) -> {T} attributes {{ipu.stage = #ipu.stage<0 : i64, 0 : i64>}} {{
  %0 = "ipu.add"(%x, %x) : ({T}, {T}) -> {T}
  return %0 : {T}
}}
func.func private @stage1(%a: {T}, %y: {T}) -> {T}
    attributes {{ipu.stage = #ipu.stage<1 : i64, 1 : i64>}} {{
  %0 = "ipu.pow"(%a, %y) : ({T}, {T}) -> {T}
  %1 = "ipu.pow"(%0, %y) : ({T}, {T}) -> {T}
  %2 = "ipu.pow"(%1, %y) : ({T}, {T}) -> {T}
  return %2 : {T}
}}
func.func @main(%x: {T}, %y: {T}) -> {T} attributes {{ipu.schedule = "gpipe",
    ipu.micro_batches = 3 : i64, ipu.tasks = {tasks_attr(gpipe(2, 3))}}} {{
  %s0 = func.call @stage0(%x) {{ipu.stage = #ipu.stage<0 : i64, 0 : i64>}} : ({T}) -> {T}
  %c0 = "ipu.copy"(%s0) {{src_ipu = 0 : i64, dst_ipu = 1 : i64}} : ({T}) -> {T}
  %s1 = func.call @stage1(%c0, %y) {{ipu.stage = #ipu.stage<1 : i64, 1 : i64>}}
      : ({T}, {T}) -> {T}
  return %s1 : {T}
}}
"""


def test_shared_host_link_serves_loads_as_their_ipus_ask():
    timeline = simulate(parse(SHARED_LINK),
                        streams=HostStreams(inputs=[(0, "x"), (1, "y")], outputs=[]))
    assert M.ipusPerHostLink == 4  # IPUs 0 and 1 load over the same link
    loads = {(e.name, e.micro_batch): e for events in timeline.events.values()
             for e in events if e.kind == "host_load"}
    computes = {(ipu, e.micro_batch): e for ipu, events in timeline.events.items()
                for e in events if e.kind == "compute"}
    assert all(e.end - e.start == HOST for e in loads.values())
    # IPU 1 asks for y of micro-batch 1 once stage1 has finished micro-batch 0; the task
    # order lists it before x of micro-batch 2, which IPU 0 asks for once its stage0 of
    # micro-batch 1 is done, much earlier: the gateway serves x first, in the gap.
    assert loads["y", 1].start == computes[1, 0].end
    assert loads["x", 2].start == computes[0, 1].end
    assert loads["x", 2].end <= loads["y", 1].start
    # one transfer at a time each way
    spans = sorted((e.start, e.end) for e in loads.values())
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_perf_counter_shapes_and_latency_order_in_a_pipeline():
    timeline = simulate(inference_pipeline(2, gpipe(2, 4), "gpipe", 4), steps=2,
                        streams=HostStreams([(0, "x")], [(0, "y")]))
    assert {e.kind for e in timeline.events[0]} >= {"host_load"}
    assert {e.kind for e in timeline.events[1]} >= {"host_store"}
    counters = timeline.perf_counters()
    assert [len(counters[k]) for k in ("input", "input_complete", "output",
                                       "output_complete")] == [1, 1, 1, 1]
    assert all(len(stream) == timeline.iterations == 8 for c in counters.values()
               for stream in c)
    for it in range(8):
        values = [counters[k][0][it] for k in ("input", "input_complete", "output",
                                               "output_complete")]
        assert values == sorted(values)
    for low, high, average in timeline.latencies().values():
        assert low <= average <= high
    data = timeline.to_dict()
    assert data["iterations"] == 8 and data["streams"] == {"inputs": ["x"], "outputs": ["y"]}
    stages = {e["stage"] for e in data["ipus"]["1"]["events"] if e["kind"] == "compute"}
    assert stages == {1}


def test_without_streams_the_round_trip_is_the_compute_span():
    timeline = simulate(inference_pipeline(2, gpipe(2, 1), "gpipe", 1))
    assert timeline.perf_counters() == {"input": [], "input_complete": [], "output": [],
                                        "output_complete": []}
    # the first task starts after the step's sync
    span = (timeline.total_cycles - step_sync(2)) / M.tileClockFrequency
    assert timeline.latencies() == {"latency": (span,) * 3, "compute": (span,) * 3,
                                    "host_ipu": (0.0,) * 3, "ipu_host": (0.0,) * 3}


def test_epilogue_runs_after_each_step_before_the_next():
    one = simulate(inference_pipeline(2, gpipe(2, 2), "gpipe", 2)).total_cycles
    work = [("all_reduce", "gradients", 0, 1000), ("optimizer", "update", 0, 300),
            ("optimizer", "update", 1, 300)]
    timeline = simulate(inference_pipeline(2, gpipe(2, 2), "gpipe", 2), steps=2,
                        epilogue=work)
    epilogue = [(e.kind, e.start, e.end, e.step, e.micro_batch)
                for events in timeline.events.values() for e in events
                if e.kind in ("all_reduce", "optimizer") and e.step == 0]
    assert sorted(epilogue) == [("all_reduce", one, one + 1000, 0, None),
                                ("optimizer", one, one + 300, 0, None),
                                ("optimizer", one + 1000, one + 1300, 0, None)]
    assert timeline.total_cycles == 2 * (one + 1300)
    with pytest.raises(Error, match="epilogue work 'gradients' \\(all_reduce\\) needs an IPU "
                                    "and cycles of at least 0, got IPU 0 and -1 cycles"):
        simulate(inference_pipeline(2, gpipe(2, 2), "gpipe", 2),
                 epilogue=[("all_reduce", "gradients", 0, -1)])


def test_stream_and_proportion_errors():
    module = parse(ADD_MAIN.replace("OP", "add"))
    with pytest.raises(Error, match="host input stream 'z' names input 5, but @main has 2 "
                                    "inputs"):
        simulate(module, streams=HostStreams([(5, "z")], []))
    with pytest.raises(Error, match="the available memory proportion of IPU 0 must be "
                                    "between 0.0 and 1.0, got 1.5"):
        simulate(module, proportions={0: 1.5})
