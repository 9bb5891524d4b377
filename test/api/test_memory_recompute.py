"""Recomputed values in the memory estimate, counted by hand: ipu-recompute clones each
forward value a backward stage needs once, just before the first backward op reading it,
and the value lives from there to its last backward reader, as PopART schedules
implicit recomputation (graphcore/popart willow/src/popx/irlowering.cpp,
pipelinedOpTaskFunc: each op of `requiredRecomputes` is added once, "Ops to recompute
should only appear once", before the first task needing it). Without checkpoints the
first backward op of a stage's last layer recomputes the chain through every earlier
layer, whose values then stay alive until their own layer's backward: the stage's
forward activations at once. With `poptorch.recomputationCheckpoint` on each layer's
output (Graphcore's BERT: `recompute_checkpoint_every_layer`, on by default in its MLPerf
submission, bert_model.py should_checkpoint) one layer is recomputed at a time and the
checkpoints are stashed.
"""

import pytest
import torch

import poptorch

ROWS, WIDTH, F32 = 8, 64, 4
VALUE = ROWS * WIDTH * F32  # one layer's output, 8x64 f32: 2048 bytes


class ThreeLayers(torch.nn.Module):
    """Stage A on IPU 0: three Linear(64, 64, bias=False) + ReLU layers, each output a
    checkpoint but the last when `checkpoints`; stage B on IPU 1: a Linear and the loss."""

    def __init__(self, checkpoints: bool):
        super().__init__()
        self.checkpoints = checkpoints
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(3))
        self.out = torch.nn.Linear(WIDTH, WIDTH, bias=False)

    def forward(self, x, y):
        with poptorch.Block("A", ipu_id=0):
            for i, layer in enumerate(self.layers):
                x = torch.relu(layer(x))
                if self.checkpoints and i < 2:
                    x = poptorch.recomputationCheckpoint(x)
        with poptorch.Block("B", ipu_id=1):
            x = self.out(x)
            return x, torch.nn.functional.mse_loss(x, y)


def compiled(checkpoints: bool):
    torch.manual_seed(0)
    model = ThreeLayers(checkpoints)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(4)
    opts.setExecutionStrategy(poptorch.PipelinedExecution("A", "B"))
    ipu = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.1))
    ipu.compile(torch.randn(4 * ROWS, WIDTH), torch.randn(4 * ROWS, WIDTH))
    estimate, stash = ipu.getMemoryEstimate().ipus[0], ipu.getTimeline().stash_bytes[0]
    ipu.destroy()
    return estimate, stash


@pytest.mark.parametrize("checkpoints", [False, True])
def test_recomputed_values_alive_at_once(checkpoints):
    estimate, stash = compiled(checkpoints)
    if not checkpoints:
        # The backward stage's first op, layer 3's ReLU mask, needs layer 3's output:
        # recomputed from the stage input x through all three layers. At the recomputed
        # ReLU of layer 3 are alive: layers 1 and 2's outputs (read later by the weight
        # gradients and masks of layers 2 and 3), layer 3's matmul (its last use) and
        # its ReLU output: 4 values. The stash holds x, the host input the recomputation
        # starts from (and layer 1's weight gradient reads), for the 3 micro-batches in
        # flight on IPU 0 (1F1B: 2(N - s) - 1 for stage 0 of N = 2).
        assert estimate.peaks["recomputation"] == 4 * VALUE
        assert stash == 3 * VALUE
    else:
        # Layers 1 and 2's outputs come from the stash: only layer 3's matmul and ReLU
        # are recomputed, 2 values at once. Each of the 3 micro-batches in flight keeps
        # its 2 checkpoints and x (layer 1's weight gradient reads it).
        assert estimate.peaks["recomputation"] == 2 * VALUE
        assert stash == 3 * (2 + 1) * VALUE
