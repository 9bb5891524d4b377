"""poptorch.dynamic_slice and poptorch.dynamic_update (spec 4.6.6, 4.6.7): slices at a
start read when the model runs, in inference and training, with replicas, gradient
accumulation and over two pipelined IPUs; PopTorch's argument errors; popops' handling
of starts out of range; the machine model's cost of the ops."""

import copy

import numpy as np
import pytest
import torch
from numerics import assert_close
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.jit.kernels.slicing import dynamic_slice, dynamic_update
from poptorch.runtime.machine.cost import op_cost


class Slice(torch.nn.Module):
    def __init__(self, dim=0, size=2, step=1):
        super().__init__()
        self.dim, self.size, self.step = dim, size, step

    def forward(self, t, start):
        return poptorch.dynamic_slice(t, self.dim, start, self.size, self.step)


class Update(torch.nn.Module):
    def __init__(self, dim=0, size=1):
        super().__init__()
        self.dim, self.size = dim, size

    def forward(self, t, src, start):
        return poptorch.dynamic_update(t, src, self.dim, start, self.size)


def wrapped(extent: int, start: int, size: int) -> list[int]:
    """popops' positions: an unsigned 32-bit offset, 0 at or past the end, wrapping."""
    offset = start & 0xFFFFFFFF
    offset = 0 if offset >= extent else offset
    return [(offset + i) % extent for i in range(size)]


@pytest.mark.parametrize("step", [1, 2, 3])
def test_dynamic_slice_start_changes_with_the_data_of_one_compiled_program(step):
    t = torch.arange(32.0).reshape(8, 4)
    ipu = poptorch.inferenceModel(Slice(size=4, step=step))
    ipu.compile(torch.randn(8, 4), torch.tensor([21]))  # compiled with other values
    assert '"ipu.dynamic_slice"(%arg0, %arg1)' in ipu._compiled.module_text
    for start in (0, 1, 3, 4):
        out = ipu(t, torch.tensor([start]))
        torch.testing.assert_close(out, t[start:start + 4:step])
    assert ipu.isCompiled()


@pytest.mark.parametrize("start", [6, 7, 8, 9, 100, -1, -8])
def test_out_of_range_starts_do_what_popops_does(start):
    """A slice running past the end wraps round; a start at or past the end (or negative:
    a huge unsigned offset) is 0 (popops DynamicSlice2d; dialects/slicing.py)."""
    t = torch.arange(8.0)
    ipu = poptorch.inferenceModel(Slice(size=4))
    out = ipu(t, torch.tensor([start], dtype=torch.int32))
    expected = t[wrapped(8, start, 4)]
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(Slice(size=4)(t, torch.tensor([start])), expected)  # CPU alike
    ipu_update = poptorch.inferenceModel(Update(size=4))
    src = -torch.arange(1.0, 5.0)
    updated = ipu_update(t, src, torch.tensor([start], dtype=torch.int32))
    expected = t.clone()
    expected[wrapped(8, start, 4)] = src
    torch.testing.assert_close(updated, expected)


def test_dynamic_slice_of_a_middle_dim_with_a_0d_int64_start():
    t = torch.randn(2, 6, 3)
    ipu = poptorch.inferenceModel(Slice(dim=-2, size=3, step=2))
    for start in (0, 2, 3):
        assert_close(ipu(t, torch.tensor(start)), t[:, start:start + 3:2])


@pytest.mark.parametrize(("shape", "src", "dim", "start"), [
    ((8,), (1,), 0, 1), ((8,), (4,), 0, 1), ((8,), (4,), 0, 4), ((3,), (2,), 0, 1),
    ((2, 8), (1, 8), 0, 0), ((2, 8), (2, 1), 1, 4)])
def test_dynamic_update_matches_pytorch(shape, src, dim, start):
    """PopTorch's tests/slice_test.py cases (size need not divide the dimension here)."""
    t, s = torch.randn(shape), -torch.rand(src)
    ipu = poptorch.inferenceModel(Update(dim, src[dim]))
    ipu.compile(torch.randn(shape), torch.randn(src), torch.tensor([start + 20]))
    out = ipu(t, s, torch.tensor([start]))
    expected = t.clone()
    expected.narrow(dim, start, src[dim]).copy_(s)
    torch.testing.assert_close(out, expected)


class Trained(torch.nn.Module):
    """A strided dynamic slice of an activation and a dynamic update of it with a
    function of the slice: gradients reach every layer through both ops."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 8)
        self.b = torch.nn.Linear(2, 4)
        self.c = torch.nn.Linear(8, 2)

    def forward(self, x, start, y):
        h = torch.tanh(self.a(x))
        s = poptorch.dynamic_slice(h, 1, start, 4, 2)
        u = poptorch.dynamic_update(h, self.b(s), 1, start, 4)
        out = self.c(u)
        return out, poptorch.identity_loss((out - y) ** 2, "mean")


def train_both(opts, accumulation, replicas, steps=3, model=None):
    """Train with poptorch and on the CPU (each micro-batch with its own start) and
    compare the weights."""
    torch.manual_seed(0)
    model = model or Trained()
    reference = copy.deepcopy(model)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1)
    micro = accumulation * replicas
    for _ in range(steps):
        x, y = torch.randn(micro * 3, 6), torch.randn(micro * 3, 2)
        starts = torch.randint(0, 12, (micro,))
        ipu(x, starts, y)
        cpu.zero_grad()
        for i in range(micro):
            rows = slice(3 * i, 3 * i + 3)
            _, loss = reference(x[rows], starts[i:i + 1], y[rows])
            (loss / micro).backward()
        cpu.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)
    return ipu


@pytest.mark.parametrize(("accumulation", "replicas"), [(1, 1), (2, 2)])
def test_training_gradients_match_autograd(accumulation, replicas):
    opts = poptorch.Options().replicationFactor(replicas)
    opts.Training.gradientAccumulation(accumulation)
    ipu = train_both(opts, accumulation, replicas)
    text = ipu._compiled.module_text
    assert '"ipu.dynamic_slice"' in text and '"ipu.dynamic_update"' in text


class TwoStages(torch.nn.Module):
    """A dynamic slice on IPU 0 and a dynamic update of its result on IPU 1."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x, start):
        with poptorch.Block(ipu_id=0):
            s = poptorch.dynamic_slice(torch.tanh(self.a(x)), 1, start, 2, 1)
        with poptorch.Block(ipu_id=1):
            return poptorch.dynamic_update(x, s * 2, 1, start, 2)


class TrainedOnTwoIpus(Trained):
    """Trained, its slicing on IPU 0 and its last layer and loss on IPU 1."""

    def forward(self, x, start, y):
        with poptorch.Block(ipu_id=0):
            h = torch.tanh(self.a(x))
            s = poptorch.dynamic_slice(h, 1, start, 4, 2)
            u = poptorch.dynamic_update(h, self.b(s), 1, start, 4)
        with poptorch.Block(ipu_id=1):
            out = self.c(u)
            return out, poptorch.identity_loss((out - y) ** 2, "mean")


def test_training_pipelined_over_two_ipus():
    opts = poptorch.Options()
    opts.setExecutionStrategy(poptorch.PipelinedExecution())
    opts.Training.gradientAccumulation(4)
    ipu = train_both(opts, 4, 1, model=TrainedOnTwoIpus())
    assert ipu._compiled.module_text.count("call @main_stage") >= 2


def test_inference_pipelined_over_two_ipus():
    torch.manual_seed(0)
    model = TwoStages()
    opts = poptorch.Options().deviceIterations(4)
    opts.setExecutionStrategy(poptorch.PipelinedExecution())
    ipu = poptorch.inferenceModel(model, opts)
    x, starts = torch.randn(4, 8), torch.tensor([0, 3, 7, 12])
    out = ipu(x, starts)
    with torch.no_grad():
        expected = torch.cat([model(x[i:i + 1], starts[i:i + 1]) for i in range(4)])
    torch.testing.assert_close(out, expected)
    assert ipu._compiled.module_text.count("call @main_stage") == 2


def test_inference_with_device_iterations_reads_each_iteration_start():
    opts = poptorch.Options().deviceIterations(3)
    ipu = poptorch.inferenceModel(Slice(dim=1, size=2), opts)
    t = torch.arange(24.0).reshape(3, 8)
    starts = torch.tensor([0, 3, 7])
    out = ipu(t, starts)
    expected = torch.stack([t[i, wrapped(8, int(s), 2)] for i, s in enumerate(starts)])
    torch.testing.assert_close(out, expected)


def _raises(fn, message):
    with pytest.raises(poptorch.Error, match=message) as info:
        fn()
    assert info.value.location.startswith(f"{__file__}:"), info.value.location


def test_argument_errors_are_poptorchs_at_the_users_line():
    t, start = torch.arange(8.0), torch.tensor([1])
    _raises(lambda: poptorch.dynamic_slice([1.0], 0, start, 2, 1),
            r"dynamic_slice must take a torch.tensor input")
    _raises(lambda: poptorch.dynamic_slice(t, 0.5, start, 2, 1), "Dimension must be an integer")
    _raises(lambda: poptorch.dynamic_slice(t, 0, 1, 2, 1),
            "Slice start argument to dynamic_slice must be a torch.tensor")
    _raises(lambda: poptorch.dynamic_slice(t, 0, torch.tensor([1.0]), 2, 1),
            r"must be an integer tensor of one element .* got a torch.float32 tensor")
    _raises(lambda: poptorch.dynamic_slice(t, 0, start, 2.0, 1), "Size must be an integer")
    _raises(lambda: poptorch.dynamic_slice(t, 0, start, 2, 1.0), "Step must be an integer")
    _raises(lambda: poptorch.dynamic_slice(t, 0, start, 0, 1),
            "The start and end of a slice must be different")
    _raises(lambda: poptorch.dynamic_slice(t, 0, start, -2, 1),
            "Taking a slice of a tensor with the end less than the start is not supported")
    _raises(lambda: poptorch.dynamic_slice(t, 0, start, 2, 0), "Slicing step must be at least 1")
    _raises(lambda: poptorch.dynamic_slice(t, 0, start, 7, 1),
            r"The size of the slice \(7\) must be a factor of the slicing dimension \(8\)\.")
    _raises(lambda: poptorch.dynamic_slice(t, 1, start, 2, 1),
            r"Dimension 1 is out of range for a tensor of 1 dimensions")
    _raises(lambda: poptorch.dynamic_update(t, torch.ones(2, 8), 0, start, 1),
            r"input and src tensors must have same dimensionality. \(1\) vs \(2\)")
    _raises(lambda: poptorch.dynamic_update(t, torch.ones(2, dtype=torch.half), 0, start, 2),
            r"input and src tensor must have same dtype. \(torch.float32 vs torch.float16\)")
    _raises(lambda: poptorch.dynamic_update(t, torch.ones(3), 0, start, 2),
            r"src of shape \[3\] does not fit a slice of size 2 along dim 0 of input \[8\]")
    _raises(lambda: poptorch.dynamic_update(t, torch.ones(2), 0, 1, 2),
            "Slice start argument to dynamic_update must be a torch.tensor")


def test_errors_inside_a_model_point_at_the_model():
    class Bad(torch.nn.Module):
        def forward(self, t, start):
            return poptorch.dynamic_slice(t, 0, start, 3, 1)

    with pytest.raises(poptorch.Error, match=r"The size of the slice \(3\)") as info:
        poptorch.inferenceModel(Bad())(torch.arange(8.0), torch.tensor([0]))
    assert f"{__file__}:" in str(info.value)


def _single_op(text: str) -> tuple[ir.Module, ir.Operation]:
    module = ir.Module.parse(text, make_context())
    func = module.body.operations[0]
    return module, list(func.regions[0].blocks[0].operations)[0].operation


def test_cost_is_a_copy_of_the_slice_that_grows_with_its_size():
    """The machine model charges popops::dynamicSlice as a gather of one index: cycles
    and exchange grow with the slice, not with the sliced tensor."""
    def cost(rows: int, size: int):
        module, op = _single_op(
            f'func.func @f(%x: tensor<{rows}x256xf32>, %i: tensor<1xi32>) -> '
            f'tensor<{size}x256xf32> {{\n  %0 = "ipu.dynamic_slice"(%x, %i) {{dim = 0 : i64, '
            f'size = {size} : i64}} : (tensor<{rows}x256xf32>, tensor<1xi32>) -> '
            f'tensor<{size}x256xf32>\n  return %0 : tensor<{size}x256xf32>\n}}')
        with module.context:
            return op_cost(op)

    small, large, same_slice = cost(4096, 16), cost(4096, 1024), cost(1024, 16)
    assert 0 < small.cycles < large.cycles
    assert small.exchange < large.exchange
    assert small == same_slice


def test_kernel_slices_each_replica_at_its_own_start():
    x = np.arange(2 * 8, dtype=np.float32).reshape(2, 8)  # 2 replicas of an [8] tensor
    starts = np.array([[1], [7]], dtype=np.int32)
    out = dynamic_slice(x, starts, dim=0, size=3, ranks=(1, 1))
    np.testing.assert_array_equal(out, [[1, 2, 3], [15, 8, 9]])
    updated = dynamic_update(x, -out, starts, dim=0, ranks=(1, 1, 1))
    np.testing.assert_array_equal(updated[1], [-8, -9, 10, 11, 12, 13, 14, -15])
