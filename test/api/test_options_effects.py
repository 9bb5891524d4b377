"""Issue 24: options and partial features that used to only store their value now have
an effect (or a clear poptorch.Error): each test checks the effect against PyTorch on
the CPU or the spec's figures."""

import re

import torch

import poptorch


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
