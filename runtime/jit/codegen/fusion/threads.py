"""A small persistent pool of worker threads that runs chunks of a compiled kernel's work
(`FusedKernel`) beside the calling thread, and how a kernel's outer loop is cut into
chunks.

A compiled kernel takes a range [lo, hi) of its outer parallel loop's iterations
(`Lines.split`), so that calls on disjoint ranges write disjoint outputs. cffi releases
the GIL around a call to C (a thread counting in Python while another runs a 0.1 s
kernel keeps counting), so the chunks run at once: the caller wakes the workers, and it
and each worker that has woken take the next chunk as they are free (each thread calls
on its own argument arrays); the caller returns when every chunk is done. A chunk
computes the same values on any thread, so results do not depend on the thread count.
The number of threads is torch's (`torch.get_num_threads()`, read at the call), so that
`torch.set_num_threads(1)` runs kernels on one thread, as it runs torch's.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable

# A kernel whose call reads and writes fewer elements (inputs and outputs) runs on one
# thread. Dispatch (waking the worker, the claims, a cffi call a chunk) costs 20-30 us:
# a kernel of add+tanh over 2^10 elements forced onto 2 threads in 8 chunks took 28-41
# against 6-9 us on one (2026-11-27: a one-op-pair module's FusedKernel called 2000x a
# block, 15 rounds alternating torch.set_num_threads(1) and (2), medians; two runs, host
# load 5 on 2 cores from other jobs). Under that load no size gained from a second
# thread (2^16 elements: 184-250 against 133-163 us; 2^21: 4.8-5.4 against 4.2-5.1 ms),
# so the break-even is not measured yet: the threshold is where a call's own work
# (60-160 us at 2^16 elements) is a few times the dispatch cost.
SPLIT_MIN_ELEMENTS = 3 << 16
# A call that moves at least CHUNKS x SPLIT_MIN_ELEMENTS elements is cut into CHUNKS ranges
# a thread, which threads take as each is free: on a loaded host a thread that is
# descheduled holds up the call by one small chunk, not by half of it.
CHUNKS = 4
# Chunk bounds of a flat (innermost, vectorised) loop are multiples of this, when each
# chunk has many iterations: every chunk but the last starts and ends on whole vectors.
ALIGN = 64


class _Task:
    """A worker's share of one call (`Pool.run`): whoever takes `claim` first decides
    whether the worker joins in (it has woken) or not (the caller ran out of chunks
    first: a worker slow to wake never makes a call wait); `done` is released when a
    worker that joined has no chunk left."""

    __slots__ = ("call", "chunks", "counter", "thread", "claim", "done")

    def __init__(self, call: Callable[[int, int], None], chunks: int,
                 counter: itertools.count, thread: int) -> None:
        self.call, self.chunks, self.counter, self.thread = call, chunks, counter, thread
        self.claim = threading.Lock()
        self.done = threading.Lock()
        self.done.acquire()

    def drain(self) -> None:
        """Run chunks (`call(chunk, thread)`) until none is left."""
        call, chunks, counter, thread = self.call, self.chunks, self.counter, self.thread
        chunk = next(counter)  # (itertools.count: atomic under the GIL)
        while chunk < chunks:
            call(chunk, thread)
            chunk = next(counter)


class Pool:
    """Worker threads, each waiting on its own queue of tasks."""

    def __init__(self) -> None:
        self.queues: list[queue.SimpleQueue] = []
        self.guard = threading.Lock()  # one caller hands out chunks at a time

    def _grow(self, workers: int) -> None:
        while len(self.queues) < workers:
            tasks: queue.SimpleQueue = queue.SimpleQueue()
            thread = threading.Thread(target=_work, args=(tasks,), daemon=True,
                                      name=f"poptorch-kernel-{len(self.queues)}")
            thread.start()
            self.queues.append(tasks)

    def run(self, call: Callable[[int, int], None], chunks: int, threads: int) -> None:
        """`call(chunk, thread)` for every chunk in range(chunks), taken in order by
        this thread (thread 0) and `threads - 1` workers as each is free; returns when
        all are done."""
        counter = itertools.count()
        mine = _Task(call, chunks, counter, 0)
        if not self.guard.acquire(blocking=False):  # another thread is using the pool
            mine.drain()
            return
        try:
            self._grow(threads - 1)
            tasks = [_Task(call, chunks, counter, k) for k in range(1, threads)]
            for tasks_queue, task in zip(self.queues, tasks, strict=False):
                tasks_queue.put(task)
            mine.drain()
            for task in tasks:
                if not task.claim.acquire(blocking=False):  # the worker joined
                    task.done.acquire()
        finally:
            self.guard.release()


def _work(tasks: queue.SimpleQueue) -> None:
    while True:
        task = tasks.get()
        if task.claim.acquire(blocking=False):
            try:
                task.drain()
            finally:
                task.done.release()


POOL = Pool()


def bounds(units: int, chunks: int, align: int) -> list[int]:
    """The chunk boundaries that cut `units` iterations into `chunks` ranges as equal as
    multiples of `align` allow (ranges may be empty)."""
    cuts = [0]
    for k in range(1, chunks):
        cut = units * k // chunks
        cuts.append(min(units, (cut + align // 2) // align * align) if align > 1 else cut)
    cuts.append(units)
    return cuts
