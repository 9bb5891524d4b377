"""trainingModel (spec 4.2.1, 4.6.3): losses, accumulation, replicas, weight syncing."""

import copy

import pytest
import torch

import poptorch


class ExampleModelWithLoss(torch.nn.Module):
    """Spec listing 4.3."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(10, 10)
        self.loss = torch.nn.MSELoss()

    def forward(self, x, target=None):
        fc = self.fc(x)
        if self.training:
            return fc, self.loss(fc, target)
        return fc


def test_spec_training_example():
    torch.manual_seed(0)
    model = ExampleModelWithLoss()
    poptorch_model = poptorch.trainingModel(model)
    input, target = torch.randn(10), torch.randn(10)
    for _ in range(800):
        poptorch_out, loss = poptorch_model(input, target)
    poptorch_model.copyWeightsToHost()
    model.eval()
    native_out = model(input)
    torch.testing.assert_close(native_out, poptorch_out, rtol=1e-04, atol=1e-04)
    assert loss.item() < 1e-3


class Regressor(torch.nn.Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.a, self.b = torch.nn.Linear(6, 8), torch.nn.Linear(8, 2)
        self.reduction = reduction

    def forward(self, x, y):
        out = self.b(torch.tanh(self.a(x)))
        return out, poptorch.identity_loss((out - y) ** 2, self.reduction)


def reference_steps(model, optimizer, batches, accumulation, replicas, mean=True):
    """What N poptorch steps compute, on the CPU: per step, the gradients of every
    micro-batch (accumulation x replicas), averaged (or summed), then one optimizer step."""
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        xs = x.reshape(accumulation, replicas, -1, *x.shape[1:])
        ys = y.reshape(accumulation, replicas, -1, *y.shape[1:])
        for g in range(accumulation):
            for r in range(replicas):
                _, loss = model(xs[g, r], ys[g, r])
                (loss / (accumulation * replicas) if mean else loss).backward()
        losses.append(loss.detach())
        optimizer.step()
    return losses


@pytest.mark.parametrize("accumulation", [1, 4])
@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("reduction", ["Mean", "Sum"])
@pytest.mark.parametrize("strategy", ["Running", "Post"])
def test_accumulation_and_replicas_match_the_cpu(accumulation, replicas, reduction, strategy):
    torch.manual_seed(0)
    model = Regressor()
    reference = copy.deepcopy(model)
    opts = poptorch.Options().replicationFactor(replicas)
    opts.Training.gradientAccumulation(accumulation)
    opts.Training.accumulationAndReplicationReductionType(
        getattr(poptorch.ReductionType, reduction))
    opts.Training.setMeanAccumulationAndReplicationReductionStrategy(
        getattr(poptorch.MeanReductionStrategy, strategy))
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.05,
                                                              momentum=0.9))
    batch = accumulation * replicas * 3
    batches = [(torch.randn(batch, 6), torch.randn(batch, 2)) for _ in range(4)]
    losses = [ipu(x, y)[1] for x, y in batches]
    expected = reference_steps(reference, torch.optim.SGD(reference.parameters(), lr=0.05,
                                                          momentum=0.9),
                               batches, accumulation, replicas, mean=reduction == "Mean")
    torch.testing.assert_close(losses[-1].reshape(-1)[-1], expected[-1], rtol=1e-4, atol=1e-6)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)


def test_identity_loss_reductions_and_combined_losses():
    torch.manual_seed(0)
    for reduction in ("sum", "mean", "none"):
        model = Regressor(reduction)
        reference = copy.deepcopy(model)
        ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(),
                                                                      lr=0.01))
        x, y = torch.randn(4, 6), torch.randn(4, 2)
        ipu(x, y)
        opt = torch.optim.SGD(reference.parameters(), lr=0.01)
        _, loss = reference(x, y)
        loss.backward(torch.ones_like(loss))
        opt.step()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)

    class TwoLosses(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, x):
            out = self.fc(x)
            first = poptorch.identity_loss(out.abs(), "mean")
            return out, poptorch.identity_loss(first + (out ** 2).sum(), "sum")

    poptorch.trainingModel(TwoLosses())(torch.randn(2, 3))


def test_loss_errors():
    class NoLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x)

    with pytest.raises(poptorch.Error, match="Couldn't find a loss in graph"):
        poptorch.trainingModel(NoLoss())(torch.randn(2, 3))

    class Unreachable(NoLoss):
        def forward(self, x):
            out = self.fc(x)
            poptorch.identity_loss(out.abs(), "mean")  # not used by the final loss
            return out, poptorch.identity_loss(out.sum(), "sum")

    with pytest.raises(poptorch.Error, match="not used by the final loss") as err:
        poptorch.trainingModel(Unreachable())(torch.randn(2, 3))
    assert err.value.location.endswith("test_training.py:" + str(
        Unreachable.forward.__code__.co_firstlineno + 2))


def test_batch_must_cover_accumulation():
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(4)
    with pytest.raises(poptorch.Error) as err:
        poptorch.trainingModel(Regressor(), opts)(torch.randn(6, 6), torch.randn(6, 2))
    assert err.value.message == (
        "input 0 has a batch of 6, which is not a multiple of deviceIterations(1) x "
        "replicationFactor(1) / input group size (1) x gradientAccumulation(4) = 4; give a "
        "batch of a multiple of 4")


def test_weights_sync_lazily_and_once():
    torch.manual_seed(0)
    model = Regressor()
    before = model.a.weight.detach().clone()
    training = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(),
                                                                       lr=0.1))
    inference = poptorch.inferenceModel(model)
    weight = model.a.weight  # the tensor itself: reading it through the model syncs
    x, y = torch.randn(4, 6), torch.randn(4, 2)
    training(x, y)
    torch.testing.assert_close(weight.detach(), before)  # not copied yet
    trained, _ = inference(x, y)  # the inference model syncs from the trainer first
    assert not torch.equal(model.a.weight.detach(), before)
    torch.testing.assert_close(trained, model.b(torch.tanh(model.a(x))))
    training(x, y)
    state = model.state_dict()  # reading the state syncs too
    torch.testing.assert_close(state["a.weight"], model.a.weight)
    assert not training.copyWeightsToHostIfNeeded()  # already synced: exactly one copy


def test_frozen_parameters_and_batch_norm_statistics():
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.bn = torch.nn.BatchNorm1d(4)
            self.fc.bias.requires_grad_(False)

        def forward(self, x):
            out = self.bn(self.fc(x))
            return out, out.pow(2).mean()

    model = Model()
    reference = copy.deepcopy(model)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(2)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(
        [p for p in model.parameters() if p.requires_grad], lr=0.1))
    x = torch.randn(8, 4)
    ipu(x)
    ipu.copyWeightsToHost()
    opt = torch.optim.SGD([p for p in reference.parameters() if p.requires_grad], lr=0.1)
    for half in x.reshape(2, 4, 4):
        (reference(half)[1] / 2).backward()
    opt.step()
    torch.testing.assert_close(model.fc.bias, reference.fc.bias)  # never updated
    torch.testing.assert_close(model.fc.weight, reference.fc.weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model.bn.running_mean, reference.bn.running_mean)
    torch.testing.assert_close(model.bn.running_var, reference.bn.running_var)


def test_dropout_trains_with_the_seed():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(200, 200)
            self.drop = torch.nn.Dropout(0.25)

        def forward(self, x):
            out = self.drop(self.fc(x))
            return out, out.pow(2).mean()

    out, _ = poptorch.trainingModel(Model(), poptorch.Options().randomSeed(3))(
        torch.randn(4, 200))
    assert abs((out == 0).float().mean().item() - 0.25) < 0.03


def test_set_optimizer_and_constants():
    torch.manual_seed(0)
    model = Regressor()
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    ipu = poptorch.trainingModel(model, optimizer=optimizer)
    x, y = torch.randn(4, 6), torch.randn(4, 2)
    ipu(x, y)
    for group in optimizer.param_groups:
        group["lr"] = 0.01
    ipu.setOptimizer(optimizer)  # a variable: applies without recompiling
    ipu(x, y)
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.5)
    for lr in (0.1, 0.01):
        for group in cpu.param_groups:
            group["lr"] = lr
        cpu.zero_grad()
        reference(x, y)[1].backward()
        cpu.step()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    for group in optimizer.param_groups:
        group["momentum"] = 0.9  # not at its default when wrapped: a variable
    ipu.setOptimizer(optimizer)
    for group in optimizer.param_groups:
        group["weight_decay"] = 0.1  # left at its default when wrapped: a constant
    with pytest.raises(poptorch.Error, match="weight_decay"):
        ipu.setOptimizer(optimizer)


def test_optimizer_state_dict_reads_the_device():
    torch.manual_seed(0)
    model = Regressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    ipu = poptorch.trainingModel(model, optimizer=optimizer)
    x, y = torch.randn(4, 6), torch.randn(4, 2)
    ipu(x, y)
    ipu(x, y)
    state = optimizer.state_dict()
    assert [s["step"].item() for s in state["state"].values()] == [2.0] * 4
    reference = copy.deepcopy(Regressor())
    reference.load_state_dict(model.state_dict())
    cpu = torch.optim.Adam(reference.parameters(), lr=0.01)
    cpu.load_state_dict(state)
    ipu(x, y)
    cpu.zero_grad()
    reference(x, y)[1].backward()
    cpu.step()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_manual_loss_scaling_keeps_the_trajectory():
    def train(**scaling):
        torch.manual_seed(0)
        model = Regressor()
        optimizer = poptorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **scaling)
        ipu = poptorch.trainingModel(model, optimizer=optimizer)
        for _ in range(5):
            ipu(torch.randn(4, 6), torch.randn(4, 2))
        return [p.detach().clone() for p in model.parameters()]

    plain = train()
    for scaled in (train(loss_scaling=1024.0),
                   train(loss_scaling=128.0, velocity_scaling=64.0, use_combined_accum=True)):
        for p, q in zip(scaled, plain, strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5)


def test_cpu_training_after_wrapping_needs_copy_weights_to_device():
    """Spec 4.2.3: host changes reach a training model only through copyWeightsToDevice."""
    torch.manual_seed(0)
    model = Regressor()
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.0))
    x, y = torch.randn(4, 6), torch.randn(4, 2)
    _, before = ipu(x, y)
    with torch.no_grad():
        model.b.bias.add_(10.0)  # "train" on the CPU
    torch.testing.assert_close(ipu(x, y)[1], before)  # the device still has the old weights
    ipu.copyWeightsToDevice()
    assert ipu(x, y)[1] > before + 10


def test_automatic_loss_scaling():
    def train(auto, scaling=1.0, steps=30, targets=1.0):
        torch.manual_seed(0)
        model = Regressor()
        opts = poptorch.Options()
        opts.Training.setAutomaticLossScaling(auto)
        ipu = poptorch.trainingModel(model, opts, poptorch.optim.SGD(
            model.parameters(), lr=0.01, loss_scaling=scaling))
        for _ in range(steps):
            ipu(torch.randn(4, 6), torch.randn(4, 2) * targets)
        return ipu, [p.detach().clone() for p in model.parameters()]

    _, plain = train(False)
    ipu, auto = train(True)  # grows the scale every 20 good steps, same trajectory
    assert ipu._optimizer_state.auto_scale == 2.0
    for p, q in zip(auto, plain, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    # gradients above 1 overflow float32 at this scale: steps are skipped, the scale halves
    ipu, weights = train(True, scaling=2.0 ** 127, steps=3, targets=100.0)
    assert ipu._optimizer_state.auto_scale < 2.0 ** 127
    assert all(torch.isfinite(w).all() for w in weights)


@pytest.mark.parametrize("replicas", [1, 2])
def test_inputs_that_require_grad(replicas):
    """An input that requires grad (the output of another model, say) is data: it gets no
    gradient (none reaches the host, as in PopTorch) and the weights train as on the CPU.
    Its gradient once crashed the capture ('PlainAOTInput' object has no attribute
    'target')."""
    torch.manual_seed(0)
    model = Regressor()
    reference = copy.deepcopy(model)
    opts = poptorch.Options().replicationFactor(replicas)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.05))
    x, y = torch.randn(4 * replicas, 6, requires_grad=True), torch.randn(4 * replicas, 2)
    ipu(x, y)
    assert x.grad is None
    reference_steps(reference, torch.optim.SGD(reference.parameters(), lr=0.05),
                    [(x.detach(), y)], 1, replicas)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


