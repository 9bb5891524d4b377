"""nn.CTCLoss, computed in tensor ops at capture (poptorch/_frontend/ctc_loss.py), with
PopTorch's limitations: reduction 'sum' or 'mean', 2-D padded targets."""

import copy

import pytest
import torch

import poptorch


class Speech(torch.nn.Module):
    """Frames -> per-frame class log-probabilities -> CTC loss against padded targets."""

    def __init__(self, reduction="mean", zero_infinity=False):
        super().__init__()
        self.project = torch.nn.Linear(4, 5)
        self.loss = torch.nn.CTCLoss(blank=0, reduction=reduction,
                                     zero_infinity=zero_infinity)

    def forward(self, frames, targets, input_lengths, target_lengths):
        log_probs = self.project(frames).log_softmax(2)
        return self.loss(log_probs, targets, input_lengths, target_lengths)


def inputs(target_dims=2):
    torch.manual_seed(0)
    frames = torch.randn(8, 2, 4)  # (T, N, features)
    targets = torch.tensor([[1, 2, 2], [3, 4, 0]])
    if target_dims == 1:
        targets = torch.tensor([1, 2, 2, 3, 4])
    return frames, targets, torch.tensor([8, 6]), torch.tensor([3, 2])


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_ctc_loss_trains_as_pytorch(reduction):
    """The loss and one SGD step match PyTorch's (whose gradient is the one with respect
    to log_softmax's logits), with lengths shorter than the padded sizes."""
    torch.manual_seed(0)
    model = Speech(reduction)
    reference = copy.deepcopy(model)
    args = inputs()
    torch.testing.assert_close(poptorch.inferenceModel(model)(*args), reference(*args),
                               rtol=1e-5, atol=1e-5)
    training = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(),
                                                                       lr=0.5))
    loss = training(*args)
    training.copyWeightsToHost()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    expected = reference(*args)
    expected.backward()
    optimizer.step()
    torch.testing.assert_close(loss, expected.detach(), rtol=1e-5, atol=1e-5)
    for actual, wanted in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(actual.detach(), wanted.detach(), rtol=1e-4, atol=1e-5)


def test_ctc_loss_impossible_alignment_is_zero_with_zero_infinity():
    """Targets longer than the input fit no alignment: inf, or 0 with zero_infinity."""
    frames, targets, _, target_lengths = inputs()
    short = torch.tensor([2, 6])
    assert torch.isinf(poptorch.inferenceModel(Speech("sum"))(frames, targets, short,
                                                              target_lengths))
    model = Speech("sum", zero_infinity=True)
    torch.testing.assert_close(poptorch.inferenceModel(model)(frames, targets, short,
                                                              target_lengths),
                               copy.deepcopy(model)(frames, targets, short, target_lengths),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction, target_dims, message", [
    ("none", 2, "CTCLoss with reduction='none' is not supported, as in PopTorch: use "
     "reduction='sum' or 'mean'"),
    ("mean", 1, "CTCLoss needs batched (T, N, C) log_probs and 2-D (N, S) targets (stacked "
     "and padded), as in PopTorch; got log_probs of 3 dims and targets of 1: pad the "
     "concatenated targets to (N, S)"),
])
def test_ctc_loss_poptorch_refuses(reduction, target_dims, message):
    with pytest.raises(poptorch.Error, match=message.replace("(", r"\(").replace(")", r"\)")
                       ) as caught:
        poptorch.inferenceModel(Speech(reduction))(*inputs(target_dims))
    line = Speech.forward.__code__.co_firstlineno + 2
    assert caught.value.location.endswith(f"test_ctc_loss.py:{line}")
