"""Recomputation without pipelining, as PopTorch users set it: `opts._Popart.set(
"autoRecomputation", 4)` (PopART's RecomputationType::RecomputeAll) with
`poptorch.recomputationCheckpoint` at the values to keep (Graphcore's PopTorch ResNet-50
training, graphcore/examples vision/cnns/pytorch/utils/ipu_settings.py). The backward
recomputes the forward values it reads from the checkpoints and the inputs, so it trains
exactly as the CPU does, with each batch norm's running statistics updated once and
dropout's mask drawn again the same; the activations alive between forward and backward
shrink to the checkpoints, at the cost of the recomputed cycles.
"""

import pytest
import torch

import poptorch
from poptorch.options import strategies
from poptorch.options.popart import RECOMPUTATION_TYPES
from poptorch.options.serialise import options_from_json, options_to_json

RECOMPUTE_ALL, PIPELINE, NONE = 4, 3, 0
LR, STEPS = 0.1, 2


# ---- the option -------------------------------------------------------------------------
def test_recomputation_types_are_poparts():
    # graphcore/popart willow/include/popart/sessionoptions.hpp, enum RecomputationType
    assert RECOMPUTATION_TYPES == {0: "None", 1: "Standard", 2: "NormOnly", 3: "Pipeline",
                                   4: "RecomputeAll"}


def test_set_and_options_view():
    opts = poptorch.Options()
    # PopTorch's _PopartOptions starts with these two
    assert opts._Popart.options == {"instrumentWithHardwareCycleCounter": False,
                                    "rearrangeAnchorsOnHost": False}
    assert opts._Popart.set("autoRecomputation", RECOMPUTE_ALL) is opts._Popart
    opts._Popart.set("explicitRecomputation", True)
    assert opts._Popart.options["autoRecomputation"] == RECOMPUTE_ALL
    assert opts._Popart.options["explicitRecomputation"] is True
    copied = opts.clone()
    copied._Popart.set("autoRecomputation", NONE)
    assert opts._Popart.options["autoRecomputation"] == RECOMPUTE_ALL


def test_unsupported_key_is_an_error():
    with pytest.raises(poptorch.Error, match=r"^_Popart.set\('dummyKey', 5\): PopART option "
                       r"'dummyKey' is not supported by this compiler \(supported: "
                       r"autoRecomputation, explicitRecomputation, and "
                       r"instrumentWithHardwareCycleCounter, rearrangeAnchorsOnHost set to "
                       r"False\)$"):
        poptorch.Options()._Popart.set("dummyKey", 5)
    with pytest.raises(poptorch.Error, match=r"use Options.enableStableNorm\(enabled\) "
                                             r"instead$"):
        poptorch.Options()._Popart.set("enableStableNorm", True)
    with pytest.raises(poptorch.Error, match="'engineOptions' is not supported"):
        poptorch.Options()._Popart.setEngineOptions({"opt.a": "1"})


@pytest.mark.parametrize("value", [1, 2])
def test_popart_chosen_recomputation_is_refused(value):
    name = RECOMPUTATION_TYPES[value]
    with pytest.raises(poptorch.Error, match=rf"^_Popart.set\('autoRecomputation', {value}\): "
                       rf"RecomputationType.{name} \(PopART choosing what to recompute\) is "
                       r"not supported; use 4 \(RecomputeAll\) with "
                       r"poptorch.recomputationCheckpoint at the values to keep, 3 "
                       r"\(Pipeline\) or 0 \(None\)$"):
        poptorch.Options()._Popart.set("autoRecomputation", value)


@pytest.mark.parametrize("key, value", [("autoRecomputation", 5), ("autoRecomputation", True),
                                        ("autoRecomputation", "4"),
                                        ("explicitRecomputation", 1),
                                        ("rearrangeAnchorsOnHost", True)])
def test_bad_values(key, value):
    with pytest.raises(poptorch.Error, match=rf"^_Popart.set\('{key}', "):
        poptorch.Options()._Popart.set(key, value)


def test_written_into_the_dict_is_checked_at_compile():
    opts = poptorch.Options()
    opts._Popart.options["autoRecomputation"] = 1  # PopTorch's dict, written directly
    with pytest.raises(poptorch.Error, match="RecomputationType.Standard"):
        strategies.options_steps(opts, 1)


def test_frozen_with_the_model():
    opts = poptorch.Options()
    poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)
    with pytest.raises(poptorch.Error, match="cannot change option _Popart.options"):
        opts._Popart.set("autoRecomputation", RECOMPUTE_ALL)


def test_stored_and_loaded(tmp_path):
    opts = poptorch.Options()
    opts._Popart.set("autoRecomputation", RECOMPUTE_ALL)
    assert options_from_json(options_to_json(opts))._Popart.options == opts._Popart.options
    path = tmp_path / "opts.conf"
    path.write_text('_Popart.set("autoRecomputation", 4)\n')
    assert poptorch.Options().loadFromFile(str(path))._Popart.options == opts._Popart.options


# ---- what the compiler runs ---------------------------------------------------------------
def steps(value=None, strategy=None):
    opts = poptorch.Options()
    if value is not None:
        opts._Popart.set("autoRecomputation", value)
    if strategy is not None:
        opts.setExecutionStrategy(strategy)
    return [s for s in strategies.options_steps(opts, 4) if s.startswith("ipu-recompute")]


def test_steps_of_each_type():
    assert steps() == ["ipu-recompute"]  # PopTorch pipelines recompute by default
    assert steps(NONE) == []  # the user's None replaces PopTorch's Pipeline
    assert steps(PIPELINE) == ["ipu-recompute"]
    assert steps(RECOMPUTE_ALL) == ["ipu-recompute{fused-stage=true}"]


def test_conflicts_are_errors():
    with pytest.raises(poptorch.Error, match=r"^_Popart autoRecomputation 4 "
                       r"\(RecomputationType.RecomputeAll\) asks for recomputation, which "
                       r"PipelinedExecution.useRecomputation\(False\) turns off: drop one "
                       r"of them$"):
        steps(RECOMPUTE_ALL, poptorch.PipelinedExecution().useRecomputation(False))
    with pytest.raises(poptorch.Error, match=r"^_Popart autoRecomputation 4 "
                       r"\(RecomputationType.RecomputeAll\) needs PipelinedExecution \(the "
                       r"default strategy\); ShardedExecution does not recompute"):
        steps(RECOMPUTE_ALL, poptorch.ShardedExecution())
    assert steps(NONE, poptorch.ShardedExecution()) == []


# ---- training -----------------------------------------------------------------------------
class SmallCNN(torch.nn.Module):
    """conv-BN-ReLU-dropout, a checkpoint, conv-BN-ReLU, a checkpoint, pooling, a
    classifier and its loss (after the last checkpoint: kept, not recomputed); with
    `blocks`, the first layer on IPU 0 and the rest on IPU 1. Returns the first layer's
    output (its dropout mask) and the loss."""

    def __init__(self, dropout: float = 0.0, blocks: bool = False):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.c2, self.b2 = torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)
        self.dropout, self.blocks = dropout, blocks

    def forward(self, x, y):
        if self.blocks:
            poptorch.Block.start("first", ipu_id=0)
        first = torch.nn.functional.dropout(torch.relu(self.b1(self.c1(x))), self.dropout,
                                            self.training)
        h = poptorch.recomputationCheckpoint(first)
        if self.blocks:
            poptorch.Block.start("rest", ipu_id=1)
        h = poptorch.recomputationCheckpoint(torch.relu(self.b2(self.c2(h))))
        out = self.fc(h.mean((2, 3)))
        return first, torch.nn.functional.cross_entropy(out, y)


def data(micro_batches: int):
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(4 * micro_batches, 3, 8, 8, generator=gen),
            torch.randint(0, 5, (4 * micro_batches,), generator=gen))


def train(model, opts, x, y, steps: int = STEPS):
    """(model after `steps` SGD steps on IPU, the last step's dropout outputs, the
    compiled module's text, the memory estimate of IPU 0, the step's cycles)."""
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=LR))
    for _ in range(steps):
        h, _ = ipu(x, y)
    ipu.copyWeightsToHost()
    found = (ipu._compiled.module_text, ipu.getMemoryEstimate().ipus[0],
             ipu.getTimeline().total_cycles)
    ipu.destroy()
    return (model, h, *found)


def cpu_reference(model, x, y, micro_batches: int, steps: int = STEPS, keep=None):
    """The same steps on CPU: each micro-batch's gradients (its own batch statistics)
    averaged, as PopTorch's Mean accumulation; `keep`: one step with the dropout mask
    the IPU drew (its output's nonzeros)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(steps):
        optimizer.zero_grad()
        for xs, ys in zip(x.chunk(micro_batches), y.chunk(micro_batches), strict=True):
            h = torch.relu(model.b1(model.c1(xs)))
            if keep is not None:
                h = h * keep / (1 - model.dropout)
            h = torch.relu(model.b2(model.c2(h)))
            loss = torch.nn.functional.cross_entropy(model.fc(h.mean((2, 3))), ys)
            (loss / micro_batches).backward()
        optimizer.step()
    return model


def assert_same_state(ipu_model, cpu_model):
    for name, value in cpu_model.state_dict().items():
        torch.testing.assert_close(ipu_model.state_dict()[name], value, rtol=1e-4, atol=1e-5,
                                   msg=name)


def options(value, accumulation: int = 1):
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(accumulation)
    if value is not None:
        opts._Popart.set("autoRecomputation", value)
    return opts


@pytest.mark.parametrize("accumulation", [1, 2])
def test_batch_norm_cnn_trains_as_on_cpu(accumulation):
    x, y = data(accumulation)
    torch.manual_seed(0)
    start = SmallCNN().state_dict()
    runs = {}
    for value in (None, RECOMPUTE_ALL):
        model = SmallCNN()
        model.load_state_dict(start)
        runs[value] = train(model, options(value, accumulation), x, y)
    cpu = SmallCNN()
    cpu.load_state_dict(start)
    cpu_reference(cpu, x, y, accumulation)
    # the running statistics were updated once per micro-batch, not again when recomputed
    assert runs[RECOMPUTE_ALL][0].b1.num_batches_tracked.item() == STEPS * accumulation
    assert_same_state(runs[RECOMPUTE_ALL][0], cpu)
    assert_same_state(runs[None][0], cpu)
    recomputed, plain = runs[RECOMPUTE_ALL][2], runs[None][2]
    assert '"ipu.conv"' in "\n".join(line for line in recomputed.splitlines()
                                     if "ipu.recomputed" in line)
    assert "ipu.recomputed" not in plain
    # fewer activations alive between forward and backward, more cycles
    assert runs[RECOMPUTE_ALL][3].peaks["activations"] < runs[None][3].peaks["activations"]
    assert runs[RECOMPUTE_ALL][3].peaks["recomputation"] > 0
    assert runs[RECOMPUTE_ALL][4] > runs[None][4]


def test_dropout_recomputed_with_the_same_mask():
    x, y = data(1)
    torch.manual_seed(0)
    start = SmallCNN().state_dict()
    model = SmallCNN(dropout=0.5)
    model.load_state_dict(start)
    opts = options(RECOMPUTE_ALL).randomSeed(7)
    trained, h, text, _, _ = train(model, opts, x, y, steps=1)
    assert '"ipu.random_uniform"' in "\n".join(
        line for line in text.splitlines() if "ipu.recomputed" in line)
    # the gradients are those of the mask the forward drew (read from the first layer's
    # output, where the ReLU's zeros do not matter: their gradient is zero): the
    # recomputed draw gave the same one. ReLU then dropout(0.5) keep about a quarter.
    keep = (h != 0).to(x.dtype)
    assert 0.15 < keep.mean().item() < 0.35
    cpu = SmallCNN(dropout=0.5)
    cpu.load_state_dict(start)
    cpu_reference(cpu, x, y, 1, steps=1, keep=keep)
    assert_same_state(trained, cpu)


def test_pipelined_recompute_all_trains_as_on_cpu():
    x, y = data(4)
    torch.manual_seed(0)
    start = SmallCNN().state_dict()
    model = SmallCNN(blocks=True)
    model.load_state_dict(start)
    trained, _, text, _, _ = train(model, options(RECOMPUTE_ALL, 4), x, y)
    cpu = SmallCNN()
    cpu.load_state_dict(start)
    cpu_reference(cpu, x, y, 4)
    assert_same_state(trained, cpu)
    # both stages recompute, the fused last one (IPU 1) too, and the clones keep the
    # placement of what they replace
    recomputed = [line for line in text.splitlines() if "ipu.recomputed" in line]
    for ipu in (0, 1):
        assert any(f"ipu.ipu_id = {ipu} : i64" in line and '"ipu.conv"' in line
                   for line in recomputed)


# ---- memory -------------------------------------------------------------------------------
ROWS, WIDTH = 8, 64
VALUE = ROWS * WIDTH * 4  # one layer's output, 8x64 f32: 2048 bytes


class ThreeLayers(torch.nn.Module):
    """Three Linear(64, 64, bias=False) + ReLU layers on one IPU, the first two outputs
    checkpoints when `checkpoints`, and an MSE loss (test_memory_recompute.py's model,
    without blocks)."""

    def __init__(self, checkpoints: bool):
        super().__init__()
        self.checkpoints = checkpoints
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(3))

    def forward(self, x, y):
        for i, layer in enumerate(self.layers):
            x = torch.relu(layer(x))
            if self.checkpoints and i < 2:
                x = poptorch.recomputationCheckpoint(x)
        return x, torch.nn.functional.mse_loss(x, y)


def peaks(checkpoints: bool, value):
    torch.manual_seed(0)
    model = ThreeLayers(checkpoints)
    ipu = poptorch.trainingModel(model, options(value),
                                 poptorch.optim.SGD(model.parameters(), lr=0.1))
    ipu.compile(torch.randn(ROWS, WIDTH), torch.randn(ROWS, WIDTH))
    found = ipu.getMemoryEstimate().ipus[0].peaks
    ipu.destroy()
    return found


@pytest.mark.parametrize("checkpoints", [False, True])
def test_recomputed_values_alive_at_once(checkpoints):
    recomputed, stashed = peaks(checkpoints, RECOMPUTE_ALL), peaks(checkpoints, None)
    assert stashed["recomputation"] == 0
    if not checkpoints:
        # every op is after the last checkpoint: kept, nothing recomputed (PopART)
        assert recomputed == stashed
        return
    # Layer 3 is after the last checkpoint: kept. The backward of layer 2 reads the
    # checkpoint of layer 1 and layer 2's ReLU output, recomputed from it: its matmul
    # and ReLU, 2 values at once (then the same for layer 1, from x).
    assert recomputed["recomputation"] == 2 * VALUE
    # layers 1 and 2's ReLU outputs are no longer kept from the forward for the
    # backward: the activations' peak (at the end of the forward) falls by 2 values
    assert recomputed["activations"] == stashed["activations"] - 2 * VALUE


def test_same_training_with_device_iterations_replicas_and_accumulation():
    # 2 device iterations x 2 replicas x 2 micro-batches: recomputing changes nothing
    x, y = data(8)
    torch.manual_seed(0)
    start = SmallCNN().state_dict()
    runs = []
    for value in (None, RECOMPUTE_ALL):
        model = SmallCNN()
        model.load_state_dict(start)
        opts = options(value, 2).deviceIterations(2).replicationFactor(2)
        runs.append(train(model, opts, x, y)[0])
    assert_same_state(runs[1], runs[0])
    assert runs[1].b1.num_batches_tracked.item() != 0
