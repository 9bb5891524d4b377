"""Indexing ops PopTorch gives a static form (issue 23), forward and backward against
PyTorch on the CPU: torch.bincount with `minlength`, torch.index_reduce,
torch.take_along_dim on an int64 index, torch.index_fill, index_put with and without
accumulation on a tensor made in forward, torch.scatter with `reduce=`, the gradients
of F.embedding_bag, torch.bucketize; and the calls
PopTorch refuses (bincount without `minlength`, F.one_hot without `num_classes`), at
the user's line.
"""

import copy

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the usual spelling
from numerics import check

import poptorch


class _Weighted(torch.nn.Module):
    """`fn(*weights, *inputs)` with trainable weights, its loss a weighted sum."""

    def __init__(self, fn, *shapes):
        super().__init__()
        torch.manual_seed(0)
        self.fn = fn
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(torch.randn(*shape)) for shape in shapes)

    def forward(self, *inputs):
        out = self.fn(*self.weights, *inputs)
        scale = torch.linspace(-1, 2, out.numel()).reshape(out.shape)
        return poptorch.identity_loss((out * scale).sum(), reduction="none")


def train_once(fn, shapes, *inputs, reference=None):
    """One SGD step (lr 1) of `fn`'s weights with poptorch and of `reference` (default
    `fn`) on the CPU, from the same weights; the updated weights must agree."""
    model = _Weighted(fn, *shapes)
    cpu = copy.deepcopy(model)
    if reference is not None:
        cpu.fn = reference
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0))
    ipu(*inputs)
    ipu.copyWeightsToHost()
    optimizer = torch.optim.SGD(cpu.parameters(), lr=1.0)
    cpu(*inputs).backward()
    optimizer.step()
    for ours, theirs in zip(model.parameters(), cpu.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_bincount_has_minlength_bins():
    x = torch.tensor([1, 3, 3, 0, 7, 2])
    weights = torch.rand(6)
    check(lambda t, w: (torch.bincount(t, minlength=8), t.bincount(w, 9),
                        torch.bincount(t, w.half(), minlength=8)), x, weights)


def test_bincount_drops_values_from_minlength_on():
    """PopTorch's `minlength` is also the maximum length: larger values are dropped."""
    x = torch.tensor([1, 3, 3, 0, 7, 2])
    out = poptorch.inferenceModel(_Fn(lambda t: torch.bincount(t, minlength=3)))(x)
    assert out.tolist() == [1, 1, 1]


def test_bincount_without_minlength_is_refused():
    model = poptorch.inferenceModel(_Fn(lambda t: torch.bincount(t)))
    with pytest.raises(poptorch.Error) as err:
        model(torch.tensor([1, 3, 3]))
    assert err.value.message == (
        "Bincount `minlength` must be specified and must be a constant. On the IPU MK2 "
        "platform the minimum length is also the maximum length: pass "
        "torch.bincount(x, minlength=N) with N > 0, the number of bins")
    assert err.value.location.startswith(f"{__file__}:")


def test_one_hot_without_num_classes_is_refused():
    check(lambda t: F.one_hot(t, 5), torch.tensor([0, 4, 2]))
    model = poptorch.inferenceModel(_Fn(lambda t: F.one_hot(t)))
    with pytest.raises(poptorch.Error) as err:
        model(torch.tensor([0, 4, 2]))
    assert err.value.message == ("OneHot num classes must be specified and must be "
                                 "constant: pass F.one_hot(x, num_classes=N)")
    assert err.value.location.startswith(f"{__file__}:")


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce(reduce):
    index = torch.tensor([0, 4, 4, 1])
    check(lambda t, i, s, s1: (torch.index_reduce(t, 0, i, s, reduce),
                               t.index_reduce(1, i[1:3] % 3, s1, reduce, include_self=False)),
          torch.randn(5, 3), index, torch.randn(4, 3), torch.randn(5, 2))
    train_once(lambda t, s, i: t.index_reduce(0, i, s, reduce, include_self=False),
               [(5, 3), (4, 3)], index)


def test_take_along_dim_on_an_int64_index():
    x, index = torch.randn(4, 5), torch.randint(0, 4, (2, 5))
    check(lambda t, i: (torch.take_along_dim(t, i, 0), t.take_along_dim(i)), x, index)
    train_once(lambda t, i: torch.take_along_dim(t, i, 0), [(4, 5)], index)


def test_index_fill_with_a_tensor_value():
    """Forward on a non-contiguous input, and the gradient of the value (torch's takes
    `_unique` of the index, a data-dependent shape)."""
    index = torch.tensor([1, -1, 1])
    check(lambda t, i, v: (t.t().index_fill(1, i, v), torch.index_fill(t.int(), 0, i, -2.5)),
          torch.randn(4, 5), index, torch.tensor(3.0))
    train_once(lambda t, v, i: t.index_fill(1, i, v[0] * 2), [(4, 5), (1,)], index % 5)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_gradients(mode):
    """The table's gradient (and the per-sample weights', in mode sum), with offsets (an
    empty bag, the last offset ending the last bag: the input's length, as torch's
documentation requires), 2-d bags and a padding index."""
    ids, bags = torch.tensor([1, 4, 4, 2, 0, 7, 3]), torch.tensor([[1, 4, 0], [2, 2, 5]])
    offsets = torch.tensor([0, 2, 2, 5])
    weighted = mode == "sum"

    def bag(table, scale, i, o, b):
        ps = scale[: i.numel()] if weighted else None
        return torch.cat([
            F.embedding_bag(i, table, o, mode=mode, per_sample_weights=ps),
            F.embedding_bag(i, table, torch.cat([o, o.new_full((1,), i.numel())]),
                            mode=mode, include_last_offset=True, per_sample_weights=ps,
                            padding_idx=4),
            F.embedding_bag(b, table, mode=mode, padding_idx=0,
                            per_sample_weights=scale[:6].reshape(2, 3) if weighted else None)])

    train_once(bag, [(8, 3), (7,)], ids, offsets, bags)


def test_bucketize():
    """Left and right bins, duplicate boundaries, int32 output, a Python number."""
    x = torch.tensor([[0.5, 1.0, 3.0, 9.0, 10.0], [5.0, 6.0, 7.0, -1.0, 3.0]])
    check(lambda t, b, d: (torch.bucketize(t, b), torch.bucketize(t, d, right=True),
                           torch.bucketize(t.half(), d.half(), out_int32=True),
                           torch.bucketize(3.0, b), torch.bucketize(7, d, right=True)),
          x, torch.tensor([1.0, 3.0, 5.0, 7.0, 9.0]), torch.tensor([1.0, 3.0, 3.0, 3.0, 9.0]))


def _put(w, v, i):
    y = w * 2
    y[i] = v
    return y


def _put_accumulate(w, v, i):
    y = w * 2
    y.index_put_((i,), v, accumulate=True)
    y[i, i] += v[:, 0]
    return y


@pytest.mark.parametrize("fn", [_put, _put_accumulate])
def test_index_put_on_a_tensor_made_in_forward(fn):
    index = torch.tensor([1, 3, 1])
    check(fn, torch.randn(4, 5), torch.randn(3, 5), index)
    train_once(fn, [(4, 5), (3, 5)], index)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_argument(reduce):
    """Forward as torch; backward (torch has none for `reduce=`) as the scatter_reduce
    it is."""
    index = torch.tensor([[0, 1], [2, 2], [3, 0]])
    same = {"add": "sum", "multiply": "prod"}[reduce]

    def scatter(x, s, i):
        y = x * 1
        y.scatter_(1, i, s, reduce=reduce)
        return torch.scatter(y, 0, i % 3, 1.5, reduce=reduce) + x.scatter(1, i, s,
                                                                            reduce=reduce)

    def reference(x, s, i):
        y = x.scatter_reduce(1, i, s, same)
        return (y.scatter_reduce(0, i % 3, torch.full(i.shape, 1.5), same)
                + x.scatter_reduce(1, i, s, same))

    check(scatter, torch.randn(3, 4), torch.randn(3, 2), index)
    train_once(scatter, [(3, 4), (3, 2)], index, reference=reference)


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)
