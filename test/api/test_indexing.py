"""The indexing family against PyTorch on CPU: gather/scatter, advanced indexing and
index_put, sort/topk, flip/roll, embeddings, and the ops that decompose into them.

Each `check` compiles one model, so each test groups several ops. Index outputs come
back as int32 (the IPU has no 64-bit types); `numerics.check` narrows PyTorch's int64.
"""

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the usual spelling
from numerics import check

import poptorch


def test_gather_index_select_take_along_dim():
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    index = torch.tensor([[0, 1], [2, 3], [4, 0], [1, 1]])
    i = torch.tensor([2, 0, 3])
    check(lambda t, idx, j: (torch.gather(t, 1, idx), torch.gather(t, 0, idx[:2]),
                             torch.index_select(t, 1, j), torch.index_select(t, 0, j),
                             torch.take_along_dim(t, torch.argsort(t, 1), 1)),
          x, index, i)


def test_advanced_indexing():
    torch.manual_seed(0)
    x = torch.randn(4, 5, 6)
    i, j = torch.tensor([2, -1, 0]), torch.tensor([1, 4, -5])
    check(lambda t, a, b: (t[a], t[:, a], t[a, b], t[a, 1:3], t[1:3, a], t[a[:, None], b],
                           t[-1, a], t[a, :, b], t[:, a, b], t[[-1, 0, -2]]),
          x, i, j)


def test_boolean_mask_indexing_is_data_dependent():
    x = torch.randn(4, 5)
    with pytest.raises(poptorch.Error, match=r"unsupported op 'tensor\[\.\.\.\]': its "
                       "output's shape depends on the values of its input"):
        poptorch.inferenceModel(_Fn(lambda t: t[t > 0]))(x)


def test_index_put_and_index_ops():
    torch.manual_seed(0)
    x, v = torch.randn(4, 5), torch.randn(3, 5)
    i, dup = torch.tensor([2, 0, -1]), torch.tensor([1, 3, 1])

    def fn(t, values, a, d):
        y = t.clone()
        y[:, a[:2]] = 1.0
        y[a, a + 1] = torch.zeros(3)
        return (t.index_put((a,), values), t.index_put((d,), values, accumulate=True),
                t.index_put((d, a), values[:, 0], accumulate=True), y,
                t.index_add(0, d, values), t.index_fill(1, a, 2.0),
                t.index_copy(0, a % 4, values))

    check(fn, x, v, i, dup)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter():
    torch.manual_seed(0)
    x, src = torch.randn(4, 5), torch.randn(4, 3)
    index = torch.tensor([[0, 1, 0], [2, 3, 2], [4, 0, 4], [1, 1, 1]])
    check(lambda t, idx, s: (
        torch.scatter(t, 1, idx[:, :2], s[:, :2]), torch.scatter(t, 1, idx, 2.5),
        torch.scatter(t, 0, idx[:2, :2] % 4, s), torch.scatter_add(t, 1, idx, s),
        torch.scatter(t, 1, idx, s, reduce="add"), torch.scatter(t, 1, idx, s, reduce="multiply"),
        *(t.scatter_reduce(1, idx, s, reduce, include_self=include)
          for reduce in ("sum", "prod", "amax", "amin", "mean")
          for include in (True, False)),
        (t * 10).int().scatter_reduce(1, idx, (s * 10).int(), "mean")),
        x, index, src)


def test_sort_argsort_topk():
    torch.manual_seed(0)
    x = torch.randn(4, 7)
    check(lambda t: (tuple(torch.sort(t, 1)), tuple(torch.sort(t, 0, descending=True)),
                     torch.argsort(t, 1, descending=True).int(), torch.msort(t),
                     tuple(torch.topk(t, 3)), tuple(torch.topk(t, 2, dim=0, largest=False))),
          x)


def test_sort_ties():
    # Equal values keep their order, in both directions (PyTorch's CPU sort is stable
    # on rows this short); topk orders ties unspecified, so only its values are compared.
    x = torch.tensor([[1.0, 3, 3, 2, 3, 1], [0, 0, 0, 1, 1, 0]])
    check(lambda t: (tuple(torch.sort(t, 1)), tuple(torch.sort(t, 1, descending=True)),
                     torch.topk(t, 3).values, torch.topk(t, 4, largest=False).values),
          x)
    i = torch.tensor([[3, 1, 3, 0, 1]], dtype=torch.int32)
    check(lambda t: tuple(torch.sort(t, 1, descending=True)), i)


def test_flip_roll_flattened():
    x = torch.arange(20.0).reshape(4, 5)
    check(lambda t: (torch.flip(t, (0, 1)), torch.flip(t, (-1,)), torch.fliplr(t),
                     torch.roll(t, 3), torch.roll(t, -7)), x)


def test_roll_dims():
    x = torch.arange(20.0).reshape(4, 5)
    check(lambda t: (torch.roll(t, 2, 1), torch.roll(t, (1, -1), (0, 1))), x)


def test_embedding_and_bags():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(6, 3, padding_idx=0)
    bags = [torch.nn.EmbeddingBag(6, 3, mode=mode) for mode in ("sum", "mean", "max")]
    last = torch.nn.EmbeddingBag(6, 3, mode="mean", include_last_offset=True)
    padded = torch.nn.EmbeddingBag(6, 3, mode="mean", padding_idx=4)
    weighted = torch.nn.EmbeddingBag(6, 3, mode="sum", padding_idx=2)
    modules = torch.nn.ModuleList([emb, *bags, last, padded, weighted])

    def fn(ids, flat, offsets, weights):
        return (emb(ids), *(bag(ids) for bag in bags),
                *(bag(flat, offsets) for bag in bags),
                last(flat, torch.cat([offsets, torch.tensor([6])])), padded(flat, offsets),
                weighted(flat, offsets, per_sample_weights=weights))

    ids = torch.tensor([[1, 0, 5], [2, 2, 4]])
    flat, offsets = torch.tensor([1, 2, 4, 4, 3, 2]), torch.tensor([0, 2, 2])
    check(_Fn(fn, modules), ids, flat, offsets, torch.rand(6))


def test_one_hot_tril_triu_diagonal_pad():
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    check(lambda t, i: (F.one_hot(i, 5).int(), torch.tril(t), torch.triu(t, 1), torch.tril(t, -1),
                        torch.diagonal(t), torch.diagonal(t, 2), torch.diagonal(t, -1),
                        torch.diag(t[0]), torch.diagonal(t.reshape(2, 2, 5), 0, 0, 2),
                        F.pad(t[None], (2, 3), mode="reflect"),
                        F.pad(t[None], (1, 2), mode="replicate")),
          x, torch.tensor([0, 3, 4, 1]))


def test_repeat_split_stack_masked_fill():
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    check(lambda t: (t.repeat(2, 1), t.repeat(1, 2, 3), t.repeat_interleave(2, 0),
                     *torch.chunk(t, 3, 1), *torch.split(t, [1, 3], 0), *torch.unbind(t, 0),
                     torch.stack([t, -t], 1), t.masked_fill(t > 0, 0.5)), x)


def test_slice_and_select_scatter():
    x = torch.arange(20.0).reshape(4, 5)
    check(lambda t: (torch.slice_scatter(t, torch.zeros(4, 2), 1, 1, 5, 2),
                     torch.slice_scatter(t, -t[:2], 0, 2),
                     torch.select_scatter(t, torch.ones(4), 1, -1)), x)


def test_replicas_index_a_shared_weight():
    # Inputs carry a replica axis, the weight does not: the kernels broadcast it.
    torch.manual_seed(0)
    emb, bag = torch.nn.Embedding(6, 3), torch.nn.EmbeddingBag(6, 3, mode="max")

    def fn(ids, t):
        index = ids.long() % 4
        values, order = torch.sort(t, 1)
        return (emb(ids), bag(ids), torch.gather(t, 1, index), values, order.int(),
                t.scatter_add(1, index, t), t[torch.arange(t.shape[0])[:, None], index])

    options = poptorch.Options().replicationFactor(2)
    ids, x = torch.tensor([[1, 5], [0, 2], [3, 3], [4, 1]]), torch.randn(4, 4)
    check(_Fn(fn, torch.nn.ModuleList([emb, bag])), ids, x, options=options)


class _Fn(torch.nn.Module):
    """A function as a module, with the submodules it uses registered as weights."""

    def __init__(self, fn, modules=None):
        super().__init__()
        self.fn, self.modules_used = fn, modules

    def forward(self, *args):
        return self.fn(*args)
