"""One process of a distributed training run, for test_distributed.py (started by
torchrun, or directly as another launcher would: then OMPI_COMM_WORLD_RANK/SIZE give
its place and MASTER_ADDR/MASTER_PORT the rendezvous).

    python distributed_worker.py OUT_DIR [--die-after-step N] [--mismatch]

Trains the same small classifier as test_distributed.py's single-process reference,
with SGD, with Adam and with a replica-grouped weight, 2 replicas x gradient
accumulation 2 a process, on this process's share of the dataset
(poptorch.DataLoader's auto_distributed_partitioning), and saves its final weights and
losses to OUT_DIR/rank<R>.pt. Each process seeds its initial weights differently:
process 0's reach every process at compile.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from distributed_common import (  # noqa: E402
    KINDS,
    STEPS,
    all_reduce_cycles,
    dataset,
    group,
    make_model,
    make_optimizer,
    options,
)

import poptorch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--die-after-step", type=int, default=None)
    parser.add_argument("--mismatch", action="store_true",
                        help="process 1 reads micro-batches of 1, not 2")
    args = parser.parse_args()
    opts = options()
    rank = opts.Distributed.processId
    results = {}
    for kind in KINDS:
        torch.manual_seed(100 + rank)  # different in every process: rank 0's wins
        model = make_model(kind)
        optimizer = make_optimizer(kind, model)
        loader = poptorch.DataLoader(opts, dataset(),
                                     batch_size=1 if args.mismatch and rank == 1 else 2)
        trainer = poptorch.trainingModel(model, opts, optimizer)
        group(trainer, kind)
        losses = []
        for step, (x, y) in enumerate(loader):
            if step == STEPS:
                break
            _, loss = trainer(x, y)
            losses.append(loss.detach().clone())
            if args.die_after_step is not None and step + 1 == args.die_after_step \
                    and rank == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        trainer.copyWeightsToHost()
        results[kind] = {"weights": {k: v.clone() for k, v in model.state_dict().items()},
                         "all_reduce": all_reduce_cycles(trainer),
                         "losses": losses,
                         "optimizer": optimizer.state_dict()}
        trainer.destroy()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(results, args.out / f"rank{rank}.pt")


if __name__ == "__main__":
    main()
