"""Training over several processes (PopRun's instances, `Options.Distributed`) on
torch.distributed.

A model whose options say `Distributed.numProcesses` > 1 joins torch.distributed's
default process group (gloo, its CPU backend) at its first compile: the group torchrun's
script made, or one made here from the options' process id and count and
torch.distributed's environment rendezvous (MASTER_ADDR, MASTER_PORT), as under mpirun
or a job script. Each process runs `replicationFactor` replicas on its own share of the
data (`poptorch.DataLoader` partitions the dataset by process); together they are one
model of processes x replicationFactor replicas:

- `check_same`: every process compiles the same model with the same options for the
  same input shapes; a difference is an error in every process, naming it.
- `broadcast`: process 0's weights and buffers go to every process before the first
  upload to the device, so that all start from one model; with broadcastBuffers (the
  default), process 0's buffers after every micro-batch, as replica 0's go to the other
  replicas of one process.
- `all_reduce`: per optimizer step, the gradients each process reduced over its
  replicas (sum, or mean) are summed over the processes in one reduction (divided by
  their count for a mean): the single-process reduction over every replica. Every
  process then takes the same optimizer step, so weights and optimizer state stay
  equal. A replica-grouped weight's groups are of the run's replicas
  (`replica_grouping`): its per-replica gradients are gathered from every process and
  reduced within each group, and every process steps every group.
- `process_generator`: the device random generator is seeded by the options' seed and
  the process id, so that the processes' replicas draw different dropout masks.

A peer that stops (killed, or exited on an error) fails the others' next collective
(gloo sees its connections close): they raise a poptorch.Error naming the process when
it can be told (a peer on this host whose process has exited), within the group's
timeout (POPTORCH_DISTRIBUTED_TIMEOUT seconds, default 300) at worst.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from poptorch.enums import CommGroupType
from poptorch.errors import Error
from poptorch.options import Options

TIMEOUT_VARIABLE = "POPTORCH_DISTRIBUTED_TIMEOUT"
DEFAULT_TIMEOUT = 300.0  # seconds: a first compile of a large model may take minutes
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT")
GONE_WAIT = 3.0  # seconds a failed collective waits to see which peer of this host exited


def _error(message: str) -> Error:
    return Error(message, type="distributed")


def _timeout() -> datetime.timedelta:
    text = os.environ.get(TIMEOUT_VARIABLE, str(DEFAULT_TIMEOUT))
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise _error(f"{TIMEOUT_VARIABLE} must be a number of seconds above 0, got {text!r}")
    return datetime.timedelta(seconds=seconds)


def _alive(pid: int) -> bool:
    """Whether process `pid` of this host still runs (a zombie has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class Processes:
    """This process's place among the processes of one distributed run: `rank` of
    `size`, and each peer's (host, pid), to name one that stops."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size
        self.peers: list[tuple[str, int]] = []
        me = (socket.gethostname(), os.getpid())
        with self.collective("meeting the other processes"):
            gathered: list[Any] = [None] * size
            dist.all_gather_object(gathered, me)
        self.peers = [tuple(p) for p in gathered]

    def _gone(self) -> str:
        """The peers on this host that have exited: a connection a peer's death closes
        may fail a collective before the kernel has finished its exit, so they are looked
        for for up to GONE_WAIT seconds."""
        host = socket.gethostname()
        nearby = [r for r, (h, _) in enumerate(self.peers) if r != self.rank and h == host]
        deadline = time.monotonic() + GONE_WAIT
        while True:
            gone = [r for r in nearby if not _alive(self.peers[r][1])]
            if gone or not nearby or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if gone:
            names = ", ".join(f"process {r} (pid {self.peers[r][1]})" for r in gone)
            return f"{names} stopped"
        return "another process stopped, failed or timed out"

    @contextlib.contextmanager
    def collective(self, what: str) -> Iterator[None]:
        """Turn a failed collective into a poptorch.Error naming the process gone."""
        try:
            yield
        except (RuntimeError, dist.DistError) as failure:
            detail = str(failure).strip().splitlines()[0] if str(failure).strip() else ""
            raise _error(f"Distributed: process {self.rank} of {self.size}: {what} "
                         f"failed: {self._gone()}"
                         + (f" ({detail})" if detail else "")
                         + "; a distributed run needs all of its processes: start them "
                           "all again") from failure

    def check_same(self, description: Mapping[str, Any]) -> None:
        """Every process compiles what process 0 does: an error in all of them, naming
        what differs and where, if one does not."""
        with self.collective("checking that every process compiles the same model"):
            gathered: list[Any] = [None] * self.size
            dist.all_gather_object(gathered, dict(description))
        first = gathered[0]
        for rank, theirs in enumerate(gathered[1:], 1):
            for key in first:
                mine, other = first[key], theirs.get(key)
                if other == mine:
                    continue
                if isinstance(mine, Mapping) and isinstance(other, Mapping):
                    names = sorted(k for k in mine.keys() | other.keys()
                                   if mine.get(k) != other.get(k))
                    other = {k: other.get(k) for k in names}
                    mine = {k: mine.get(k) for k in names}
                raise _error(
                    f"Distributed: process {rank} and process 0 compile different {key}: "
                    f"{_brief(other)} in process {rank}, {_brief(mine)} in process 0; every "
                    f"process must compile the same model with the same options for the "
                    f"same input shapes")

    def broadcast(self, tensors: Sequence[torch.Tensor], what: str) -> None:
        """Process 0's values of `tensors`, in place in every process, one broadcast
        per dtype."""
        with self.collective(f"broadcasting process 0's {what}"), torch.no_grad():
            _per_dtype(tensors, lambda flat: dist.broadcast(flat, src=0))

    def broadcast_arrays(self, arrays: Sequence[np.ndarray], what: str) -> list[np.ndarray]:
        """Process 0's values of NumPy `arrays` (new arrays)."""
        tensors = [torch.from_numpy(np.array(a)) for a in arrays]
        self.broadcast(tensors, what)
        return [t.numpy() for t in tensors]

    def all_gather(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Each array of every process, concatenated along the first axis in process
        order (every process's arrays have the same shapes: `check_same`)."""
        out = []
        with self.collective("gathering the replica-grouped gradients"):
            for a in arrays:
                tensor = torch.from_numpy(np.ascontiguousarray(a))
                parts = [torch.empty_like(tensor) for _ in range(self.size)]
                dist.all_gather(parts, tensor)
                out.append(torch.cat(parts).numpy())
        return out

    def all_reduce(self, arrays: Sequence[np.ndarray], mean: bool) -> list[np.ndarray]:
        """The sum (mean) over processes of each array (new arrays), one reduction per
        dtype."""
        tensors = [torch.from_numpy(np.array(a)) for a in arrays]

        def reduce(flat: torch.Tensor) -> None:
            dist.all_reduce(flat)
            if mean:
                flat /= self.size
        with self.collective("the gradient all-reduce over processes"):
            _per_dtype(tensors, reduce)
        return [t.numpy() for t in tensors]


def _per_dtype(tensors: Sequence[torch.Tensor],
               collective: Callable[[torch.Tensor], None]) -> None:
    """Run `collective` in place on the tensors of each dtype as one flat tensor, and
    write its result back into them: one collective per dtype, not per tensor."""
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for group in by_dtype.values():
        flat = torch.cat([t.detach().reshape(-1) for t in group])
        collective(flat)
        offset = 0
        for t in group:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


_JOINED: Processes | None = None


def join(options: Options) -> Processes | None:
    """This process's `Processes` (None for one process): joins torch.distributed's
    default group, made by torchrun or here (module docstring), once a process."""
    global _JOINED
    processes = options.Distributed.numProcesses
    if processes == 1:
        return None
    rank = options.Distributed.processId
    if _JOINED is not None and (_JOINED.rank, _JOINED.size) == (rank, processes):
        return _JOINED
    if dist.is_initialized():
        if (dist.get_rank(), dist.get_world_size()) != (rank, processes):
            raise _error(
                f"Distributed: the options say process {rank} of {processes}, but "
                f"torch.distributed's process group has this process as rank "
                f"{dist.get_rank()} of {dist.get_world_size()}; configure the options as "
                f"the group (Options.Distributed.configureProcessId("
                f"{dist.get_rank()}, {dist.get_world_size()})) or leave them to the "
                f"launcher's environment")
        if dist.get_backend() != "gloo":
            raise _error(f"Distributed: torch.distributed's process group uses the "
                         f"{dist.get_backend()!r} backend; the IPU model exchanges "
                         f"host arrays and needs 'gloo'")
    else:
        missing = [v for v in RENDEZVOUS if not os.environ.get(v)]
        if missing:
            raise _error(
                f"Distributed: process {rank} of {processes} needs {' and '.join(missing)} "
                f"in its environment to meet the other processes (torch.distributed's "
                f"environment rendezvous); launch with poptorch-run or torchrun, which set "
                f"them, or export MASTER_ADDR=<host of process 0> and MASTER_PORT=<a free "
                f"port there> in every process")
        timeout = _timeout()
        try:
            dist.init_process_group("gloo", init_method="env://", rank=rank,
                                    world_size=processes, timeout=timeout)
        except (RuntimeError, ValueError) as failure:
            raise _error(f"Distributed: process {rank} of {processes} could not meet the "
                         f"other processes at {os.environ['MASTER_ADDR']}:"
                         f"{os.environ['MASTER_PORT']}: {failure}") from failure
    _JOINED = Processes(rank, processes)
    return _JOINED


# Options each process may set apart: its own directories and logs, and the device it
# attaches to (useIpuId: popdist.poptorch.Options gives each instance its own)
HOST_OPTIONS = frozenset(("Distributed.process_id", "executable_cache_dir", "profile_dir",
                          "log_dir", "ir_dump_dir", "max_repeat_logs", "log_cycle_count",
                          "ipu_id"))


def _options_description(options: Options) -> dict[str, Any]:
    """The options as flat `category.name: value` pairs, without the host-side ones."""
    from poptorch.options.serialise import options_to_json  # start-up cost

    flat: dict[str, Any] = {}

    def walk(prefix: str, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            if isinstance(value, Mapping):
                walk(f"{prefix}{key}.", value)
            elif f"{prefix}{key}" not in HOST_OPTIONS:
                flat[f"{prefix}{key}"] = value
    walk("", options_to_json(options)["values"])
    return flat


def start_processes(executor: Any) -> Processes | None:
    """At an executor's install (compile, or executable loaded): join the processes,
    check that they all compiled alike, and give the host model process 0's weights and
    buffers before they go to the device (module docstring)."""
    opts = executor._options
    if opts.Distributed.numProcesses == 1:
        return None
    if opts.input_group_size > 1 and opts.input_group_type == CommGroupType.Orthogonal:
        raise _error(f"Distributed: inputReplicaGrouping({opts.input_group_size}, "
                     f"CommGroupType.Orthogonal) puts replicas of different processes in one "
                     f"input group, which would read different data (each process reads "
                     f"its own share); use CommGroupType.Consecutive, whose groups stay "
                     f"within a process")
    processes = join(opts)
    options = _options_description(opts)
    weights = [(arg.name, executor._host_tensor(arg)) for arg in executor._weights()
               if arg.kind != "constant"]
    processes.check_same({
        "models (weights)": [(name, tuple(t.shape), str(t.dtype)) for name, t in weights],
        "options": options,
        "input shapes": [(tuple(shape), str(dtype)) for shape, dtype in executor._input_meta],
        "modes": "training" if executor._training else "inference"})
    processes.broadcast([t for _, t in weights], "weights and buffers")
    return processes


def reduce_gradients(processes: Processes, names: Sequence[str], grads: Sequence[np.ndarray],
                     reduced: Sequence[np.ndarray], groupings: Mapping[str, Any],
                     mean: bool) -> list[np.ndarray]:
    """The step's gradients reduced over every replica of the run: `reduced` (each over
    this process's replicas) summed over the processes; a replica-grouped weight's
    per-replica `grads` gathered from every process and reduced within each group of
    the run's replicas ((groups, ...), as one process reduces its groups)."""
    out = list(reduced)
    plain = [i for i, n in enumerate(names) if n not in groupings]
    for i, value in zip(plain, processes.all_reduce([reduced[i] for i in plain], mean),
                        strict=True):
        out[i] = value
    grouped = [i for i, n in enumerate(names) if n in groupings]
    reduce = np.mean if mean else np.sum
    if grouped:
        gathered = processes.all_gather([np.asarray(grads[i]) for i in grouped])
        for i, every in zip(grouped, gathered, strict=True):
            owners = groupings[names[i]].group_of()
            out[i] = np.stack([reduce(every[owners == g], axis=0).astype(every.dtype)
                               for g in range(groupings[names[i]].groups)])
    return out


def process_generator(seed: int, processes: Processes | None) -> np.random.Generator:
    """The device random generator of this process: seeded by the options' seed and, with
    several processes, the process id, so that the replicas of different processes draw
    different numbers (dropout masks), as the replicas of one process do."""
    return np.random.default_rng(seed if processes is None else [seed, processes.rank])


def broadcast_buffers(processes: Processes, weights: Any, names: Sequence[str]) -> None:
    """Process 0's device values of the buffers `names` in every process (replica 0's of
    the whole run, as broadcastBuffers gives replica 0's to one process's replicas)."""
    names = [n for n in names if n in weights.arrays]
    if names:
        arrays = processes.broadcast_arrays([weights.arrays[n] for n in names], "buffers")
        weights.store_buffers(zip(names, arrays, strict=True), (), False)
