"""The stash of a pipelined training step (`Timeline.stash_bytes`, the memory estimate's
"stash" class): what each IPU keeps per micro-batch between a forward stage and a later
stage of the same micro-batch on the same IPU, counted by hand.

A forward stage's input received from another IPU (`ipu.copy`) that the backward stage on
the same IPU reads again (recomputation starts from the stage's inputs) is stashed there
too, as PopART stashes the IpuCopy's destination tensor (graphcore/popart,
willow/src/transforms/pipeline.cpp); so is a host input of the micro-batch that the
backward stage reads again.
"""

from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime.machine.events import HostStreams
from poptorch.runtime.machine.timeline import simulate

# Three IPUs: forward stage 0 on IPU 0, forward stage 1 on IPU 1 (reading %c, copied
# from IPU 0), the last forward stage fused with the first backward one on IPU 2,
# backward stage 1 on IPU 1 reading %c again, backward stage 0 on IPU 0 reading %a#0.
ACT = "tensor<16x64xf32>"
W = "tensor<64x64xf32>"
PIPELINE = f"""
func.func private @fwd0(%x: {ACT}, %w: {W}) -> ({ACT}, {ACT})
    attributes {{ipu.stage = #ipu.stage<0 : i64, 0 : i64>}} {{
  %y = "ipu.matmul"(%x, %w) : ({ACT}, {W}) -> {ACT}
  %a = "ipu.relu"(%y) : ({ACT}) -> {ACT}
  return %a, %a : {ACT}, {ACT}
}}
func.func private @fwd1(%c: {ACT}, %w: {W}) -> {ACT}
    attributes {{ipu.stage = #ipu.stage<1 : i64, 1 : i64>}} {{
  %y = "ipu.matmul"(%c, %w) : ({ACT}, {W}) -> {ACT}
  return %y : {ACT}
}}
func.func private @fwd2_bwd2(%b: {ACT}, %w: {W}) -> {ACT}
    attributes {{ipu.stage = #ipu.stage<2 : i64, 2 : i64>}} {{
  %y = "ipu.matmul"(%b, %w) : ({ACT}, {W}) -> {ACT}
  %g = "ipu.matmul"(%y, %w) : ({ACT}, {W}) -> {ACT}
  return %g : {ACT}
}}
func.func private @bwd1(%c: {ACT}, %g: {ACT}, %w: {W}) -> {ACT}
    attributes {{ipu.stage = #ipu.stage<3 : i64, 1 : i64>}} {{
  %y = "ipu.matmul"(%c, %w) : ({ACT}, {W}) -> {ACT}
  %d = "ipu.mul"(%y, %g) : ({ACT}, {ACT}) -> {ACT}
  return %d : {ACT}
}}
func.func private @bwd0(%a: {ACT}, %g: {ACT}) -> {ACT}
    attributes {{ipu.stage = #ipu.stage<4 : i64, 0 : i64>}} {{
  %d = "ipu.mul"(%a, %g) : ({ACT}, {ACT}) -> {ACT}
  return %d : {ACT}
}}
func.func @main(%x: {ACT}, %w0: {W}, %w1: {W}, %w2: {W}) -> {ACT}
    attributes {{ipu.schedule = "gpipe", ipu.micro_batches = 4 : i64, ipu.tasks = TASKS}} {{
  %a:2 = func.call @fwd0(%x, %w0) {{ipu.stage = #ipu.stage<0 : i64, 0 : i64>}}
      : ({ACT}, {W}) -> ({ACT}, {ACT})
  %c = "ipu.copy"(%a#1) {{src_ipu = 0 : i64, dst_ipu = 1 : i64}} : ({ACT}) -> {ACT}
  %b = func.call @fwd1(%c, %w1) {{ipu.stage = #ipu.stage<1 : i64, 1 : i64>}}
      : ({ACT}, {W}) -> {ACT}
  %bc = "ipu.copy"(%b) {{src_ipu = 1 : i64, dst_ipu = 2 : i64}} : ({ACT}) -> {ACT}
  %g = func.call @fwd2_bwd2(%bc, %w2) {{ipu.stage = #ipu.stage<2 : i64, 2 : i64>}}
      : ({ACT}, {W}) -> {ACT}
  %gc = "ipu.copy"(%g) {{src_ipu = 2 : i64, dst_ipu = 1 : i64}} : ({ACT}) -> {ACT}
  %g1 = func.call @bwd1(%c, %gc, %w1) {{ipu.stage = #ipu.stage<3 : i64, 1 : i64>}}
      : ({ACT}, {ACT}, {W}) -> {ACT}
  %g1c = "ipu.copy"(%g1) {{src_ipu = 1 : i64, dst_ipu = 0 : i64}} : ({ACT}) -> {ACT}
  %r = func.call @bwd0(%a#0, %g1c) {{ipu.stage = #ipu.stage<4 : i64, 0 : i64>}}
      : ({ACT}, {ACT}) -> {ACT}
  return %r : {ACT}
}}
"""
ACTIVATION = 16 * 64 * 4  # bytes of one f32 16x64 value
MICRO_BATCHES = 4


def pipeline(tasks: list[tuple[int, int]]) -> ir.Module:
    attr = "array<i64: " + ", ".join(f"{k}, {mb}" for k, mb in tasks) + ">"
    with make_context():
        return ir.Module.parse(PIPELINE.replace("TASKS", attr))


def test_received_stage_input_is_stashed_for_every_micro_batch_in_flight():
    # GPipe: every forward of the step before any backward. IPU 1 keeps the %c of all 4
    # micro-batches until bwd1 reads them; IPU 0 keeps %a#0 of all 4; IPU 2 nothing.
    gpipe = [(k, mb) for k in range(5) for mb in range(MICRO_BATCHES)]
    timeline = simulate(pipeline(gpipe))
    assert timeline.stash_bytes == {0: 4 * ACTIVATION, 1: 4 * ACTIVATION, 2: 0}


def test_received_stage_input_is_freed_by_its_last_reader():
    # One micro-batch at a time through all five tasks: one %c (and one %a#0) at most.
    sequential = [(k, mb) for mb in range(MICRO_BATCHES) for k in range(5)]
    timeline = simulate(pipeline(sequential))
    assert timeline.stash_bytes == {0: ACTIVATION, 1: ACTIVATION, 2: 0}


def test_received_value_read_once_is_not_stashed():
    # Without bwd1 reading %c (it reads only the gradient), IPU 1 keeps nothing.
    text = PIPELINE.replace("func.call @bwd1(%c, %gc, %w1)", "func.call @bwd1(%gc, %gc, %w1)")
    gpipe = [(k, mb) for k in range(5) for mb in range(MICRO_BATCHES)]
    attr = "array<i64: " + ", ".join(f"{k}, {mb}" for k, mb in gpipe) + ">"
    with make_context():
        module = ir.Module.parse(text.replace("TASKS", attr))
    assert simulate(module).stash_bytes == {0: 4 * ACTIVATION, 1: 0, 2: 0}


def test_host_input_read_by_the_backward_stage_is_stashed():
    # bwd0 reads the host input %x again (recomputation starts from it): with %x streamed
    # a micro-batch, IPU 0 keeps the %x of all 4 micro-batches besides their %a#0.
    text = PIPELINE.replace("func.call @bwd0(%a#0, %g1c)", "func.call @bwd0(%x, %g1c)")
    gpipe = [(k, mb) for k in range(5) for mb in range(MICRO_BATCHES)]
    attr = "array<i64: " + ", ".join(f"{k}, {mb}" for k, mb in gpipe) + ">"
    with make_context():
        module = ir.Module.parse(text.replace("TASKS", attr))
    streamed = simulate(module, streams=HostStreams(inputs=[(0, "x")]))
    assert streamed.stash_bytes == {0: 4 * ACTIVATION, 1: 4 * ACTIVATION, 2: 0}
    # %a#0 is no longer read by bwd0: without the stream, %x is a weight-like argument
    assert simulate(module).stash_bytes == {0: 0, 1: 4 * ACTIVATION, 2: 0}
