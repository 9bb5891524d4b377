"""Blocks without a user_id are named by their index among unnamed blocks, with or
without Block.useAutoId() (PopTorch's beginStage does so; the spec's AutoStage examples
name such blocks "0", "1", "2"): AutoIncrement then gives each its own stage."""

import re

import pytest
import torch

import poptorch


class ZeroOneZero(torch.nn.Module):
    """The AutoStage example of spec 11.5: blocks on IPUs 0, 1, 0, none named."""

    def __init__(self):
        super().__init__()
        self.linears = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for ipu, linear in zip((0, 1, 0), self.linears, strict=True):
            with poptorch.Block(ipu_id=ipu):
                x = torch.relu(linear(x))
        return x


def test_auto_increment_gives_each_unnamed_block_a_stage():
    torch.manual_seed(0)
    model, x = ZeroOneZero(), torch.randn(6, 4)
    opts = poptorch.Options().deviceIterations(3)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    wrapped = poptorch.inferenceModel(model, opts)
    torch.testing.assert_close(wrapped(x), model(x))
    blocks = set(re.findall(r'ipu\.block = "(\w+)"', wrapped._compiled.module_text))
    assert blocks == {"0", "1", "2"}


def test_same_as_ipu_refuses_the_stage_going_back():
    opts = poptorch.Options().deviceIterations(3)
    with pytest.raises(poptorch.Error, match=r"test_unnamed_blocks.py:23: stage ids must ascend "
                                             r"in PipelinedExecution: block '2' \(stage 0\) "
                                             r"runs after block '1' \(stage 1\); use "
                                             r"AutoStage.AutoIncrement"):
        poptorch.inferenceModel(ZeroOneZero(), opts)(torch.randn(6, 4))
