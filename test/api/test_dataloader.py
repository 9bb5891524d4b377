"""poptorch.DataLoader (spec 11.7): combined batch sizes, batches, shuffling and errors."""

import logging

import pytest
import torch
from torch.utils.data import BatchSampler, IterableDataset, SequentialSampler, TensorDataset

from poptorch.data import DataLoader, DataLoaderMode
from poptorch.enums import CommGroupType
from poptorch.errors import Error
from poptorch.options import Options


def dataset(n: int) -> TensorDataset:
    """Element i is (a [3] vector filled with i, the label i)."""
    return TensorDataset(torch.arange(n).float()[:, None].expand(n, 3), torch.arange(n))


def options(iterations=1, replicas=1, group=1, accumulation=1,
            kind=CommGroupType.Consecutive) -> Options:
    opts = Options().deviceIterations(iterations).replicationFactor(replicas)
    opts.inputReplicaGrouping(group, kind).Training.gradientAccumulation(accumulation)
    return opts


class Counting(IterableDataset):
    def __iter__(self):
        return iter(torch.arange(10))


@pytest.mark.parametrize("batch, iterations, replicas, group, accumulation, combined", [
    (1, 1, 1, 1, 1, 1),
    (2, 3, 1, 1, 1, 6),
    (2, 1, 4, 1, 1, 8),
    (2, 1, 4, 2, 1, 4),
    (2, 1, 4, 4, 1, 2),
    (1, 1, 1, 1, 5, 5),
    (3, 2, 4, 2, 5, 60),
])
def test_combined_batch_size(batch, iterations, replicas, group, accumulation, combined):
    for kind in (CommGroupType.Consecutive, CommGroupType.Orthogonal):
        opts = options(iterations, replicas, group, accumulation, kind)
        loader = DataLoader(opts, dataset(combined * 3 + combined // 2), batch_size=batch)
        assert isinstance(loader, torch.utils.data.DataLoader)
        assert loader.combinedBatchSize == combined and loader.options is opts
        batches = list(loader)
        assert len(loader) == len(batches) == 3  # drop_last=True by default
        for index, (x, y) in enumerate(batches):
            assert x.shape == (combined, 3) and y.shape == (combined,)
            assert y.tolist() == list(range(index * combined, (index + 1) * combined))


def test_drop_last_false_keeps_the_incomplete_batch_and_warns():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("poptorch")
    logger.addHandler(handler)
    try:
        loader = DataLoader(options(iterations=2), dataset(11), batch_size=3, drop_last=False)
    finally:
        logger.removeHandler(handler)
    assert [len(y) for _, y in loader] == [6, 5]
    assert [r.getMessage() for r in records] == [
        "the dataset's 11 elements are not a multiple of the combined batch size 6 and "
        "drop_last=False: the last batch holds 5 elements; pass drop_last=True to drop it"]
    assert [len(y) for _, y in DataLoader(options(iterations=2), dataset(11), batch_size=3)] == [6]


def test_shuffle():
    def order(seed, shuffle=True):
        loader = DataLoader(Options(), dataset(20), batch_size=4, shuffle=shuffle,
                            generator=torch.Generator().manual_seed(seed))
        return [y.tolist() for _, y in loader]

    assert order(0) == order(0)
    assert order(0) != order(1)
    assert sorted(sum(order(0), [])) == list(range(20))
    assert order(0, shuffle=None) == order(0, shuffle=False) == [
        list(range(i, i + 4)) for i in range(0, 20, 4)]


def test_batch_size_none_disables_batching():
    loader = DataLoader(options(iterations=4), dataset(3), batch_size=None)
    assert loader.combinedBatchSize is None
    assert [y.item() for _, y in loader] == [0, 1, 2]


def test_batch_sampler_gives_the_batches():
    sampler = BatchSampler(SequentialSampler(range(10)), batch_size=4, drop_last=False)
    loader = DataLoader(options(iterations=2), dataset(10), batch_sampler=sampler)
    assert loader.combinedBatchSize is None
    assert [y.tolist() for _, y in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_iterable_dataset_and_torch_arguments():
    loader = DataLoader(options(iterations=2), Counting(), batch_size=2,
                        collate_fn=lambda items: torch.stack(items) * 10)
    assert [b.tolist() for b in loader] == [[0, 10, 20, 30], [40, 50, 60, 70]]


def test_options_are_frozen_and_terminate_does_nothing():
    opts = options(iterations=2)
    loader = DataLoader(opts, dataset(8), batch_size=2)
    with pytest.raises(Error, match="these options are frozen"):
        opts.deviceIterations(3)
    assert opts.clone().deviceIterations(3).device_iterations == 3
    assert loader.terminate() is None
    assert [len(y) for _, y in loader] == [4, 4]


def test_distributed_partitioning_errors():
    """What auto_distributed_partitioning cannot split (test_async_data.py tests the split)."""
    opts = Options()
    opts.Distributed.configureProcessId(0, 2)
    fix = "or pass auto_distributed_partitioning=False and partition it yourself"
    for kwargs, message in [
        ({"dataset": Counting()},
         "auto_distributed_partitioning cannot split an IterableDataset between 2 processes: "
         "have its __iter__ yield this process's share (options.Distributed.processId of "
         "numProcesses) and pass auto_distributed_partitioning=False"),
        ({"batch_size": None},
         f"auto_distributed_partitioning needs a batch_size to split the dataset between 2 "
         f"processes in whole batches; pass one, {fix}"),
        ({"sampler": range(8)},
         f"auto_distributed_partitioning chooses the indices of each of the 2 processes: it "
         f"cannot be used with a sampler or batch_sampler; leave those out, {fix}"),
        ({"shuffle": True},
         "shuffle=True with auto_distributed_partitioning needs options.randomSeed(N), with "
         "the same N in all 2 processes, so that they shuffle the dataset alike and read "
         "disjoint shares"),
    ]:
        with pytest.raises(Error) as info:
            DataLoader(**{"options": opts.clone(), "dataset": dataset(8), **kwargs})
        assert str(info.value) == f"DataLoader: {message}"
    loader = DataLoader(opts.clone(), Counting(), auto_distributed_partitioning=False)
    assert len(list(loader)) == 10


SAMPLER = BatchSampler(SequentialSampler(range(10)), batch_size=4, drop_last=False)
BATCH_SAMPLER_ERROR = ("DataLoader: batch_sampler is mutually exclusive with batch_size, "
                       "shuffle and sampler: leave them at their defaults (each list of indices "
                       "from batch_sampler is one batch)")


@pytest.mark.parametrize("kwargs, message", [
    ({"options": None}, "DataLoader: options must be a poptorch.Options, got None"),
    ({"async_options": {"buffer_size": 2}},
     "DataLoader: async_options is only used by the asynchronous modes; pass "
     "mode=poptorch.DataLoaderMode.Async (or AsyncRebatched), or leave async_options out"),
    ({"rebatched_worker_size": 2},
     "DataLoader: rebatched_worker_size is only used by the asynchronous modes; pass "
     "mode=poptorch.DataLoaderMode.Async (or AsyncRebatched), or leave rebatched_worker_size "
     "out"),
    ({"mode": DataLoaderMode.Async, "rebatched_worker_size": 2},
     "DataLoader: rebatched_worker_size is only used by DataLoaderMode.AsyncRebatched; pass "
     "that mode, or leave rebatched_worker_size out"),
    ({"mode": DataLoaderMode.AsyncRebatched, "rebatched_worker_size": 0},
     "DataLoader: rebatched_worker_size must be an int >= 1, got 0"),
    ({"mode": DataLoaderMode.AsyncRebatched, "batch_size": 2, "rebatched_worker_size": 3},
     "DataLoader: rebatched_worker_size (3) must be <= the combined batch size (2)"),
    ({"mode": DataLoaderMode.Async, "async_options": {"rebatched_size": 4}},
     "DataLoader: async_options cannot set rebatched_size: the DataLoader sets it (to the "
     "combined batch size, with DataLoaderMode.AsyncRebatched)"),
    ({"mode": DataLoaderMode.Async, "async_options": {"buffer": 4, "sleep": 1}},
     "DataLoader: async_options: unknown option(s) buffer, sleep; AsynchronousDataAccessor "
     "takes buffer_size, miss_sleep_time_in_ms, load_indefinitely, early_preload, "
     "sharing_strategy"),
    ({"mode": DataLoaderMode.Async, "async_options": [("buffer_size", 4)]},
     "DataLoader: async_options must be a dict of AsynchronousDataAccessor arguments, got "
     "[('buffer_size', 4)]"),
    ({"mode": "Sync"}, "DataLoader: mode must be a poptorch.DataLoaderMode (Sync, Async or "
                       "AsyncRebatched), got 'Sync'"),
    ({"batch_size": 0}, "DataLoader: batch_size must be an int >= 1 or None, got 0"),
    ({"batch_size": 2.0}, "DataLoader: batch_size must be an int >= 1 or None, got 2.0"),
    ({"batch_size": True}, "DataLoader: batch_size must be an int >= 1 or None, got True"),
    ({"batch_sampler": SAMPLER, "batch_size": 2}, BATCH_SAMPLER_ERROR),
    ({"batch_sampler": SAMPLER, "shuffle": True}, BATCH_SAMPLER_ERROR),
    ({"batch_sampler": SAMPLER, "sampler": range(10)}, BATCH_SAMPLER_ERROR),
])
def test_errors(kwargs, message):
    kwargs = {"options": Options(), "dataset": dataset(10), **kwargs}
    with pytest.raises(Error) as info:
        DataLoader(**kwargs)
    assert str(info.value) == message
    assert info.value.type == "dataloader"
