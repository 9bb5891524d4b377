"""Asynchronous data loading against synchronous: wall time of an epoch of training.

A slow dataset (each element sleeps, as a decoder or a network read would) feeds a
poptorch training model. The sleep per element is set so that loading a combined batch
takes about as long as one training step measured beforehand. With DataLoaderMode.Sync
an epoch takes about the sum of loading and computing; with Async the worker process
loads the next batches while the model computes, so the epoch takes about the larger of
the two. Run with `make bench-async`; prints a small table
(of each row, the fastest of `--repeats` epochs after a first one, which also starts the
worker and compiles).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import Dataset

import poptorch


class SlowDataset(Dataset):
    """`n` random (input, target) pairs, each taking `delay` seconds to load."""

    def __init__(self, n: int, delay: float) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 64, generator=generator)
        self.y = torch.randn(n, 8, generator=generator)
        self.delay = delay

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay)
        return self.x[i], self.y[i]


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # wide enough that a step takes tens of milliseconds, so that the per-element
        # sleep (about a millisecond) is far above the timer's resolution
        self.body = torch.nn.Sequential(torch.nn.Linear(64, 2048), torch.nn.ReLU(),
                                        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                                        torch.nn.Linear(2048, 8))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.body(x)
        return out, torch.nn.functional.mse_loss(out, y)


def _training(opts: poptorch.Options) -> poptorch.PoplarExecutor:
    torch.manual_seed(0)
    model = Model()
    return poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.01))


def _epoch(model: poptorch.PoplarExecutor, loader: object) -> tuple[float, int]:
    start, steps = time.perf_counter(), 0
    for x, y in loader:
        model(x, y)
        steps += 1
    return time.perf_counter() - start, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps per epoch")
    parser.add_argument("--batch", type=int, default=8, help="micro-batch size")
    parser.add_argument("--repeats", type=int, default=3,
                        help="epochs timed per row, the fastest kept (a shared machine)")
    args = parser.parse_args()
    opts = poptorch.Options().deviceIterations(4).showCompilationProgressBar(False)
    combined = args.batch * 4
    n = combined * args.steps

    # compute alone: the steps on batches already in memory (after a compiling call)
    model = _training(opts.clone())
    batches = [(torch.randn(combined, 64), torch.randn(combined, 8))
               for _ in range(args.steps)]
    model(*batches[0])
    compute = min(_epoch(model, batches)[0] for _ in range(args.repeats))
    delay = compute / args.steps / combined  # loading a batch ~ computing a step

    # loading alone
    dataset = SlowDataset(n, delay)
    loader = poptorch.DataLoader(opts.clone(), dataset, batch_size=args.batch)
    loading = float("inf")
    for _ in range(1 + args.repeats):  # after a first epoch, as below
        start = time.perf_counter()
        for _ in loader:
            pass
        loading = min(loading, time.perf_counter() - start)

    rows = []
    for mode in (poptorch.DataLoaderMode.Sync, poptorch.DataLoaderMode.Async):
        loader = poptorch.DataLoader(
            opts.clone(), dataset, batch_size=args.batch, mode=mode,
            async_options=None if mode == poptorch.DataLoaderMode.Sync else {
                "buffer_size": 3, "miss_sleep_time_in_ms": 5.0})
        model = _training(opts.clone())
        model(*batches[0])  # compile outside the timed epoch
        _epoch(model, loader)  # the first epoch also starts the worker process
        wall, steps = min(_epoch(model, loader) for _ in range(args.repeats))
        loader.terminate()
        rows.append((mode.name, wall, steps))

    print(f"{args.steps} steps of {combined} elements; loading {delay * 1e3:.2f} ms/element")
    print(f"{'':24}{'seconds':>9}{'/ (load + compute)':>20}")
    total = loading + compute
    for name, value in [("loading only", loading), ("compute only", compute),
                        ("load + compute", total)]:
        print(f"{name:24}{value:9.3f}{value / total:20.2f}")
    for name, wall, steps in rows:
        assert steps == args.steps, (name, steps)
        print(f"{'DataLoaderMode.' + name:24}{wall:9.3f}{wall / total:20.2f}")


if __name__ == "__main__":
    main()
