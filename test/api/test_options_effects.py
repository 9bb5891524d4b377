"""Issue 24: options and partial features that used to only store their value now have
an effect (or a clear poptorch.Error): each test checks the effect against PyTorch on
the CPU or the spec's figures."""

import contextlib
import inspect
import logging
import re
import sys

import location_helper
import numpy as np
import pytest
import torch
from test_optim import Device, compare

import poptorch
from poptorch.runtime.machine.system import GC200


# ---- AutoStage.AutoIncrement (11-api-reference.txt, poptorch.AutoStage) ------------------
class ThreeBlocks(torch.nn.Module):
    """The API reference's AutoStage example: blocks "0", "1", "2" on IPUs 0, 1, 0,
    without user ids."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x, target=None):
        for layer, ipu in zip(self.layers, (0, 1, 0), strict=True):
            with poptorch.Block(ipu_id=ipu):
                x = torch.relu(layer(x))
                if target is not None and layer is self.layers[-1]:
                    return x, torch.nn.functional.mse_loss(x, target)
        return x


def _stages(poptorch_model):
    return sorted(set(re.findall(r"#ipu\.stage<(\d+) : i64, (\d+) : i64>",
                                 poptorch_model._compiled.module_text)))


def test_auto_increment_gives_id_less_blocks_their_own_stage():
    """AutoIncrement: Block "2" (IPU 0) is stage 2, not stage 0 shared with Block "0"."""
    opts = poptorch.Options().deviceIterations(3).setExecutionStrategy(
        poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    model = ThreeBlocks()
    ipu = poptorch.inferenceModel(model, opts)
    x = torch.randn(6, 4)
    torch.testing.assert_close(ipu(x), model(x))
    assert _stages(ipu) == [("0", "0"), ("1", "1"), ("2", "0")]
    assert ipu._compiled.module_text.count("call @main_stage") == 3


def test_auto_increment_trains_pipelined_with_gradient_accumulation():
    opts = poptorch.Options().setExecutionStrategy(
        poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    opts.Training.gradientAccumulation(6)
    model, reference = ThreeBlocks(), ThreeBlocks()
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    x, target = torch.randn(6, 4), torch.randn(6, 4)
    _, loss = ipu(x, target)
    cpu_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    cpu_loss = torch.stack([reference(x[i:i + 1], target[i:i + 1])[1] for i in range(6)])
    cpu_loss.mean().backward()
    cpu_optimizer.step()
    torch.testing.assert_close(loss.reshape(-1)[-1], cpu_loss[-1])
    ipu.copyWeightsToHost()
    for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs)
    # the forward's three stages, then the backward's stages 3 (IPU 1) and 4 (IPU 0)
    assert _stages(ipu) == [("0", "0"), ("1", "1"), ("2", "0"), ("3", "1"), ("4", "0")]


def test_same_as_ipu_puts_id_less_blocks_of_one_ipu_in_one_stage():
    """The default AutoStage.SameAsIpu gives Block "2" stage 0, like Block "0": the
    pipeline's stage ids then descend, which the spec forbids."""
    opts = poptorch.Options().deviceIterations(3)
    try:
        poptorch.inferenceModel(ThreeBlocks(), opts)(torch.randn(6, 4))
    except poptorch.Error as error:
        assert "stage ids must ascend in PipelinedExecution: block '2' (stage 0) runs " \
               "after block '1' (stage 1)" in error.message
    else:
        raise AssertionError("expected a poptorch.Error")


# ---- ipu_print_tensor and nop in training (spec 4.6.2, 4.6.5) -----------------------------
class Printed(torch.nn.Module):
    def __init__(self, pipelined=False, print_gradient=True):
        super().__init__()
        torch.manual_seed(1)
        self.first, self.second = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
        self.pipelined, self.print_gradient = pipelined, print_gradient

    def forward(self, x, target):
        with poptorch.Block(ipu_id=0) if self.pipelined else contextlib.nullcontext():
            y = poptorch.ipu_print_tensor(self.first(x), "hidden", self.print_gradient)
            y = poptorch.nop(y)
        with poptorch.Block(ipu_id=1) if self.pipelined else contextlib.nullcontext():
            out = self.second(y)
            return out, torch.nn.functional.mse_loss(out, target)


def _printed(text, title):
    """The arrays printed after `title: ` in `text`, in order."""
    found = re.findall(rf"^{title}: (\[.*?\]\])$", text, re.MULTILINE | re.DOTALL)
    number = r"-?\d+\.?\d*(?:e[-+]?\d+)?"
    return [np.array([float(n) for n in re.findall(number, block)]).reshape(-1, 3)
            for block in found]


def _cpu_hidden_gradient(model, x, target):
    hidden = model.first(x).detach().requires_grad_()
    loss = torch.nn.functional.mse_loss(model.second(hidden), target)
    loss.backward()
    return hidden, hidden.grad


def test_print_tensor_prints_the_gradient_in_training(capsys):
    model, reference = Printed(), Printed()
    x, target = torch.randn(2, 3), torch.randn(2, 3)
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    ipu(x, target)
    text = capsys.readouterr().out
    hidden, gradient = _cpu_hidden_gradient(reference, x, target)
    np.testing.assert_allclose(_printed(text, "hidden")[0], hidden.detach(), rtol=1e-5)
    np.testing.assert_allclose(_printed(text, "hidden_gradient")[0], gradient, rtol=1e-4,
                               atol=1e-6)
    assert len(_printed(text, "hidden_gradient")) == 1
    ipu.copyWeightsToHost()
    torch.optim.SGD(reference.parameters(), lr=0.1)  # the nop's gradient reached `first`
    loss = reference(x, target)[1]
    reference.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in reference.parameters():
            p -= 0.1 * p.grad
    torch.testing.assert_close(model.first.weight, reference.first.weight)


def test_print_tensor_without_print_gradient_prints_only_the_forward(capsys):
    model = Printed(print_gradient=False)
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    ipu(torch.randn(2, 3), torch.randn(2, 3))
    text = capsys.readouterr().out
    assert len(_printed(text, "hidden")) == 1 and "hidden_gradient" not in text


def test_print_tensor_and_nop_train_pipelined_over_two_ipus(capsys):
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(3)
    model, reference = Printed(pipelined=True), Printed()
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    x, target = torch.randn(3, 3), torch.randn(3, 3)
    ipu(x, target)
    text = capsys.readouterr().out
    gradients = _printed(text, "hidden_gradient")
    assert len(gradients) == 3  # one per micro-batch
    for step in range(3):
        _, expected = _cpu_hidden_gradient(reference, x[step:step + 1], target[step:step + 1])
        np.testing.assert_allclose(gradients[step], expected, rtol=1e-4, atol=1e-6)
    assert '"ipu.print"' in ipu._compiled.module_text and "hidden_gradient" in \
        ipu._compiled.module_text


# ---- the optimizers' maximize= (torch.optim: gradient ascent) -----------------------------
class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x, target):
        out = self.linear(x)
        return out, torch.nn.functional.mse_loss(out, target)


MAXIMIZING = {
    "torch.SGD": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01,
                                           maximize=True),
    "poptorch.SGD": lambda p: poptorch.optim.SGD(p, lr=0.05, momentum=0.9, maximize=True),
    "torch.Adam": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01, maximize=True),
    "poptorch.Adam": lambda p: poptorch.optim.Adam(p, lr=0.01, maximize=True),
    "torch.AdamW": lambda p: torch.optim.AdamW(p, lr=0.01, maximize=True),
    "poptorch.AdamW": lambda p: poptorch.optim.AdamW(p, lr=0.01, maximize=True),
    "torch.RMSprop": lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, maximize=True),
    "poptorch.RMSprop": lambda p: poptorch.optim.RMSprop(p, lr=0.01, maximize=True),
}


@pytest.mark.parametrize("name", MAXIMIZING)
def test_maximize_ascends_the_gradient_as_torch_on_the_cpu(name):
    model, reference = Regression(), Regression()
    ipu = poptorch.trainingModel(model, optimizer=MAXIMIZING[name](model.parameters()))
    cpu_optimizer = MAXIMIZING[name](reference.parameters())
    x, target = torch.randn(4, 3), torch.randn(4, 2)
    for _ in range(3):
        _, loss = ipu(x, target)
        cpu_optimizer.zero_grad()
        _, cpu_loss = reference(x, target)
        cpu_loss.backward()
        cpu_optimizer.step()
        torch.testing.assert_close(loss, cpu_loss.detach())
    ipu.copyWeightsToHost()
    torch.testing.assert_close(model.linear.weight, reference.linear.weight)
    assert loss > Regression()(x, target)[1]  # the loss grew


def test_maximize_with_replicas_and_gradient_accumulation():
    opts = poptorch.Options().replicationFactor(2)
    opts.Training.gradientAccumulation(2)
    model, reference = Regression(), Regression()
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1,
                                                              maximize=True))
    x, target = torch.randn(4, 3), torch.randn(4, 2)
    ipu(x, target)
    _, cpu_loss = reference(x, target)  # the mean over micro-batches and replicas
    cpu_loss.backward()
    torch.optim.SGD(reference.parameters(), lr=0.1, maximize=True).step()
    ipu.copyWeightsToHost()
    torch.testing.assert_close(model.linear.weight, reference.linear.weight)


def test_maximize_cannot_change_after_compilation():
    model = Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, maximize=True)
    ipu = poptorch.trainingModel(model, optimizer=optimizer)
    ipu(torch.randn(2, 3), torch.randn(2, 2))
    with pytest.raises(poptorch.Error, match=r"maximize changed from True to False; it "
                                             r"decides the structure of the compiled "
                                             r"optimizer"):
        ipu.setOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))


# ---- Training.gradientAccumulation in inference (PopTorch's _poplar_executor error) ------
ACCUMULATION_ERROR = ("You must set poptorch.Options().Training.gradientAccumulation to 1 or "
                      "leave it as its default value (1) when running a "
                      "poptorch.inferenceModel().")


@pytest.mark.parametrize("strategy, hint", [
    (None, True), (poptorch.PipelinedExecution, True), (poptorch.ShardedExecution, False)])
def test_inference_refuses_gradient_accumulation(strategy, hint):
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(2)
    if strategy is not None:
        opts.setExecutionStrategy(strategy())
    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)
    pipelined = (" Use poptorch.Options().deviceIterations to process a sufficient number "
                 "of batches each run for pipelined execution instead.")
    assert info.value.message == ACCUMULATION_ERROR + (pipelined if hint else "")
    opts = opts.clone()
    opts.Training.gradientAccumulation(1)  # as the message says
    x = torch.randn(2, 2)
    model = torch.nn.Linear(2, 2)
    torch.testing.assert_close(poptorch.inferenceModel(model, opts)(x), model(x))


# ---- relaxOptimizerAttributesChecks (11-api-reference.txt) --------------------------------
@contextlib.contextmanager
def poptorch_log():
    """The records of the "poptorch" logger (it does not propagate to the root logger)."""
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    log = logging.getLogger("poptorch")
    level = log.level
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


@pytest.mark.parametrize("relax, level", [(False, logging.WARNING), (True, logging.DEBUG)])
def test_unexpected_optimizer_attributes_warn_unless_relaxed(relax, level):
    opts = poptorch.Options().relaxOptimizerAttributesChecks(relax)
    model = Regression()
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.1)
    ipu = poptorch.trainingModel(model, opts, optimizer)
    x, target = torch.randn(2, 3), torch.randn(2, 2)
    ipu(x, target)
    optimizer.param_groups[0]["nonsense"] = 2.0
    optimizer.not_an_attribute = True
    expected = ["Ignoring unexpected group 0 attribute in SGD optimizer: ['nonsense']",
                "Ignoring unexpected optimizer attribute in SGD optimizer: "
                "['not_an_attribute']"]
    with poptorch_log() as records:
        ipu.setOptimizer(optimizer)
        ipu.setOptimizer(optimizer)  # each message once
    ignoring = [r for r in records if r.getMessage().startswith("Ignoring")]
    assert [r.getMessage() for r in ignoring] == expected
    assert {r.levelno for r in ignoring} == {level}
    reference = Regression()
    before = reference.linear.weight.detach().clone()
    ipu(x, target)  # the attributes change nothing: two plain SGD steps
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        cpu.zero_grad()
        reference(x, target)[1].backward()
        cpu.step()
    ipu.copyWeightsToHost()
    torch.testing.assert_close(model.linear.weight, reference.linear.weight)
    assert not torch.equal(before, reference.linear.weight)


# ---- sourceLocationExcludes (11-api-reference.txt) ----------------------------------------
class CallsHelper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.helper = location_helper.Unsupported()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x, target=None):
        out = self.helper(self.linear(x))  # the caller's line
        return out if target is None else (out, torch.nn.functional.mse_loss(out, target))


def _line(module, marker):
    source = inspect.getsourcefile(module)
    with open(source) as f:
        return f"{source}:{next(n for n, text in enumerate(f, 1) if marker in text)}"


@pytest.mark.parametrize("training", [False, True])
def test_source_location_excludes_moves_the_location_to_the_caller(training):
    helper_line = _line(location_helper, "# the helper's line")
    caller_line = _line(sys.modules[__name__], "# the caller's line")
    x, target = torch.rand(2, 3), torch.rand(2, 3)
    for excludes, where in [(None, helper_line),
                            (["/torch/", "/poptorch/", "location_helper.py"], caller_line)]:
        opts = poptorch.Options()
        if excludes is not None:
            opts.sourceLocationExcludes(excludes)
        model = CallsHelper()
        with pytest.raises(poptorch.Error) as info:
            if training:
                poptorch.trainingModel(model, opts, torch.optim.SGD(
                    model.parameters(), lr=0.1))(x, target)
            else:
                poptorch.inferenceModel(model, opts)(x)
        assert info.value.location == where
        assert re.match(r"unsupported op 'torch\.(aten\.)?lgamma'", info.value.message)


def test_append_to_location_excludes_adds_to_the_defaults():
    opts = poptorch.Options().appendToLocationExcludes("location_helper.py")
    assert opts.source_location_excludes == ["/torch/", "/poptorch/", "location_helper.py"]
    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(CallsHelper(), opts)(torch.rand(2, 3))
    assert info.value.location == _line(sys.modules[__name__], "# the caller's line")


# ---- options with only their default on the machine model; useIpuModel ------------------
@pytest.mark.parametrize("pattern", [poptorch.SyncPattern.SinglePipeline,
                                     poptorch.SyncPattern.ReplicaAndLadder])
def test_sync_patterns_other_than_full_are_refused(pattern):
    with pytest.raises(poptorch.Error) as info:
        poptorch.Options().syncPattern(pattern)
    assert info.value.message == (
        f"syncPattern(SyncPattern.{pattern.name}) is not supported: the machine model has no "
        "sync groups that would let IPUs communicate with the host independently; use "
        "SyncPattern.Full (the default)")
    assert poptorch.Options().syncPattern(poptorch.SyncPattern.Full).sync_pattern == \
        poptorch.SyncPattern.Full


def test_convolution_dithering_is_refused():
    opts = poptorch.Options()
    with pytest.raises(poptorch.Error, match=r"^setConvolutionDithering\(True\) is not "
                                             r"supported: the machine model maps each "
                                             r"convolution evenly"):
        opts.Training.setConvolutionDithering(True)
    assert opts.Training.setConvolutionDithering(False).convolution_dithering is False


def test_trace_model_true_is_no_longer_supported():
    """PopTorch 3: traceModel is deprecated (a warning), and True is an error."""
    opts = poptorch.Options()
    assert opts.Jit.trace_model is False
    with poptorch_log() as records:
        with pytest.raises(poptorch.Error, match=r"^options.Jit.traceModel\(True\) is no "
                                                 r"longer supported: PopTorch 3 captures"):
            opts.Jit.traceModel(True)
        opts.Jit.traceModel(False)
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and warnings[0].getMessage().startswith(
        "[Deprecated] Do not call options.Jit.traceModel()")
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    torch.testing.assert_close(poptorch.inferenceModel(model, opts)(x), model(x))


def test_ipu_model_is_popart_s_mk2_model_with_the_same_figures():
    """PopTorch's IPU Model is an "ipu2" model of 1472 tiles, the machine model's IPU:
    the same cycles and memory as without useIpuModel."""
    figures = []
    for use_model in (False, True):
        opts = poptorch.Options().useIpuModel(use_model).deviceIterations(2)
        model = Regression()
        ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
        ipu(torch.randn(2, 3), torch.randn(2, 2))
        figures.append((ipu.cycleCount(), ipu.getMemoryEstimate().to_dict()))
    assert figures[0] == figures[1] and figures[0][0] > 0
    assert figures[0][1]["tiles"] == GC200.tilesPerIPU == 1472


def test_ipu_model_refuses_cycle_count_logging():
    opts = poptorch.Options().useIpuModel(True).logCycleCount(True)
    with pytest.raises(poptorch.Error, match=r"^Cycle count logging is only supported on "
                                             r"actual IPU hardware"):
        poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)


# ---- anchorTensor / getAnchoredTensor (PopTorch's user guide, "Debugging your model") -----
class Debugged(torch.nn.Module):
    """The user guide's debugging example (docs/user_guide/debugging.py)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.fc1 = torch.nn.Linear(10, 10)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(10, 10)
        self.loss = torch.nn.MSELoss(reduction="mean")

    def forward(self, x, labels=None):
        out = self.fc2(self.relu(self.fc1(x)))
        if self.training:
            return self.loss(out, labels)
        return out


def test_the_user_guide_s_gradient_and_update_anchors_match_the_cpu():
    x, labels = torch.rand(10, 10), torch.rand(10, 10)
    opts = poptorch.Options()
    opts.anchorTensor("grad_bias", "Gradient___fc2.bias")
    opts.anchorTensor("update_weight", "UpdatedVar___fc2.weight")
    model, reference = Debugged(), Debugged()
    ipu = poptorch.trainingModel(model, opts)  # PopTorch's default SGD(lr=0.01)
    ipu(x, labels)
    reference(x, labels).backward()
    torch.testing.assert_close(ipu.getAnchoredTensor("grad_bias"), reference.fc2.bias.grad)
    torch.testing.assert_close(ipu.getAnchoredTensor("update_weight"),
                               reference.fc2.weight - 0.01 * reference.fc2.weight.grad)


def _anchored(mode, period=1):
    opts = poptorch.Options().deviceIterations(2)
    opts.Training.gradientAccumulation(2)
    opts.anchorTensor("g", "Gradient___fc2.bias", output_mode=mode, output_return_period=period)
    torch.manual_seed(4)
    x, labels = torch.rand(8, 10), torch.rand(8, 10)
    ipu = poptorch.trainingModel(Debugged(), opts)
    ipu(x, labels)
    return ipu.getAnchoredTensor("g")


def test_anchor_output_modes_with_device_iterations_and_accumulation():
    """One gradient per optimizer step (2 device iterations): All keeps both (All is
    OutputMode 0, which used to fall back to the model's Final), Sum adds them, Final
    and EveryN(2) keep the last."""
    every = _anchored(poptorch.OutputMode.All)
    assert every.shape == (2, 10) and not torch.equal(every[0], every[1])
    torch.testing.assert_close(_anchored(poptorch.OutputMode.Sum), every.sum(0))
    torch.testing.assert_close(_anchored(poptorch.OutputMode.Final), every[-1])
    torch.testing.assert_close(_anchored(poptorch.OutputMode.EveryN, 2), every[1:])
    torch.testing.assert_close(_anchored(None), every[-1])  # the model's mode: Final


def test_inference_anchors_a_weight_per_device_iteration():
    opts = poptorch.Options().deviceIterations(2).anchorTensor("w", "fc2.weight")
    model = Debugged().eval()
    ipu = poptorch.inferenceModel(model, opts)
    ipu(torch.rand(4, 10))
    anchored = ipu.getAnchoredTensor("w")  # OutputMode.All, the inference default
    assert anchored.shape == (2, 10, 10)
    torch.testing.assert_close(anchored[1], model.fc2.weight.detach())


# ---- randomSeed: reproducible random ops, a stream per replica ----------------------------
RANDOM_OPS = {
    "dropout": lambda x: torch.nn.functional.dropout(x, 0.5, training=True),
    "normal": lambda x: torch.normal(x, 1.0),
    "randperm": lambda x: torch.randperm(8).to(x.dtype).unsqueeze(0) + x,
    "bernoulli": lambda x: torch.bernoulli(torch.full_like(x, 0.5)),
    "distributions": lambda x: torch.distributions.Normal(x, torch.ones_like(x)).sample(),
}


class Draws(torch.nn.Module):
    def __init__(self, draw):
        super().__init__()
        self.draw = draw

    def forward(self, x):
        return self.draw(x)


def _draws(name, seed, replicas=2, iterations=2):
    opts = poptorch.Options().randomSeed(seed).replicationFactor(replicas)
    ipu = poptorch.inferenceModel(Draws(RANDOM_OPS[name]), opts.deviceIterations(iterations))
    return ipu(torch.ones(replicas * iterations, 8))


@pytest.mark.parametrize("name", RANDOM_OPS)
def test_random_seed_reproduces_random_ops_with_a_stream_per_replica(name):
    """The same seed gives the same draws run to run (a fresh model each time), another
    seed others; every replica, and every device iteration, draws its own numbers."""
    first = _draws(name, 5)
    assert first.shape == (4, 8)
    torch.testing.assert_close(_draws(name, 5), first)
    assert not torch.equal(_draws(name, 6), first)
    assert len({tuple(row.tolist()) for row in first}) == 4  # 2 iterations x 2 replicas
    one_replica = _draws(name, 5, replicas=1, iterations=1)
    torch.testing.assert_close(_draws(name, 5, replicas=1, iterations=1), one_replica)


class DropoutLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))

    def forward(self, x):
        return poptorch.identity_loss(self.model(x).square().mean(), "sum")


def test_random_seed_reproduces_dropout_training_with_replicas():
    weights = []
    for _ in range(2):
        opts = poptorch.Options().randomSeed(7).replicationFactor(2).deviceIterations(2)
        wrapper = DropoutLoss()
        model = wrapper.model
        ipu = poptorch.trainingModel(wrapper, opts, torch.optim.SGD(model.parameters(), lr=0.1))
        ipu(torch.ones(4, 8))
        ipu.copyWeightsToHost()
        weights.append(model[0].weight.detach().clone())
    torch.testing.assert_close(weights[0], weights[1])


def test_maximize_negates_the_gradient_scale_of_its_group_only():
    """optimizer_step: the group with maximize=True steps with -scale (one ipu.neg), the
    other with the scale itself; ten steps match torch with random gradients."""
    def make(params):
        return torch.optim.SGD([{"params": params[:1]}, {"params": params[1:], "maximize": True}],
                               lr=0.1, momentum=0.9)
    params = [torch.nn.Parameter(torch.randn(3)) for _ in range(2)]
    device = Device(make(params), params)
    neg = re.findall(r'(%\S+) = "ipu\.neg"\((%\S+)\)', device.ir)
    assert len(neg) == 1
    negated, scale = neg[0]
    steps = re.findall(r'"ipu\.sgd_momentum_step"\(([^)]*)\)', device.ir)
    assert [step.split(", ")[4] for step in steps] == [scale, negated]
    compare(make, shapes=[(3,), (2, 2)])
