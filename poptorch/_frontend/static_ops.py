"""Capture-time routes for torch calls PopTorch gives a static form that aten lacks.

Some torch functions have an output shape that depends on their input's values in
PyTorch, while PopTorch fixes it from an argument (`torch.bincount`'s `minlength`,
`F.one_hot`'s `num_classes`); others have no aten lowering but an equivalent one
(`torch.index_reduce` is a `scatter_reduce` with its index broadcast, as PopTorch's
canonicalisation lowers it; `torch.scatter`'s `reduce=` is a `scatter_reduce`, which
has a gradient; `torch.index_fill` is a `where`, whose gradient needs no `_unique`; a
differentiated `F.embedding_bag` is an `embedding` and an `index_add`; `torch.bucketize`
of a Python number is that of a 0-d tensor), or check an index dtype that narrowing
changed (`torch.take_along_dim` on an int64 index poptorch streams as int32).
`StaticShapes`, a TorchFunctionMode active while poptorch exports a model
(`capture.tracing_contexts`), replaces each such call by standard torch ops before
torch.export records it, so the exported graph has static shapes and ops the compiler
lowers; autograd derives their gradients. Calls PopTorch refuses raise a poptorch.Error
with PopTorch's words at the user's line.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own alias
from torch.overrides import TorchFunctionMode

from poptorch._frontend.attention_decompositions import scaled_dot_product_attention
from poptorch.errors import Error


def _bincount(input, weights=None, minlength=0):  # noqa: A002 - torch's names
    """torch.bincount as PopTorch computes it: `minlength` bins exactly (values at or
    above it are dropped), by a scatter-add of the weights (ones without them) into
    zeros; torch's result dtypes (int64 counts, float32 or float64 sums)."""
    if not isinstance(minlength, int) or minlength <= 0:
        raise Error("Bincount `minlength` must be specified and must be a constant. On the "
                    "IPU MK2 platform the minimum length is also the maximum length: pass "
                    "torch.bincount(x, minlength=N) with N > 0, the number of bins", type="capture")
    if weights is None:
        dtype = torch.int64
        weights = torch.ones_like(input, dtype=dtype)
    else:
        dtype = torch.float32 if weights.dtype == torch.float32 else torch.float64
        weights = weights.to(dtype)
    inside = input < minlength
    index = torch.where(inside, input, 0).to(torch.int64)
    kept = torch.where(inside, weights, torch.zeros_like(weights))
    return torch.zeros(minlength, dtype=dtype).scatter_add(0, index, kept)


def _one_hot(tensor, num_classes=-1):
    """F.one_hot with a given number of classes; without it (the class count would come
    from the input's values) the error PopTorch gives."""
    if num_classes < 0:
        raise Error("OneHot num classes must be specified and must be constant: pass "
                    "F.one_hot(x, num_classes=N)", type="capture")
    return F.one_hot(tensor, num_classes)


def _broadcast_index(index, source, dim):
    """`index_reduce`'s 1-d index along `dim` as a `scatter_reduce` index: shaped and
    expanded like `source`."""
    dim = dim % max(source.dim(), 1)
    shape = [source.size(d) if d == dim else 1 for d in range(source.dim())]
    return index.to(torch.int64).reshape(shape).expand(source.shape)


def _index_reduce(input, dim, index, source, reduce, *, include_self=True,  # noqa: A002
                  out=None):
    """torch.index_reduce as the `scatter_reduce` it is, with the index broadcast (as
    PopTorch's canonicalisation lowers it)."""
    result = input.scatter_reduce(dim, _broadcast_index(index, source, dim), source, reduce,
                                  include_self=include_self)
    return result if out is None else out.copy_(result)


def _index_reduce_(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """Tensor.index_reduce_ as `scatter_reduce_` with the index broadcast."""
    return input.scatter_reduce_(dim, _broadcast_index(index, source, dim), source, reduce,
                                 include_self=include_self)


def _take_along_dim(input, indices, dim=None, *, out=None):  # noqa: A002 - torch's names
    """torch.take_along_dim on an int32 index: torch wants int64, which poptorch narrows
    to int32 on the host (as PopTorch does)."""
    if indices.dtype == torch.int32:
        indices = indices.to(torch.int64)
    kwargs = {} if out is None else {"out": out}
    return torch.take_along_dim(input, indices, dim, **kwargs)


def _index_fill(input, dim, index, value):  # noqa: A002 - torch's names
    """torch.index_fill as a `where` over a mask of the filled positions along `dim`:
    its gradient in a tensor `value` is the sum over those positions (torch's takes
    `_unique` of the index, a data-dependent shape), and a non-contiguous input needs no
    strided copy."""
    dim = dim % max(input.dim(), 1)
    size = input.size(dim) if input.dim() else 1
    mask = torch.zeros(size, dtype=torch.bool).index_fill(0, index, True)
    mask = mask.reshape([size if d == dim else 1 for d in range(input.dim())])
    value = (value.to(input.dtype) if isinstance(value, torch.Tensor)
             else torch.scalar_tensor(value, dtype=input.dtype))
    return torch.where(mask, value, input)


def _index_fill_(input, dim, index, value):  # noqa: A002 - torch's names
    """Tensor.index_fill_ as `_index_fill` copied into the tensor."""
    return input.copy_(_index_fill(input, dim, index, value))


def _embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2.0,  # noqa: A002
                   scale_grad_by_freq=False, mode="mean", sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """F.embedding_bag to differentiate as the rows it picks (`F.embedding`, times the
    per-sample weights) added (`index_add`) or maximised (`scatter_reduce`) into their
    bags, whose gradients lower, where aten's `_embedding_bag_backward` and
    `_embedding_bag_per_sample_weights_backward` do not; without a gradient it stays one
    `embedding_bag` (ipu.embedding_bag)."""
    weighted = per_sample_weights is not None
    if not torch.is_grad_enabled() or not (
            weight.requires_grad or (weighted and per_sample_weights.requires_grad)):
        return F.embedding_bag(input, weight, offsets, max_norm, norm_type,
                               scale_grad_by_freq, mode, sparse, per_sample_weights,
                               include_last_offset, padding_idx)
    if input.dim() == 2:  # bags of equal length, as rows
        offsets = torch.arange(0, input.numel(), max(input.size(1), 1))
        input = input.reshape(-1)  # noqa: A001 - torch's name
        per_sample_weights = per_sample_weights.reshape(-1) if weighted else None
        include_last_offset = False
    count, width = input.numel(), weight.size(1)
    rows = F.embedding(input, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    if weighted:
        rows = rows * per_sample_weights.to(rows.dtype).unsqueeze(-1)
    bags = offsets.numel() - 1 if include_last_offset else offsets.numel()
    bag = (offsets.unsqueeze(0) <= torch.arange(count).unsqueeze(1)).sum(1) - 1
    keep = (bag >= 0) & (bag < bags)
    if padding_idx is not None:
        keep = keep & (input != padding_idx % weight.size(0))
    target = torch.where(keep, bag, bags)  # row `bags` collects the dropped ones
    sizes = torch.zeros(bags + 1, dtype=rows.dtype).index_add(
        0, target, torch.ones(count, dtype=rows.dtype)).unsqueeze(-1)
    zeros = torch.zeros(bags + 1, width, dtype=rows.dtype)
    if mode == "max":
        out = zeros.scatter_reduce(0, target.unsqueeze(-1).expand(count, width), rows,
                                   "amax", include_self=False)
        out = torch.where(sizes > 0, out, zeros)
    else:
        out = zeros.index_add(0, target, rows)
        if mode == "mean":
            out = out / sizes.clamp(min=1)
    return out[:bags]


def _bucketize(input, boundaries, *, out_int32=False, right=False, out=None):  # noqa: A002
    """torch.bucketize of a Python number as of a 0-d tensor (aten's `bucketize.Scalar`
    has no lowering)."""
    if not isinstance(input, torch.Tensor):
        input = torch.scalar_tensor(input, dtype=torch.result_type(boundaries, input))  # noqa: A001
    given = {} if out is None else {"out": out}
    return torch.bucketize(input, boundaries, out_int32=out_int32, right=right, **given)


_SCATTER_REDUCTIONS = {"add": "sum", "multiply": "prod"}


def _scatter(original: Callable, inplace: bool) -> Callable:
    """torch.scatter (`inplace`: Tensor.scatter_) whose `reduce=` ("add", "multiply")
    is the `scatter_reduce` ("sum", "prod") including the input, which has a gradient:
    torch has none for scatter with `reduce=`, PopTorch lowers both to one
    scatter-reduce."""
    def route(input, dim, index, src=None, *, value=None, reduce=None,  # noqa: A002
              out=None):
        source = value if src is None else src
        given = {} if out is None else {"out": out}
        if reduce not in _SCATTER_REDUCTIONS:
            return original(input, dim, index, source, **given,
                            **({} if reduce is None else {"reduce": reduce}))
        if not isinstance(source, torch.Tensor):
            source = torch.full(index.shape, source, dtype=input.dtype)
        method = input.scatter_reduce_ if inplace else input.scatter_reduce
        result = method(dim, index, source, _SCATTER_REDUCTIONS[reduce])
        return result if out is None else out.copy_(result)
    return route


_ROUTES: dict[Callable, Callable] = {
    torch.bincount: _bincount, torch.Tensor.bincount: _bincount,
    F.one_hot: _one_hot,
    torch.index_reduce: _index_reduce, torch.Tensor.index_reduce: _index_reduce,
    torch.Tensor.index_reduce_: _index_reduce_,
    torch.take_along_dim: _take_along_dim, torch.Tensor.take_along_dim: _take_along_dim,
    F.embedding_bag: _embedding_bag, torch.bucketize: _bucketize,
    torch.index_fill: _index_fill, torch.Tensor.index_fill: _index_fill,
    torch.Tensor.index_fill_: _index_fill_,
    torch.scatter: _scatter(torch.scatter, False),
    torch.Tensor.scatter: _scatter(torch.Tensor.scatter, False),
    torch.Tensor.scatter_: _scatter(torch.Tensor.scatter_, True),
    # half attention in half, as PopART's matmuls and softmax (attention_decompositions)
    F.scaled_dot_product_attention: scaled_dot_product_attention,
}


class StaticShapes(TorchFunctionMode):
    """Routes the torch calls in `_ROUTES` to their static, lowerable forms while
    poptorch captures a model (the mode is off inside a route, which calls torch
    directly); a route's error is located at the innermost frame outside the files
    `library_file` (capture's) calls torch's and poptorch's own: the user's call."""

    def __init__(self, library_file: Callable[[str], bool]) -> None:
        super().__init__()
        self._library_file = library_file

    def __torch_function__(self, func, types, args=(), kwargs=None):
        route = _ROUTES.get(func, func)
        try:
            return route(*args, **(kwargs or {}))
        except Error as err:
            if err.location:
                raise
            frames = [f for f in traceback.extract_stack() if not f.filename.startswith("<")
                      and not self._library_file(f.filename)]
            location = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
            raise Error(err.message, err.type, location) from None
