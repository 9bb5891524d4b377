"""Spec 4.4: execution strategies compile through the multi-IPU passes, run with the same
numbers as PyTorch on CPU, fail with the spec's checks, and give the machine model's
timeline (ramp-up / ramp-down idle time, stash memory per schedule)."""

import copy
import inspect
import re

import pytest
import torch
import torch.nn.functional as F
from test_annotations import FunctionNetwork, Network

import poptorch
from poptorch.options.strategies import multi_ipu_steps
from poptorch.runtime.machine.timeline import simulate


def pipeline_error(model, inputs, opts, training=False):
    with pytest.raises(poptorch.Error) as info:
        wrap = poptorch.trainingModel if training else poptorch.inferenceModel
        wrap(model, opts)(*inputs)
    return info.value.message


# ---- the spec's annotation examples ------------------------------------------------------
def test_block_with_auto_ids_on_4_ipus_needs_4_device_iterations():
    """Listing 4.8 as printed (deviceIterations 1) fails the spec's own rule for
    pipelined inference; with deviceIterations(4) it runs and matches the CPU."""
    model = Network()
    message = pipeline_error(model, (torch.rand((4, 5)),), poptorch.Options())
    assert message.startswith("deviceIterations (1) must be at least the number of pipeline "
                              "stages (4) in inference; set Options.deviceIterations(4) or "
                              "more")
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(4))
    x = torch.rand((16, 5))
    torch.testing.assert_close(ipu(x), model(x))
    text = ipu._compiled.module_text
    assert text.count("call @main_stage") == 4 and text.count('"ipu.copy"') == 3


def test_block_function_two_stages():
    model = FunctionNetwork()
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))
    x = torch.rand((8, 5))
    torch.testing.assert_close(ipu(x), model(x))
    assert ipu._compiled.module_text.count("call @main_stage") == 2


def test_begin_block_on_sub_modules():
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(6, 6) for _ in range(4)])
    for n in (1, 2, 3):
        model[n] = poptorch.BeginBlock(model[n], ipu_id=n)
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(4))
    x = torch.randn(8, 6)
    torch.testing.assert_close(ipu(x), model(x))
    assert ipu._compiled.module_text.count("call @main_stage") == 4


class PhasedModel(torch.nn.Module):
    """Spec listing 4.11: 6 phases alternating between IPUs 0/2 and 1/3, with f-strings."""

    N, size = 3, 10

    def __init__(self):
        super().__init__()
        self.weights = torch.nn.ParameterList([
            torch.nn.Parameter(torch.rand(self.size, self.size), requires_grad=True)
            for n in range(self.N * 6)])

    def forward(self, in0, target=None):
        phase = 0
        weight = iter(self.weights)
        with poptorch.Block("phase0_ipu0"):
            ins = torch.split(in0, self.size)
        for n in range(self.N * 3):
            out = []
            for ipu in range(2):
                x = ins[ipu]
                with poptorch.Block(f"phase{phase}_ipu{ipu}"):
                    x = torch.matmul(next(weight), x)
                    out.append(F.relu(x))
            ins = out[1], out[0]
            if n % 3 != 1:  # We want 2 matmuls in the same phase
                phase += 1
        with poptorch.Block(f"phase{self.N * 2 - 1}_ipu1"):
            res = ins[0] + ins[1]
            if target is None:
                return res
            return res, torch.nn.L1Loss(reduction="mean")(res, target)


def phased_strategy(N=3):
    phases = []
    for n in range(N):  # Alternate between 0-2 and 1-3
        phases.append([poptorch.Stage(f"phase{2 * n}_ipu0").ipu(0),
                       poptorch.Stage(f"phase{2 * n}_ipu1").ipu(2)])
        phases.append([poptorch.Stage(f"phase{2 * n + 1}_ipu0").ipu(1),
                       poptorch.Stage(f"phase{2 * n + 1}_ipu1").ipu(3)])
    return poptorch.ParallelPhasedExecution(*phases)


@pytest.mark.parametrize("liveness", list(poptorch.Liveness))
def test_fstring_parallel_phased_training(liveness):
    torch.manual_seed(0)
    inputs, target = torch.rand(20, 1), torch.rand(10, 1)
    model = PhasedModel()
    reference = copy.deepcopy(model)
    opts = poptorch.Options()
    opts.setExecutionStrategy(phased_strategy().setTensorsLiveness(liveness))
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=1e-9))
    ipu.compile(inputs, target)
    res, loss = ipu(inputs, target)
    expected_res, expected_loss = reference(inputs, target)
    torch.testing.assert_close(res, expected_res.detach(), rtol=1e-5, atol=0)
    torch.testing.assert_close(loss, expected_loss.detach(), rtol=1e-5, atol=0)
    expected_loss.backward()
    torch.optim.SGD(reference.parameters(), lr=1e-9).step()
    for mine, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(mine.detach(), theirs.detach(), rtol=1e-5, atol=1e-6)
    text = ipu._compiled.module_text
    # two stages of phase 1 feed each other: one is split into two calls
    assert "call @main_stage2_1" in text
    timeline = ipu.getTimeline()
    assert timeline.schedule == "phased"
    loads = sum(e.kind == "remote_load" for events in timeline.events.values() for e in events)
    stores = sum(e.kind == "remote_store" for events in timeline.events.values() for e in events)
    assert loads > 0  # weights stream in for their phase
    assert (stores > 0) == (liveness != poptorch.Liveness.AlwaysLive)


def test_serial_phased_listing_4_12_and_sharded_4_10():
    class Model(torch.nn.Module):
        def forward(self, x, y):
            outs = []
            for name, v in (("A", x), ("A2", y)):
                with poptorch.Block(name):
                    outs.append(torch.relu(v))
            for name, n in (("B", 0), ("B2", 1)):
                with poptorch.Block(name):
                    outs[n] = torch.exp(outs[n])
            for name, n in (("C", 0), ("C2", 1)):
                with poptorch.Block(name):
                    outs[n] = -outs[n]
            return tuple(outs)

    strategy = poptorch.SerialPhasedExecution(
        poptorch.Phase(poptorch.Stage("A"), poptorch.Stage("A2")),
        poptorch.Phase(poptorch.Stage("B"), poptorch.Stage("B2")),
        poptorch.Phase(poptorch.Stage("C"), poptorch.Stage("C2")))
    for n in range(3):
        strategy.phase(n).ipus(0, 1)
    assert strategy.stage("B2").blocks == ["B2"]
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    ipu = poptorch.inferenceModel(Model(), poptorch.Options().setExecutionStrategy(strategy))
    for mine, theirs in zip(ipu(x, y), Model()(x, y), strict=True):
        torch.testing.assert_close(mine, theirs)
    assert 'ipu.phase = 2 : i64, ipu.stage = #ipu.stage<5 : i64, 1 : i64>' \
        in ipu._compiled.module_text

    sharded = poptorch.ShardedExecution(poptorch.Stage("A", "A2").ipu(0),
                                        poptorch.Stage("B", "B2").ipu(1),
                                        poptorch.Stage("C", "C2").ipu(0))
    ipu = poptorch.inferenceModel(Model(), poptorch.Options().setExecutionStrategy(sharded))
    for mine, theirs in zip(ipu(x, y), Model()(x, y), strict=True):
        torch.testing.assert_close(mine, theirs)
    busy = sorted((e.start, e.end) for events in ipu.getTimeline().events.values()
                  for e in events if e.kind == "compute")
    assert all(a[1] <= b[0] for a, b in zip(busy, busy[1:], strict=False))  # one at a time


# ---- the machine model's figures --------------------------------------------------------
class FourStages(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(64, 64) for _ in range(4))

    def forward(self, x, target=None):
        for n, layer in enumerate(self.layers):
            with poptorch.Block(ipu_id=n):
                x = torch.relu(layer(x))
                if target is not None and n == 3:
                    return x, F.mse_loss(x, target)
        return x


@pytest.mark.parametrize("m", [4, 8, 16])
def test_pipeline_idle_fraction_is_ramp_up_and_down(m):
    p = 4
    ipu = poptorch.inferenceModel(FourStages(), poptorch.Options().deviceIterations(m))
    ipu(torch.randn(m * 32, 64))
    expected = (p - 1) / (m + p - 1)
    compiled = ipu._compiled
    with compiled.context:  # the schedule alone, without the host's streams
        schedule = simulate(compiled.module, micro_batches=m)
    # The bubble of the schedule: the span less the step's sync and micro-batch 0's
    # copies between IPUs (on the critical path of the ramp-up; the later ones overlap).
    events = [e for ipu_events in schedule.events.values() for e in ipu_events]
    sync = max(e.end for e in events if e.kind == "sync")
    copies = sum(e.end - e.start for e in events if e.kind == "copy" and e.micro_batch == 0)
    span = schedule.total_cycles - sync - copies
    bubble = 1 - sum(schedule.busy_cycles.values()) / (p * span)
    assert bubble == pytest.approx(expected, rel=0.05)
    assert schedule.idle_fraction > bubble  # the transfers idle IPUs too
    # streaming every micro-batch's input and output over the host link idles IPUs more
    assert ipu.getTimeline().idle_fraction > schedule.idle_fraction


def training_timeline(accumulation, schedule=poptorch.PipelineSchedule.FillMainFlush):
    """Without recomputation (on by default, as in PopTorch), so that activations stash."""
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(accumulation)
    opts.setExecutionStrategy(
        poptorch.PipelinedExecution().setSchedule(schedule).useRecomputation(False))
    model = FourStages()
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.01))
    ipu(torch.randn(accumulation * 8, 64), torch.randn(accumulation * 8, 64))
    return ipu.getTimeline()


def test_training_throughput_rises_with_gradient_accumulation():
    rates = [accumulation / training_timeline(accumulation).total_cycles
             for accumulation in (7, 14, 28)]
    assert rates[0] < rates[1] < rates[2]


def test_1f1b_stashes_less_than_fill_main_flush():
    gpipe = training_timeline(8)
    one_f_one_b = training_timeline(8, poptorch.PipelineSchedule.OneForwardOneBackward)
    assert gpipe.schedule == "gpipe" and one_f_one_b.schedule == "1f1b"
    assert sum(one_f_one_b.stash_bytes.values()) < sum(gpipe.stash_bytes.values())


def test_pipelined_training_matches_cpu_for_both_schedules():
    torch.manual_seed(0)
    x, target = torch.randn(56, 64), torch.randn(56, 64)
    for schedule in poptorch.PipelineSchedule:
        model = FourStages()
        reference = copy.deepcopy(model)
        opts = poptorch.Options()
        opts.Training.gradientAccumulation(7)
        opts.setExecutionStrategy(poptorch.PipelinedExecution().setSchedule(schedule))
        ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
        ipu(x, target)
        optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        loss = sum(reference(a, b)[1] for a, b in zip(x.split(8), target.split(8),
                                                      strict=True)) / 7
        loss.backward()
        optimizer.step()
        ipu.copyWeightsToHost()
        for mine, theirs in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(mine.detach(), theirs.detach(), rtol=1e-4, atol=1e-5)


def test_pipelined_training_of_a_batch_normalised_cnn_is_one_ipus_bit_for_bit():
    """Issue 27: pipelining (1F1B, recomputation, stashes) changes no number. ResNet-18's
    pipelined zoo loss was 1e-3 off float64 while one IPU's (micro-batch 4, no
    accumulation) was not; with the same accumulation one IPU's weights and statistics
    are the pipeline's exactly: the difference was a ReLU input within 3e-6 of zero that
    float32 rounds to the other side of it, here and on one IPU alike."""
    class Cnn(torch.nn.Sequential):
        def __init__(self):
            super().__init__(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                             torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, stride=2, padding=1),
                             torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Flatten(),
                             torch.nn.Linear(128, 4))

        def forward(self, x, labels):
            out = super().forward(x)
            return out, F.cross_entropy(out, labels)

    torch.manual_seed(0)
    initial = Cnn().state_dict()
    batches = [(torch.randn(12, 3, 8, 8), torch.randint(0, 4, (12,))) for _ in range(2)]
    states = []
    for pipelined in (False, True):
        model = Cnn()
        model.load_state_dict(initial)
        if pipelined:
            poptorch.BeginBlock(model[3], "b1", ipu_id=1)
        opts = poptorch.Options()
        opts.Training.gradientAccumulation(3)
        ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1,
                                                                    momentum=0.9))
        for x, y in batches:
            ipu(x, y)
        ipu.copyWeightsToHost()
        states.append(model.state_dict())
    for key, value in states[0].items():
        torch.testing.assert_close(states[1][key], value, rtol=0, atol=0, msg=key)

# ---- checks from the spec -----------------------------------------------------------------
def test_gradient_accumulation_must_cover_forward_and_backward_stages():
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(4)
    message = pipeline_error(FourStages(), (torch.randn(32, 64), torch.randn(32, 64)), opts,
                             training=True)
    assert message.startswith("gradientAccumulation (4) must be at least the number of "
                              "pipeline stages counting backward, 2N-1 = 7 for N = 4 forward "
                              "stages; set Options.Training.gradientAccumulation(7) or more")


class ThreeIpus(torch.nn.Module):
    def forward(self, x):
        for n in range(3):
            with poptorch.Block(ipu_id=n):
                x = torch.relu(x + n)
        return x


def test_ipu_count_must_be_a_power_of_two_unless_auto_rounded():
    opts = poptorch.Options().deviceIterations(3)
    message = pipeline_error(ThreeIpus(), (torch.randn(3, 2),), opts)
    assert message.startswith("the model uses 3 IPUs, which is not a power of 2; IPUs are "
                              "reserved in powers of 2: place the blocks on 4 IPUs or set "
                              "Options.autoRoundNumIPUs(True)")
    x = torch.randn(3, 2)
    ipu = poptorch.inferenceModel(ThreeIpus(), opts.clone().autoRoundNumIPUs(True))
    torch.testing.assert_close(ipu(x), ThreeIpus()(x))


def test_stage_ids_must_ascend_in_pipelined_execution():
    class Model(torch.nn.Module):
        def forward(self, x):
            with poptorch.Block("1", ipu_id=1):
                x = torch.relu(x)
            with poptorch.Block("2", ipu_id=0):
                return torch.exp(x)

    message = pipeline_error(Model(), (torch.randn(2, 2),), poptorch.Options().deviceIterations(2))
    assert message.startswith("stage ids must ascend in PipelinedExecution: block '2' (stage 0) "
                              "runs after block '1' (stage 1); use AutoStage.AutoIncrement")
    opts = poptorch.Options().deviceIterations(2).setExecutionStrategy(
        poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    x = torch.randn(4, 2)
    torch.testing.assert_close(poptorch.inferenceModel(Model(), opts)(x), Model()(x))


def test_phase_stages_must_match_its_ipus_and_parallel_parity():
    strategy = phased_strategy()
    strategy.phase(0).ipus(0)
    message = pipeline_error(PhasedModel(), (torch.rand(20, 1),),
                             poptorch.Options().setExecutionStrategy(strategy))
    assert message.startswith("phase 0 has 2 stages but its ipus() lists 1 IPU; give one IPU "
                              "per stage of the Phase")
    strategy = phased_strategy()
    strategy.phase(1).ipus(1, 2)
    message = pipeline_error(PhasedModel(), (torch.rand(20, 1),),
                             poptorch.Options().setExecutionStrategy(strategy))
    assert message.startswith("ParallelPhasedExecution runs odd phases on odd IPUs, but block "
                              "'phase1_ipu1' of phase 1 is on IPU 2; move it to an odd IPU")


def test_stage_naming_a_missing_block_and_layers_outside_blocks():
    opts = poptorch.Options().deviceIterations(4).setExecutionStrategy(
        poptorch.PipelinedExecution("0", "1", "2", "X"))
    message = pipeline_error(Network(), (torch.rand(16, 5),), opts)
    # "Unknown Block": PopTorch's words, which users search for
    assert message.startswith("Unknown Block 'X': a Stage names it, but it does not exist; "
                              "the model's blocks are 0, 1, 2, 3")

    class Outside(torch.nn.Module):
        def forward(self, x):
            with poptorch.Block(ipu_id=0):
                x = torch.relu(x)
            return torch.exp(x)

    message = pipeline_error(Outside(), (torch.randn(2, 2),), poptorch.Options())
    assert message.startswith("'ipu.exp' is outside every Block; once a model uses blocks, put "
                              "every layer inside a poptorch.Block")


# ---- the strategy API ----------------------------------------------------------------------
def test_strategy_api_errors():
    with pytest.raises(poptorch.Error, match="setExecutionStrategy: strategy must be an "
                                             "instance of poptorch.PipelinedExecution"):
        poptorch.Options().setExecutionStrategy("pipelined")
    with pytest.raises(poptorch.Error, match="no Stage of this PipelinedExecution holds "
                                             "block 'Z'"):
        poptorch.PipelinedExecution("A").stage("Z")
    with pytest.raises(poptorch.Error, match=r"phase\(3\): this strategy has 3 phases"):
        poptorch.SerialPhasedExecution(["A"], ["B"], ["C"]).phase(3)
    with pytest.raises(poptorch.Error, match="block id 'a=b' cannot name a Stage"):
        poptorch.Stage("a=b")
    with pytest.raises(poptorch.Error, match="Stage.ipu: ipu must be an int >= 0, got -1"):
        poptorch.Stage("A").ipu(-1)
    with pytest.raises(poptorch.Error, match="setTensorsLiveness: liveness must be a "
                                             "poptorch.Liveness"):
        phased_strategy().setTensorsLiveness("always")
    with pytest.raises(poptorch.Error, match="setSchedule: schedule must be a "
                                             "poptorch.PipelineSchedule"):
        poptorch.PipelinedExecution().setSchedule("1f1b")
    with pytest.raises(poptorch.Error, match="Phase takes one or more Stages or one or more "
                                             "block ids"):
        poptorch.Phase(1)
    with pytest.raises(poptorch.Error, match="useRecomputation: enabled must be True or "
                                             "False, got 1"):
        poptorch.PipelinedExecution().useRecomputation(1)
    with pytest.raises(poptorch.Error, match="useSeparateBackwardPhase: use must be True or "
                                             "False, got 'yes'"):
        phased_strategy().useSeparateBackwardPhase("yes")


def test_separate_backward_phase_numbers_backward_phases_apart():
    torch.manual_seed(0)
    opts = poptorch.Options()
    opts.setExecutionStrategy(phased_strategy().useSeparateBackwardPhase())
    model = PhasedModel()
    inputs, target = torch.rand(20, 1), torch.rand(10, 1)
    expected = model(inputs, target)[1].detach()
    _, loss = poptorch.trainingModel(model, opts)(inputs, target)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=0)
    ipu = poptorch.trainingModel(PhasedModel(), opts)
    ipu.compile(inputs, target)
    text = ipu._compiled.module_text
    assert "ipu.phase = 12 : i64" in text and '"forward_backward"' not in text


def test_recomputation_trades_stash_for_cycles_with_the_same_numbers():
    class Deep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(4))

        def forward(self, x, target):
            for n, layer in enumerate(self.layers):
                with poptorch.Block(ipu_id=n // 2):
                    x = torch.tanh(layer(x))
                    if n == 0:
                        x = poptorch.recomputationCheckpoint(x)
                    if n == 3:
                        return x, F.mse_loss(x, target)

    torch.manual_seed(0)
    initial = Deep().state_dict()
    x, target = torch.randn(24, 16), torch.randn(24, 16)
    runs = {}
    for recompute in (False, True):
        model = Deep()
        model.load_state_dict(initial)
        opts = poptorch.Options()
        opts.Training.gradientAccumulation(3)
        opts.setExecutionStrategy(poptorch.PipelinedExecution().useRecomputation(recompute))
        ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
        ipu(x, target)
        ipu.copyWeightsToHost()
        runs[recompute] = (ipu.getTimeline(), [p.detach().clone() for p in model.parameters()],
                           ipu._compiled.module_text)
    (plain, plain_weights, _), (recomputed, weights, text) = runs[False], runs[True]
    for a, b in zip(plain_weights, weights, strict=True):
        torch.testing.assert_close(a, b)
    assert "ipu.recomputed" in text
    assert recomputed.stash_bytes[0] < plain.stash_bytes[0]
    assert recomputed.total_cycles > plain.total_cycles


def test_timeline_needs_a_compiled_model():
    with pytest.raises(poptorch.Error, match="the model must be compiled before it has a "
                                             "timeline"):
        poptorch.inferenceModel(FourStages()).getTimeline()
    ipu = poptorch.inferenceModel(torch.nn.Linear(2, 2))  # no blocks: one task on IPU 0
    ipu(torch.randn(1, 2))
    timeline = ipu.getTimeline()
    assert list(timeline.events) == [0]
    assert [e.kind for e in timeline.events[0]] == ["host_load", "compute", "host_store"]
    compute = timeline.events[0][1]
    assert timeline.idle_fraction == 1 - (compute.end - compute.start) / timeline.total_cycles


def test_placement_errors_point_at_the_users_block():
    opts = poptorch.Options().deviceIterations(3)
    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(ThreeIpus(), opts)(torch.randn(3, 2))
    lines, start = inspect.getsourcelines(ThreeIpus.forward)
    line = start + next(n for n, text in enumerate(lines) if "torch.relu" in text)
    assert info.value.location.endswith(f"test_strategies.py:{line}")  # the blocks' layer


# ---- values out of the multi-IPU passes' range, from the Python API (issue 22) -------------
class TwoBlocks(torch.nn.Module):
    """Block "A" on IPU 0, block "B" on IPU `ipu`; with `loss`, B also returns the loss."""

    def __init__(self, ipu=1, loss=False):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
        self.ipu, self.loss = ipu, loss

    def forward(self, x):
        with poptorch.Block("A", ipu_id=0):
            x = self.a(x)
        with poptorch.Block("B", ipu_id=self.ipu):
            x = self.b(x)
            return (x, x.sum()) if self.loss else x


def compile_error(message, step, log_dir):
    """A regex for the whole message of a failed compile step: `message`, then the ipu-opt
    command that reproduces the step from the module written to `log_dir`."""
    return (f"{re.escape(message)}; reproduce with: ipu-opt {re.escape(str(log_dir))}/"
            f"poptorch-repro-\\S+\\.mlir --pass-pipeline='builtin\\.module\\("
            f"{re.escape(step)}\\)'")


def line_of(method, text):
    lines, start = inspect.getsourcelines(method)
    return start + next(n for n, line in enumerate(lines) if text in line)


TOO_MANY = ("{} (70000) must be at most 65536 for a model split into stages: the schedule "
            "orders every micro-batch of every stage; set {}(65536) or less")
SCHEDULE = "ipu-schedule{strategy=pipelined schedule=1f1b micro-batches=70000}"


def test_device_iterations_beyond_the_schedule_are_an_error_naming_the_option(tmp_path):
    opts = poptorch.Options().deviceIterations(70000).logDir(str(tmp_path))
    message = TOO_MANY.format("deviceIterations", "Options.deviceIterations")
    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(TwoBlocks(), opts)(torch.randn(70000, 4))
    assert re.fullmatch(compile_error(message, SCHEDULE, tmp_path), info.value.message)
    assert info.value.type == "compiler"
    assert info.value.location.endswith(
        f"test_strategies.py:{line_of(TwoBlocks.forward, 'self.a(x)')}")


def test_gradient_accumulation_beyond_the_schedule_is_an_error_naming_the_option(tmp_path):
    opts = poptorch.Options().logDir(str(tmp_path))
    opts.Training.gradientAccumulation(70000)
    model = TwoBlocks(loss=True)
    message = TOO_MANY.format("gradientAccumulation", "Options.Training.gradientAccumulation")
    with pytest.raises(poptorch.Error) as info:
        poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))(
            torch.randn(70000, 4))
    assert re.fullmatch(compile_error(message, SCHEDULE, tmp_path), info.value.message)
    assert info.value.type == "compiler"


def test_a_model_without_stages_takes_more_device_iterations_than_a_schedule():
    """Nothing is scheduled per micro-batch without stages: no limit, as in PopTorch (the
    bound on the pass option used to refuse this with a raw PassOptionError)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x = torch.randn(70000, 4)
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(70000))
    torch.testing.assert_close(ipu(x), model(x))


def test_block_ipu_id_beyond_the_pass_ids_is_an_error():
    # Block checks its ids (test_misuse.py); the pass's own check, reached from ipu-opt,
    # is in test/Passes/assign-stages-invalid.mlir
    for ipu in (70000, 2**40, -1):  # 2**40 ran ipu-schedule out of memory
        opts = poptorch.Options().deviceIterations(2)
        with pytest.raises(poptorch.Error) as info:
            poptorch.inferenceModel(TwoBlocks(ipu), opts)(torch.randn(2, 4))
        assert info.value.message.endswith(
            f"Block: ipu_id must be an int from 0 to 65535 (or None), got {ipu}")


@pytest.mark.parametrize(("make", "message"), [
    (lambda: poptorch.Stage("B").ipu(70000), "Stage.ipu: ipu must be an int <= 65535, got 70000"),
    (lambda: poptorch.Phase(poptorch.Stage("A"), poptorch.Stage("B")).ipus(0, 70000),
     "Phase.ipus: ipus must be an int <= 65535, got 70000"),
    (lambda: poptorch.Phase("A").ipus(0, 65536),  # more IPUs than stages: still checked
     "Phase.ipus: ipus must be an int <= 65535, got 65536"),
    (lambda: poptorch.PipelinedExecution(*[f"b{n}" for n in range(65537)]),
     "PipelinedExecution takes at most 65536 stages, got 65537"),
    (lambda: poptorch.ShardedExecution([poptorch.Stage(f"b{n}") for n in range(65537)]),
     "ShardedExecution takes at most 65536 stages, got 65537"),
    (lambda: poptorch.SerialPhasedExecution(*[[f"b{n}"] for n in range(65537)]),
     "SerialPhasedExecution takes at most 65536 stages, got 65537"),
    (lambda: poptorch.Options().deviceIterations(10**20),
     "deviceIterations: device_iterations must be an int <= 9223372036854775807, got "
     "100000000000000000000"),
    (lambda: poptorch.Options().Training.gradientAccumulation(10**20),
     "gradientAccumulation: gradient_accumulation must be an int <= 9223372036854775807, got "
     "100000000000000000000"),
], ids=["stage-ipu", "phase-ipus", "phase-extra-ipus", "pipelined-stages", "sharded-stages",
        "phased-stages", "device-iterations", "gradient-accumulation"])
def test_stage_and_ipu_ids_beyond_the_pass_ids_are_refused_when_set(make, message):
    """Stage and IPU ids reach ipu-assign-stages' options, which take 0 to 65535: the
    PassOptionError (a ValueError) they raised at compile is now refused when set."""
    with pytest.raises(poptorch.Error, match=f"^{re.escape(message)}$") as info:
        make()
    assert info.value.type == "options"


def test_strategy_values_no_check_covers_are_still_a_poptorch_error():
    """ParallelPhasedExecution puts stage n of a phase on IPU 2n (+1): past 32768 stages
    in a phase that is not an IPU id; the pass's own message, as a poptorch.Error."""
    strategy = poptorch.ParallelPhasedExecution(
        poptorch.Phase(*[poptorch.Stage(f"b{n}") for n in range(32769)]))
    message = ("the execution strategy gives the compiler option 'stages' of pass "
               "'ipu-assign-stages' expects a comma-separated list of block=stage[:ipu[:phase]] "
               "items (e.g. A=0:0,B=1:1), ids from 0 to 65535, got 'b32768=32768:65536:0' in "
               "'b0=0:0:0,b1=1:2:0,b2=2:4:0,b3=3:6:0,b4=4:8:0,b5=5:10:0,b6=6:12:0,b7=7:14:0,b8...'")
    with pytest.raises(poptorch.Error, match=f"^{re.escape(message)}$") as info:
        multi_ipu_steps(strategy, 1, False)
    assert info.value.type == "options"
