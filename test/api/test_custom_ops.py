"""poptorch.custom_op (spec 4.9, listings 4.24-4.26, Table 4.1) with implementations
registered from Python (poptorch.register_custom_op): the spec's ops as NumPy versions
of PopTorch's tests/custom_ops/*.cpp, in inference and training, with device
iterations, replicas and a pipeline; the registered cost in the machine model; errors.
"""

import numpy as np
import pytest
import torch
from numerics import assert_close, check
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.machine.cost import op_cost
from poptorch.runtime.user_code import CUSTOM_OPS


def cube(x, bias):
    """custom_cube_op.cpp: (x^3 + bias, x^3)."""
    return [x * x * x + bias, x * x * x]


def cube_grad(grads, inputs, outputs):
    x, _ = inputs
    g0, g1 = grads
    return [3 * x * x * (g0 + g1), g0]


def leaky_relu(x, alpha):
    """custom_leaky_relu_op.cpp: x where x >= 0, else alpha * x."""
    return np.where(x >= 0, x, np.float32(alpha) * x).astype(x.dtype)


# listing 4.26's attributes; custom_many_attribute_op.cpp adds 1 when all arrive intact
MANY = {"float_one": 1.0, "float_minus_two": -2.0, "int_zero": 0, "int_minus_five": -5,
        "floats_one_two_three": [1.0, 2.0, 3.0],
        "floats_minus_one_two_three": [-1.0, -2.0, -3.0], "ints_one_two_three": [1, 2, 3],
        "ints_minus_one_two_three": [-1, -2, -3],
        "a_string": "string with quotes and slash \" ' \\ end", "strs": ["abc", "def", "ghi"]}


def many_attributes(x, **attributes):
    typed = all(type(attributes[k]) is type(v) and
                (not isinstance(v, list) or all(type(a) is type(b) for a, b in
                                                zip(attributes[k], v, strict=True)))
                for k, v in MANY.items())
    return x + 1 if typed and attributes == MANY else x


@pytest.fixture(autouse=True)
def registered():
    poptorch.register_custom_op("Cube", "com.acme", 1, forward=cube, backward=cube_grad)
    poptorch.register_custom_op("LeakyRelu", "com.acme", 1, forward=leaky_relu)
    poptorch.register_custom_op("ManyAttributeOp", "test.poptorch", 1,
                                forward=many_attributes)
    yield
    CUSTOM_OPS.clear()


class BasicNetwork(torch.nn.Module):  # listing 4.24
    def forward(self, x, bias):
        x, y = poptorch.custom_op([x, bias], "Cube", "com.acme", 1, example_outputs=[x, x])
        return x, y


def test_listing_4_24_inference():
    out = poptorch.inferenceModel(BasicNetwork())(torch.full((1, 8), 2.0),
                                                   torch.full((1, 8), 4.0))
    assert_close(out, (torch.full((1, 8), 12.0), torch.full((1, 8), 8.0)))
    check(BasicNetwork(), torch.randn(3, 8), torch.randn(8))


def test_listing_4_25_attribute():
    class Model(torch.nn.Module):
        def forward(self, x):
            x = poptorch.custom_op([x], "LeakyRelu", "com.acme", 1, example_outputs=[x],
                                   attributes={"alpha": 0.02})
            return x[0]

    out = poptorch.inferenceModel(Model())(torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0]))
    assert_close(out, torch.tensor([-0.02, -0.01, 0.0, 0.5, 1.0]))


def test_floats_are_float32_on_the_cpu_as_in_the_program():
    seen = []

    def scale(x, factor, factors):
        seen.append((factor, factors))
        return x * np.float32(factor)

    poptorch.register_custom_op("Scale", "com.acme", 1, forward=scale)

    def forward(x):
        return poptorch.custom_op([x], "Scale", "com.acme", 1, example_outputs=[x],
                                  attributes={"factor": 0.1, "factors": (0.1, 2.0)})[0]

    check(forward, torch.randn(4))
    tenth = float(np.float32(0.1))
    assert seen == [(tenth, [tenth, 2.0])] * 2  # on the CPU, then in the program


def test_listing_4_26_many_attribute_types():
    class Model(torch.nn.Module):
        def forward(self, x):
            x = poptorch.custom_op([x], "ManyAttributeOp", "test.poptorch", 1,
                                   example_outputs=[x], attributes=dict(MANY))
            return x[0]

    x = torch.randn(2, 3)
    assert_close(poptorch.inferenceModel(Model())(x), x + 1)


class Trained(torch.nn.Module):  # PopTorch's test_training_both_sides
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.Linear(6, 6), torch.nn.Linear(6, 4)

    def forward(self, x, bias, target):
        x, y = poptorch.custom_op([self.ln1(x), bias], "Cube", "com.acme", 1,
                                  example_outputs=[x, x])
        out = torch.log_softmax(self.ln2(x), 1)
        loss = torch.nn.functional.nll_loss(out, target) + torch.sum(y) * 0.0001
        return out, loss


def test_training_calls_the_registered_gradient():
    torch.manual_seed(0)
    model, reference = Trained(), Trained()
    reference.load_state_dict(model.state_dict())
    x, bias, target = torch.rand(3, 6), torch.full((3, 6), 0.5), torch.tensor([1, 0, 3])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    _, loss = trainer(x, bias, target)
    cpu_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    _, cpu_loss = reference(x, bias, target)  # the custom op's NumPy code on the CPU
    cpu_loss.backward()
    cpu_optimizer.step()
    torch.testing.assert_close(loss, cpu_loss.detach())
    trainer.copyWeightsToHost()
    torch.testing.assert_close(model.ln1.weight, reference.ln1.weight)  # through the op
    assert not torch.equal(model.ln1.weight, Trained().ln1.weight)


def test_cpu_gradient_matches_torch_autograd():
    x = torch.randn(2, 3, requires_grad=True)
    bias = torch.randn(2, 3, requires_grad=True)
    a, b = poptorch.custom_op([x, bias], "Cube", "com.acme", 1, example_outputs=[x, x])
    (a.sum() + 2 * b.sum()).backward()
    x2, bias2 = x.detach().requires_grad_(), bias.detach().requires_grad_()
    ((x2 ** 3 + bias2).sum() + 2 * (x2 ** 3).sum()).backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(bias.grad, bias2.grad)


def test_training_without_a_gradient_is_an_error():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = poptorch.custom_op([self.fc(x)], "LeakyRelu", "com.acme", 1,
                                   example_outputs=[x], attributes={"alpha": 0.1})[0]
            return y, poptorch.identity_loss(y.sum(), "none")

    with pytest.raises(poptorch.Error, match=r"custom op 'LeakyRelu' \(domain 'com.acme', "
                       r"version 1\) has no gradient, so a training model cannot use it: "
                       r"register one with poptorch.register_custom_op\('LeakyRelu'"):
        poptorch.trainingModel(Model())(torch.randn(2, 4))


def test_device_iterations_replicas_and_a_pipeline():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            with poptorch.Block(ipu_id=0):
                x = self.fc(x)
            with poptorch.Block(ipu_id=1):
                x = poptorch.custom_op([x], "LeakyRelu", "com.acme", 1,
                                       example_outputs=[x], attributes={"alpha": 0.1})[0]
            return x

    model = Model()
    x = torch.randn(12, 4)
    expected = torch.nn.functional.leaky_relu(model.fc(x), 0.1).detach()
    options = poptorch.Options().deviceIterations(3).replicationFactor(2)
    options.setExecutionStrategy(poptorch.PipelinedExecution())
    assert_close(poptorch.inferenceModel(model, options)(x), expected)


def test_unregistered_op_says_how_to_register_it():
    def forward(x):
        return poptorch.custom_op([x], "Gelu", "org.me", 2, example_outputs=[x])  # line

    with pytest.raises(poptorch.Error) as err:
        check(forward, torch.randn(3))
    assert err.value.message.startswith(
        "custom op 'Gelu' (domain 'org.me', version 2) is not registered in this process: "
        "register its implementation with poptorch.register_custom_op('Gelu', 'org.me', 2, "
        "forward=")
    assert err.value.location.endswith(f"test_custom_ops.py:{forward.__code__.co_firstlineno + 1}")


@pytest.mark.parametrize(("returned", "detail"), [
    (lambda x: x[:2], "output 0 of shape [2] and dtype float32; expected shape [3] and dtype "
                      "float32"),
    (lambda x: x.astype(np.int32), "output 0 of shape [3] and dtype int32; expected shape "
                                   "[3] and dtype float32"),
    (lambda x: [x, x], "2 outputs, expected 1")])
def test_outputs_unlike_example_outputs_are_an_error(returned, detail):
    poptorch.register_custom_op("Bad", "com.acme", 1, forward=returned)

    def forward(x):
        return poptorch.custom_op([x], "Bad", "com.acme", 1, example_outputs=[x])[0]

    model = poptorch.inferenceModel(_Module(forward))
    with pytest.raises(poptorch.Error) as err:
        model(torch.randn(3))
    assert err.value.message == f"custom op 'Bad' (domain 'com.acme', version 1) returned {detail}"



def _line_of(text: str) -> int:
    """The line of this file where the call ending with `text` starts."""
    lines = open(__file__, encoding="utf-8").read().splitlines()
    end = next(i for i, line in enumerate(lines) if line.strip().endswith(text))
    return end  # (1-based: the line before `text`'s, where the call starts)


class _Module(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


@pytest.mark.parametrize(("attributes", "message"), [
    ({"g": torch.nn.Linear(2, 2)}, "attribute 'g' is a graph; PopTorch supports all PopART "
                                   "attribute types except Graph"),
    ({"m": [1, 2.0]}, "attribute 'm' must be a list or tuple of only floats, only ints or "
                      "only strings (not a mix)"),
    ({"e": []}, "attribute 'e' is an empty list"),
    ({"d": {"a": 1}}, "attribute 'd' must be a float, an int, a str or a list or tuple of "
                      "one of those"),
    ({"s": "caf\u00e9"}, "attribute 's': 'café' contains non-ASCII characters"),
    ({1: 2}, "all attribute keys must be strings")])
def test_bad_attributes_are_an_error(attributes, message):
    x = torch.randn(3)
    with pytest.raises(poptorch.Error) as err:
        poptorch.custom_op([x], "LeakyRelu", "com.acme", 1, example_outputs=[x],
                           attributes=attributes)
    assert err.value.message.startswith("custom_op: " + message)
    assert err.value.location.endswith(f"test_custom_ops.py:{_line_of('attributes=attributes)')}")


def test_registration_is_checked():
    with pytest.raises(poptorch.Error, match="register_custom_op: forward must be a function"):
        poptorch.register_custom_op("A", "b", 1, forward=None)
    with pytest.raises(poptorch.Error, match="domain_version must be an int >= 0, got '1'"):
        poptorch.register_custom_op("A", "b", "1", forward=cube)


def _custom_op_module(attrs: str) -> ir.Operation:
    context = make_context()
    with context:
        module = ir.Module.parse(f"""
func.func @f(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {{
  %0 = "ipu.custom"(%x) {{op_name = "LeakyRelu", domain = "com.acme", domain_version = 1,
      attrs = {attrs}, gradient = false,
      operandSegmentSizes = array<i32: 1{", 0" * 23}>,
      resultSegmentSizes = array<i32: 1{", 0" * 23}>}}
      : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  return %0 : tensor<64x1024xf32>
}}""")
    return module, module.body.operations[0].regions[0].blocks[0].operations[0]


def test_the_machine_model_charges_the_registered_cost():
    seen = []

    def cost(inputs, outputs, alpha):
        seen.append((inputs, outputs, alpha))
        return poptorch.CustomOpCost(cycles=12345, temporary_bytes=4096)

    module, op = _custom_op_module("{alpha = 2.5e-01 : f32}")
    with module.context:
        default = op_cost(op)
        poptorch.register_custom_op("LeakyRelu", "com.acme", 1, forward=leaky_relu,
                                    cost=cost)
        registered = op_cost(op)
    assert (registered.cycles, registered.temporary_bytes) == (12345, 4096)
    assert seen == [([(64, 1024)], [(64, 1024)], 0.25)]
    # without a cost: one pass of an elementwise op over the result (65536 f32 over all
    # 1472 tiles, 45 a tile, 2 a cycle for each of 6 workers: 6 * ceil(ceil(45/6)/2) = 24)
    assert (default.compute, default.exchange, default.temporary_bytes) == (24, 0, 0)


def test_training_pipelined_over_two_ipus_with_gradient_accumulation():
    class Model(Trained):
        def forward(self, x, bias, target):
            with poptorch.Block(ipu_id=0):
                x, y = poptorch.custom_op([self.ln1(x), bias], "Cube", "com.acme", 1,
                                          example_outputs=[x, x])
            with poptorch.Block(ipu_id=1):
                out = torch.log_softmax(self.ln2(x), 1)
                loss = torch.nn.functional.nll_loss(out, target) + torch.sum(y) * 0.0001
            return out, loss

    torch.manual_seed(1)
    model, reference = Model(), Trained()
    reference.load_state_dict(model.state_dict())
    x, bias, target = torch.rand(12, 6), torch.full((12, 6), 0.5), torch.tensor([1, 0, 3] * 4)
    options = poptorch.Options().deviceIterations(2)
    options.Training.gradientAccumulation(3)
    options.setExecutionStrategy(poptorch.PipelinedExecution())
    trainer = poptorch.trainingModel(model, options,
                                     optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    trainer(x, bias, target)
    # each device iteration: one SGD step on the mean of three micro-batches' gradients
    cpu_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(2):
        cpu_optimizer.zero_grad()
        for micro in range(3):
            rows = slice(6 * step + 2 * micro, 6 * step + 2 * micro + 2)
            (reference(x[rows], bias[rows], target[rows])[1] / 3).backward()
        cpu_optimizer.step()
    trainer.copyWeightsToHost()
    torch.testing.assert_close(model.ln1.weight, reference.ln1.weight)
    torch.testing.assert_close(model.ln2.weight, reference.ln2.weight)


def test_a_compiled_op_unregistered_later_is_an_error_when_it_runs():
    model = poptorch.inferenceModel(BasicNetwork())
    x, bias = torch.ones(2, 8), torch.ones(8)
    model(x, bias)
    CUSTOM_OPS.clear()  # as in a process that loaded the executable without registering
    with pytest.raises(poptorch.Error, match=r"^custom op 'Cube' \(domain 'com.acme', version "
                                             r"1\) is not registered in this process"):
        model(x, bias)
