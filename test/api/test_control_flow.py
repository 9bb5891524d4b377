"""poptorch.for_loop (spec 11) and poptorch.cond (PopTorch 3.x): numerics against running
the body in PyTorch, the IR (the body once, whatever the count), the machine model (count
x the body's cycles, the body's memory once), placement in a pipelined model, and the
errors PopTorch gives (training, bad inputs)."""

from __future__ import annotations

import re

import pytest
import torch
from numerics import assert_close

import poptorch
from poptorch.runtime.machine.system import GC200
from poptorch.runtime.machine.tasks import TaskGraph


class Loop(torch.nn.Module):
    """A Linear + tanh body that uses the model's weights, `count` times."""

    def __init__(self, count: int, width: int = 8) -> None:
        super().__init__()
        self.count = count
        self.layer = torch.nn.Linear(width, width)

    def forward(self, x):
        return poptorch.for_loop(self.count, lambda a: torch.tanh(self.layer(a)), [x])[0]


def by_hand(model: Loop, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        for _ in range(model.count):
            x = torch.tanh(model.layer(x))
    return x


def main_cost(executor):
    """The machine model's cost of one call of @main."""
    compiled = executor._compiled
    with compiled.context:
        return TaskGraph(compiled.module, GC200, 1, {}, 0).calls[0].cost


def test_for_loop_matches_the_body_run_count_times():
    torch.manual_seed(0)
    model, x = Loop(5), torch.randn(4, 8)
    assert_close(poptorch.inferenceModel(model)(x), by_hand(model, x))


def test_for_loop_several_inputs_of_different_shapes():
    # PopTorch's test_loop_multiple_inputs, with the body reading a tensor of the caller
    class Model(torch.nn.Module):
        def forward(self, x, y, z, w):
            def body(x, y, z, w):
                return x * y, y + z, x[:, :1] * w, w + 1

            return poptorch.for_loop(6, body, [x, y, z, w])

    x, y, z, w = torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 1), torch.rand(2, 1)
    expected = [x, y, z, w]
    for _ in range(6):
        a, b, c, d = expected
        expected = [a * b, b + c, a[:, :1] * d, d + 1]
    out = poptorch.inferenceModel(Model())(x, y, z, w)
    assert len(out) == 4
    for actual, wanted in zip(out, expected, strict=True):
        assert_close(actual, wanted)


def test_for_loop_body_with_conv_weights():
    # PopTorch's test_loop_weights: a Linear then a Conv2d inside the body
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = torch.nn.Linear(1, 256)
            self.layer2 = torch.nn.Conv2d(4, 1, [8, 8])

        def forward(self, x):
            def body(x):
                act = self.layer1(x).reshape([1, 4, 8, 8])
                return self.layer2(act).flatten()

            return poptorch.for_loop(2, body, [x])[0]

    torch.manual_seed(0)
    model, x = Model(), torch.tensor([0.5])
    with torch.no_grad():
        expected = x
        for _ in range(2):
            expected = model.layer2(model.layer1(expected).reshape([1, 4, 8, 8])).flatten()
    assert_close(poptorch.inferenceModel(model)(x), expected, rtol=1e-4, atol=1e-5)


def test_for_loop_inputs_are_passed_by_value():
    # PopTorch's test_loop_body_inplace_ops_1: the caller's tensor is unchanged
    class Model(torch.nn.Module):
        def forward(self, x):
            def body(y):
                y += 1
                return y

            return poptorch.for_loop(3, body, [x])[0]

    x = torch.ones(1, 5, dtype=torch.int32)
    out = poptorch.inferenceModel(Model())(x)
    assert torch.equal(x, torch.ones(1, 5, dtype=torch.int32))
    assert torch.equal(out, torch.full((1, 5), 4, dtype=torch.int32))


def test_for_loop_body_appears_once_in_the_ir_and_the_program():
    model = Loop(1000)
    executor = poptorch.inferenceModel(model)
    x = torch.randn(4, 8)
    assert_close(executor(x), by_hand(model, x), rtol=1e-4, atol=1e-5)
    text = executor._compiled.module_text
    assert len(re.findall(r'"ipu\.matmul"', text)) == 1
    assert re.search(r"scf\.for %\S+ = %c0 to %c1000 step %c1 iter_args", text)
    source = executor._compiled.program.source
    assert source.count("for ") == 1 and "range(" in source
    assert source.count("ipu_matmul(") == 1


def test_for_loop_cycles_are_count_times_the_body_and_memory_is_the_body_once():
    x = torch.randn(16, 64)
    costs, peaks = {}, {}
    for count in (2, 4, 8):
        executor = poptorch.inferenceModel(Loop(count, width=64))
        executor(x)
        costs[count] = main_cost(executor)
        peaks[count] = executor._compiled.memory.ipus[0].total
    per_iteration = (costs[4].cycles - costs[2].cycles) // 2
    assert per_iteration > 0
    assert costs[8].cycles - costs[4].cycles == 4 * per_iteration
    # the body's syncs (matmul, add, tanh, the counter's add) repeat each iteration
    assert costs[8].sync == 4 * costs[2].sync
    assert peaks[2] == peaks[4] == peaks[8]


@pytest.mark.parametrize("options", [
    poptorch.Options().deviceIterations(3),
    poptorch.Options().replicationFactor(2),
], ids=["device_iterations", "replicas"])
def test_for_loop_with_batching_options(options):
    torch.manual_seed(1)
    model = Loop(3)
    x = torch.randn(6 * 2, 8)
    assert_close(poptorch.inferenceModel(model, options)(x), by_hand(model, x))


def test_for_loop_in_one_stage_of_a_pipeline_over_two_ipus_keeps_its_placement():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            with poptorch.Block("s0", ipu_id=0):
                h = torch.relu(self.a(x))
            with poptorch.Block("s1", ipu_id=1):
                h = poptorch.for_loop(4, lambda t: [torch.tanh(self.b(t))], [h])[0]
                return h * 2

    torch.manual_seed(2)
    model = Model()
    options = poptorch.Options().deviceIterations(2)
    options.setExecutionStrategy(poptorch.PipelinedExecution("s0", "s1"))
    executor = poptorch.inferenceModel(model, options)
    x = torch.randn(8, 8)
    with torch.no_grad():
        h = torch.relu(model.a(x))
        for _ in range(4):
            h = torch.tanh(model.b(h))
    assert_close(executor(x), h * 2)
    text = executor._compiled.module.operation.get_asm()
    stage1 = text[text.index("func.func private @main_stage1"):]
    assert "scf.for" in stage1 and "scf.for" not in text[:text.index("@main_stage1(")]
    loop = stage1[stage1.index("scf.for"):]
    assert '} {ipu.block = "s1", ipu.ipu_id = 1 : i64}' in loop
    body = [line for line in loop[:loop.index("scf.yield")].splitlines() if '"ipu.' in line]
    assert len(body) >= 5  # the counter's constant and add, permute, matmul, add, tanh
    assert all('ipu.block = "s1", ipu.ipu_id = 1 : i64' in line for line in body)


def test_for_loop_in_training_is_an_error():
    # PopTorch's test_loop_training (popart_compiler/source/Compiler.cpp)
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = torch.nn.Linear(4, 4)

        def forward(self, x):
            out = poptorch.for_loop(2, lambda x: self.layer1(x), [x])[0]
            return out, poptorch.identity_loss(out, reduction="sum")

    with pytest.raises(poptorch.Error,
                       match=r"test_control_flow.py:\d+: poptorch.for_loop\(\) is only "
                             r"supported in inference\."):
        poptorch.trainingModel(Model())(torch.ones(1, 4))


def test_for_loop_inputs_must_be_a_list_of_tensors():
    # PopTorch's test_loop_non_list_in and test_loop_non_tensor_in
    class NotList(torch.nn.Module):
        def forward(self, x):
            return poptorch.for_loop(2, lambda x: x * 2, x)

    class NotTensor(torch.nn.Module):
        def forward(self, x):
            return poptorch.for_loop(2, lambda x, y: (x * y, y + 1), [x, 5])

    with pytest.raises(poptorch.Error, match=r"test_control_flow.py:\d+: poptorch.for_loop "
                                             r"expects input tensors \(inputs\) to be a list "
                                             r"of tensors. \(Object is not list\)"):
        poptorch.inferenceModel(NotList())(torch.ones(2))
    with pytest.raises(poptorch.Error, match=r"\(Object contained in list at index 1 is not "
                                         r"torch.tensor\)"):
        poptorch.inferenceModel(NotTensor())(torch.ones(2))


@pytest.mark.parametrize("body, message", [
    (lambda x: x[:1], r"returned output 0 of shape \[1\] and dtype torch.float32 for an input "
                      r"of shape \[2\] and dtype torch.float32; each output must keep its "
                      r"input's shape and dtype"),
    (lambda x: x.int(), r"returned output 0 of shape \[2\] and dtype torch.int32"),
    (lambda x: (x, x), r"returned 2 tensors for its 1 inputs; it must return one tensor per "
                       r"input"),
], ids=["shape", "dtype", "count"])
def test_for_loop_body_must_keep_its_inputs_shapes_and_dtypes(body, message):
    class Model(torch.nn.Module):
        def forward(self, x):
            return poptorch.for_loop(2, body, [x])[0]

    with pytest.raises(poptorch.Error, match=r"test_control_flow.py:\d+: the body of "
                                             r"poptorch.for_loop " + message):
        poptorch.inferenceModel(Model())(torch.ones(2))


def test_for_loop_count_must_be_a_non_negative_int():
    class Model(torch.nn.Module):
        def forward(self, x):
            return poptorch.for_loop(2.5, lambda x: x, [x])[0]

    with pytest.raises(poptorch.Error, match=r"count must be a non-negative Python int, not "
                                             r"2.5"):
        poptorch.inferenceModel(Model())(torch.ones(2))


class Branches(torch.nn.Module):
    """PopTorch's if_test shapes: branches of different input counts that also read the
    caller's tensors and the model's weights."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)

    def forward(self, condition, x, y):
        def then_body(a, b):
            return self.layer(a) + b, a * 2

        def else_body(a):
            return a - y, x + 1

        return poptorch.cond(condition, then_body, [x, y], else_body, [y])


def test_cond_takes_either_branch_with_the_data_in_one_compiled_program():
    torch.manual_seed(3)
    model = Branches()
    executor = poptorch.inferenceModel(model)
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    with torch.no_grad():
        then_out = [model.layer(x) + y, x * 2]
        else_out = [y - y, x + 1]
    for flag, expected in [(True, then_out), (False, else_out), (True, then_out)]:
        out = executor(torch.tensor([flag]), x, y)
        for actual, wanted in zip(out, expected, strict=True):
            assert_close(actual, wanted)
    text = executor._compiled.module_text
    assert text.count("scf.if") == 1 and text.count(" else {") == 1
    assert executor._compiled.program.source.count("if v") == 1


def test_cond_charges_the_dearer_branch_on_the_machine_model():
    class Model(torch.nn.Module):
        def __init__(self, which):
            super().__init__()
            self.layer, self.which = torch.nn.Linear(64, 64), which

        def forward(self, condition, x):
            heavy = lambda a: torch.tanh(self.layer(a))  # noqa: E731
            light = lambda a: a + 1  # noqa: E731
            if self.which == "heavy":
                return heavy(x)
            if self.which == "light":
                return light(x)
            return poptorch.cond(condition, heavy, [x], light, [x])[0]

    x, condition = torch.randn(16, 64), torch.tensor([False])
    costs = {}
    for which in ("cond", "heavy", "light"):
        executor = poptorch.inferenceModel(Model(which))
        executor(condition, x)
        costs[which] = main_cost(executor)
    assert costs["heavy"].cycles > costs["light"].cycles
    assert costs["heavy"].sync == costs["cond"].sync
    assert costs["heavy"].cycles <= costs["cond"].cycles < costs["heavy"].cycles + 100


def test_cond_in_training_is_an_error():
    # PopTorch's test_cond_training
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = torch.nn.Linear(4, 4)

        def forward(self, condition, x):
            out = poptorch.cond(condition, self.layer1, [x], self.layer1, [x])[0]
            return out, poptorch.identity_loss(out, reduction="sum")

    with pytest.raises(poptorch.Error, match=r"poptorch.cond\(\) is only supported in "
                                             r"inference\."):
        poptorch.trainingModel(Model())(torch.tensor([True]), torch.ones(1, 4))


def test_cond_condition_must_be_one_boolean():
    class Model(torch.nn.Module):
        def forward(self, condition, x):
            return poptorch.cond(condition, lambda a: a, [x], lambda a: -a, [x])[0]

    with pytest.raises(poptorch.Error, match=r"test_control_flow.py:\d+: poptorch.cond's "
                                             r"condition must be a one-element torch.bool "
                                             r"tensor, not a tensor of shape \[2\] and dtype "
                                             r"torch.bool"):
        poptorch.inferenceModel(Model())(torch.tensor([True, False]), torch.ones(2))
    with pytest.raises(poptorch.Error, match=r"then_inps and else_inps tensors to be a list of "
                                         r"tensors. \(Object is not list\)"):
        poptorch.cond(torch.tensor([True]), lambda a: a, (torch.ones(1),), lambda a: a, [])


def test_on_the_cpu_the_ops_run_as_pytorch():
    model, x = Loop(3), torch.randn(2, 8)
    assert_close(model(x), by_hand(model, x))
    out = poptorch.cond(torch.tensor([False]), lambda a: a * 2, [x], lambda a: a - 1, [x])
    assert_close(out[0], x - 1)


def test_cond_branches_must_return_matching_outputs():
    class Model(torch.nn.Module):
        def forward(self, condition, x):
            return poptorch.cond(condition, lambda a: a, [x], lambda a: a[:1], [x])[0]

    with pytest.raises(poptorch.Error, match=r"test_control_flow.py:\d+: output 0 of "
                                             r"poptorch.cond's then_body has shape \[2\] and "
                                             r"dtype torch.float32 but the else_body's has "
                                             r"shape \[1\]"):
        poptorch.inferenceModel(Model())(torch.tensor([True]), torch.ones(2))


def test_for_loop_reading_values_of_a_fused_kernel():
    # x1, x2 come from one fused elementwise kernel of the top block, whose last op is
    # after the loop: the kernel must run before the loop that reads them
    class Model(torch.nn.Module):
        def forward(self, x, y):
            x1 = torch.exp(x + 1)
            x2 = x1 * 2
            out = poptorch.for_loop(3, lambda a: [a * 0.5 + torch.sin(x2) * x1], [y])[0]
            return out + x2

    torch.manual_seed(4)
    x, y = torch.randn(256, 256) * 0.1, torch.randn(256, 256)
    x1 = torch.exp(x + 1)
    x2, a = x1 * 2, y
    for _ in range(3):
        a = a * 0.5 + torch.sin(x2) * x1
    executor = poptorch.inferenceModel(Model())
    assert_close(executor(x, y), a + x2)
    assert "fused_0(" in executor._compiled.program.source
