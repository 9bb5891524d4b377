"""Precision options (spec 11 `_PrecisionOptions`, `setAutomaticLossScaling`,
`enableStableNorm`, 4.x "Half / float16 support"): each option's effect on the numbers."""

import torch

import poptorch


class HalfRegressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 2)

    def forward(self, x, y):
        out = self.fc(x)
        return out, torch.nn.functional.mse_loss(out, y)


def test_automatic_loss_scaling_recovers_from_fp16_overflow():
    """A manual loss scaling of 60000 overflows this fp16 model's gradients: automatic
    loss scaling skips those steps and halves the scale until they fit; the weights stay
    finite and the model trains (it once multiplied fp16 gradients back up to the manual
    scale, writing inf into the weights)."""
    torch.manual_seed(0)
    model = HalfRegressor().half()
    opts = poptorch.Options()
    opts.Training.setAutomaticLossScaling(True)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.001, loss_scaling=60000.0)
    ipu = poptorch.trainingModel(model, opts, optimizer)
    x, y = torch.randn(16, 6).half() * 10, torch.randn(16, 2).half() * 10
    scales, losses = [], []
    for _ in range(40):
        _, loss = ipu(x, y)
        losses.append(float(loss))
        scales.append(float(optimizer.state_dict()["ipu_state"]["automatic_loss_scaling.scale"]))
        assert all(torch.isfinite(p).all() for p in model.parameters())
    assert scales[0] == 30000.0  # the first step overflowed
    assert scales[-1] < 60000.0 / 16
    assert any(b == 2 * a for a, b in zip(scales, scales[1:], strict=False))
    assert losses[-1] < 0.7 * losses[0]  # training progresses
    # without automatic loss scaling, the same run writes inf or NaN into the weights
    torch.manual_seed(0)
    model = HalfRegressor().half()
    ipu = poptorch.trainingModel(model, poptorch.Options(), poptorch.optim.SGD(
        model.parameters(), lr=0.001, loss_scaling=60000.0))
    ipu(x, y)
    assert not all(torch.isfinite(p).all() for p in model.parameters())
