"""Precision options (spec 11 `_PrecisionOptions`, `setAutomaticLossScaling`,
`enableStableNorm`, 4.x "Half / float16 support"): each option's effect on the numbers."""

import copy

import numpy as np
import pytest
import torch
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.machine.cost import op_cost


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


class Exp(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return torch.exp(y) + 1  # the exp overflows float32 at x = 100


class Div(torch.nn.Module):
    def forward(self, x, y):
        return torch.log(x) / y


def test_floating_point_exceptions_off_carries_inf():
    out = poptorch.inferenceModel(Exp())(torch.tensor([1.0, 100.0]))
    assert torch.isinf(out[1])
    torch.testing.assert_close(out[0], torch.exp(torch.tensor(2.0)) + 1)


@pytest.mark.parametrize(("model", "inputs", "kind", "op", "line"), [
    (Exp, (torch.tensor([1.0, 100.0]),), "overflow", "ipu.exp", "torch.exp(y)"),
    (Div, (torch.tensor([2.0]), torch.tensor([0.0])), "divide by zero", "ipu.div",
     "torch.log(x) / y"),
    (Div, (torch.tensor([-2.0]), torch.tensor([1.0])), "invalid operation", "ipu.log",
     "torch.log(x) / y"),
])
def test_floating_point_exceptions_name_the_first_op(model, inputs, kind, op, line):
    """The op that first turns finite operands into inf or NaN, at the user's line; the
    ops after it, which only carry it, are not blamed."""
    opts = poptorch.Options()
    opts.Precision.enableFloatingPointExceptions(True)
    ipu = poptorch.inferenceModel(model(), opts)
    with pytest.raises(poptorch.Error) as info:
        ipu(*inputs)
    message = str(info.value)
    assert f"floating-point exception ({kind}): {op} produced" in message
    path, lineno = message.split(": floating-point")[0].rsplit(":", 1)
    assert path == __file__
    with open(__file__, encoding="utf-8") as f:
        assert line in f.read().splitlines()[int(lineno) - 1]


def test_floating_point_exceptions_in_training():
    """The backward pass is trapped too: a gradient overflowing fp16."""
    torch.manual_seed(0)
    model = HalfRegressor().half()
    opts = poptorch.Options()
    opts.Precision.enableFloatingPointExceptions(True)
    ipu = poptorch.trainingModel(model, opts, poptorch.optim.SGD(
        model.parameters(), lr=0.001, loss_scaling=60000.0))
    with pytest.raises(poptorch.Error, match=r"floating-point exception \(overflow\)"):
        ipu(torch.randn(16, 6).half() * 10, torch.randn(16, 2).half() * 10)


class ToHalf(torch.nn.Module):
    def forward(self, x):
        return x.half()


def _rounded(seed, stochastic=True, n=200_000):
    opts = poptorch.Options().randomSeed(seed)
    opts.Precision.enableStochasticRounding(stochastic)
    # 1 + 0.1 ulp of f16 (ulp 2^-10 at 1): to nearest always 1
    return poptorch.inferenceModel(ToHalf(), opts)(torch.full((n,), 1 + 0.1 * 2.0 ** -10))


def test_stochastic_rounding_is_unbiased_and_seeded():
    exact = 1 + 0.1 * 2.0 ** -10
    nearest, a, b, c = _rounded(1, False), _rounded(1), _rounded(1), _rounded(2)
    assert nearest.dtype == a.dtype == torch.float16
    assert (nearest == 1).all()  # round to nearest: biased by -0.1 ulp
    # up with probability 0.1: the mean is exact within 5 standard errors
    error = 5 * 2.0 ** -10 * np.sqrt(0.1 * 0.9 / a.numel())
    assert abs(a.double().mean().item() - exact) < error
    assert set(a.unique().tolist()) == {1.0, 1 + 2.0 ** -10}
    assert torch.equal(a, b)  # the same seed, the same rounding
    assert not torch.equal(a, c)


def test_stochastic_rounding_moves_tiny_fp16_updates():
    """An fp16 SGD update of a tenth of an ulp: round-to-nearest loses every one, the
    weight never moves; stochastic rounding moves it by the right amount on average."""

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4096, dtype=torch.float16))

        def forward(self, x):
            return (self.w * x).sum()  # d loss / d w = x

    def train(stochastic, steps=10):
        model = Scale()
        opts = poptorch.Options().randomSeed(0)
        opts.Precision.enableStochasticRounding(stochastic)
        lr = 0.1 * 2.0 ** -11  # a tenth of an ulp below 1 (2^-11) per step
        ipu = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=lr))
        x = torch.ones(4096, dtype=torch.float16)
        for _ in range(steps):
            ipu(x)
        return model.w.detach().double()

    assert (train(False) == 1).all()
    moved = 1 - train(True).mean().item()  # expected 10 x 0.1 x 2^-11
    assert moved == pytest.approx(2.0 ** -11, rel=0.1)


class NormRegressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 64)
        self.ln = torch.nn.LayerNorm(64)

    def forward(self, x, y):
        out = self.ln(self.fc(x))
        return out, torch.nn.functional.mse_loss(out, y)


def _large_mean(n=8):
    torch.manual_seed(0)
    return 1000 + torch.randn(n, 64) * 0.1  # a variance of 0.01 under a mean of 1000


@pytest.mark.parametrize("norm", [torch.nn.LayerNorm(64), torch.nn.GroupNorm(4, 64)])
def test_stable_norm_on_a_large_mean(norm):
    """enableStableNorm(True) computes the variance in two passes (about the mean) and
    matches PyTorch; off (PopTorch's default), E[x^2] - E[x]^2 in float32 loses the
    0.01 variance under a squared mean of 1e6 (ulp 0.06): NaN or far off."""
    x = _large_mean()
    expected = norm(x)
    stable = poptorch.inferenceModel(norm, poptorch.Options().enableStableNorm(True))(x)
    torch.testing.assert_close(stable, expected, rtol=0, atol=5e-3)
    plain = poptorch.inferenceModel(norm, poptorch.Options().enableStableNorm(False))(x)
    assert not torch.isfinite(plain).all() or (plain - expected).abs().max() > 0.5
    # around zero both match PyTorch
    centred = x - 1000
    plain = poptorch.inferenceModel(norm, poptorch.Options())(centred)
    torch.testing.assert_close(plain, norm(centred), rtol=1e-4, atol=1e-4)


def test_stable_norm_batch_norm_training():
    """BatchNorm's batch statistics in training: the same difference."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(64)

        def forward(self, x):
            out = self.bn(x)
            return out, out.square().mean()

    x = _large_mean(16)
    reference = Net()
    expected, _ = reference(x)
    for stable in (True, False):
        model = Net()
        out, _ = poptorch.trainingModel(model, poptorch.Options().enableStableNorm(stable))(x)
        if stable:
            torch.testing.assert_close(out, expected, rtol=0, atol=5e-3)
        else:
            assert not torch.isfinite(out).all() or (out - expected).abs().max() > 0.5


def test_stable_norm_pipelined_over_two_ipus():
    """The rewritten variance keeps its block: the LayerNorm on IPU 1 of a 2-stage
    pipeline trains with gradient accumulation as on the CPU (stable) or not (plain)."""
    torch.manual_seed(0)
    x, y = _large_mean(16), torch.randn(16, 64)
    for stable in (True, False):
        model = NormRegressor()
        with torch.no_grad():  # the LayerNorm sees x itself
            model.fc.weight.copy_(torch.eye(64))
            model.fc.bias.zero_()
        reference = copy.deepcopy(model)
        model.ln = poptorch.BeginBlock(model.ln, ipu_id=1)
        opts = poptorch.Options().enableStableNorm(stable)
        opts.Training.gradientAccumulation(4)
        ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.0))
        out, _ = ipu(x, y)
        assert ipu._compiled.module_text.count("call @main_stage") >= 2
        expected = reference(x, y)[0][-len(out):]  # the last micro-batch's
        close = torch.isfinite(out).all() and (out - expected).abs().max() < 5e-3
        assert close == stable


class LongDot(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(4096, 8).half())

    def forward(self, x):
        return x @ self.w


@pytest.mark.parametrize("partials", [None, torch.float, torch.half])
def test_partials_type_numerics(partials):
    """fp16 matmul partials: the running sum of 4096 products (about 1000, ulp 0.5 to 1)
    kept in fp16 is visibly less accurate than in fp32 (the default)."""
    torch.manual_seed(0)
    model, x = LongDot(), torch.rand(4, 4096).half()
    opts = poptorch.Options()
    if partials is not None:
        opts.Precision.setPartialsType(partials)
    ipu = poptorch.inferenceModel(model, opts)
    out = ipu(x)
    exact = x.double() @ model.w.double()
    error = ((out.double() - exact).abs() / exact).max().item()
    if partials is torch.half:
        assert error > 2e-3
        assert "ipu.partials_type = f16" in ipu._compiled.module_text
    else:
        assert error < 1e-3  # fp16 rounding of the result only
        assert ("ipu.partials_type = f32" in ipu._compiled.module_text) == (partials is not None)
    training = poptorch.trainingModel(HalfRegressor().half(), opts)  # the backward's too
    training.compile(torch.rand(4, 6).half(), torch.rand(4, 2).half())
    assert ("ipu.partials_type" in training._compiled.module_text) == (partials is not None)


def test_partials_type_cost():
    """Half partials halve the bytes of the partial sums a K-split AMP op exchanges and
    keeps, and their sum runs at the half vector width: fewer cycles."""
    shapes = "(tensor<16x65536xf16>, tensor<65536x16xf16>) -> tensor<16x16xf16>"
    module = ir.Module.parse(f"""
func.func @main(%a: tensor<16x65536xf16>, %b: tensor<65536x16xf16>) {{
  %0 = "ipu.matmul"(%a, %b) : {shapes}
  %1 = "ipu.matmul"(%a, %b) {{ipu.partials_type = f32}} : {shapes}
  %2 = "ipu.matmul"(%a, %b) {{ipu.partials_type = f16}} : {shapes}
  return
}}""", make_context())
    plain, single, half = [op_cost(op) for op in
                           list(module.body.operations[0].regions[0].blocks[0].operations)[:3]]
    assert plain == single
    assert half.compute < plain.compute and half.exchange < plain.exchange
    assert half.temporary_bytes < plain.temporary_bytes


def test_float32_linear_on_float16_input_inference():
    """Spec 4.7 (listing 4.20, second way): float32 parameters are converted to float16
    for an op with a float16 input, so the Linear returns float16."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4).half()
    out = poptorch.inferenceModel(model)(x)
    assert out.dtype == torch.float16
    expected = torch.nn.functional.linear(x.float(), model.weight.half().float(),
                                          model.bias.half().float())
    torch.testing.assert_close(out.float(), expected, rtol=1e-3, atol=1e-3)
    # other ops keep PyTorch's promotion: float16 + float32 is float32
    mixed = poptorch.inferenceModel(Adder())(x, torch.ones(2, 4))
    assert mixed.dtype == torch.float32


class Adder(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class MixedRegressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 2)  # float32 parameters

    def forward(self, x, y):
        out = self.fc(x)
        return out, torch.nn.functional.mse_loss(out, y)


@pytest.mark.parametrize("replicas", [1, 2])
def test_float32_linear_on_float16_input_training(replicas):
    """The parameters stay float32 and are updated in float32 (the gradient flows through
    the cast), with device iterations and replicas; the outputs are float16."""
    torch.manual_seed(0)
    model = MixedRegressor()
    reference = copy.deepcopy(model)
    opts = poptorch.Options().deviceIterations(2).replicationFactor(replicas)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    x, y = torch.randn(8 * replicas, 6).half(), torch.randn(8 * replicas, 2).half()
    out, loss = ipu(x, y)
    assert out.dtype == loss.dtype == torch.float16
    assert model.fc.weight.dtype == torch.float32
    assert not torch.equal(model.fc.weight, reference.fc.weight)  # trained
    # the same steps on the CPU: each half of the batch, one step each
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for chunk_x, chunk_y in zip(x.chunk(2), y.chunk(2), strict=True):
        optimizer.zero_grad()
        out = torch.nn.functional.linear(chunk_x, reference.fc.weight.half(),
                                         reference.fc.bias.half())
        torch.nn.functional.mse_loss(out.float(), chunk_y.float()).backward()
        optimizer.step()
    torch.testing.assert_close(model.fc.weight, reference.fc.weight, rtol=1e-2, atol=1e-3)


def test_half_float_casting():
    """HalfUpcastToFloat (and Default) is PyTorch's promotion, what runs; the removed
    FloatDowncastToHalf is refused when the model compiles, saying what to do."""
    x, y = torch.ones(2, 4).half(), torch.ones(2, 4)
    for behaviour in (poptorch.HalfFloatCastingBehavior.Default,
                      poptorch.HalfFloatCastingBehavior.HalfUpcastToFloat):
        opts = poptorch.Options()
        opts.Precision.halfFloatCasting(behaviour)
        assert poptorch.inferenceModel(Adder(), opts)(x, y).dtype == torch.float32
    opts = poptorch.Options()
    opts.Precision.halfFloatCasting(poptorch.HalfFloatCastingBehavior.FloatDowncastToHalf)
    with pytest.raises(poptorch.Error, match=r"^Precision.halfFloatCasting\(FloatDowncastToHalf"
                       r"\) is not supported: PopTorch follows PyTorch's type promotion"):
        poptorch.inferenceModel(Adder(), opts)(x, y)


class HalfBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.bn = torch.nn.BatchNorm1d(8)

    def forward(self, x):
        out = self.bn(self.fc(x))
        return out, out.float().square().mean()


def test_running_statistics_always_float():
    """False (PyTorch's behaviour) keeps the statistics in their buffers' dtype; True is
    refused with the way to get float32 statistics, which this test follows: a float32
    BatchNorm in a float16 model trains with float32 running statistics."""
    torch.manual_seed(0)
    x = torch.randn(16, 8).half()
    opts = poptorch.Options()
    opts.Precision.runningStatisticsAlwaysFloat(True)
    with pytest.raises(poptorch.Error, match=r"runningStatisticsAlwaysFloat\(True\) is not "
                       r"supported: .* keep the batch-norm layer in float32"):
        poptorch.trainingModel(HalfBatchNorm().half(), opts)(x)
    for keep_float in (False, True):
        model = HalfBatchNorm().half()
        if keep_float:
            model.bn.float()
        opts = poptorch.Options()
        opts.Precision.runningStatisticsAlwaysFloat(False)
        ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.0))
        out, _ = ipu(x)
        ipu.copyWeightsToHost()
        assert out.dtype == torch.float16
        dtype = torch.float32 if keep_float else torch.float16
        assert model.bn.running_mean.dtype == model.bn.running_var.dtype == dtype
        batch = model.fc(x).float()
        torch.testing.assert_close(model.bn.running_mean.float(), 0.1 * batch.mean(0),
                                   rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("partials", [None, torch.half])
def test_partials_type_convolution(partials):
    """A convolution summing 256 x 9 products (about 600) in fp16 partials."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(256, 4, 3, bias=False).half()
    with torch.no_grad():
        conv.weight.uniform_(0, 1)
    x = torch.rand(1, 256, 6, 6).half()
    opts = poptorch.Options()
    if partials is not None:
        opts.Precision.setPartialsType(partials)
    out = poptorch.inferenceModel(conv, opts)(x)
    exact = torch.nn.functional.conv2d(x.double(), conv.weight.double())
    error = ((out.double() - exact).abs() / exact).max().item()
    assert (error > 2e-3) == (partials is torch.half)
    assert error < 1e-2


class TwoStages(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = poptorch.BeginBlock(torch.nn.Linear(4, 4), ipu_id=1)

    def forward(self, x):
        h = self.b(self.a(x))
        return h * 1e30  # overflows float32 on IPU 1


def test_floating_point_exceptions_pipelined_with_replicas():
    """In a stage on IPU 1 of a pipelined model, with replicas and device iterations."""
    torch.manual_seed(0)
    opts = poptorch.Options().deviceIterations(2).replicationFactor(2)
    opts.Precision.enableFloatingPointExceptions(True)
    ipu = poptorch.inferenceModel(TwoStages(), opts)
    x = torch.randn(8, 4)
    with pytest.raises(poptorch.Error, match=r"test_precision.py:\d+: floating-point exception "
                       r"\(overflow\): ipu.mul produced inf"):
        ipu(x * 1e10)
    assert ipu._compiled.module_text.count("call @main_stage") == 2


def test_automatic_loss_scaling_with_accumulation_and_replicas():
    """The scale halves on the overflowing first step also when the gradients are
    accumulated over micro-batches and reduced over replicas; weights stay finite."""
    torch.manual_seed(0)
    model = HalfRegressor().half()
    opts = poptorch.Options().replicationFactor(2)
    opts.Training.gradientAccumulation(2)
    opts.Training.setAutomaticLossScaling(True)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.001, loss_scaling=60000.0)
    ipu = poptorch.trainingModel(model, opts, optimizer)
    x, y = torch.randn(16, 6).half() * 10, torch.randn(16, 2).half() * 10
    for _ in range(8):
        ipu(x, y)
        assert all(torch.isfinite(p).all() for p in model.parameters())
    scale = float(optimizer.state_dict()["ipu_state"]["automatic_loss_scaling.scale"])
    assert scale < 60000.0 / 8
