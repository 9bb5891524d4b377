"""NumPy kernels of the structural ops: nop, print, streaming-memory transfers, all_reduce."""

from __future__ import annotations

import numpy as np

from poptorch.dialects.structure import (
    AllReduceOp,
    CopyOp,
    NopOp,
    PrintOp,
    RemoteLoadOp,
    RemoteStoreOp,
)
from poptorch.runtime.jit.kernels.common import no_static, with_ranks
from poptorch.runtime.jit.kernels.registry import helper, kernel


@kernel(NopOp)
def nop(x):
    return x


@kernel(CopyOp, RemoteLoadOp, static=no_static)
def transfer(x):
    """IPU-Link copies and streaming-memory loads move a value unchanged; the machine
    model's timeline charges their time."""
    return x


@kernel(RemoteStoreOp, static=no_static)
def remote_store(x):
    """A store has no result; the machine model charges its time."""


@kernel(PrintOp, static=with_ranks)
def print_tensor(x, title, rank):
    """Print the tensor after its title, once per replica when there are several."""
    copies = np.asarray(x).reshape((-1,) + x.shape[x.ndim - rank:])
    for replica, copy in enumerate(copies):
        label = f"{title} (replica {replica})" if len(copies) > 1 else title
        text = np.array2string(copy)
        print(f"{label}: {text}" if label else text)
    return x


def _all_reduce_static(op):
    group = op.attributes["group"]
    return {"reduction": op.attributes["reduction"].value,
            "kind": group.kind.maybe_downcast().value, "size": group.size.maybe_downcast().value,
            "rank": op.input.type.rank}


_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


@kernel(AllReduceOp, static=_all_reduce_static)
def all_reduce(x, reduction, kind, size, rank):
    """Reduce over the leading replica axis within each replica group; every replica of a
    group gets the result. A value without a replica axis is the same on every replica,
    so only sum changes it, and that needs the replica count: such values are given
    their replica axis by the caller."""
    if x.ndim == rank or kind == "no_grouping" or x.shape[0] == 1:  # one replica: itself
        return x
    replicas = x.shape[0]
    if kind == "all":
        grouped = x.reshape((1, replicas) + x.shape[1:])
    elif kind == "consecutive":
        grouped = x.reshape((replicas // size, size) + x.shape[1:])
    else:  # orthogonal: replica r is in group r % (replicas // size)
        grouped = x.reshape((size, replicas // size) + x.shape[1:]).swapaxes(0, 1)
    reduced = _REDUCE[reduction](grouped, axis=1, keepdims=True).astype(x.dtype, copy=False)
    out = np.broadcast_to(reduced, grouped.shape)
    if kind == "orthogonal":
        out = out.swapaxes(0, 1)
    # a read-only view where the layout allows one (every replica of one group reads the
    # same array; the executor takes one replica's or group's value), else a copy
    return out.reshape(x.shape)


@helper("replica_sum")
def replica_sum(x, reduction, rank, replicas):
    """`all_reduce` over all replicas, returned once (without the replica axis) rather
    than to every replica: the JIT's reduction of a returned gradient (`compile_module`'s
    `summed`). A value without a replica axis is the same on every replica."""
    if x.ndim == rank:  # a new array either way: the caller may scale it in place
        return x * x.dtype.type(replicas) if reduction == "sum" else x.copy()
    if x.shape[0] != replicas:
        raise ValueError(f"a result has {x.shape[0]} replicas where {replicas} were compiled")
    return _REDUCE[reduction](x, axis=0).astype(x.dtype, copy=False)
