"""Parameters updated in place in forward (spec 4.8): PopTorch updates parameters and
buffers alike in place on the device (its `update_param_inplace`), so a parameter the
model changes keeps its new value between calls, as on the CPU."""

import copy

import pytest
import torch

import poptorch


class Shrinking(torch.nn.Module):
    """Halves its weight before using it and counts its calls."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.register_buffer("n", torch.zeros(()))

    def forward(self, x):
        with torch.no_grad():
            self.lin.weight.mul_(0.5)
        self.n += 1
        return self.lin(x).sum()


@pytest.mark.parametrize("iterations", [1, 3])
def test_inference_parameter_updated_in_place_matches_the_cpu(iterations):
    torch.manual_seed(0)
    model = Shrinking()
    reference = copy.deepcopy(model)
    initial = model.lin.weight.detach().clone()
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(iterations))
    for _ in range(3):
        x = torch.randn(iterations, 2)
        with torch.no_grad():
            expected = torch.stack([reference(row[None]) for row in x])
        torch.testing.assert_close(ipu(x).reshape(-1), expected)
    # spec 4.8: an inference model's updates reach the host by copyWeightsToHost
    torch.testing.assert_close(model.lin.weight.detach(), initial)
    ipu.copyWeightsToHost()
    torch.testing.assert_close(model.lin.weight, reference.lin.weight)
    torch.testing.assert_close(model.n, reference.n)
    assert model.n.item() == 3 * iterations


def test_inference_parameter_update_is_read_through_the_wrapper():
    torch.manual_seed(0)
    model = Shrinking()
    reference = copy.deepcopy(model)
    ipu = poptorch.inferenceModel(model)
    x = torch.randn(1, 2)
    for _ in range(3):
        ipu(x)
        with torch.no_grad():
            reference(x)
    torch.testing.assert_close(ipu.lin.weight, reference.lin.weight)  # the device's value
    torch.testing.assert_close(ipu.n, reference.n)
    torch.testing.assert_close(model.lin.weight, reference.lin.weight)  # written back


class ShrinkingRegressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("n", torch.zeros(()))

    def forward(self, x, t):
        with torch.no_grad():
            self.lin.weight.mul_(0.9)
        self.n += 1
        y = self.lin(x)
        return y, torch.nn.functional.mse_loss(y, t)


OPTIMIZERS = {"SGD": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
              "Adam": lambda params: torch.optim.Adam(params, lr=0.05)}


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("accumulation", [1, 2])
def test_training_parameter_updated_in_place_matches_the_cpu(optimizer, accumulation):
    """The optimizer steps the updated value with the gradient taken at it, as autograd
    on the CPU does; each micro-batch sees the previous one's update."""
    torch.manual_seed(0)
    model = ShrinkingRegressor()
    reference = copy.deepcopy(model)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(accumulation)
    ipu = poptorch.trainingModel(model, opts, OPTIMIZERS[optimizer](model.parameters()))
    cpu_optimizer = OPTIMIZERS[optimizer](reference.parameters())
    for _ in range(3):
        x, t = torch.randn(2 * accumulation, 3), torch.randn(2 * accumulation, 2)
        _, loss = ipu(x, t)
        cpu_optimizer.zero_grad()
        for xs, ts in zip(x.chunk(accumulation), t.chunk(accumulation), strict=True):
            _, expected = reference(xs, ts)
            (expected / accumulation).backward()
        cpu_optimizer.step()
        torch.testing.assert_close(loss.reshape(-1)[-1], expected.detach())
    torch.testing.assert_close(ipu.lin.weight, reference.lin.weight)  # through the wrapper
    ipu.copyWeightsToHost()
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value, msg=name)


class PipelinedShrinking(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Linear(3, 2)

    def forward(self, x, t):
        with poptorch.Block("A", ipu_id=0):
            h = torch.tanh(self.a(x))
        with poptorch.Block("B", ipu_id=1):
            with torch.no_grad():
                self.b.weight.mul_(0.9)
            y = self.b(h)
            loss = torch.nn.functional.mse_loss(y, t)
        return y, loss


def test_pipelined_training_parameter_updated_in_place_matches_the_cpu():
    torch.manual_seed(0)
    model = PipelinedShrinking()
    reference = copy.deepcopy(model)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(4)
    opts.setExecutionStrategy(poptorch.PipelinedExecution("A", "B"))
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    cpu_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        x, t = torch.randn(8, 3), torch.randn(8, 2)
        ipu(x, t)
        cpu_optimizer.zero_grad()
        for xs, ts in zip(x.chunk(4), t.chunk(4), strict=True):
            (reference(xs, ts)[1] / 4).backward()
        cpu_optimizer.step()
    ipu.copyWeightsToHost()
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value, msg=name)
