"""Tensors with a zero-size dimension (issue 22): models give PyTorch's results, and the
machine model plans zero-size work without dividing by zero (an op whose results are
empty costs nothing; one with no input elements, a matmul over K = 0 or a sum over an
empty dimension, only fills its result), where it raised ZeroDivisionError or
ValueError from its cost rules."""

import copy

import numpy as np
import pytest
import torch
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.jit.kernels.linear import matmul
from poptorch.runtime.jit.kernels.reduction import reduce
from poptorch.runtime.machine.cost import OpCost, op_cost
from poptorch.runtime.machine.system import GC200

SYNC, MEMCPY = GC200.globalSyncCycles, GC200.memcpyBytesPerCycle

# ---- the cost model ------------------------------------------------------------------------
ZERO_SIZE = """
func.func @main(%a: tensor<2x0xf32>, %b: tensor<0x3xf32>, %c: tensor<2x3xf32>,
                %d: tensor<3x0xf32>, %x: tensor<4x0x5xf32>, %cx: tensor<1x0x4x4xf32>,
                %cw: tensor<3x0x1x1xf32>) {
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x0xf32>, tensor<0x3xf32>) -> tensor<2x3xf32>
  %1 = "ipu.reduce"(%x) {dims = array<i64: 1>, keepdim = false, kind = "sum"}
      : (tensor<4x0x5xf32>) -> tensor<4x5xf32>
  %2 = "ipu.conv"(%cx, %cw) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>,
                             padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>,
                             groups = 1 : i64}
      : (tensor<1x0x4x4xf32>, tensor<3x0x1x1xf32>) -> tensor<1x3x4x4xf32>
  %3 = "ipu.matmul"(%c, %d) : (tensor<2x3xf32>, tensor<3x0xf32>) -> tensor<2x0xf32>
  %4 = "ipu.reduce"(%x) {dims = array<i64: 2>, keepdim = false, kind = "max"}
      : (tensor<4x0x5xf32>) -> tensor<4x0xf32>
  %5 = "ipu.exp"(%x) : (tensor<4x0x5xf32>) -> tensor<4x0x5xf32>
  return
}
"""


@pytest.fixture(scope="module")
def zero_size_ops():
    module = ir.Module.parse(ZERO_SIZE, make_context())
    func = next(iter(module.body.operations))
    yield list(func.regions[0].blocks[0].operations)[:-1]
    del module


def test_ops_with_empty_results_cost_nothing(zero_size_ops):
    for op in zero_size_ops[3:]:  # matmul by 3x0, max over 4x0x5's last dim, exp
        assert op_cost(op) == OpCost(), op.operation.name


def test_ops_without_input_elements_fill_their_result(zero_size_ops):
    """K = 0 (2x0 @ 0x3, a conv of no input channels), a sum over an empty dimension:
    one step writing the result share (zeros, the sum's 0) at memcpy speed, as iota."""
    matmul_, sum_, conv = zero_size_ops[:3]
    # 2x3 f32: 24 bytes, one tile (128 bytes at least a tile)
    assert op_cost(matmul_) == OpCost(compute=24 // MEMCPY, sync=SYNC)
    assert op_cost(sum_) == OpCost(compute=80 // MEMCPY, sync=SYNC)  # 4x5 f32 on a tile
    # 1x3x4x4 f32: 192 bytes over 2 tiles, 96 bytes a tile
    assert op_cost(conv) == OpCost(compute=96 // MEMCPY, sync=SYNC)


# ---- models with empty tensors inside ------------------------------------------------------
class EmptyInside(torch.nn.Module):
    """A weight `w` and one op on an empty slice of the input (`op` names it); with
    `loss`, forward also returns a loss for trainingModel."""

    def __init__(self, op, loss=False):
        super().__init__()
        self.linear = torch.nn.Linear(0, 5)
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 5))
        self.op, self.loss = op, loss

    def forward(self, x):
        empty = x[:, :0]  # 4 x 0
        if self.op == "linear":  # Linear(0, 5): its bias
            y = self.linear(empty) * self.w + x
        elif self.op == "sum":  # over the empty dimension: zeros
            y = (x.reshape(4, 1, 5)[:, :0] * self.w).sum(1) + x
        elif self.op == "mean":  # over the empty dimension: NaN
            y = (x.reshape(4, 1, 5)[:, :0] * self.w).mean(1)
        elif self.op == "cat":
            y = torch.cat([x * self.w, empty], 1)
        else:  # softmax over the empty dimension: an empty result
            y = torch.softmax(empty * self.w[:0], 1)
        return (y, y.nansum() + self.w.sum()) if self.loss else y


OPS = ["linear", "sum", "mean", "cat", "softmax"]


@pytest.mark.parametrize("op", OPS)
def test_inference_with_empty_tensors_inside_matches_pytorch(op):
    model = EmptyInside(op)
    x = torch.randn(4, 5)
    ipu = poptorch.inferenceModel(model)
    torch.testing.assert_close(ipu(x), model(x), equal_nan=True)
    assert ipu.getTimeline().total_cycles > 0
    # softmax's result is empty: the program computes and holds nothing (an op whose
    # results have no elements is an empty constant)
    assert ipu.getMemoryEstimate().ipus[0].total > 0 or op == "softmax"


@pytest.mark.parametrize("op", OPS)
def test_training_with_empty_tensors_inside_matches_pytorch(op):
    torch.manual_seed(0)
    model, x = EmptyInside(op, loss=True), torch.randn(4, 5)
    reference = copy.deepcopy(model)
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    out, loss = ipu(x)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    expected, expected_loss = reference(x)
    expected_loss.backward()
    optimizer.step()
    torch.testing.assert_close(out, expected.detach(), equal_nan=True)
    torch.testing.assert_close(loss, expected_loss.detach())
    for mine, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(mine.detach(), theirs.detach())


# ---- models fed inputs with a zero-size dimension --------------------------------------------
class Sum1(torch.nn.Module):
    def forward(self, x):
        return x.sum(1)


@pytest.mark.parametrize(("make", "shape"), [
    (lambda: torch.nn.Linear(0, 3), (2, 0)),
    (lambda: torch.nn.Linear(3, 0), (2, 3)),
    (Sum1, (4, 0, 5)),
    (lambda: torch.nn.LayerNorm(5), (4, 0, 5)),
], ids=["linear-0-in", "linear-0-out", "sum-over-empty", "layer-norm-of-empty"])
def test_compiling_for_inputs_with_a_zero_size_dimension(make, shape):
    """The machine model plans the compiled program (timeline, memory estimate); one
    whose output is empty computes and holds nothing (its ops are empty constants)."""
    model, x = make(), torch.randn(shape)
    ipu = poptorch.inferenceModel(model)
    ipu.compile(x)
    assert ipu.getTimeline().total_cycles > 0
    assert ipu.getMemoryEstimate().ipus[0].total > 0 or not model(x).numel()


def test_a_convolution_over_no_positions_is_pytorchs_error():
    """PyTorch refuses a kernel larger than the input (0 rows): its words, as a
    poptorch.Error of the capture."""
    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(torch.nn.Conv2d(2, 3, 1))(torch.randn(1, 2, 0, 4))
    assert info.value.type == "capture"
    assert info.value.message == (
        "could not capture the model with torch.export: Calculated padded input size per "
        "channel: (0 x 4). Kernel size: (1 x 1). Kernel size can't be greater than actual "
        "input size")


# ---- the JIT's kernels -------------------------------------------------------------------------
def test_matmul_kernel_over_k_0_gives_zeros():
    """Replicas of a 2x0 input by one 0x3 weight: the one-gemm path reshaped with -1."""
    lhs = np.ones((2, 2, 0), np.float32)
    rhs = np.broadcast_to(np.ones((0, 3), np.float32), (2, 0, 3))
    np.testing.assert_array_equal(matmul(lhs, rhs), np.zeros((2, 2, 3), np.float32))


@pytest.mark.parametrize(("kind", "dtype", "value"), [
    ("max", np.float32, -np.inf), ("min", np.float32, np.inf),
    ("max", np.int32, np.iinfo(np.int32).min), ("min", np.int32, np.iinfo(np.int32).max),
])
def test_max_and_min_over_an_empty_dimension_give_their_identity(kind, dtype, value):
    """As softmax's decomposition over an empty dimension needs (torch: -inf for max)."""
    out = reduce(np.zeros((4, 0), dtype), kind, (-1,), True)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.full((4, 1), value, dtype))


class Softmax1(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, 1)


class Cat(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y, x], 1)


@pytest.mark.parametrize(("make", "shapes"), [
    (lambda: torch.nn.Linear(0, 3), [(2, 0)]),
    (lambda: torch.nn.Linear(3, 0), [(2, 3)]),
    (Sum1, [(4, 0, 5)]),
    (lambda: torch.nn.LayerNorm(5), [(4, 0, 5)]),
    (Softmax1, [(4, 0)]),
    (Cat, [(4, 3), (4, 0)]),
], ids=["linear-0-in", "linear-0-out", "sum-over-empty", "layer-norm-of-empty",
        "softmax-over-empty", "cat-with-empty"])
def test_inputs_with_a_zero_size_dimension_give_pytorchs_result(make, shapes):
    """Inputs were split into micro-batches with reshape(-1), which a zero-size
    dimension makes ambiguous (NumPy's ValueError)."""
    torch.manual_seed(0)
    model, inputs = make(), [torch.randn(shape) for shape in shapes]
    torch.testing.assert_close(poptorch.inferenceModel(model)(*inputs), model(*inputs))


def test_training_linear_0_in_features_matches_pytorch():
    """Only the bias learns: the weight is 3 x 0."""
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(0, 3)

        def forward(self, x, target):
            y = self.linear(x)
            return y, torch.nn.functional.mse_loss(y, target)

    model, x, target = Model(), torch.randn(2, 0), torch.randn(2, 3)
    reference = copy.deepcopy(model)
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    out, loss = ipu(x, target)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    expected, expected_loss = reference(x, target)
    expected_loss.backward()
    optimizer.step()
    torch.testing.assert_close((out, loss), (expected.detach(), expected_loss.detach()))
    torch.testing.assert_close(model.linear.bias.detach(), reference.linear.bias.detach())
