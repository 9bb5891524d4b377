"""Each process's share of a map-style dataset (DataLoader's auto_distributed_partitioning).

With `opts.Distributed.configureProcessId(i, n)`, process i reads a contiguous share
of the dataset's indices, as PopTorch does: with drop_last, every process gets the same
whole number of combined batches (the remainder is left out); without it, the elements
are spread as evenly as possible (the first `len % n` processes get one more). With
shuffling, the indices are permuted first, by a generator seeded with the options'
random seed plus the epoch, so that every process draws the same permutation and the
shares stay disjoint, and a different one each epoch (so that the remainder left out
changes too).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


class ProcessShareSampler(Sampler[int]):
    """The indices of process `process_id`'s share of a dataset of `length` elements."""

    def __init__(self, length: int, process_id: int, num_processes: int, step: int,
                 drop_last: bool, seed: int | None) -> None:
        if drop_last:
            per_process = step * (length // (step * num_processes))
            self.offset, self.length = process_id * per_process, per_process
        else:
            shares = [length // num_processes + (length % num_processes > p)
                      for p in range(num_processes)]
            self.offset, self.length = sum(shares[:process_id]), shares[process_id]
        self.total = length
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[int]:
        if self.seed is None:
            indices = torch.arange(self.total)
        else:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            indices = torch.randperm(self.total, generator=generator)
        self.epoch += 1
        return iter(indices[self.offset:self.offset + self.length].tolist())
