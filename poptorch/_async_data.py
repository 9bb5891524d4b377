"""poptorch.AsynchronousDataAccessor (spec 11.7): batches loaded ahead by a worker process.

The accessor starts the worker of `poptorch._async_worker` with the multiprocessing
start method of its SharingStrategy, then reads the ring buffer the worker fills: each
batch it returns is a view of a slot in shared memory, handed back to the worker when
the next batch is requested (clone a batch to keep it). The worker is shut down by
`terminate()`, when the accessor is garbage collected and at interpreter exit
(`weakref.finalize`); a worker that raised, or died, is reported as a poptorch.Error
within `_POLL_SECONDS` of the consumer waiting for it.
"""

from __future__ import annotations

import numbers
import os
import pickle
import queue
import signal
import tempfile
import weakref
from typing import Any

import torch
import torch.multiprocessing
from torch.utils import _pytree as pytree

from poptorch import _async_worker as worker
from poptorch.enums import SharingStrategy
from poptorch.errors import Error

__all__ = ["AsynchronousDataAccessor"]

# SharedMemory and FileSystem spawn a new interpreter (the dataset is pickled through
# a pipe, or through a file), Fork forks this one, ForkServer forks a clean server
_START_METHODS = {SharingStrategy.SharedMemory: "spawn", SharingStrategy.FileSystem: "spawn",
                  SharingStrategy.Fork: "fork", SharingStrategy.ForkServer: "forkserver"}
# how long the consumer waits for a batch before checking that the worker lives
_POLL_SECONDS = 0.05
# how long terminate() lets the worker finish its item before SIGTERM, then SIGKILL
_JOIN_SECONDS = 2.0


def _error(message: str) -> Error:
    return Error(f"AsynchronousDataAccessor: {message}", type="dataloader")


def _shutdown(process: Any, commands: Any, queues: tuple, directory: Any) -> None:
    """Stop the worker (a command, then SIGTERM, then SIGKILL), reap it, close the queues."""
    if process.is_alive():
        try:
            commands.put((worker.SHUTDOWN,))
        except (OSError, ValueError):
            pass
        process.join(_JOIN_SECONDS)
    if process.is_alive():
        process.terminate()
        process.join(_JOIN_SECONDS)
    if process.is_alive():
        process.kill()
    process.join()
    for channel in queues:
        channel.cancel_join_thread()
        channel.close()
    if directory is not None:
        directory.cleanup()


class AsynchronousDataAccessor:
    """Loads the batches of `dataset` in a worker process, `buffer_size` batches ahead.

    `dataset` is any iterable of tensors or of tuples, lists or dicts of tensors
    (typically a poptorch.DataLoader in Sync mode). `miss_sleep_time_in_ms`: how long
    the worker sleeps when the ring buffer is full before checking again.
    `load_indefinitely`: at the end of an epoch the worker starts the next one at once
    (otherwise it waits for the next `iter()`). `early_preload`: loading starts when the
    accessor is created (otherwise at the first `iter()`). `sharing_strategy`: how the
    dataset reaches the worker (SharingStrategy). `rebatched_size`: batches of that many
    rows cut and joined from the dataset's (which should have a batch size of 1); the
    last, partial batch is dropped, unless `dataset` is a poptorch.DataLoader with
    drop_last=False. Batches are views of shared memory, valid until the next one is
    requested.
    """

    def __init__(self, dataset: Any, buffer_size: int = 3, miss_sleep_time_in_ms: float = 0.1,
                 load_indefinitely: bool = True, early_preload: bool = False,
                 sharing_strategy: SharingStrategy = SharingStrategy.ForkServer,
                 rebatched_size: int | None = None) -> None:
        self._finalizer = None
        self._check(dataset, buffer_size, miss_sleep_time_in_ms, sharing_strategy,
                    rebatched_size, load_indefinitely=load_indefinitely,
                    early_preload=early_preload)
        self._dataset = dataset
        self.rebatched_size = rebatched_size
        self._load_indefinitely = load_indefinitely
        config = worker.WorkerConfig(
            buffer_size=buffer_size, miss_sleep_time=miss_sleep_time_in_ms / 1000,
            load_indefinitely=load_indefinitely, early_preload=early_preload,
            rebatched_size=rebatched_size,
            rebatched_drop_last=getattr(dataset, "rebatched_drop_last", True))
        context = torch.multiprocessing.get_context(_START_METHODS[sharing_strategy])
        if sharing_strategy == SharingStrategy.ForkServer:
            # the server imports torch once (when it starts), not every worker it forks
            context.set_forkserver_preload([worker.__name__, "poptorch.data"])
        self._ready, self._free, self._commands = (context.Queue(), context.Queue(),
                                                   context.Queue())
        directory, source = None, dataset
        if sharing_strategy == SharingStrategy.FileSystem:
            directory = tempfile.TemporaryDirectory(prefix="poptorch-dataset-")
            source = worker.PickledFile(os.path.join(directory.name, "dataset.pkl"))
            with open(source.path, "wb") as file:
                pickle.dump(dataset, file, protocol=4)
        self._process = context.Process(
            target=worker.main, name="poptorch-async-data",
            args=(source, config, self._ready, self._free, self._commands))
        self._process.start()
        self._finalizer = weakref.finalize(
            self, _shutdown, self._process, self._commands,
            (self._ready, self._free, self._commands), directory)
        self._buffers: list[torch.Tensor] | None = None
        self._spec: pytree.TreeSpec | None = None
        self._generation = 0
        self._held: int | None = None  # the slot of the batch last returned
        self._used = False  # a batch of the current epoch was returned
        self._started = early_preload
        self._waiting = not early_preload  # the worker waits for `start`

    @staticmethod
    def _check(dataset: Any, buffer_size: Any, miss_sleep: Any, strategy: Any,
               rebatched_size: Any, **flags: Any) -> None:
        if getattr(dataset, "_accessor", None) is not None:
            raise _error("the DataLoader already uses an AsynchronousDataAccessor (its mode "
                         "is Async or AsyncRebatched): iterate the DataLoader itself, or "
                         "create it with mode=poptorch.DataLoaderMode.Sync")
        if not hasattr(dataset, "__iter__") and not (
                hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise _error(f"dataset must be an iterable, or a map-style Dataset with __len__ "
                         f"(a Dataset or a DataLoader), got {dataset!r}")
        if isinstance(buffer_size, bool) or not isinstance(
                buffer_size, numbers.Integral) or buffer_size < 1:
            raise _error(f"buffer_size must be an int >= 1, got {buffer_size!r}")
        if isinstance(miss_sleep, bool) or not isinstance(miss_sleep, numbers.Real) or (
                miss_sleep < 0):
            raise _error(f"miss_sleep_time_in_ms must be a number >= 0, got {miss_sleep!r}")
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise _error(f"{name} must be a bool, got {value!r}")
        if not isinstance(strategy, SharingStrategy):
            raise _error(f"sharing_strategy must be a poptorch.SharingStrategy (SharedMemory, "
                         f"FileSystem, Fork or ForkServer), got {strategy!r}")
        if rebatched_size is not None and (isinstance(rebatched_size, bool) or not isinstance(
                rebatched_size, numbers.Integral) or rebatched_size < 2):
            raise _error(f"rebatched_size must be None or an int > 1, got {rebatched_size!r}")
        combined = getattr(dataset, "combinedBatchSize", None)
        if (rebatched_size is None and getattr(dataset, "_user_drop_last", True) is False
                and combined is not None and combined > 1):
            raise _error(f"the DataLoader's drop_last=False may leave a last batch smaller "
                         f"than its combined batch size {combined}, which only rebatching "
                         f"handles: pass rebatched_size={combined}, or drop_last=True")

    @property
    def pid(self) -> int | None:
        """The worker process's id (None once it is terminated)."""
        return self._process.pid if self._process.is_alive() else None

    def terminate(self) -> None:
        """Stop the worker process and release the ring buffer; the accessor is then done."""
        if self._finalizer is not None:
            self._finalizer()

    def __del__(self) -> None:
        self.terminate()

    def __len__(self) -> int:
        length = len(self._dataset)
        # a DataLoader with an accessor of its own counts rebatched batches itself
        if self.rebatched_size and getattr(self._dataset, "_accessor", None) is not self:
            batch = getattr(self._dataset, "batch_size", None) or 1
            length = length * batch // self.rebatched_size
        return length

    def __iter__(self) -> AsynchronousDataAccessor:
        self._alive_or_raise()
        self._release()
        if self._used:  # restart an epoch half-way through: a new generation
            self._generation += 1
            self._commands.put((worker.RESET, self._generation))
            self._used = self._waiting = False
        elif self._waiting:
            self._commands.put((worker.START,))
            self._waiting = False
        self._started = True
        return self

    def __next__(self) -> Any:
        self._alive_or_raise()
        self._release()
        if not self._started:
            self.__iter__()
        if self._waiting:  # this epoch ended: the next starts with iter()
            raise StopIteration
        while True:
            try:
                message = self._ready.get(timeout=_POLL_SECONDS)
            except (queue.Empty, OSError, EOFError):  # the last two: a worker that died
                self._alive_or_raise()  # while sending the ring buffer
                continue
            batch = self._receive(message)
            if batch is not None:
                return batch

    def _receive(self, message: tuple) -> Any:
        """The batch `message` carries, or None; raises StopIteration at the end of epoch."""
        kind = message[0]
        if kind == worker.SETUP:
            self._buffers, self._spec = message[1], pytree.treespec_loads(message[2])
        elif kind == worker.ERROR:
            self.terminate()
            raise _error(f"the worker process raised an exception while loading the "
                         f"dataset:\n{message[1].rstrip()}")
        elif kind == worker.BATCH:
            _, generation, _, slot, rows = message
            if generation != self._generation:
                self._free.put(slot)
                return None
            self._held, self._used = slot, True
            leaves = [b[slot] if rows is None else b[slot][:rows] for b in self._buffers]
            return pytree.tree_unflatten(leaves, self._spec)
        elif message[1] == self._generation:  # EOF
            self._used = False
            self._waiting = not self._load_indefinitely
            raise StopIteration
        return None

    def _release(self) -> None:
        if self._held is not None:
            self._free.put(self._held)
            self._held = None

    def _alive_or_raise(self) -> None:
        if self._finalizer is None or not self._finalizer.alive:
            raise _error("the accessor was terminated; create a new one to read the dataset "
                         "again")
        if self._process.is_alive():
            return
        try:  # the worker may have reported an error just before exiting
            message = self._ready.get(timeout=_POLL_SECONDS)
        except (queue.Empty, OSError, EOFError):
            message = None
        if message is not None and message[0] == worker.ERROR:
            self._receive(message)
        code = self._process.exitcode
        how = (f"was killed by signal {signal.Signals(-code).name}" if code < 0
               else f"exited with code {code}")
        pid = self._process.pid
        self.terminate()
        raise _error(f"the worker process (pid {pid}) {how} while loading the dataset, "
                     "without reporting an error; if it was killed for using too much "
                     "memory, lower buffer_size or the batch size")
