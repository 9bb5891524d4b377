"""poptorch.DataLoader (spec 11.7): a torch DataLoader whose batches each feed one call.

A PopTorch model consumes batch_size x deviceIterations x (replicationFactor / input
replica group size) x Training.gradientAccumulation elements per call; the DataLoader
does that arithmetic (`combinedBatchSize`) and yields batches of that size. For now
it reads synchronously (DataLoaderMode.Sync) in a single process.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset, IterableDataset, Sampler

from poptorch.enums import DataLoaderMode
from poptorch.errors import Error
from poptorch.options import Options

__all__ = ["DataLoader", "DataLoaderMode"]

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
    batching). `async_options` and `rebatched_worker_size` belong to the asynchronous
    modes, which are not supported yet. Other keyword arguments (`generator`,
    `collate_fn`, `sampler`, ...) go to torch's DataLoader. The options are frozen:
    change a copy made with `options.clone()`.
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
        if not isinstance(options, Options):
            raise _error(f"options must be a poptorch.Options, got {options!r}")
        if not isinstance(mode, DataLoaderMode):
            raise _error(f"mode must be a poptorch.DataLoaderMode (Sync, Async or "
                         f"AsyncRebatched), got {mode!r}")
        if mode != DataLoaderMode.Sync:
            raise _error(f"mode DataLoaderMode.{mode.name} is not supported yet; use "
                         "DataLoaderMode.Sync")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(
                batch_size, numbers.Integral) or batch_size < 1):
            raise _error(f"batch_size must be an int >= 1 or None, got {batch_size!r}")
        processes = options.Distributed.numProcesses
        if processes > 1 and auto_distributed_partitioning:
            raise _error(f"partitioning the dataset between {processes} processes is not "
                         "supported yet; partition it yourself and pass "
                         "auto_distributed_partitioning=False")
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
            self._warn_if_incomplete(dataset, combined, drop_last)
        if persistent_workers is None:
            persistent_workers = num_workers > 0
        self._options = options
        self._combined_batch_size = combined
        super().__init__(dataset, num_workers=num_workers,
                         persistent_workers=persistent_workers, **batching, **kwargs)
        options._freeze()

    @staticmethod
    def _warn_if_incomplete(dataset: Dataset, combined: int | None, drop_last: bool) -> None:
        if (drop_last or combined is None or isinstance(dataset, IterableDataset)
                or not hasattr(dataset, "__len__")):
            return
        if len(dataset) % combined:
            log.warning("the dataset's %d elements are not a multiple of the combined batch "
                        "size %d and drop_last=False: the last batch holds %d elements; pass "
                        "drop_last=True to drop it", len(dataset), combined,
                        len(dataset) % combined)

    @property
    def combinedBatchSize(self) -> int | None:  # noqa: N802 - PopTorch's names
        """Total number of elements consumed from the dataset by one call of the model."""
        return self._combined_batch_size

    @property
    def options(self) -> Options:
        """The options this DataLoader was created with."""
        return self._options

    def terminate(self) -> None:
        """Stop the asynchronous worker; DataLoaderMode.Sync has none, so nothing to do."""
