"""Training over several processes on torch.distributed (Options.Distributed, issue 26):
2 processes x 2 replicas, started by torchrun or by another launcher, against one
process with 4 replicas on the same global data.

Each launch starts fresh Python processes (torch and poptorch imports, a compile): the
tests here are few and small.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from distributed_common import (
    ACCUMULATION,
    KINDS,
    MICRO_BATCH,
    PROCESSES,
    REPLICAS,
    STEPS,
    all_reduce_cycles,
    dataset,
    group,
    make_model,
    make_optimizer,
    options,
)

import poptorch

WORKER = Path(__file__).with_name("distributed_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


def reference(kind: str) -> dict:
    """One process, 4 replicas: call k reads what the 2 processes read at their call k,
    process p's 2 replicas as replicas 2p and 2p + 1."""
    torch.manual_seed(100)  # process 0's seed: its weights reach every process
    model = make_model(kind)
    optimizer = make_optimizer(kind, model)
    trainer = poptorch.trainingModel(model, options(PROCESSES * REPLICAS), optimizer)
    group(trainer, kind)
    x_all, y_all = dataset().tensors
    per_call = REPLICAS * ACCUMULATION * MICRO_BATCH
    share = len(x_all) // PROCESSES
    losses = []
    for k in range(STEPS):
        def call_input(t: torch.Tensor, k: int = k) -> torch.Tensor:
            parts = [t[p * share + k * per_call:p * share + (k + 1) * per_call]
                     .reshape(ACCUMULATION, REPLICAS, MICRO_BATCH, *t.shape[1:])
                     for p in range(PROCESSES)]
            return torch.cat(parts, dim=1).reshape(-1, *t.shape[1:])
        _, loss = trainer(call_input(x_all), call_input(y_all))
        losses.append(loss.detach().clone())
    trainer.copyWeightsToHost()
    return {"weights": model.state_dict(), "losses": losses,
            "all_reduce": all_reduce_cycles(trainer),
            "optimizer": optimizer.state_dict()}


def _run(command: list[str], env: dict[str, str], timeout: float
         ) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_two_processes_train_as_one_with_four_replicas(tmp_path):
    port = _free_port()
    done = _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                 str(PROCESSES), "--master-addr", "127.0.0.1", "--master-port", str(port),
                 str(WORKER), str(tmp_path)], _env(), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False)
             for r in range(PROCESSES)]
    for kind in KINDS:
        expected = reference(kind)
        for r, result in enumerate(ranks):
            got = result[kind]
            for name, value in expected["weights"].items():
                torch.testing.assert_close(got["weights"][name], value, rtol=1e-5, atol=1e-6,
                                           msg=f"{kind}: rank {r}'s {name}")
            # the optimizer state (momentum, Adam's moments) equal on every rank
            for a, b in zip(got["optimizer"]["state"].values(),
                            expected["optimizer"]["state"].values(), strict=True):
                for key in b:
                    if isinstance(b[key], torch.Tensor) and b[key].numel() > 1:
                        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6)
        # the machine model's all-reduce spans the run's 4 replicas, as the reference's
        for r in range(PROCESSES):
            assert ranks[r][kind]["all_reduce"] == expected["all_reduce"] != []
        # bit for bit the same weights on both ranks
        for name in expected["weights"]:
            assert torch.equal(ranks[0][kind]["weights"][name], ranks[1][kind]["weights"][name])
        # the losses: each process returns its own 2 replicas' (the reference: all 4)
        for k in range(STEPS):
            both = torch.cat([ranks[r][kind]["losses"][k].reshape(-1)
                              for r in range(PROCESSES)])
            torch.testing.assert_close(both, expected["losses"][k].reshape(-1),
                                       rtol=1e-5, atol=1e-6)


def test_a_killed_process_fails_the_other_with_an_error(tmp_path):
    """Started without torchrun, as mpirun would start them (OMPI_COMM_WORLD_* and the
    environment rendezvous); process 1 kills itself after its first step."""
    port = str(_free_port())
    procs = [subprocess.Popen(
        [sys.executable, str(WORKER), str(tmp_path), "--die-after-step", "1"],
        env=_env(OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(PROCESSES),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(PROCESSES)]
    start = time.monotonic()
    try:
        _, err = procs[0].communicate(timeout=120)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert procs[1].returncode == -9
    assert procs[0].returncode != 0
    # the survivor's error names the process that stopped, within 60 s of its death
    assert "poptorch.Error" in err or "Error" in err
    assert "Distributed: process 0 of 2" in err, err[-3000:]
    assert f"process 1 (pid {procs[1].pid}) stopped" in err, err[-3000:]
    assert time.monotonic() - start < 90


def test_processes_compiling_different_inputs_fail_at_compile(tmp_path):
    port = _free_port()
    done = _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                 str(PROCESSES), "--master-addr", "127.0.0.1", "--master-port", str(port),
                 str(WORKER), str(tmp_path), "--mismatch"], _env(), timeout=240)
    assert done.returncode != 0
    # both processes raise it (the micro-batch shapes: 1 and 2 rows)
    message = ("poptorch.errors.Error: Distributed: process 1 and process 0 compile "
               "different input shapes: [((1, 8), 'torch.float32'), ((1,), 'torch.int32')] "
               "in process 1, [((2, 8), 'torch.float32'), ((2,), 'torch.int32')] in process "
               "0; every process must compile the same model with the same options for the "
               "same input shapes")
    assert f"[rank0]: {message}" in done.stderr, done.stderr[-3000:]
    assert f"[rank1]: {message}" in done.stderr, done.stderr[-3000:]
    assert not list(tmp_path.glob("rank*.pt"))


def test_a_missing_rendezvous_is_an_error(monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    opts = options()
    opts.Distributed.configureProcessId(1, 2)
    model = make_model()
    trainer = poptorch.trainingModel(model, opts, make_optimizer("sgd", model))
    x, y = dataset().tensors
    with pytest.raises(poptorch.Error, match=r"Distributed: process 1 of 2 needs MASTER_ADDR "
                                             r"and MASTER_PORT in its environment"):
        trainer(x[:8], y[:8])


def test_orthogonal_input_groups_over_processes_are_refused():
    opts = options()
    opts.Distributed.configureProcessId(0, 2)
    opts.inputReplicaGrouping(2, poptorch.CommGroupType.Orthogonal)
    model = make_model()
    trainer = poptorch.trainingModel(model, opts, make_optimizer("sgd", model))
    x, y = dataset().tensors
    with pytest.raises(poptorch.Error, match=r"Distributed: inputReplicaGrouping\(2, "
                                             r"CommGroupType.Orthogonal\) puts replicas of "
                                             r"different processes in one input group"):
        trainer(x[:4], y[:4])


def _compile_as(process: int, processes: int) -> None:
    opts = options()
    opts.Distributed.configureProcessId(process, processes)
    model = make_model()
    trainer = poptorch.trainingModel(model, opts, make_optimizer("sgd", model))
    x, y = dataset().tensors
    trainer(x[:8], y[:8])


def test_a_bad_timeout_is_an_error(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    monkeypatch.setenv("POPTORCH_DISTRIBUTED_TIMEOUT", "soon")
    with pytest.raises(poptorch.Error, match=r"POPTORCH_DISTRIBUTED_TIMEOUT must be a number "
                                             r"of seconds above 0, got 'soon'"):
        _compile_as(0, 2)


def test_options_that_disagree_with_the_process_group_are_an_error(monkeypatch):
    """A group the script made itself (rank 0 of 1) against options saying 1 of 2."""
    import torch.distributed as dist

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        with pytest.raises(poptorch.Error, match=r"Distributed: the options say process 1 of "
                                                 r"2, but torch.distributed's process group "
                                                 r"has this process as rank 0 of 1"):
            _compile_as(1, 2)
    finally:
        dist.destroy_process_group()


def test_a_peer_that_never_comes_is_an_error_after_the_timeout(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    monkeypatch.setenv("POPTORCH_DISTRIBUTED_TIMEOUT", "2")
    start = time.monotonic()
    with pytest.raises(poptorch.Error, match=r"Distributed: process 0 of 2 could not meet the "
                                             r"other processes at 127.0.0.1:"):
        _compile_as(0, 2)
    assert time.monotonic() - start < 60


def test_a_grouping_must_divide_the_replicas_of_every_process():
    opts = options()
    opts.Distributed.configureProcessId(0, 2)
    model = make_model("grouped")
    trainer = poptorch.trainingModel(model, opts, make_optimizer("grouped", model))
    with pytest.raises(poptorch.Error, match=r"scale.replicaGrouping: shards=3 replicas per "
                                             r"group does not divide the 4 replicas of 2 "
                                             r"processes x replicationFactor\(2\); use a "
                                             r"factor of 4"):
        trainer.scale.replicaGrouping(poptorch.CommGroupType.Consecutive, 3,
                                      poptorch.VariableRetrievalMode.OnePerGroup)
