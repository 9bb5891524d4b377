"""The launcher and PopDist's calls (issue 26, items 1 and 3): poptorch.distributed and
the `popdist` package read a torchrun-like or poptorch-run-like environment, refuse to
work outside one, and `poptorch-run` checks its arguments, exports the replica counts
and starts the instances through torch.distributed.run (one real launch of 2)."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest
import torch
from torch.distributed import run as torchrun

import popdist
import popdist.poptorch
import poptorch
import poptorch.distributed as dist
from poptorch.tools import run

LAUNCH_VARS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
               "POPTORCH_NUM_REPLICAS", "POPTORCH_IPUS_PER_REPLICA", "OMPI_COMM_WORLD_SIZE",
               "OMPI_COMM_WORLD_RANK")

HINT = ("launch the script with poptorch-run --num-instances N --num-replicas R script.py "
        "(or torchrun --nproc-per-node N script.py), or use poptorch.Options and "
        "Options.Distributed.configureProcessId() to run without a launcher")


@pytest.fixture
def launched(monkeypatch):
    """Set the launcher's environment: launched(WORLD_SIZE=..., RANK=..., ...)."""
    for name in LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)

    def set_env(**values):
        for name, value in values.items():
            monkeypatch.setenv(name, str(value))
    return set_env


CALLS = ("getNumInstances", "getInstanceIndex", "getNumTotalReplicas", "getNumLocalReplicas",
         "getReplicationFactor", "getReplicaIndexOffset", "getNumIpusPerReplica",
         "getDeviceId", "init")


@pytest.mark.parametrize("call", CALLS)
def test_calls_outside_a_launch_say_how_to_launch(launched, call):
    launched()
    assert not dist.isPopdistEnvSet()
    with pytest.raises(poptorch.Error) as info:
        getattr(dist, call)()
    assert str(info.value) == (
        f"popdist.{call}(): this process was not started by poptorch-run or torchrun "
        f"(WORLD_SIZE and RANK are not set); {HINT}")


def test_options_outside_a_launch(launched):
    launched()
    with pytest.raises(poptorch.Error, match=r"^popdist\.poptorch\.Options: this process "
                       r"was not started by poptorch-run or torchrun \(WORLD_SIZE and RANK "
                       r"are not set\); launch the script with poptorch-run"):
        popdist.poptorch.Options()


def test_torchrun_environment_gives_one_replica_per_instance(launched):
    launched(WORLD_SIZE=2, RANK=1, LOCAL_RANK=1)
    assert dist.isPopdistEnvSet()
    assert (dist.getNumInstances(), dist.getInstanceIndex()) == (2, 1)
    assert (dist.getNumTotalReplicas(), dist.getNumLocalReplicas()) == (2, 1)
    assert dist.getReplicationFactor() == 1
    assert dist.getReplicaIndexOffset() == 1
    assert dist.getNumIpusPerReplica() == 1
    assert dist.getDeviceId() == 1  # the second single IPU
    assert dist.getDeviceId(2) == 65  # the second pair of IPUs (64..95)
    dist.init()


def test_poptorch_run_environment(launched):
    launched(WORLD_SIZE=2, RANK=1, POPTORCH_NUM_REPLICAS=4, POPTORCH_IPUS_PER_REPLICA=2)
    assert (dist.getNumTotalReplicas(), dist.getNumLocalReplicas()) == (4, 2)
    assert dist.getReplicaIndexOffset() == 2
    assert dist.getNumIpusPerReplica() == 2
    assert dist.checkNumIpusPerReplica(2) and not dist.checkNumIpusPerReplica(1)
    assert dist.getDeviceId() == 97  # 2 replicas x 2 IPUs: the second device of 4 (96..111)
    dist.init()


def test_popdist_package_is_poptorch_distributed(launched):
    launched(WORLD_SIZE=4, RANK=3, POPTORCH_NUM_REPLICAS=8)
    for name in popdist.__all__:
        assert getattr(popdist, name) is getattr(dist, name)
    assert popdist.poptorch.Options is dist.Options
    assert poptorch.distributed is dist
    assert (popdist.getInstanceIndex(), popdist.getNumLocalReplicas()) == (3, 2)


@pytest.mark.parametrize("env, message", [
    (dict(WORLD_SIZE=2, RANK=2), "environment variable RANK (2) must be smaller than "
     f"WORLD_SIZE (2); {HINT}"),
    (dict(WORLD_SIZE="two", RANK=0), "environment variable WORLD_SIZE must be an integer "
     f">= 1, got 'two'; {HINT}"),
    (dict(WORLD_SIZE=2, RANK=0, POPTORCH_NUM_REPLICAS=3), "POPTORCH_NUM_REPLICAS=3 "
     "replicas cannot be shared out evenly over WORLD_SIZE=2 instances; launch with a "
     "number of replicas that is a multiple of 2"),
    (dict(WORLD_SIZE=2, RANK=0, POPTORCH_IPUS_PER_REPLICA=0), "environment variable "
     f"POPTORCH_IPUS_PER_REPLICA must be an integer >= 1, got '0'; {HINT}"),
])
def test_bad_environment_is_an_error_naming_the_variable(launched, env, message):
    launched(**env)
    with pytest.raises(poptorch.Error) as info:
        dist.init()
    assert str(info.value) == message


def test_device_id_needs_a_device_size(launched):
    launched(WORLD_SIZE=2, RANK=0, POPTORCH_NUM_REPLICAS=6)
    with pytest.raises(poptorch.Error) as info:
        dist.getDeviceId()
    assert str(info.value) == (
        "each instance drives 3 replicas x 1 IPUs per replica = 3 IPUs, but the devices of "
        "the simulated IPU-POD64 have 1, 2, 4, 8, 16, 32, 64 IPUs; launch with "
        "--num-replicas and --ipus-per-replica whose product per instance is one of these, "
        "at most 64")


def test_execute_on_instances(launched):
    calls = []

    def add(x, y=0):
        calls.append(dist.getInstanceIndex())
        return x + y
    for rank in (0, 1):
        launched(WORLD_SIZE=2, RANK=rank)
        assert dist.execute_on_instances({0}, add, 1, y=2) == (3 if rank == 0 else None)
    assert calls == [0]
    with pytest.raises(poptorch.Error, match=r"^execute_on_instances: instances must be "
                       r"indices 0 to 1 of the 2 instances, got 2$"):
        dist.execute_on_instances({0, 2}, print)


def test_options_from_the_launcher(launched):
    launched(WORLD_SIZE=2, RANK=1, POPTORCH_NUM_REPLICAS=4)
    opts = popdist.poptorch.Options()
    assert isinstance(opts, poptorch.Options)
    assert opts.replication_factor == 2
    assert opts.ipu_id == 65
    assert (opts.Distributed.processId, opts.Distributed.numProcesses) == (1, 2)
    copied = opts.clone()
    assert (copied.replication_factor, copied.Distributed.processId) == (2, 1)
    opts.deviceIterations(3)  # what the launcher does not set stays the user's
    assert opts.device_iterations == 3


# PopTorch's tests/popdist_test.py test_blocked_options: the calls the launcher decides
@pytest.mark.parametrize("call, name, why", [
    (lambda o: o.useIpuId(1), "useIpuId", "the launcher gives this instance device 65"),
    (lambda o: o.replicationFactor(1), "replicationFactor",
     "the launcher sets it: each of the 2 instances drives 2 of the 4 replicas; change "
     "poptorch-run's --num-replicas (the total) instead"),
    (lambda o: o.Distributed.disable(), "Distributed.disable", "the launcher sets the process"),
    (lambda o: o.Distributed.setEnvVarNames("A", "B"), "Distributed.setEnvVarNames",
     "the launcher sets the process"),
    (lambda o: o.Distributed.configureProcessId(1, 2), "Distributed.configureProcessId",
     "the launcher sets the process id and count (RANK, WORLD_SIZE); change poptorch-run's "
     "--num-instances, or use poptorch.Options to set them yourself"),
])
def test_options_refuse_what_the_launcher_sets(launched, call, name, why):
    launched(WORLD_SIZE=2, RANK=1, POPTORCH_NUM_REPLICAS=4)
    opts = popdist.poptorch.Options()
    with pytest.raises(poptorch.Error) as info:
        call(opts)
    assert str(info.value).startswith(f"Cannot call `{name}` with popdist.poptorch.Options: "
                                      f"{why}")
    assert (opts.replication_factor, opts.ipu_id, opts.Distributed.processId) == (2, 65, 1)


def test_ipus_per_replica_must_agree_with_the_launcher(launched):
    launched(WORLD_SIZE=2, RANK=0, POPTORCH_NUM_REPLICAS=4, POPTORCH_IPUS_PER_REPLICA=1)
    with pytest.raises(poptorch.Error) as info:
        popdist.poptorch.Options(ipus_per_replica=2)
    assert str(info.value) == (
        "popdist.poptorch.Options(ipus_per_replica=2) differs from the launcher's 1 (IPUs "
        "per replica, POPTORCH_IPUS_PER_REPLICA, poptorch-run's --ipus-per-replica); launch "
        "with --ipus-per-replica 2 or pass the same number to both")
    with pytest.raises(TypeError):
        popdist.poptorch.Options(replicas=2)  # poptorch.Options takes no such argument


class Pipelined(torch.nn.Module):
    """A linear layer per IPU: 2 IPUs per replica."""

    def __init__(self):
        super().__init__()
        self.a = poptorch.BeginBlock(torch.nn.Linear(4, 4), ipu_id=0)
        self.b = poptorch.BeginBlock(torch.nn.Linear(4, 2), ipu_id=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_ipus_per_replica_sizes_the_device(launched):
    """Under plain torchrun (one replica per process), the model on 2 IPUs runs with
    ipus_per_replica=2 and matches the CPU; with the default 1 the device is too small."""
    # torchrun's whole environment for one process, should the engine open a group of 1
    launched(WORLD_SIZE=1, RANK=0, LOCAL_RANK=0, MASTER_ADDR="127.0.0.1",
             MASTER_PORT=free_port())
    gc.collect()  # release the devices of models other tests left unreferenced
    torch.manual_seed(0)
    model, x = Pipelined().eval(), torch.randn(4, 4)
    opts = popdist.poptorch.Options(ipus_per_replica=2).deviceIterations(2)
    assert opts.ipu_id == 64
    ipu = poptorch.inferenceModel(model, opts)
    torch.testing.assert_close(ipu(x), model(x))
    ipu.destroy()
    with pytest.raises(poptorch.Error, match=r"useIpuId\(0\): device 0 \(IPU 0\) has 1 IPU, "
                       r"but the model needs 2 IPUs \(2 IPUs x replicationFactor\(1\)\)"):
        poptorch.inferenceModel(model, popdist.poptorch.Options().deviceIterations(2))(x)


# poptorch-run's arguments
@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Work in tmp_path, which holds the scripts s.py and train.py."""
    monkeypatch.chdir(tmp_path)
    for name in ("s.py", "train.py"):
        (tmp_path / name).write_text("")
    return tmp_path


def usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        run.main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, message", [
    (["--num-instances", "2", "--num-replicas", "3", "s.py"],
     "--num-replicas 3 is not a multiple of --num-instances 2: every instance drives the "
     "same number of replicas; use a --num-replicas that is a multiple of 2 (such as 2 or 4)"),
    (["--num-instances", "4", "--num-replicas", "2", "s.py"],
     "--num-replicas 2 is not a multiple of --num-instances 4: every instance drives the "
     "same number of replicas; use a --num-replicas that is a multiple of 4 (such as 4)"),
    (["--num-instances", "0", "--num-replicas", "2", "s.py"],
     "argument --num-instances: must be an integer >= 1, got 0"),
    (["--num-instances", "2", "--num-replicas", "4"],
     "no script to run: give it after the options, as in poptorch-run --num-instances 2 "
     "--num-replicas 4 script.py [args ...]"),
    (["--num-instances", "2", "s.py"],
     "the following arguments are required: --num-replicas"),
    (["--num-instances", "2", "--num-replicas", "6", "s.py"],
     "each instance would drive 3 replicas x 1 IPUs per replica = 3 IPUs, but the devices of "
     "the simulated IPU-POD64 have 1, 2, 4, 8, 16, 32, 64 IPUs; change --num-replicas or "
     "--ipus-per-replica so that their product per instance is one of these"),
    (["--num-instances", "3", "--num-replicas", "3", "--nnodes", "2", "s.py"],
     "--num-instances 3 is not a multiple of --nnodes 2: every host starts the same number "
     "of instances; use a --num-instances that is a multiple of 2"),
    (["--num-instances", "2", "--num-replicas", "2", "--nnodes", "2", "--node-rank", "2",
      "s.py"], "--node-rank must be 0 to 1 (--nnodes 2), got 2"),
    (["--num-instances", "2", "--num-replicas", "2", "--nnodes", "2", "s.py"],
     "--nnodes 2 with the static rendezvous needs --node-rank (0 to 1, a different one on "
     "each host) and --master-addr HOST --master-port PORT of host 0; or use --rdzv-backend "
     "c10d --rdzv-endpoint HOST:PORT --rdzv-id ID, the same on every host"),
    (["--num-instances", "2", "--num-replicas", "2", "--rdzv-backend", "c10d",
      "--rdzv-endpoint", "h:1", "--node-rank", "0", "--master-port", "2", "s.py"],
     "--node-rank and --master-port only apply to the static rendezvous, but --rdzv-backend "
     "is c10d, which ranks the hosts itself at --rdzv-endpoint; drop --node-rank and "
     "--master-port"),
    (["--num-instances", "2", "--num-replicas", "2", "--nnodes", "2", "--rdzv-backend",
      "c10d", "s.py"], "--rdzv-backend c10d over --nnodes 2 hosts needs --rdzv-endpoint "
     "HOST:PORT, the same on every host"),
    (["--num-instances", "2", "--num-replicas", "2", "--rdzv-endpoint", "h:1",
      "--master-addr", "h", "s.py"], "give the static rendezvous's address once: either "
     "--rdzv-endpoint HOST:PORT or --master-addr HOST --master-port PORT"),
    (["--num-instances", "2", "--num-replicas", "2", "missing.py"],
     "cannot find the script 'missing.py' (in {cwd}): give the path of a Python file"),
])
def test_bad_arguments_are_usage_errors(capsys, in_tmp, argv, message):
    message = message.format(cwd=in_tmp)
    assert usage_error(capsys, argv) == f"poptorch-run: error: {message}"


def test_arguments_become_torchrun_arguments(in_tmp):
    args, command = run.parse([
        "--num-instances", "4", "--num-replicas", "8", "--ipus-per-replica", "2",
        "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "host0:29400",
        "--rdzv-id", "job7", "train.py", "--epochs", "3", "--num-replicas", "1"])
    assert (args.num_replicas, args.ipus_per_replica) == (8, 2)
    parsed = torchrun.parse_args(command)
    assert (parsed.nnodes, parsed.nproc_per_node, parsed.max_restarts) == ("2", "2", 0)
    assert (parsed.rdzv_backend, parsed.rdzv_endpoint, parsed.rdzv_id) == (
        "c10d", "host0:29400", "job7")
    # the script's own arguments are its own, even when they look like the launcher's
    assert (parsed.training_script, parsed.training_script_args) == (
        "train.py", ["--epochs", "3", "--num-replicas", "1"])
    _, static = run.parse(["--num-instances", "2", "--num-replicas", "2", "--nnodes", "2",
                           "--node-rank", "1", "--master-addr", "10.1.2.3",
                           "--master-port", "29500", "s.py"])
    parsed = torchrun.parse_args(static)
    assert (parsed.node_rank, parsed.master_addr, parsed.master_port) == (1, "10.1.2.3", 29500)
    assert parsed.nproc_per_node == "1"


def test_console_script_is_installed():
    (script,) = entry_points(group="console_scripts", name="poptorch-run")
    assert script.value == "poptorch.tools.run:main"


SCRIPT = textwrap.dedent("""\
    import json, os, sys
    import popdist
    import poptorch.distributed as dist
    popdist.init()
    print("RESULT " + json.dumps({
        "rank": os.environ["RANK"], "world_size": os.environ["WORLD_SIZE"],
        "local_rank": os.environ["LOCAL_RANK"], "master": "MASTER_ADDR" in os.environ
        and "MASTER_PORT" in os.environ, "index": dist.getInstanceIndex(),
        "local": dist.getNumLocalReplicas(), "total": dist.getNumTotalReplicas(),
        "ipus": dist.getNumIpusPerReplica(), "args": sys.argv[1:]}), flush=True)
    if sys.argv[1:] == ["--fail-rank", os.environ["RANK"]]:
        sys.exit(7)
    """)


def test_launch_two_instances(tmp_path):
    """poptorch-run starts 2 instances of 2 replicas each; when one fails, its exit status
    is poptorch-run's."""
    (tmp_path / "script.py").write_text(SCRIPT)
    exe = os.path.join(os.path.dirname(sys.executable), "poptorch-run")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    command = [exe, "--num-instances", "2", "--num-replicas", "4", "script.py"]
    done = subprocess.run(command + ["--x"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = sorted((json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines()
                      if line.startswith("RESULT ")), key=lambda r: r["rank"])
    assert results == [{"rank": str(rank), "world_size": "2", "local_rank": str(rank),
                        "master": True, "index": rank, "local": 2, "total": 4, "ipus": 1,
                        "args": ["--x"]} for rank in (0, 1)]
    failed = subprocess.run(command + ["--fail-rank", "1"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode == 7
    assert failed.stderr.strip().splitlines()[-1] == (
        "poptorch-run: error: instance 1 of 2 failed with exit status 7")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_launch_as_two_hosts(tmp_path):
    """The multi-host how-to on one host: two poptorch-run commands, --nnodes 2 with
    --node-rank 0 and 1, meet at --master-addr/--master-port and start one instance each."""
    (tmp_path / "script.py").write_text(SCRIPT)
    exe = os.path.join(os.path.dirname(sys.executable), "poptorch-run")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    port = str(free_port())
    hosts = [subprocess.Popen(
        [exe, "--num-instances", "2", "--num-replicas", "4", "--nnodes", "2", "--node-rank",
         str(rank), "--master-addr", "127.0.0.1", "--master-port", port, "script.py"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in (0, 1)]
    outputs = [host.communicate(timeout=120) for host in hosts]
    assert [host.returncode for host in hosts] == [0, 0], [err for _, err in outputs]
    results = [json.loads(line[len("RESULT "):]) for out, _ in outputs
               for line in out.splitlines() if line.startswith("RESULT ")]
    assert [(r["rank"], r["local_rank"], r["world_size"], r["local"], r["total"])
            for r in results] == [("0", "0", "2", 2, 4), ("1", "0", "2", 2, 4)]


def test_popdist_example_under_the_launcher(tmp_path):
    """examples/popdist_training.py, a PopDist-style script, trains under poptorch-run:
    each instance trains on its share with its 2 replicas, the weights stay equal in
    both; only instance 0 logs and writes the checkpoint."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "examples", "popdist_training.py")
    exe = os.path.join(os.path.dirname(sys.executable), "poptorch-run")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    done = subprocess.run([exe, "--num-instances", "2", "--num-replicas", "4", script,
                           "--epochs", "1", "--checkpoint", "weights.pt"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    # (the instances' lines may interleave on the shared pipe)
    checksums = dict(re.findall(r"instance (\d+): weights checksum (-?[\d.]+)", done.stdout))
    assert sorted(checksums) == ["0", "1"], done.stdout
    # one model trained by both: the same weights in every instance
    assert checksums["0"] == checksums["1"]
    assert sum(line.startswith("epoch 0: loss") for line in done.stderr.splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["weights.pt"]
    assert set(torch.load(tmp_path / "weights.pt")) == {
        "layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"}


def test_stopping_the_launcher_stops_the_instances(tmp_path):
    """SIGTERM to poptorch-run stops its instances and gives exit status 128 + 15."""
    (tmp_path / "script.py").write_text(
        "import os, time\nprint('READY', os.getpid(), flush=True)\ntime.sleep(120)\n")
    exe = os.path.join(os.path.dirname(sys.executable), "poptorch-run")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    launcher = subprocess.Popen([exe, "--num-instances", "2", "--num-replicas", "2",
                                 "script.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    pids = [int(launcher.stdout.readline().split()[1]) for _ in range(2)]
    launcher.send_signal(signal.SIGTERM)
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines()[-1] == (
        "poptorch-run: stopped by SIGTERM; the instances were stopped too")
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
