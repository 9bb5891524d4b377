"""A small persistent pool of worker threads that runs chunks of a compiled kernel's work
(`FusedKernel`) beside the calling thread, and how a kernel's outer loop is cut into
chunks.

A compiled kernel takes a range [lo, hi) of its outer parallel loop's iterations
(`Lines.split`), so that calls on disjoint ranges write disjoint outputs. cffi releases
the GIL around a call to C, so the chunks run at once: the caller hands each worker its
chunk (a call on its own argument arrays), runs the first chunk itself and waits for the
others. The number of threads is torch's (`torch.get_num_threads()`, read at the call),
so that `torch.set_num_threads(1)` runs kernels on one thread, as it runs torch's.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

# A kernel whose call reads and writes fewer elements (inputs and outputs) runs on one
# thread. Handing one chunk to the worker and waiting for it costs 25-40 us on the
# 2-core host (a 2-thread call of a no-op kernel against a 1-thread call, medians of
# interleaved repeats); an elementwise add of 2^16 elements (3 x 2^16 moved) took 30 us on one
# thread and 28 on two, of 2^17 59 against 38: the split pays from about 3 x 2^16.
SPLIT_MIN_ELEMENTS = 3 << 16
# Chunk bounds of a flat (innermost, vectorised) loop are multiples of this, when each
# chunk has many iterations: every chunk but the last starts and ends on whole vectors.
ALIGN = 64


class Pool:
    """Worker threads, each waiting on its own queue of (call, argument, done lock)."""

    def __init__(self) -> None:
        self.queues: list[queue.SimpleQueue] = []
        self.locks: list[threading.Lock] = []
        self.guard = threading.Lock()  # one caller hands out chunks at a time

    def _grow(self, workers: int) -> None:
        while len(self.queues) < workers:
            tasks: queue.SimpleQueue = queue.SimpleQueue()
            thread = threading.Thread(target=_work, args=(tasks,), daemon=True,
                                      name=f"poptorch-kernel-{len(self.queues)}")
            thread.start()
            self.queues.append(tasks)
            self.locks.append(threading.Lock())

    def run(self, call: Callable[[object], None], arguments: list[object]) -> None:
        """`call(argument)` for every argument, the first on this thread, the others on
        workers; returns when all are done."""
        if not self.guard.acquire(blocking=False):  # another thread is using the pool
            for argument in arguments:
                call(argument)
            return
        try:
            self._grow(len(arguments) - 1)
            locks = self.locks
            for k, argument in enumerate(arguments[1:]):
                locks[k].acquire()
                self.queues[k].put((call, argument, locks[k]))
            call(arguments[0])
            for k in range(len(arguments) - 1):
                locks[k].acquire()  # released by the worker when its chunk is done
                locks[k].release()
        finally:
            self.guard.release()


def _work(tasks: queue.SimpleQueue) -> None:
    while True:
        call, argument, done = tasks.get()
        try:
            call(argument)
        finally:
            done.release()


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
