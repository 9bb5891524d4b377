"""poptorch.plan_pipeline (beyond PopTorch): the planner's split of a BERT-style stack over
4 IPUs is at least as fast as the even split on the machine model and fits; where the
even split puts two big layers on one IPU of the 304 MiB Mk1 (more than it holds by
their weights and Adam state alone) the plan separates them and fits; pipeline
recomputation is the options' (PopTorch's default: on) unless recompute= sets it or
lets the planner choose; `code()` is the user's BeginBlock code; `apply(model)` and
compiling with `plan.options` gives the plan's simulated step; bad arguments are
errors."""

import copy
import re

import pytest
import torch
import torch.nn.functional as F

import poptorch
from poptorch._frontend.annotations import begin_block_of
from poptorch._planner import partition
from poptorch._planner.plan import _refused_groups


class Attention(torch.nn.Module):
    """Single-head self-attention, as a BERT layer's (without masking)."""

    def __init__(self, hidden):
        super().__init__()
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.out = torch.nn.Linear(hidden, hidden)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
        return self.out(weights @ v)


class Layer(torch.nn.Module):
    """A transformer encoder layer (post-norm, GELU feed-forward); without attention, the
    feed-forward block alone."""

    def __init__(self, hidden, attention=True):
        super().__init__()
        self.attention = Attention(hidden) if attention else None
        self.norm1 = torch.nn.LayerNorm(hidden)
        self.fc1 = torch.nn.Linear(hidden, 4 * hidden)
        self.fc2 = torch.nn.Linear(4 * hidden, hidden)
        self.norm2 = torch.nn.LayerNorm(hidden)

    def forward(self, x):
        if self.attention is not None:
            x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.fc2(F.gelu(self.fc1(x))))


class Stack(torch.nn.Module):
    """Embedding, a ModuleList of layers, a token classifier and its loss."""

    def __init__(self, vocab, hidden, layers, classes, attention=True):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList(Layer(hidden, attention) for _ in range(layers))
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, ids, labels):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(self.head(x).flatten(0, 1), labels.flatten())


def bert_style():
    torch.manual_seed(0)
    model = Stack(vocab=1000, hidden=64, layers=8, classes=1000)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(16)
    ids = torch.randint(0, 1000, (16 * 2, 32))
    return model, opts, (ids, ids)


@pytest.fixture(scope="module")
def four_ipus():
    model, opts, args = bert_style()
    return poptorch.plan_pipeline(model, *args, ipus=4, options=opts)


def test_plan_on_4_ipus_is_at_least_as_fast_as_the_even_split_and_fits(four_ipus):
    plan, even = four_ipus, four_ipus.even_split
    assert plan.fits and plan.confirmed and even.fits and even.confirmed
    assert plan.step_cycles <= even.step_cycles
    assert len(plan.memory) == 4 and max(plan.memory) <= plan.available
    # every layer in one stage, in order, each IPU at least one
    assert [n for stage in plan.stages for n in stage] == [f"layers.{i}" for i in range(8)]
    assert all(plan.stages) and even.stages == [["layers.0", "layers.1"], ["layers.2", "layers.3"],
                                                ["layers.4", "layers.5"], ["layers.6", "layers.7"]]
    # the prediction ((m + p - 1) slots of the slowest stage) is near the simulation
    assert abs(plan.prediction_error) < 0.1
    # pipeline recomputation as PopTorch runs it by default: kept, no options line
    assert plan.recompute and plan.options.execution_strategy.recomputation
    assert "setExecutionStrategy" not in plan.code()


def test_apply_then_compile_gives_the_plans_step(four_ipus):
    model, _, args = bert_style()
    reference = copy.deepcopy(model)
    four_ipus.apply(model)
    assert [n for n, m in model.named_modules() if begin_block_of(m) is not None] == \
        [s for s in four_ipus.starts if s is not None]
    trainer = poptorch.trainingModel(model, four_ipus.options,
                                     torch.optim.SGD(model.parameters(), lr=0.0))
    loss = trainer(*args)
    timeline = trainer.getTimeline()
    assert timeline.total_cycles / timeline.steps == four_ipus.step_cycles
    assert len(timeline.busy_cycles) == 4
    # the pipelined model computes what the CPU does (lr 0: the last micro-batch's loss)
    torch.testing.assert_close(loss, reference(args[0][-2:], args[1][-2:]),
                               rtol=1e-4, atol=1e-4)


class FeedForward(torch.nn.Module):
    """A residual feed-forward layer: hidden -> inner -> hidden."""

    def __init__(self, hidden, inner):
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, inner)
        self.fc2 = torch.nn.Linear(inner, hidden)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


class Widths(torch.nn.Module):
    """Feed-forward layers of the given inner widths, a token classifier and its loss."""

    def __init__(self, hidden, inners):
        super().__init__()
        self.layers = torch.nn.ModuleList(FeedForward(hidden, inner) for inner in inners)
        self.head = torch.nn.Linear(hidden, 16)

    def forward(self, x, labels):
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(self.head(x).flatten(0, 1), labels.flatten())


MK1 = 304 * 2**20  # the Mk1's In-Processor-Memory per IPU
HIDDEN, BIG, SMALL = 512, 10000, 512


def adam_bytes(layer):
    """Bytes of a layer's fp32 weights, gradient accumulators and Adam's two moments."""
    return 16 * sum(p.numel() for p in layer.parameters())


def widths(inners, rows=2, sequence=8, strategy=None, hidden=HIDDEN):
    """The Mk1, Adam, 8 micro-batches of `rows` x `sequence` tokens."""
    torch.manual_seed(0)
    model = Widths(hidden, inners)
    opts = poptorch.Options().useOfflineIpuTarget(1)
    opts.Training.gradientAccumulation(8)
    if strategy is not None:
        opts.setExecutionStrategy(strategy)
    x = torch.randn(8 * rows, sequence, hidden)
    labels = torch.randint(0, 16, (8 * rows, sequence))
    return model, opts, (x, labels), torch.optim.Adam(model.parameters())


def test_even_split_does_not_fit_and_the_plan_does():
    """Two small layers, then two big ones: the even split puts both big layers on IPU 1,
    whose weights, accumulators and Adam moments alone exceed the Mk1's memory; the
    plan gives each big layer an IPU, which then holds well under it."""
    model, opts, args, adam = widths([SMALL, SMALL, BIG, BIG])
    big = adam_bytes(model.layers[2])
    assert 2 * big > 1.02 * MK1 and big + 2 * adam_bytes(model.layers[0]) < 0.6 * MK1
    plan = poptorch.plan_pipeline(model, *args, ipus=2, options=opts, optimizer=adam)
    even = plan.even_split
    assert even.stages == [["layers.0", "layers.1"], ["layers.2", "layers.3"]]
    assert not even.fits and not even.confirmed
    assert even.refusal.startswith("out of memory on IPU 1") and even.refused_ipus == (1,)
    assert plan.fits and plan.confirmed and plan.available == MK1
    assert plan.stages == [["layers.0", "layers.1", "layers.2"], ["layers.3"]]
    assert big <= min(plan.memory) and max(plan.memory) <= MK1
    assert plan.recompute and not plan.offchip_optimizer  # PopTorch's default, kept
    assert plan.code() == "model.layers[3] = poptorch.BeginBlock(model.layers[3], ipu_id=1)"
    assert re.fullmatch(
        r"plan: step [\d,]+ cycles \(simulated\), fits\n"
        r"  IPU 0: layers\.0\.\.layers\.2, [\d.]+ of 304\.0 MiB\n"
        r"  IPU 1: layers\.3, [\d.]+ of 304\.0 MiB\n"
        r"even split: step [\d,]+ cycles \(predicted, refused as out of memory\), does not fit\n"
        r"  IPU 0: layers\.0\.\.layers\.1, [\d.]+ of 304\.0 MiB\n"
        r"  IPU 1: layers\.2\.\.layers\.3, [\d.]+ of 304\.0 MiB", plan.report())
    assert not any(begin_block_of(m) for m in model.modules())  # left as it was


def test_no_split_fits_names_the_smallest_need():
    """Three big layers and a small one over 2 IPUs: every split puts two big layers on
    one IPU (more than the Mk1 holds by their Adam bytes alone); the least need is the
    two big layers without the small one, stages beginning at layers.0 and layers.2."""
    model, opts, args, adam = widths([BIG, BIG, BIG, SMALL])
    assert 2 * adam_bytes(model.layers[0]) > 1.02 * MK1
    with pytest.raises(poptorch.Error, match=r"^plan_pipeline: no split of the model over 2 "
                       r"IPUs fits: the smallest per-IPU need is about [\d,]+ bytes "
                       r"\([\d.]+ MiB, with stages beginning at layers\.0, layers\.2\) but "
                       r"an IPU has 318,767,104 bytes \(304\.0 MiB\); use more IPUs, "
                       r"offchip_optimizer=True or lower precision \(model\.half\(\)\)$"):
        poptorch.plan_pipeline(model, *args, ipus=2, options=opts, optimizer=adam)


# ---- the dynamic programme ---------------------------------------------------------------
def test_partition_minimises_the_slowest_stage_within_memory():
    segments = [partition.SegmentFigures(c, 0, {"weights": w})
                for c, w in [(10, 50), (10, 10), (10, 10), (30, 10), (10, 10)]]

    def memory(first, end, stage):
        return sum(sum(s.classes.values()) for s in segments[first:end])
    split = partition.partition(segments, 2, memory, 1000)
    assert split.starts == (0, 3) and split.stage_cycles == (30, 40)
    # 60 bytes an IPU: the first stage can hold the first two segments at most
    split = partition.partition(segments, 2, memory, 60)
    assert split.starts == (0, 2) and split.memory == (60, 30) and split.stage_cycles == (20, 50)
    assert partition.partition(segments, 2, memory, 45) is None
    assert partition.smallest_need(segments, 2, memory)[0] == 50
    assert partition.even_starts(8, 3, prefix=True) == [0, 4, 7]
    assert partition.even_starts(8, 4, prefix=False) == [0, 2, 4, 6]


def test_a_refused_split_excludes_the_groups_of_the_ipus_out_of_memory():
    """The compile's OutOfMemoryError names the IPUs (stage j on IPU j): their groups
    (first segment, end, stage) are excluded; none holding a stage, every group is."""
    split = partition.Split(starts=(0, 2, 3), stage_cycles=(1, 1, 1), memory=(1, 1, 1))
    assert _refused_groups((0, 2), split, 5) == {(0, 2, 0), (3, 5, 2)}
    assert _refused_groups((1,), split, 5) == {(2, 3, 1)}
    assert _refused_groups((4,), split, 5) == {(0, 2, 0), (2, 3, 1), (3, 5, 2)}


def test_the_planner_reads_the_strategy_through_its_properties():
    """PipelinedExecution's settings, read-only (the planner plans with them)."""
    default = poptorch.PipelinedExecution()
    assert default.schedule == poptorch.PipelineSchedule.OneForwardOneBackward
    assert default.recomputation and default.stages == []
    assert default.auto_stage == poptorch.AutoStage.SameAsIpu
    stages = [poptorch.Stage("a"), poptorch.Stage("b", "c").ipu(1)]
    strategy = poptorch.PipelinedExecution(*stages).setSchedule(
        poptorch.PipelineSchedule.FillMainFlush).useRecomputation(False)
    assert strategy.schedule == poptorch.PipelineSchedule.FillMainFlush
    assert not strategy.recomputation and strategy.stages == stages
    strategy.stages.clear()  # a copy: the strategy keeps its stages
    assert strategy.stages == stages
    assert poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement).auto_stage == \
        poptorch.AutoStage.AutoIncrement
    with pytest.raises(AttributeError):
        strategy.schedule = poptorch.PipelineSchedule.OneForwardOneBackward


# ---- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    ({"ipus": 0}, "plan_pipeline: ipus must be a number of IPUs from 1 to 64, got 0"),
    ({"ipus": 10}, "plan_pipeline: 10 IPUs need 10 stages, but the model has only 9 segments "
                   "between its candidate boundaries (layers.0, layers.1, layers.2, layers.3, "
                   "layers.4, layers.5, layers.6, layers.7); plan for at most 9 IPUs or give "
                   "more candidates="),
    ({"ipus": 2, "candidates": ["layers.9"]},
     "plan_pipeline: candidates: the model has no submodule 'layers.9'; use names from "
     "model.named_modules(), such as 'embed'"),
    ({"ipus": 2, "recompute": 1},
     "plan_pipeline: recompute must be None (the options' pipeline recomputation), True, "
     "False or 'auto' (the planner chooses), got 1"),
    ({"ipus": 2, "training": False, "offchip_optimizer": True, "options": None},
     "plan_pipeline: offchip_optimizer is for training, but training=False plans inference; "
     "leave offchip_optimizer out or plan training"),
    ({"ipus": 2, "options": poptorch.Options().setExecutionStrategy(
        poptorch.ShardedExecution())},
     "plan_pipeline: the options set an execution strategy with its own stages; the planner "
     "chooses the stages of a PipelinedExecution: leave setExecutionStrategy out, or set "
     "PipelinedExecution(poptorch.AutoStage.SameAsIpu) for its schedule or recomputation"),
    ({"ipus": 4, "options": poptorch.Options().deviceIterations(2)},
     "plan_pipeline: a training pipeline over 4 IPUs needs gradientAccumulation of at least "
     "7 (its stages counting backward), the options have 1; set "
     "options.Training.gradientAccumulation(7) or more"),
    ({"ipus": 3, "training": False, "options": poptorch.Options()},
     "plan_pipeline: an inference pipeline over 3 IPUs needs deviceIterations of at least 3, "
     "the options have 1; set options.deviceIterations(3) or more"),
    ({"ipus": 2, "options": poptorch.Options().deviceIterations(3)},
     "plan_pipeline: example argument 0 has 32 rows, not a multiple of the 3 micro-batches "
     "one call of the model takes with these options (deviceIterations 3 x "
     "replicationFactor 1 x gradientAccumulation 1); pass the inputs of one call of the "
     "wrapped model"),
])
def test_argument_errors(kwargs, message):
    model, opts, args = bert_style()
    with pytest.raises(poptorch.Error) as info:
        poptorch.plan_pipeline(model, *args, **{"options": opts, **kwargs})
    assert info.value.message == message


def test_an_annotated_model_is_refused():
    model, opts, args = bert_style()
    poptorch.BeginBlock(model.layers[4], ipu_id=1)
    with pytest.raises(poptorch.Error, match=r"^plan_pipeline: the model already has a "
                       r"BeginBlock at layers\.4; the planner chooses the blocks: remove them "
                       r"with poptorch\.removeBlocks\(model\) first$"):
        poptorch.plan_pipeline(model, *args, ipus=2, options=opts)


def test_a_candidate_that_runs_twice_is_refused():
    model, opts, args = bert_style()
    model.layers[1] = model.layers[0]
    with pytest.raises(poptorch.Error, match=r"candidate 'layers\.0' runs 2 times"):
        poptorch.plan_pipeline(model, *args, ipus=2, options=opts)


def test_recomputation_when_asked_and_nothing_fits_without_it():
    """With every forward before any backward (FillMainFlush) and recomputation off in the
    options, IPU 0 stashes each layer's two inner activations for all 8 micro-batches:
    more than the Mk1 holds by that stash alone. recompute="auto" turns recomputation
    on (the stage input stashed instead), which fits, and leaves optimizer state on chip
    (allowed but not needed); code() gives the options line. Not asked, the planner
    keeps the options' setting and says what would help."""
    inner, rows, sequence = 16384, 3, 128
    strategy = poptorch.PipelinedExecution(poptorch.AutoStage.SameAsIpu).setSchedule(
        poptorch.PipelineSchedule.FillMainFlush).useRecomputation(False)
    model, opts, args, adam = widths([inner, inner], rows, sequence, strategy, hidden=64)
    assert 8 * 2 * rows * sequence * inner * 4 > 1.2 * MK1
    plan = poptorch.plan_pipeline(model, *args, ipus=2, options=opts, recompute="auto",
                                  offchip_optimizer=True, optimizer=adam)
    assert plan.recompute and not plan.offchip_optimizer and plan.fits
    assert plan.options.execution_strategy.recomputation
    assert plan.stages == [["layers.0"], ["layers.1"]]
    assert plan.code() == (
        "model.layers[1] = poptorch.BeginBlock(model.layers[1], ipu_id=1)\n"
        "opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.SameAsIpu)"
        ".setSchedule(poptorch.PipelineSchedule.FillMainFlush).useRecomputation())")
    # not asked (recompute=None), the planner keeps the options' recomputation: off
    with pytest.raises(poptorch.Error, match=r"^plan_pipeline: a segment of the model does "
                       r"not fit on one IPU even on its own \(out of memory on IPU 0: .*\); "
                       r"give finer candidates= boundaries, allow recompute='auto', allow "
                       r"offchip_optimizer=True$"):
        poptorch.plan_pipeline(model, *args, ipus=2, options=opts, optimizer=adam)


def test_one_ipu_is_the_whole_model_checked_to_fit():
    model, opts, args = bert_style()
    plan = poptorch.plan_pipeline(model, *args, ipus=1, options=opts)
    assert plan.stages == [[f"layers.{i}" for i in range(8)]] and plan.even_split is None
    assert plan.fits and plan.confirmed and plan.code() == ""
    assert len(plan.memory) == 1 and plan.memory[0] <= plan.available
