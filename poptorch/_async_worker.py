"""The AsynchronousDataAccessor's worker process (spec 11.7): it loads ahead into a ring buffer.

The worker iterates the dataset (usually a poptorch.DataLoader) and copies each batch
into one of `buffer_size` slots of tensors in shared memory, allocated on the first
batch and sent once to the host. Three multiprocessing queues carry everything else:
`ready` (worker -> host: the buffers, then "slot s holds a batch", "end of epoch",
"this exception"), `free` (host -> worker: "slot s may be overwritten") and `commands`
(host -> worker: start, reset, shutdown). The worker only writes a slot the host freed,
so a full ring buffer makes it wait, checking for commands every `miss_sleep_time`.

Batches and ends of epoch carry a generation number: the host starts a new generation
when it restarts an epoch half-way through (`reset`), and frees the slots of an older
generation unread. With `rebatched_size` the worker cuts and joins the batches it reads
into batches of that many rows (the last, partial one kept unless `rebatched_drop_last`).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import pickle
import queue
import traceback
from typing import Any

import torch
from torch.utils import _pytree as pytree

from poptorch.errors import Error

# message kinds, the first element of every message
SETUP, BATCH, EOF, ERROR = "setup", "batch", "eof", "error"
START, RESET, SHUTDOWN = "start", "reset", "shutdown"

# how long an idle worker waits on its commands before checking that its parent lives
PARENT_CHECK_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class WorkerConfig:
    """The AsynchronousDataAccessor's arguments the worker needs."""

    buffer_size: int
    miss_sleep_time: float  # seconds
    load_indefinitely: bool
    early_preload: bool
    rebatched_size: int | None
    rebatched_drop_last: bool


@dataclasses.dataclass(frozen=True)
class PickledFile:
    """A dataset serialised to `path` (SharingStrategy.FileSystem): the worker loads it."""

    path: str


class _Interrupted(Exception):
    """A reset or shutdown command arrived while the worker waited for a free slot."""


def _error(message: str) -> Error:
    return Error(f"AsynchronousDataAccessor: {message}", type="dataloader")


def main(source: Any, config: WorkerConfig, ready: Any, free: Any, commands: Any) -> None:
    """The worker process: load `source` ahead until told to shut down.

    An exception goes back to the host as its traceback's text (the host raises it as a
    poptorch.Error); KeyboardInterrupt (Ctrl+C reaches the whole process group) ends
    the worker quietly, the host reports it.
    """
    try:
        if isinstance(source, PickledFile):
            with open(source.path, "rb") as file:
                source = pickle.load(file)
        _Worker(source, config, ready, free, commands).run()
        ready.cancel_join_thread()  # the host may not read what is left: do not wait for it
    except KeyboardInterrupt:
        ready.cancel_join_thread()
    except BaseException:  # noqa: BLE001 - every failure goes back to the host
        ready.put((ERROR, traceback.format_exc()))
        _wait_for_shutdown(commands)


def _wait_for_shutdown(commands: Any) -> None:
    """Live until the host reads the error: the ring buffer it may not have received yet
    is shared through this process (torch passes its file descriptors on request)."""
    parent = multiprocessing.parent_process()
    while parent is None or parent.is_alive():
        try:
            if commands.get(timeout=PARENT_CHECK_SECONDS)[0] == SHUTDOWN:
                return
        except queue.Empty:
            continue


class _Worker:
    """The loading loop: one item of the dataset per step, commands in between."""

    def __init__(self, dataset: Any, config: WorkerConfig, ready: Any, free: Any,
                 commands: Any) -> None:
        self.dataset = dataset
        self.config = config
        self.ready, self.free, self.commands = ready, free, commands
        self.generation = 0
        self.epoch = 0
        self.loading = config.early_preload
        self.iterator = None
        self.items = 0  # items read in this epoch
        self.interrupts = 0  # resets and shutdowns received
        self.shutdown = False
        self.buffers: list[torch.Tensor] | None = None  # one [buffer_size, ...] per leaf
        self.spec: pytree.TreeSpec | None = None
        self.shapes: list[torch.Size] = []  # the first item's leaves' shapes
        self.slot: int | None = None  # the slot being filled when rebatching
        self.filled = 0  # its rows already written

    def run(self) -> None:
        while not self.shutdown:
            self._poll(block=not self.loading)
            if self.shutdown or not self.loading:
                continue
            try:
                self._step()
            except _Interrupted:
                continue

    def _poll(self, block: bool) -> None:
        """Handle the commands waiting; with `block`, wait for one first."""
        while True:
            try:
                command = self.commands.get(block, PARENT_CHECK_SECONDS if block else None)
            except queue.Empty:
                if not block:
                    return
                self._check_parent()
                continue
            self._handle(command)
            block = False

    def _check_parent(self) -> None:
        parent = multiprocessing.parent_process()
        if parent is not None and not parent.is_alive():
            self.shutdown = True
            self.interrupts += 1

    def _handle(self, command: tuple) -> None:
        kind = command[0]
        if kind == SHUTDOWN:
            self.shutdown = True
            self.interrupts += 1
        elif kind == START:
            self.loading = True
        elif kind == RESET:
            self.generation, self.epoch, self.items = command[1], 0, 0
            self.iterator = None
            if self.slot is not None:
                self.free.put(self.slot)
                self.slot, self.filled = None, 0
            self.loading = True
            self.interrupts += 1

    def _step(self) -> None:
        if self.iterator is None:
            self.iterator = (iter(self.dataset) if hasattr(self.dataset, "__iter__") else
                             map(self.dataset.__getitem__, range(len(self.dataset))))
        try:
            item = next(self.iterator)
        except StopIteration:
            self._end_epoch()
            return
        self.items += 1
        leaves, spec = pytree.tree_flatten(item)
        if self.buffers is None:
            self._allocate(leaves, spec)
        if self.config.rebatched_size:
            self._rebatch(leaves, spec)
            return
        rows = self._rows(leaves, spec)
        slot = self._acquire()
        for buffer, leaf in zip(self.buffers, leaves, strict=True):
            (buffer[slot] if rows is None else buffer[slot][:rows]).copy_(leaf)
        self.ready.put((BATCH, self.generation, self.epoch, slot, rows))

    def _allocate(self, leaves: list, spec: pytree.TreeSpec) -> None:
        """The ring buffer, shaped after the first item; sent to the host with the slots."""
        for leaf in leaves:
            if not isinstance(leaf, torch.Tensor):
                raise _error(f"the dataset's items must be tensors or tuples, lists or dicts "
                             f"of tensors, got a {type(leaf).__name__} in {spec}; convert "
                             "it to a tensor (torch's default collate_fn does)")
        rebatched = self.config.rebatched_size
        if rebatched:
            for leaf in leaves:
                if leaf.dim() == 0:
                    raise _error(f"rebatched_size={rebatched} joins the items along their "
                                 "first dimension, but an item holds a 0-d tensor; give "
                                 "every tensor a batch dimension")
        self.shapes = [leaf.shape for leaf in leaves]
        self.spec = spec
        self.buffers = [
            torch.empty((self.config.buffer_size, *((rebatched, *leaf.shape[1:]) if rebatched
                                                    else leaf.shape)),
                        dtype=leaf.dtype).share_memory_()
            for leaf in leaves]
        self.ready.put((SETUP, self.buffers, pytree.treespec_dumps(spec)))
        for slot in range(self.config.buffer_size):
            self.free.put(slot)

    def _rows(self, leaves: list, spec: pytree.TreeSpec) -> int | None:
        """None for an item shaped like the first; n for a partial batch of n rows."""
        shapes = [leaf.shape for leaf in leaves]
        if spec == self.spec and shapes == self.shapes:
            return None
        if spec == self.spec and all(len(s) == len(f) > 0 and s[1:] == f[1:]
                                     for s, f in zip(shapes, self.shapes, strict=True)):
            rows = {s[0] for s in shapes}
            if len(rows) == 1 and all(next(iter(rows)) < f[0] for f in self.shapes):
                return next(iter(rows))
        raise _error(f"item {self.items - 1} of epoch {self.epoch} is "
                     f"{self._describe(spec, shapes)} but the first item was "
                     f"{self._describe(self.spec, self.shapes)}; the ring buffer holds "
                     "tensors of fixed shapes (only a last batch may be smaller): give "
                     "every item the same structure and shapes")

    def _rebatch(self, leaves: list, spec: pytree.TreeSpec) -> None:
        """Append the item's rows to the slot being filled, sending each full slot."""
        size = self.config.rebatched_size
        rows = {leaf.shape[0] if leaf.dim() else -1 for leaf in leaves}
        if spec != self.spec or len(rows) != 1 or -1 in rows or any(
                leaf.shape[1:] != shape[1:]
                for leaf, shape in zip(leaves, self.shapes, strict=True)):
            raise _error(f"item {self.items - 1} of epoch {self.epoch} is "
                         f"{self._describe(spec, [leaf.shape for leaf in leaves])} but the "
                         f"first item was {self._describe(self.spec, self.shapes)}; to rebatch,"
                         " every item needs the same structure and the same shapes after a "
                         "common first (batch) dimension")
        count, offset = rows.pop(), 0
        while offset < count:
            if self.slot is None:
                self.slot, self.filled = self._acquire(), 0
            take = min(count - offset, size - self.filled)
            for buffer, leaf in zip(self.buffers, leaves, strict=True):
                buffer[self.slot][self.filled:self.filled + take].copy_(
                    leaf[offset:offset + take])
            self.filled += take
            offset += take
            if self.filled == size:
                self.ready.put((BATCH, self.generation, self.epoch, self.slot, None))
                self.slot, self.filled = None, 0

    def _end_epoch(self) -> None:
        if self.items == 0:
            raise _error(f"the dataset is empty (epoch {self.epoch} yielded no item)")
        if self.slot is not None:  # a partial rebatched batch
            if self.config.rebatched_drop_last:
                self.free.put(self.slot)
            else:
                self.ready.put((BATCH, self.generation, self.epoch, self.slot, self.filled))
            self.slot, self.filled = None, 0
        self.ready.put((EOF, self.generation, self.epoch))
        self.epoch += 1
        self.items = 0
        self.iterator = None
        if not self.config.load_indefinitely:
            self.loading = False

    def _acquire(self) -> int:
        """A free slot; waits `miss_sleep_time` at a time while the ring buffer is full."""
        interrupts = self.interrupts
        while True:
            try:
                return self.free.get(timeout=self.config.miss_sleep_time)
            except queue.Empty:
                pass
            self._poll(block=False)
            self._check_parent()
            if self.interrupts != interrupts:
                raise _Interrupted

    @staticmethod
    def _describe(spec: pytree.TreeSpec, shapes: list[torch.Size]) -> str:
        return f"{spec} of shapes {[list(s) for s in shapes]}"
