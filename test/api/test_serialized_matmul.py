"""poptorch.serializedMatMul (spec 4.6.8): the plain product's result in every mode,
keep_precision's effect on half partial sums, gradients against PyTorch's autograd of
torch.matmul (with replicas and gradient accumulation), PopART's error for a factor
that does not divide, and the machine model's figures: more cycles, a slice's
temporary memory."""

import copy

import pytest
import torch
from numerics import assert_close
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.machine.cost import op_cost

Mode = poptorch.MatMulSerializationMode


class Product(torch.nn.Module):
    def __init__(self, mode, factor=0, keep_precision=False):
        super().__init__()
        self.mode, self.factor, self.keep_precision = mode, factor, keep_precision

    def forward(self, a, b):
        return poptorch.serializedMatMul(a, b, self.mode, self.factor, self.keep_precision)


@pytest.mark.parametrize(("mode", "factor"), [
    (Mode.InputChannels, 4), (Mode.ReducingDim, 3), (Mode.OutputChannels, 8),
    (Mode.Disabled, 0), (Mode.ReducingDim, 1)])
@pytest.mark.parametrize(("lhs", "rhs"), [((8, 12), (12, 16)), ((2, 8, 12), (12, 16)),
                                          ((2, 8, 12), (2, 12, 16))])
def test_result_is_the_plain_matmul(mode, factor, lhs, rhs):
    a, b = torch.randn(lhs), torch.randn(rhs)
    ipu = poptorch.inferenceModel(Product(mode, factor))
    torch.testing.assert_close(ipu(a, b), a @ b, rtol=1e-5, atol=1e-5)
    text = ipu._compiled.module_text
    if mode is Mode.Disabled:
        assert '"ipu.matmul"' in text and '"ipu.serialized_matmul"' not in text
    else:
        assert f'factor = {factor} : i64' in text and f'mode = "{mode.value}"' in text


def test_keep_precision_sums_half_partials_in_float32():
    """Over the reducing dimension, half partial sums round at every addition; fp32
    ones (keep_precision) stay closer to the exact product. Both match the CPU."""
    torch.manual_seed(0)
    a = (torch.rand(4, 4096) + 0.5).half()
    b = (torch.rand(4096, 4) + 0.5).half()
    exact = a.double() @ b.double()
    errors = {}
    for keep in (False, True):
        model = Product(Mode.ReducingDim, 64, keep)
        out = poptorch.inferenceModel(model)(a, b)
        assert out.dtype == torch.float16
        torch.testing.assert_close(out, model(a, b), rtol=0, atol=0)  # as the CPU does it
        errors[keep] = (out.double() - exact).abs().max().item()
    assert errors[True] < errors[False]
    assert errors[False] > 0.5  # 64 half additions of sums near 1e3 (a half ulp is 0.5)


class Layer(torch.nn.Module):
    """A weight used through serializedMatMul (the CPU reference uses torch.matmul)."""

    def __init__(self, mode, factor, serialised=True):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(12, 8) * 0.3)
        self.v = torch.nn.Parameter(torch.randn(8, 4) * 0.3)
        self.mode, self.factor, self.serialised = mode, factor, serialised

    def forward(self, x, y):
        if self.serialised:
            h = torch.tanh(poptorch.serializedMatMul(x, self.w, self.mode, self.factor))
            out = poptorch.serializedMatMul(h, self.v, self.mode, self.factor)
        else:
            out = torch.tanh(x @ self.w) @ self.v
        return out, poptorch.identity_loss((out - y) ** 2, "mean")


@pytest.mark.parametrize("mode", [Mode.InputChannels, Mode.ReducingDim, Mode.OutputChannels])
@pytest.mark.parametrize(("accumulation", "replicas"), [(1, 1), (2, 2)])
def test_training_matches_autograd_of_the_plain_matmul(mode, accumulation, replicas):
    torch.manual_seed(0)
    model = Layer(mode, 4)
    reference = Layer(mode, 4, serialised=False)
    reference.load_state_dict(copy.deepcopy(model.state_dict()))
    opts = poptorch.Options().replicationFactor(replicas)
    opts.Training.gradientAccumulation(accumulation)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1)
    micro = accumulation * replicas
    for _ in range(3):
        x, y = torch.randn(micro * 8, 12), torch.randn(micro * 8, 4)
        ipu(x, y)
        cpu.zero_grad()
        for i in range(micro):
            _, loss = reference(x[8 * i:8 * i + 8], y[8 * i:8 * i + 8])
            (loss / micro).backward()
        cpu.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
    # the gradients are serialised too (PopART's modes for them)
    assert ipu._compiled.module_text.count('"ipu.serialized_matmul"') >= 4


def test_cpu_gradient_is_autograd_of_matmul():
    a = torch.randn(2, 6, 8, requires_grad=True)
    b = torch.randn(8, 4, requires_grad=True)
    for mode in (Mode.InputChannels, Mode.ReducingDim, Mode.OutputChannels):
        ga, gb = torch.autograd.grad(poptorch.serializedMatMul(a, b, mode, 2).sin().sum(),
                                     (a, b))
        ea, eb = torch.autograd.grad((a @ b).sin().sum(), (a, b))
        assert_close(ga, ea, rtol=1e-5, atol=1e-5)
        assert_close(gb, eb, rtol=1e-5, atol=1e-5)


def _raises(fn, message):
    with pytest.raises(poptorch.Error, match=message) as info:
        fn()
    assert info.value.location.startswith(f"{__file__}:"), info.value.location


def test_errors():
    a, b = torch.randn(2, 2), torch.randn(2, 4)
    _raises(lambda: poptorch.serializedMatMul(a, b, Mode.OutputChannels, 3),
            r"Invalid serialisation factor 3 for output channels dim 4\. output_channels dim "
            r"should be a multple of the serialisation factor; pass a factor that divides 4")
    _raises(lambda: poptorch.serializedMatMul(a, b, Mode.InputChannels, 0),
            r"Invalid serialisation factor 0 for input channels dim 2")
    _raises(lambda: poptorch.serializedMatMul(a, b, "reducing_dim", 2),
            r"mode must be a poptorch.MatMulSerializationMode")
    _raises(lambda: poptorch.serializedMatMul(a, b, Mode.ReducingDim, 2.0),
            r"factor must be an int, got 2.0")
    _raises(lambda: poptorch.serializedMatMul(a, b, Mode.ReducingDim, 2, 1),
            r"keep_precision must be a bool, got 1")
    _raises(lambda: poptorch.serializedMatMul(a, b, Mode.Disabled, 2),
            r"factor 2 has no effect with MatMulSerializationMode.Disabled")
    _raises(lambda: poptorch.serializedMatMul(torch.randn(2), b, Mode.ReducingDim, 2),
            r"needs matrices \(rank >= 2\), got shapes \[2\] and \[2, 4\]")


_MODULES = []


def _cost(text: str):
    module = ir.Module.parse(text, make_context())
    _MODULES.append(module)
    op = list(module.body.operations[0].regions[0].blocks[0].operations)[0].operation
    with module.context:
        return op_cost(op)


def _matmul(m, k, n, attrs=""):
    name = "ipu.serialized_matmul" if attrs else "ipu.matmul"
    return _cost(f'func.func @f(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> '
                 f'tensor<{m}x{n}xf32> {{\n  %0 = "{name}"(%a, %b) {attrs} : '
                 f'(tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>\n'
                 f'  return %0 : tensor<{m}x{n}xf32>\n}}')


@pytest.mark.parametrize(("mode", "slice_shape"), [
    ("input_channels", (128, 1024, 1024)), ("output_channels", (512, 1024, 256)),
    ("reducing_dim", (512, 256, 1024))])
def test_machine_model_charges_factor_slices(mode, slice_shape):
    """The serialised product is 4 slices in sequence: 4 times a slice's cycles (plus
    the partial sums over the reducing dimension), and one slice's temporary memory,
    less than the plain product's."""
    attrs = f'{{mode = "{mode}", factor = 4 : i64, keep_precision = false}}'
    serial, plain = _matmul(512, 1024, 1024, attrs), _matmul(512, 1024, 1024)
    one = _matmul(*slice_shape)
    assert serial.temporary_bytes == one.temporary_bytes < plain.temporary_bytes
    assert serial.cycles > plain.cycles
    assert serial.exchange == 4 * one.exchange and serial.sync == 4 * one.sync
    if mode == "reducing_dim":
        assert serial.compute > 4 * one.compute  # and the 3 additions of the partials
    else:
        assert serial.compute == 4 * one.compute


def test_memory_estimate_and_timeline_of_a_model():
    """Through the real pipeline: serialising cuts the IPU's temporary memory and adds
    cycles to its timeline (figures of a 512x1024 @ 1024x1024 f32 product)."""
    a = torch.randn(512, 1024)
    figures = {}
    for mode, factor in ((Mode.Disabled, 0), (Mode.OutputChannels, 4)):
        model = Product(mode, factor)
        ipu = poptorch.inferenceModel(model)
        ipu(a, torch.randn(1024, 1024))
        classes = ipu.getMemoryEstimate().to_dict()["ipus"]["0"]["classes"]
        figures[mode] = (classes["temporary"], ipu.getTimeline().total_cycles)
    assert figures[Mode.OutputChannels][0] < figures[Mode.Disabled][0] / 2
    assert figures[Mode.OutputChannels][1] > figures[Mode.Disabled][1]
