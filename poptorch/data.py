"""poptorch.DataLoader (spec 11.7): a torch DataLoader whose batches each feed one call.

A PopTorch model consumes batch_size x deviceIterations x (replicationFactor / input
replica group size) x Training.gradientAccumulation elements per call; the DataLoader
does that arithmetic (`combinedBatchSize`) and yields batches of that size. It reads
synchronously (DataLoaderMode.Sync) or through an AsynchronousDataAccessor (Async,
AsyncRebatched: `poptorch._async_data`), and, with `opts.Distributed`, reads this
process's share of a map-style dataset (`poptorch._data_partition`).
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset, IterableDataset, Sampler

from poptorch._async_data import AsynchronousDataAccessor
from poptorch._data_partition import ProcessShareSampler
from poptorch.enums import DataLoaderMode
from poptorch.errors import Error
from poptorch.options import Options

__all__ = ["AsynchronousDataAccessor", "DataLoader", "DataLoaderMode"]

# AsynchronousDataAccessor's arguments a DataLoader passes through async_options
_ASYNC_OPTIONS = ("buffer_size", "miss_sleep_time_in_ms", "load_indefinitely",
                  "early_preload", "sharing_strategy")

log = logging.getLogger("poptorch")


def _error(message: str) -> Error:
    return Error(f"DataLoader: {message}", type="dataloader")


class DataLoader(torch.utils.data.DataLoader):
    """Thin wrapper around `torch.utils.data.DataLoader` yielding combined batches.

    `batch_size` is the micro-batch size the model sees; each batch holds
    `combinedBatchSize` elements. `shuffle=None` means no shuffling. With
    `batch_sampler`, each list of indices it yields is one batch: `batch_size` and
    `shuffle` must then be left at their defaults, `drop_last` is not used and
    `combinedBatchSize` is None (as it is with `batch_size=None`, which disables
    batching). mode=Async reads through an AsynchronousDataAccessor created with
    `async_options`; AsyncRebatched (and Async with drop_last=False) has the accessor cut
    and join the batches into combined batches, the torch workers loading batches of
    `rebatched_worker_size` elements (default: 1 for an IterableDataset, whose workers
    would each drop a partial batch, and the combined batch size otherwise). Other
    keyword arguments (`generator`, `collate_fn`, `sampler`, ...) go to torch's
    DataLoader. The options are frozen: change a copy made with `options.clone()`.
    """

    def __init__(self, options: Options, dataset: Dataset, batch_size: int | None = 1,
                 shuffle: bool | None = None, num_workers: int = 0, drop_last: bool = True,
                 persistent_workers: bool | None = None,
                 auto_distributed_partitioning: bool = True,
                 mode: DataLoaderMode = DataLoaderMode.Sync,
                 async_options: dict[str, Any] | None = None,
                 rebatched_worker_size: int | None = None,
                 batch_sampler: Sampler[Sequence[int]] | Iterable[Sequence[int]] | None = None,
                 **kwargs: Any) -> None:
        self._accessor: AsynchronousDataAccessor | None = None
        if not isinstance(options, Options):
            raise _error(f"options must be a poptorch.Options, got {options!r}")
        if not isinstance(mode, DataLoaderMode):
            raise _error(f"mode must be a poptorch.DataLoaderMode (Sync, Async or "
                         f"AsyncRebatched), got {mode!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(
                batch_size, numbers.Integral) or batch_size < 1):
            raise _error(f"batch_size must be an int >= 1 or None, got {batch_size!r}")
        _check_async_arguments(mode, async_options, rebatched_worker_size)
        combined = None
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or kwargs.get("sampler") is not None:
                raise _error("batch_sampler is mutually exclusive with batch_size, shuffle and "
                             "sampler: leave them at their defaults (each list of indices "
                             "from batch_sampler is one batch)")
            batching: dict[str, Any] = {"batch_sampler": batch_sampler}
        else:
            if batch_size is not None:
                combined = (batch_size * options.device_iterations
                            * (options.replication_factor // options.input_group_size)
                            * options.Training.gradient_accumulation)
            batching = {"batch_size": combined, "shuffle": bool(shuffle),
                        "drop_last": drop_last and combined is not None}
            self._warn_if_incomplete(dataset, combined, drop_last,
                                     options.Distributed.numProcesses)
        if options.Distributed.numProcesses > 1 and auto_distributed_partitioning:
            batching["sampler"] = _process_share(options, dataset, combined, batching, kwargs)
            batching["shuffle"] = False
        rebatched = None
        self.rebatched_drop_last = drop_last
        if mode == DataLoaderMode.AsyncRebatched or (
                mode == DataLoaderMode.Async and not drop_last and (combined or 1) > 1):
            rebatched = combined
            if combined is not None and combined > 1:
                worker_batch = rebatched_worker_size or (
                    1 if isinstance(dataset, IterableDataset) else combined)
                if worker_batch > combined:
                    raise _error(f"rebatched_worker_size ({worker_batch}) must be <= the "
                                 f"combined batch size ({combined})")
                batching["batch_size"], batching["drop_last"] = worker_batch, False
            else:
                rebatched = None
        if persistent_workers is None:
            persistent_workers = num_workers > 0
        self._options = options
        self._combined_batch_size = combined
        self._user_drop_last = drop_last
        super().__init__(dataset, num_workers=num_workers,
                         persistent_workers=persistent_workers, **batching, **kwargs)
        options._freeze()
        if mode != DataLoaderMode.Sync:
            self._accessor = AsynchronousDataAccessor(self, **(async_options or {}),
                                                      rebatched_size=rebatched)

    @staticmethod
    def _warn_if_incomplete(dataset: Dataset, combined: int | None, drop_last: bool,
                            processes: int) -> None:
        if (drop_last or combined is None or isinstance(dataset, IterableDataset)
                or not hasattr(dataset, "__len__")):
            return
        if len(dataset) % (combined * processes):
            log.warning("the dataset's %d elements are not a multiple of the combined batch "
                        "size %d and drop_last=False: the last batch holds %d elements; pass "
                        "drop_last=True to drop it", len(dataset), combined * processes,
                        len(dataset) % (combined * processes))

    @property
    def combinedBatchSize(self) -> int | None:  # noqa: N802 - PopTorch's names
        """Total number of elements consumed from the dataset by one call of the model."""
        return self._combined_batch_size

    @property
    def options(self) -> Options:
        """The options this DataLoader was created with."""
        return self._options

    def terminate(self) -> None:
        """Stop the AsynchronousDataAccessor's worker process (Async modes; else nothing)."""
        if self._accessor is not None:
            self._accessor.terminate()

    def __del__(self) -> None:
        if getattr(self, "_accessor", None) is not None:
            self._accessor.terminate()

    def __len__(self) -> int:
        if self._accessor is None or not self._accessor.rebatched_size:
            return super().__len__()
        # the workers load smaller batches than the accessor returns
        elements = len(self.sampler) if self.sampler is not None and not isinstance(
            self.dataset, IterableDataset) else len(self.dataset)
        batches, partial = divmod(elements, self._accessor.rebatched_size)
        return batches + (1 if partial and not self.rebatched_drop_last else 0)

    def __iter__(self) -> Iterator[Any]:
        if self._accessor is not None:
            return iter(self._accessor)
        return super().__iter__()


def _check_async_arguments(mode: DataLoaderMode, async_options: Any,
                           rebatched_worker_size: Any) -> None:
    if mode == DataLoaderMode.Sync:
        for name, value in (("async_options", async_options),
                            ("rebatched_worker_size", rebatched_worker_size)):
            if value is not None:
                raise _error(f"{name} is only used by the asynchronous modes; pass "
                             "mode=poptorch.DataLoaderMode.Async (or AsyncRebatched), or "
                             f"leave {name} out")
        return
    if async_options is not None:
        if not isinstance(async_options, dict):
            raise _error(f"async_options must be a dict of AsynchronousDataAccessor "
                         f"arguments, got {async_options!r}")
        if "rebatched_size" in async_options:
            raise _error("async_options cannot set rebatched_size: the DataLoader sets it "
                         "(to the combined batch size, with DataLoaderMode.AsyncRebatched)")
        unknown = sorted(set(async_options) - set(_ASYNC_OPTIONS))
        if unknown:
            raise _error(f"async_options: unknown option(s) {', '.join(unknown)}; "
                         f"AsynchronousDataAccessor takes {', '.join(_ASYNC_OPTIONS)}")
    if rebatched_worker_size is not None:
        if mode != DataLoaderMode.AsyncRebatched:
            raise _error("rebatched_worker_size is only used by DataLoaderMode.AsyncRebatched"
                         "; pass that mode, or leave rebatched_worker_size out")
        if isinstance(rebatched_worker_size, bool) or not isinstance(
                rebatched_worker_size, numbers.Integral) or rebatched_worker_size < 1:
            raise _error(f"rebatched_worker_size must be an int >= 1, got "
                         f"{rebatched_worker_size!r}")


def _process_share(options: Options, dataset: Dataset, combined: int | None,
                   batching: dict[str, Any], kwargs: dict[str, Any]) -> ProcessShareSampler:
    """The sampler of this process's share of `dataset` (auto_distributed_partitioning)."""
    processes = options.Distributed.numProcesses
    fix = "or pass auto_distributed_partitioning=False and partition it yourself"
    if isinstance(dataset, IterableDataset):
        raise _error(f"auto_distributed_partitioning cannot split an IterableDataset between "
                     f"{processes} processes: have its __iter__ yield this process's share "
                     f"(options.Distributed.processId of numProcesses) and pass "
                     f"auto_distributed_partitioning=False")
    if "batch_sampler" in batching or kwargs.get("sampler") is not None:
        raise _error(f"auto_distributed_partitioning chooses the indices of each of the "
                     f"{processes} processes: it cannot be used with a sampler or "
                     f"batch_sampler; leave those out, {fix}")
    if combined is None:
        raise _error(f"auto_distributed_partitioning needs a batch_size to split the dataset "
                     f"between {processes} processes in whole batches; pass one, {fix}")
    if batching["shuffle"] and options.random_seed is None:
        raise _error(f"shuffle=True with auto_distributed_partitioning needs "
                     f"options.randomSeed(N), with the same N in all {processes} processes, "
                     f"so that they shuffle the dataset alike and read disjoint shares")
    return ProcessShareSampler(len(dataset), options.Distributed.processId, processes,
                               combined, batching["drop_last"],
                               options.random_seed if batching["shuffle"] else None)
