"""AsynchronousDataAccessor and DataLoader's Async modes (spec 11.7): loading ahead in a
worker process, rebatching, epochs, worker failures, shutdown, distributed shares."""

import contextlib
import gc
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from torch.utils.data import Dataset, IterableDataset, TensorDataset

import poptorch
from poptorch import AsynchronousDataAccessor, DataLoader, DataLoaderMode, SharingStrategy
from poptorch.errors import Error

FORK = {"sharing_strategy": SharingStrategy.Fork}  # the quickest to start


class Counted(Dataset):
    """Element i is [i, i]; counts in shared memory the elements the worker loaded."""

    def __init__(self, n, fail_at=None, delay=0.0):
        self.n, self.fail_at, self.delay = n, fail_at, delay
        self.loaded = torch.zeros(1, dtype=torch.int64).share_memory_()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"element {i} is corrupt")
        time.sleep(self.delay)
        self.loaded += 1
        return torch.full((2,), float(i))


class Increment(IterableDataset):
    """PopTorch's IncrementIterableDataset: full((2, 3), i) for i in [start, start+length)."""

    def __init__(self, length):
        self.total, self.start, self.length = length, 0, length

    def __len__(self):
        return self.total

    def __iter__(self):
        for i in range(self.start, self.start + self.length):
            yield torch.full((2, 3), float(i))


def split_between_workers(worker_id):
    """The torch workers' split of Increment (PopTorch's tests' _worker_init_fn)."""
    info = torch.utils.data.get_worker_info()
    dataset = info.dataset
    per_worker = math.ceil(dataset.total / info.num_workers)
    dataset.start = per_worker * worker_id
    dataset.length = min(per_worker, dataset.total - dataset.start)


def values(batches):
    return [int(v) for b in batches for v in b.reshape(b.shape[0], -1)[:, 0]]


def items(accessor):
    """The first value of each of the accessor's (unbatched) elements."""
    return [int(b[0]) for b in accessor]


def read(loader):
    """Every batch, cloned (the accessor's batches are views of its ring buffer)."""
    return [b.clone() for b in loader]


def wait_for(predicate, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def settles_at(counter, value):
    """True if the counter reaches `value` (waiting for a slow worker) and stays there."""
    wait_for(lambda: int(counter) >= value)
    time.sleep(0.5)
    return int(counter) == value


def process_gone(pid):
    """True once `pid` is neither running nor a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            stat.read()
    except FileNotFoundError:
        return True
    return False


@pytest.mark.parametrize("strategy", list(SharingStrategy))
def test_every_sharing_strategy_reads_the_dataset(strategy):
    loader = torch.utils.data.DataLoader(Counted(10), batch_size=2)
    accessor = AsynchronousDataAccessor(loader, sharing_strategy=strategy)
    assert len(accessor) == 5
    for _ in range(2):
        assert [b.tolist() for b in accessor] == [[[2 * k] * 2, [2 * k + 1] * 2]
                                                  for k in range(5)]
    accessor.terminate()


@pytest.mark.parametrize("buffer_size", [1, 4])
def test_the_worker_fills_the_ring_buffer_ahead_and_waits(buffer_size):
    dataset = Counted(20)
    accessor = AsynchronousDataAccessor(dataset, buffer_size=buffer_size, **FORK)
    assert settles_at(dataset.loaded, 0)  # early_preload=False: nothing before iter()
    iterator = iter(accessor)
    assert next(iterator).tolist() == [0, 0]
    # the batch held by the consumer, buffer_size - 1 more, one more waiting for a slot
    assert settles_at(dataset.loaded, buffer_size + 1)
    assert next(iterator).tolist() == [1, 1]
    assert settles_at(dataset.loaded, buffer_size + 2)
    accessor.terminate()


def test_early_preload_loads_at_construction():
    dataset = Counted(20)
    accessor = AsynchronousDataAccessor(dataset, buffer_size=3, early_preload=True, **FORK)
    assert settles_at(dataset.loaded, 4)  # 3 slots full, a 4th element waiting
    assert items(accessor) == list(range(20))
    accessor.terminate()


@pytest.mark.parametrize("indefinitely", [True, False])
def test_load_indefinitely_starts_the_next_epoch_at_once(indefinitely):
    dataset = Counted(6)
    accessor = AsynchronousDataAccessor(dataset, buffer_size=2,
                                        load_indefinitely=indefinitely, **FORK)
    assert items(accessor) == list(range(6))
    # the worker reads the next epoch ahead only when loading indefinitely
    assert settles_at(dataset.loaded, 6 + 3 if indefinitely else 6)
    assert items(accessor) == list(range(6))
    assert items(accessor) == list(range(6))
    accessor.terminate()


def test_a_new_iterator_restarts_a_partly_read_epoch():
    accessor = AsynchronousDataAccessor(Counted(8), buffer_size=3, **FORK)
    iterator = iter(accessor)
    assert [next(iterator).tolist()[0] for _ in range(3)] == [0, 1, 2]
    assert items(accessor) == list(range(8))
    iterator = iter(accessor)
    assert next(iterator).tolist()[0] == 0
    assert items(accessor) == list(range(8))
    accessor.terminate()


def test_batches_are_views_valid_until_the_next_one():
    accessor = AsynchronousDataAccessor(Counted(8), buffer_size=2, **FORK)
    batches = list(accessor)  # not cloned: the ring buffer's 2 slots, reused
    assert len(batches) == 8 and len({b.data_ptr() for b in batches}) == 2
    accessor.terminate()


def test_structures_of_tensors_come_back_as_they_went():
    class Pairs(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return {"x": torch.full((3,), float(i)), "pair": (torch.tensor(i), [torch.ones(1)])}

    loader = torch.utils.data.DataLoader(Pairs(), batch_size=2)
    accessor = AsynchronousDataAccessor(loader, **FORK)
    for got, expected in zip(accessor, loader, strict=True):
        assert got.keys() == expected.keys() and type(got["pair"]) is type(expected["pair"])
        torch.testing.assert_close(got, expected)
    accessor.terminate()


def test_rebatched_size_cuts_and_joins_batches():
    def batches(dataset, size, **kwargs):
        accessor = AsynchronousDataAccessor(dataset, rebatched_size=size, **FORK, **kwargs)
        result = [values([b.clone()]) for b in accessor], len(accessor)
        accessor.terminate()
        return result

    # a torch DataLoader (or Dataset): the last partial batch is dropped (spec note)
    assert batches(torch.utils.data.DataLoader(Counted(10), batch_size=1), 3) == (
        [[0, 1, 2], [3, 4, 5], [6, 7, 8]], 3)
    # the workers' batches need not divide the rebatched size
    assert batches(torch.utils.data.DataLoader(Counted(10), batch_size=4), 3)[0] == [
        [0, 1, 2], [3, 4, 5], [6, 7, 8]]
    # a poptorch.DataLoader with drop_last=False keeps it
    loader = DataLoader(poptorch.Options(), Counted(10), drop_last=False)
    assert batches(loader, 3) == ([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]], 3)


def test_async_rebatched_uses_the_iterable_datasets_partial_worker_batches():
    """PopTorch's test_iterable_dataloader_drop_last with 3 workers: each torch worker
    drops its partial batch in Sync and Async; AsyncRebatched loses only the last 1."""
    def loaded(mode):
        loader = DataLoader(poptorch.Options(), Increment(101), batch_size=4, num_workers=3,
                            mode=mode, worker_init_fn=split_between_workers,
                            async_options=None if mode == DataLoaderMode.Sync else FORK)
        epochs = [read(loader), read(loader)]
        loader.terminate()
        assert len(loader) == 25  # torch's theoretical length
        return epochs

    for mode, count in [(DataLoaderMode.Sync, 24), (DataLoaderMode.Async, 24),
                        (DataLoaderMode.AsyncRebatched, 25)]:
        for batches in loaded(mode):
            assert [b.shape for b in batches] == [torch.Size([4, 2, 3])] * count
            assert len(set(values(batches))) == 4 * count


@pytest.mark.parametrize("mode", [DataLoaderMode.Async, DataLoaderMode.AsyncRebatched])
def test_drop_last_false_gives_a_last_partial_batch(mode):
    """PopTorch's test_leftover: 101 elements in batches of 6, the last of 5."""
    loader = DataLoader(poptorch.Options().deviceIterations(2), Counted(101), batch_size=3,
                        num_workers=2, drop_last=False, mode=mode, async_options=FORK)
    assert len(loader) == 17
    batches = read(loader)
    assert [len(b) for b in batches] == [6] * 16 + [5]
    assert values(batches) == list(range(101))
    loader.terminate()


def test_rebatched_worker_size():
    loader = DataLoader(poptorch.Options().deviceIterations(4), Counted(20), batch_size=1,
                        mode=DataLoaderMode.AsyncRebatched, rebatched_worker_size=3,
                        async_options=FORK)
    assert loader.batch_size == 3 and len(loader) == 5
    assert [values([b]) for b in read(loader)] == [list(range(i, i + 4))
                                                   for i in range(0, 20, 4)]
    loader.terminate()


def test_a_worker_exception_is_a_poptorch_error_with_its_traceback():
    loader = DataLoader(poptorch.Options(), Counted(20, fail_at=7), batch_size=2,
                        mode=DataLoaderMode.Async, async_options=FORK)
    start = time.monotonic()
    with pytest.raises(Error) as info:
        read(loader)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert message.startswith("AsynchronousDataAccessor: the worker process raised an "
                              "exception while loading the dataset:\nTraceback")
    assert message.endswith("ValueError: element 7 is corrupt")
    assert f'File "{__file__}"' in message and "in __getitem__" in message
    assert info.value.type == "dataloader"
    with pytest.raises(Error, match="the accessor was terminated"):
        read(loader)


def test_a_killed_worker_is_an_error_within_two_seconds():
    dataset = Counted(1000, delay=0.05)
    accessor = AsynchronousDataAccessor(dataset, **FORK)
    iterator = iter(accessor)
    next(iterator)
    pid = accessor.pid
    os.kill(pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(Error) as info:
        for _ in iterator:
            pass
    assert time.monotonic() - start < 2
    assert str(info.value) == (
        f"AsynchronousDataAccessor: the worker process (pid {pid}) was killed by signal "
        "SIGKILL while loading the dataset, without reporting an error; if it was killed "
        "for using too much memory, lower buffer_size or the batch size")
    assert process_gone(pid)


@pytest.mark.parametrize("strategy", [SharingStrategy.Fork, SharingStrategy.ForkServer])
def test_no_process_left_after_terminate_or_garbage_collection(strategy):
    dataset = Counted(100, delay=0.2)  # the worker is inside __getitem__ most of the time
    loader = DataLoader(poptorch.Options(), dataset, num_workers=2, mode=DataLoaderMode.Async,
                        async_options={"sharing_strategy": strategy, "early_preload": True})
    wait_for(lambda: int(dataset.loaded) > 0)
    pid = loader._accessor.pid
    loader.terminate()
    assert process_gone(pid) and loader._accessor.pid is None
    accessor = AsynchronousDataAccessor(dataset, early_preload=True,
                                        sharing_strategy=strategy)
    pid = accessor.pid
    del accessor
    gc.collect()
    assert process_gone(pid)


def test_no_process_left_at_interpreter_exit():
    script = textwrap.dedent("""
        import torch, poptorch
        from torch.utils.data import TensorDataset
        if __name__ == "__main__":
            accessor = poptorch.AsynchronousDataAccessor(
                TensorDataset(torch.arange(100)), early_preload=True, buffer_size=2)
            print(accessor.pid, flush=True)
            next(iter(accessor))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=True)
    assert process_gone(int(result.stdout.split()[0]))


def map_style_share(process_id, processes, n=22, **kwargs):
    opts = poptorch.Options().deviceIterations(2)
    opts.Distributed.configureProcessId(process_id, processes)
    if kwargs.pop("seed", None) is not None:
        opts.randomSeed(5)
    return DataLoader(opts, TensorDataset(torch.arange(n)), batch_size=2, **kwargs)


def test_distributed_processes_read_disjoint_shares_of_whole_batches():
    shares = [[b.tolist() for (b,) in map_style_share(p, 2)] for p in range(2)]
    # 22 elements, combined batches of 4: 2 batches each, the last 6 elements left out
    assert shares == [[[0, 1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13, 14, 15]]]
    assert [len(map_style_share(p, 2)) for p in range(2)] == [2, 2]
    # drop_last=False: an even split, the first process taking the odd element
    shares = [[b.tolist() for (b,) in map_style_share(p, 3, n=10, drop_last=False)]
              for p in range(3)]
    assert shares == [[[0, 1, 2, 3]], [[4, 5, 6]], [[7, 8, 9]]]
    # off: every process reads the whole dataset
    assert len(map_style_share(1, 2, auto_distributed_partitioning=False)) == 5


def test_distributed_shuffling_is_the_same_permutation_in_every_process():
    loaders = [map_style_share(p, 2, shuffle=True, seed=5) for p in range(2)]
    epochs = [[sum((b.tolist() for (b,) in loader), []) for loader in loaders]
              for _ in range(2)]
    for first, second in epochs:
        assert len(first) == len(second) == 8 and not set(first) & set(second)
    assert epochs[0] != epochs[1]  # a new permutation each epoch
    again = [sum((b.tolist() for (b,) in map_style_share(p, 2, shuffle=True, seed=5)), [])
             for p in range(2)]
    assert again == epochs[0]


def test_distributed_async_loader_reads_its_share():
    loader = map_style_share(1, 2, mode=DataLoaderMode.Async, async_options=FORK)
    assert [b.tolist() for (b,) in loader] == [[8, 9, 10, 11], [12, 13, 14, 15]]
    loader.terminate()


class Regressor(torch.nn.Module):
    """Two stages (on IPUs 0 and 1 when pipelined), as the spec's pipelining listings."""

    def __init__(self, pipelined):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
        self.pipelined = pipelined

    def block(self, ipu_id):
        return poptorch.Block(ipu_id=ipu_id) if self.pipelined else contextlib.nullcontext()

    def forward(self, x, y=None):
        with self.block(0):
            hidden = torch.relu(self.a(x))
        with self.block(1):
            out = self.b(hidden)
            if y is None:
                return out
            return out, torch.nn.functional.mse_loss(out, y)


def regression_data(n=48):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=generator)
    return TensorDataset(x, x.sum(1, keepdim=True))


def options(iterations, replicas, accumulation, pipelined):
    opts = poptorch.Options().deviceIterations(iterations).replicationFactor(replicas)
    opts.Training.gradientAccumulation(accumulation)
    if pipelined:
        opts.setExecutionStrategy(poptorch.PipelinedExecution())
    return opts


def run_model(mode, iterations, replicas, accumulation, pipelined):
    """Two epochs of training, then one of inference, fed by a DataLoader in `mode`."""
    torch.manual_seed(0)
    model = Regressor(pipelined)
    async_options = None if mode == DataLoaderMode.Sync else FORK
    opts = options(iterations, replicas, accumulation, pipelined)
    loader = DataLoader(opts, regression_data(), batch_size=2, mode=mode,
                        async_options=async_options)
    training = poptorch.trainingModel(model, opts.clone(),
                                      torch.optim.SGD(model.parameters(), lr=0.05))
    losses = [training(x, y)[1].clone() for _ in range(2) for x, y in loader]
    training.destroy()
    opts = options(iterations, replicas, 1, pipelined)
    loader = DataLoader(opts, regression_data(), batch_size=2, mode=mode,
                        async_options=async_options)
    inference = poptorch.inferenceModel(model.eval(), opts.clone())
    outputs = [inference(x).clone() for x, _ in loader]
    loader.terminate()
    return losses, outputs


@pytest.mark.parametrize("mode", [DataLoaderMode.Async, DataLoaderMode.AsyncRebatched])
@pytest.mark.parametrize("iterations, replicas, accumulation, pipelined", [
    (2, 1, 1, False), (1, 2, 2, False), (2, 1, 3, True)],
    ids=["iterations", "replicas-accumulation", "pipelined"])
def test_models_fed_asynchronously_match_the_sync_loader(mode, iterations, replicas,
                                                         accumulation, pipelined):
    expected = run_model(DataLoaderMode.Sync, iterations, replicas, accumulation, pipelined)
    assert len(expected[0]) > 2
    torch.testing.assert_close(run_model(mode, iterations, replicas, accumulation, pipelined),
                               expected)


SYNC_DROP_LAST_FALSE = DataLoader(poptorch.Options().deviceIterations(2), Counted(5),
                                  drop_last=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"dataset": 3}, "dataset must be an iterable, or a map-style Dataset with __len__ (a "
                     "Dataset or a DataLoader), got 3"),
    ({"buffer_size": 0}, "buffer_size must be an int >= 1, got 0"),
    ({"buffer_size": 2.5}, "buffer_size must be an int >= 1, got 2.5"),
    ({"miss_sleep_time_in_ms": -1}, "miss_sleep_time_in_ms must be a number >= 0, got -1"),
    ({"load_indefinitely": 1}, "load_indefinitely must be a bool, got 1"),
    ({"early_preload": "yes"}, "early_preload must be a bool, got 'yes'"),
    ({"sharing_strategy": "fork"}, "sharing_strategy must be a poptorch.SharingStrategy "
                                   "(SharedMemory, FileSystem, Fork or ForkServer), got 'fork'"),
    ({"rebatched_size": 1}, "rebatched_size must be None or an int > 1, got 1"),
    ({"dataset": SYNC_DROP_LAST_FALSE},
     "the DataLoader's drop_last=False may leave a last batch smaller than its combined "
     "batch size 2, which only rebatching handles: pass rebatched_size=2, or drop_last=True"),
])
def test_accessor_argument_errors(kwargs, message):
    with pytest.raises(Error) as info:
        AsynchronousDataAccessor(**{"dataset": Counted(4), **kwargs})
    assert str(info.value) == f"AsynchronousDataAccessor: {message}"
    assert info.value.type == "dataloader"


def test_an_async_dataloader_cannot_be_wrapped_again():
    loader = DataLoader(poptorch.Options(), Counted(4), mode=DataLoaderMode.Async,
                        async_options=FORK)
    with pytest.raises(Error) as info:
        AsynchronousDataAccessor(loader)
    assert str(info.value) == (
        "AsynchronousDataAccessor: the DataLoader already uses an AsynchronousDataAccessor "
        "(its mode is Async or AsyncRebatched): iterate the DataLoader itself, or create it "
        "with mode=poptorch.DataLoaderMode.Sync")
    loader.terminate()


def test_items_the_ring_buffer_cannot_hold_are_errors():
    class Growing(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return torch.zeros(i + 1) if i < 2 else "text"

    accessor = AsynchronousDataAccessor(Growing(), **FORK)
    with pytest.raises(Error) as info:
        items(accessor)
    assert str(info.value).endswith(
        "poptorch.errors.Error: AsynchronousDataAccessor: item 1 of epoch 0 is * of shapes "
        "[[2]] but the first item was * of shapes [[1]]; the ring buffer holds tensors of "
        "fixed shapes (only a last batch may be smaller): give every item the same "
        "structure and shapes")
