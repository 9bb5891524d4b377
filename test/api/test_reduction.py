"""Reductions, scans, norms, softmax and the normalisation layers against PyTorch on CPU.

Each test groups several ops in one model (one compile) and runs on float32 and float16.
Index results come back as int32, the IPU's index type (`numerics.check` narrows
PyTorch's int64 to compare).
"""

import pytest
import torch
from numerics import check
from torch import nn

import poptorch

DTYPES = [torch.float32, torch.float16]


def _input(*shape, dtype=torch.float32, low=-2.0, high=2.0):
    torch.manual_seed(0)
    return (torch.rand(*shape) * (high - low) + low).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_mean_prod(dtype):
    x = _input(3, 4, 5, dtype=dtype)
    check(lambda t: (t.sum(), t.sum(1), t.sum((0, 2), keepdim=True),
                     t.sum(-1, dtype=torch.float32), t.mean(), t.mean(-1),
                     t.mean((0, 1), keepdim=True)), x)
    y = _input(2, 3, 4, dtype=dtype, low=0.5, high=1.5)
    check(lambda t: (t.prod(), t.prod(1), t.prod(2, keepdim=True)), y)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_min_arg(dtype):
    x = _input(3, 4, 5, dtype=dtype)

    def fn(t):
        values, indices = t.max(1)
        low, low_at = t.min(0, keepdim=True)
        return (t.max(), t.min(), t.amax((0, 2)), t.amin(1, keepdim=True), values,
                indices, low, low_at, t.argmax(1), t.argmin(),
                t.argmax(2, keepdim=True), t.argmin(keepdim=True))

    check(fn, x)


def test_arg_ties_take_first_index():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, -1.0]])
    check(lambda t: (t.argmax(1), t.argmin(1), t.max(1).indices), x)


def test_any_all():
    b = _input(3, 4, 5) > 0.5
    x = _input(3, 4) * (_input(3, 4) > 0)
    check(lambda t, f: (t.any(), t.any(1), t.all(2), t.all(), t.any(0, keepdim=True),
                        t.any((0, 2)), f.any(1), f.all(0), t.amax(1), t.min(2).values), b, x)


@pytest.mark.parametrize("length", [8, 64, 136])
def test_any_all_of_rows_by_words(length):
    """Rows of 8 to 128 bools fold eight at a time (`_rows_all_any`); 136 folds as
    NumPy does. Rows all True, all False and mixed, kept or dropped dims."""
    b = _input(4, 6, length) > -1.9
    b[0], b[1, :, : length // 2] = True, False

    def fn(t):
        return (t.all(-1), t.any(-1), t.all(-1, keepdim=True), t.any(-1, keepdim=True),
                (~t).all(-1), t[:, :3].all(-1))
    check(fn, b)


def test_integer_reductions():
    torch.manual_seed(0)
    i = torch.randint(-5, 6, (3, 4), dtype=torch.int32)
    check(lambda t: (t.sum(1), t.amax(0), t.min(1).values, t.cumsum(0),
                     (t > 0).sum(), t.prod(1),
                     torch.count_nonzero(t, 1)), i)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cumsum_cumprod(dtype):
    x = _input(3, 4, 5, dtype=dtype, low=0.5, high=1.5)
    check(lambda t: (t.cumsum(1), t.cumsum(-1), t.cumprod(2), t.cumprod(0),
                     t.cumsum(0, dtype=torch.float32)), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_norms(dtype):
    x = _input(3, 4, 5, dtype=dtype)
    norm = torch.linalg.vector_norm
    inf = float("inf")
    check(lambda t: (norm(t), norm(t, 1, dim=1), norm(t, inf, dim=(0, 2), keepdim=True),
                     norm(t, -inf, dim=1), norm(t.relu(), 0, dim=2), norm(t, 3, dim=1),
                     t.norm(dim=1), torch.linalg.norm(t[0]),
                     torch.linalg.norm(t, 1, dim=2)), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_var_std_logsumexp(dtype):
    x = _input(3, 4, 5, dtype=dtype)
    check(lambda t: (t.var(1), t.std(2, correction=0), t.var(), t.std((0, 2), keepdim=True),
                     *torch.var_mean(t, 1), *torch.std_mean(t, (0, 2), correction=2),
                     torch.logsumexp(t, 1), torch.logsumexp(t, (0, 2), keepdim=True)), x)


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
def test_logsumexp_of_infinities():
    x = torch.tensor([[-float("inf")] * 3, [1.0, -float("inf"), 2.0], [float("inf"), 0.0, 1.0]])
    check(lambda t: torch.logsumexp(t, 1), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax(dtype):
    x = _input(3, 4, 5, dtype=dtype) * 3
    f = nn.functional
    check(lambda t: (t.softmax(0), t.softmax(1), f.softmax(t, -1), t.log_softmax(0),
                     f.log_softmax(t, -1), nn.Softmax(dim=1)(t), nn.LogSoftmax(dim=1)(t)), x)


class Norms(nn.Module):
    """The normalisation layers side by side, in evaluation mode."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.LayerNorm(5)
        self.layer2d = nn.LayerNorm([4, 5], elementwise_affine=False)
        self.batch1d = nn.BatchNorm1d(4)
        self.batch2d = nn.BatchNorm2d(4)
        self.instance = nn.InstanceNorm2d(4, affine=True)
        for bn in (self.batch1d, self.batch2d):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
        for p in self.parameters():
            nn.init.uniform_(p, 0.5, 1.5)

    def forward(self, x3, x4):
        return (self.layer(x3), self.layer2d(x3), self.batch1d(x3), self.batch2d(x4),
                self.instance(x4))


@pytest.mark.parametrize("dtype", DTYPES)
def test_normalisation_layers(dtype):
    model = Norms().to(dtype)
    check(model, _input(3, 4, 5, dtype=dtype), _input(2, 4, 3, 5, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_group_norm(dtype):
    torch.manual_seed(0)
    model = nn.GroupNorm(2, 4).to(dtype)
    check(model, _input(2, 4, 3, 5, dtype=dtype))


def test_replicas_keep_leading_axes():
    opts = poptorch.Options().replicationFactor(2).deviceIterations(2)
    x = _input(8, 3, 5)
    check(lambda t: (t.sum(2), t.amax(1, keepdim=True), t.argmax(2), t.cumsum(1),
                     t.softmax(-1), torch.linalg.vector_norm(t, dim=1)), x, options=opts)


def test_zero_dim_reductions_and_softmax():
    """0-d operands: an empty dims array, and softmax / var through one element (torch-mlir's
    pipeline looped forever on a 0-d softmax)."""
    check(lambda t: (t.sum(), t.amax(), t.prod(0), t.softmax(0), t.log_softmax(-1),
                     t.var(0, correction=0), t.std(0, correction=0), t.all(), t.any(0), t.argmax(),
                     t.cumsum(0), torch.logsumexp(t, 0)), torch.tensor(1.5))


def test_cdist_median_all_dims():
    a, b = _input(2, 5, 3), _input(2, 4, 3, low=-1.0)
    inf = float("inf")
    check(lambda s, t: (torch.cdist(s, t), torch.cdist(s, t, p=1), torch.cdist(s, t, p=inf),
                        torch.cdist(s[0], t[0], p=1.5), torch.median(s), *torch.median(s, 1),
                        torch.median(s, -1, keepdim=True).values, (s > -1.5).all((0, 2)),
                        (s > 0).all(())), a, b)


class Trained(nn.Module):
    """Parameters through addmv, cdist, a 0-d softmax and a median: their gradients."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.vector = nn.Parameter(torch.randn(4))
        self.points = nn.Parameter(torch.randn(3, 4))
        self.scalar = nn.Parameter(torch.tensor(0.7))

    def forward(self, bias, matrix):
        out = torch.addmv(bias, matrix, self.vector, beta=0.5, alpha=2.0)
        distances = torch.cdist(matrix, self.points) + torch.cdist(matrix, self.points, p=3)
        loss = out.sum() + distances.sum() + (self.scalar * 3).softmax(0) \
            + self.scalar.log_softmax(0) + self.points.median(1).values.sum()
        return out, poptorch.identity_loss(loss, reduction="sum")


def test_addmv_cdist_softmax_gradients():
    bias, matrix = _input(5), _input(5, 4)
    model, reference = Trained(), Trained()
    training = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0))
    training(bias, matrix)
    training.copyWeightsToHost()
    optimizer = torch.optim.SGD(reference.parameters(), lr=1.0)
    reference(bias, matrix)[1].backward()
    optimizer.step()
    for name, value in reference.named_parameters():
        torch.testing.assert_close(dict(model.named_parameters())[name], value,
                                   rtol=1e-5, atol=1e-5)


def test_nuclear_norm_refused():
    with pytest.raises(poptorch.Error, match=r"torch.norm.*Matrix nuclear norm is not supported"):
        check(lambda t: torch.norm(t, "nuc"), _input(4, 4))
