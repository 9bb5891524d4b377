"""Recomputed random draws (ipu-recompute on dropout): the backward stage draws the same
mask as the forward stage did (a seed modifier shared by the draw and its clone, as
PopART's recomputed dropout), so training with recomputation gives the gradients of
the forward pass it ran, and the mask is recomputed rather than stashed."""

import pytest
import torch

import poptorch

MICRO, ACCUMULATE, LR = 4, 4, 0.5


class Dropped(torch.nn.Module):
    """Block A (IPU 0): Linear(8, 16) and dropout(0.5); block B (IPU 1): Linear(16, 4)
    and the summed output as the loss."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        with poptorch.Block("A", ipu_id=0):
            h = torch.nn.functional.dropout(self.fc1(x), 0.5, self.training)
        with poptorch.Block("B", ipu_id=1):
            loss = self.fc2(h).sum()
        return h, poptorch.identity_loss(loss, reduction="none")


def train_once(recompute: bool):
    """(the model before, the dropout output of every micro-batch, the weights after) of
    one pipelined SGD step."""
    torch.manual_seed(0)
    model = Dropped()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opts = poptorch.Options()
    opts.randomSeed(42)
    opts.Training.gradientAccumulation(ACCUMULATE)
    opts.outputMode(poptorch.OutputMode.All)
    opts.setExecutionStrategy(poptorch.PipelinedExecution().useRecomputation(recompute))
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=LR))
    x = torch.randn(MICRO * ACCUMULATE, 8)
    h, _ = ipu(x)
    ipu.copyWeightsToHost()
    after = {k: v.clone() for k, v in model.state_dict().items()}
    ipu.destroy()
    return before, x, h, after


def expected(before, x, h):
    """The step on CPU with the masks the forward pass drew (read from its output):
    what the backward must use; micro-batch gradients averaged (PopTorch's default
    accumulation reduction, Mean)."""
    model = Dropped()
    model.load_state_dict(before)
    keep = (h != 0).to(x.dtype)
    hidden = model.fc1(x) * keep * 2.0
    loss = sum(model.fc2(hidden[k * MICRO:(k + 1) * MICRO]
                         ).sum() for k in range(ACCUMULATE)) / ACCUMULATE
    loss.backward()
    with torch.no_grad():
        return {name: p - LR * p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("recompute", [False, True], ids=["stashed", "recomputed"])
def test_recomputed_dropout_uses_the_forward_mask(recompute):
    """The weights after a step are those of the forward pass's masks, with the mask
    stashed and with it recomputed alike."""
    before, x, h, after = train_once(recompute)
    dropped = (h == 0).float().mean().item()
    assert 0.3 < dropped < 0.7  # dropout did drop, about half
    for name, value in expected(before, x, h).items():
        torch.testing.assert_close(after[name], value, rtol=1e-4, atol=1e-5)


def test_recomputed_dropout_is_not_stashed():
    """Without recomputation IPU 0 stashes the mask and fc1's output per micro-batch in
    flight; with it, block A is recomputed from its input, the draw included: only that
    input (4x8 f32) is stashed, for the 2N - 1 = 3 micro-batches in flight (N = 2)."""
    stash = {}
    for recompute in (False, True):
        torch.manual_seed(0)
        model = Dropped()
        opts = poptorch.Options()
        opts.Training.gradientAccumulation(ACCUMULATE)
        opts.setExecutionStrategy(poptorch.PipelinedExecution().useRecomputation(recompute))
        ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=LR))
        ipu.compile(torch.randn(MICRO * ACCUMULATE, 8))
        stash[recompute] = ipu.getMemoryEstimate().ipus[0].peaks["stash"]
        ipu.destroy()
    assert stash[True] == 3 * MICRO * 8 * 4
    assert stash[False] > stash[True]
