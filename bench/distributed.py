"""Training over several processes (Options.Distributed on torch.distributed):
`make bench-distributed` runs this.

Two tables, written to DIR/distributed.json and printed:

- Wall clock on this machine: one training model (bench/models.py, with SGD and
  momentum, gradient accumulation 2) trained by 1, 2 and 4 processes started by torchrun
  (gloo on this host), one replica each at micro-batch 16, on the same global batch per
  step; samples a second over STEPS steps after a warm-up step, in every process, and
  the share of process 0's time in the gradient all-reduce (waiting for the other
  processes to reach it included). On a 2-core
  machine more processes than cores only share them: the figure is the cost of the
  processes and their collective, not a speed-up.
- Simulated on the machine model: the same model with 1 replica per IPU over 1, 2, 4 and
  16 IPU-M2000s (4, 8, 16 and 64 replicas in one process), and over 32 (two IPU-POD64s:
  2 processes of 64 replicas, launched by torchrun, whose gradient ring crosses the
  pods over the GW-Links), compile only: samples a second of the simulated step and the
  gradient all-reduce's share of it.

    .venv/bin/python bench/distributed.py [--out bench/out] [--model mlp]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch
from models import WithLoss, batch, make

import poptorch

HERE = Path(__file__).resolve().parent
PROCESSES = (1, 2, 4)
MACHINES = (1, 2, 4, 16)  # IPU-M2000s of 4 IPUs, one process
POD_PROCESSES = 2  # processes of a full IPU-POD64 each (64 replicas)
MICRO_BATCH, ACCUMULATION, STEPS = 16, 2, 20
GLOBAL = 4 * MICRO_BATCH * ACCUMULATION  # samples a step, whatever the processes


def _trainer(name: str, replicas: int, accumulation: int) -> poptorch.PoplarExecutor:
    model = WithLoss(make(name)).train()
    opts = poptorch.Options().showCompilationProgressBar(False).replicationFactor(replicas)
    opts.Training.gradientAccumulation(accumulation)
    return poptorch.trainingModel(
        model, opts, poptorch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))


def worker(name: str, out: Path) -> None:
    """One process of a torchrun launch (Options.Distributed from RANK / WORLD_SIZE)."""
    processes = int(os.environ["WORLD_SIZE"])
    accumulation = GLOBAL // (MICRO_BATCH * processes)
    trainer = _trainer(name, 1, accumulation)
    x, labels = batch(name, MICRO_BATCH * accumulation)
    trainer(x, labels)  # compile, and one step to warm up
    reduce_s = 0.0
    processes_group = trainer._processes  # the benchmark's look inside: the collective
    if processes_group is not None:
        original = processes_group.all_reduce

        def timed(*args, **kwargs):
            nonlocal reduce_s
            start = time.perf_counter()
            result = original(*args, **kwargs)
            reduce_s += time.perf_counter() - start
            return result
        processes_group.all_reduce = timed
    start = time.perf_counter()
    for _ in range(STEPS):
        trainer(x, labels)
    seconds = time.perf_counter() - start
    if int(os.environ["RANK"]) == 0:
        out.write_text(json.dumps({"processes": processes, "seconds": seconds,
                                   "samples_per_s": STEPS * GLOBAL / seconds,
                                   "all_reduce_share": reduce_s / seconds}))


def simulate_worker(name: str, out: Path) -> None:
    """One process of a torchrun launch driving a whole IPU-POD64 (64 replicas), compile
    only: process 0 writes the simulated figures of the run's replicas."""
    trainer = _trainer(name, 64, ACCUMULATION)
    x, labels = batch(name, MICRO_BATCH * ACCUMULATION * 64)
    trainer.compile(x, labels)
    if int(os.environ["RANK"]) == 0:
        processes = int(os.environ["WORLD_SIZE"])
        row = _figures(trainer, len(x) * processes)
        out.write_text(json.dumps({"machines": 16 * processes, "replicas": 64 * processes,
                                   **row}))


def _figures(trainer: poptorch.PoplarExecutor, samples: int) -> dict:
    timeline = trainer.getTimeline()
    seconds = timeline.total_cycles / timeline.machine.tileClockFrequency
    reduce = max((sum(e.end - e.start for e in events if e.kind == "all_reduce")
                  for events in timeline.events.values()), default=0)
    return {"samples_per_s": samples / seconds,
            "all_reduce_share": reduce / timeline.total_cycles}


def _launch(processes: int, *args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                    str(processes), "--master-addr", "127.0.0.1", "--master-port",
                    str(_free_port()), __file__, *args], env=env, check=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wall_clock(name: str, out_dir: Path) -> list[dict]:
    rows = []
    for processes in PROCESSES:
        out = out_dir / f"distributed_{processes}.json"
        _launch(processes, "--worker", "--model", name, "--out", str(out))
        rows.append(json.loads(out.read_text()))
        print(f"{processes} process(es): {rows[-1]['samples_per_s']:,.0f} samples/s, "
              f"in the all-reduce (waiting included) "
              f"{rows[-1]['all_reduce_share'] * 100:.1f}%", flush=True)
    return rows


def simulated(name: str, out_dir: Path) -> list[dict]:
    rows = []
    for machines in MACHINES:
        replicas = 4 * machines
        trainer = _trainer(name, replicas, ACCUMULATION)
        x, labels = batch(name, MICRO_BATCH * ACCUMULATION * replicas)
        trainer.compile(x, labels)
        rows.append({"machines": machines, "replicas": replicas,
                     **_figures(trainer, len(x))})
        trainer.destroy()
        print(f"{machines} IPU-M2000(s), {replicas} replicas: {rows[-1]['samples_per_s']:,.0f} "
              f"samples/s simulated, all-reduce {rows[-1]['all_reduce_share'] * 100:.1f}%",
              flush=True)
    out = out_dir / "distributed_pods.json"
    _launch(POD_PROCESSES, "--simulate-worker", "--model", name, "--out", str(out))
    rows.append(json.loads(out.read_text()))
    print(f"{rows[-1]['machines']} IPU-M2000s over {POD_PROCESSES} processes, "
          f"{rows[-1]['replicas']} replicas: {rows[-1]['samples_per_s']:,.0f} samples/s "
          f"simulated, all-reduce {rows[-1]['all_reduce_share'] * 100:.1f}%", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--simulate-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker or args.simulate_worker:
        (worker if args.worker else simulate_worker)(args.model, Path(args.out))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    results = {"model": args.model, "micro_batch": MICRO_BATCH, "global_batch": GLOBAL,
               "wall_clock": wall_clock(args.model, out), "simulated": simulated(args.model, out)}
    (out / "distributed.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
