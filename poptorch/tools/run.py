"""poptorch-run: PopRun's launcher for poptorch-mlir, built on torch.distributed.run.

    poptorch-run --num-instances N --num-replicas R [--ipus-per-replica K]
                 [--nnodes M --node-rank I] [--rdzv-backend B --rdzv-endpoint HOST:PORT
                 --rdzv-id ID] [--master-addr HOST --master-port PORT] [--max-restarts 0]
                 script.py [script arguments...]

starts N instances (processes) of `python script.py ...` in all, N / M on this host, and
gives each R / N of the R replicas: it exports POPTORCH_NUM_REPLICAS=R and
POPTORCH_IPUS_PER_REPLICA=K beside torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR
and MASTER_PORT, which `poptorch.distributed` (PopDist's calls) and
`popdist.poptorch.Options()` read. The instances are started and watched by torchrun's
elastic agent (`torch.distributed.run.run`), and several hosts meet through its
rendezvous: run the same command on each host with --nnodes M, and either
--rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID, or --node-rank I with
--master-addr HOST --master-port PORT. On one host without a rendezvous option the
instances meet on a free local port.

Bad arguments are argparse errors (exit status 2). When an instance fails, the others
are stopped and poptorch-run exits with that instance's exit status (128 + the signal
number when a signal ended it), after torchrun's summary of the failure; a signal that
stops poptorch-run stops the instances and gives 128 + its number.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from torch.distributed import run as torchrun
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

from poptorch.distributed import IPUS_PER_REPLICA_VAR, NUM_REPLICAS_VAR
from poptorch.runtime.machine.system import DEVICE_SIZES

PROG = "poptorch-run"

# torchrun's rendezvous options poptorch-run passes on when given: (flag, type, help)
_RENDEZVOUS = (
    ("--node-rank", int, "this host's rank, 0 to --nnodes - 1 (static rendezvous)"),
    ("--rdzv-backend", str, "torchrun's rendezvous backend (static, c10d, etcd)"),
    ("--rdzv-endpoint", str, "the rendezvous backend's HOST:PORT"),
    ("--rdzv-id", str, "a job id, the same on every host"),
    ("--master-addr", str, "address of the host of instance 0 (static rendezvous)"),
    ("--master-port", int, "free port on that host (static rendezvous)"),
)


def positive(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Start the instances of a PopTorch script, each driving "
        "some of the replicas (PopRun's launcher, on torch.distributed.run).",
        usage=f"{PROG} --num-instances N --num-replicas R [options] script.py [args ...]")
    parser.add_argument("--num-instances", type=positive, required=True, metavar="N",
                        help="instances (processes) to start on all hosts together")
    parser.add_argument("--num-replicas", type=positive, required=True, metavar="R",
                        help="replicas of all instances together (a multiple of N)")
    parser.add_argument("--ipus-per-replica", type=positive, default=1, metavar="K",
                        help="IPUs one replica of the model uses (default 1)")
    parser.add_argument("--nnodes", type=positive, default=1, metavar="M",
                        help="hosts taking part; each starts N / M instances (default 1)")
    for flag, kind, text in _RENDEZVOUS:
        parser.add_argument(flag, type=kind, default=None, help=text)
    parser.add_argument("--max-restarts", type=int, default=0,
                        help="times torchrun restarts the instances after a failure "
                        "(default 0)")
    parser.add_argument("script", nargs="?", help="the Python script to run")
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="the script's arguments")
    return parser


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """poptorch-run's arguments, and torchrun's command line made from them; an argparse
    error (SystemExit 2) for bad ones."""
    parser = make_parser()
    args = parser.parse_args(argv)
    instances, replicas = args.num_instances, args.num_replicas
    if args.script is None:
        parser.error("no script to run: give it after the options, as in "
                     f"{PROG} --num-instances {instances} --num-replicas {replicas} "
                     "script.py [args ...]")
    if not os.path.isfile(args.script):
        parser.error(f"cannot find the script {args.script!r} (in {os.getcwd()}): give the "
                     "path of a Python file")
    if replicas % instances:
        lower = replicas // instances * instances
        choices = f"{lower} or {lower + instances}" if lower else str(instances)
        parser.error(f"--num-replicas {replicas} is not a multiple of --num-instances "
                     f"{instances}: every instance drives the same number of replicas; use "
                     f"a --num-replicas that is a multiple of {instances} (such as "
                     f"{choices})")
    ipus = replicas // instances * args.ipus_per_replica
    if ipus not in DEVICE_SIZES:
        sizes = ", ".join(map(str, DEVICE_SIZES))
        parser.error(f"each instance would drive {replicas // instances} replicas x "
                     f"{args.ipus_per_replica} IPUs per replica = {ipus} IPUs, but the "
                     f"devices of the simulated IPU-POD64 have {sizes} IPUs; change "
                     "--num-replicas or --ipus-per-replica so that their product per "
                     "instance is one of these")
    if instances % args.nnodes:
        parser.error(f"--num-instances {instances} is not a multiple of --nnodes "
                     f"{args.nnodes}: every host starts the same number of instances; use a "
                     f"--num-instances that is a multiple of {args.nnodes}")
    if args.node_rank is not None and not 0 <= args.node_rank < args.nnodes:
        parser.error(f"--node-rank must be 0 to {args.nnodes - 1} (--nnodes {args.nnodes}), "
                     f"got {args.node_rank}")
    if args.max_restarts < 0:
        parser.error(f"--max-restarts must be >= 0, got {args.max_restarts}")
    if why := rendezvous_problem(args):
        parser.error(why)
    command = ["--nnodes", str(args.nnodes), "--nproc-per-node", str(instances // args.nnodes),
               "--max-restarts", str(args.max_restarts)]
    for flag, _, _ in _RENDEZVOUS:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            command += [flag, str(value)]
    return args, [*command, args.script, *args.script_args]


def rendezvous_problem(args: argparse.Namespace) -> str | None:
    """Why the rendezvous options cannot work together (torchrun would ignore some with
    a warning, or let every host claim node rank 0), or None."""
    static = args.rdzv_backend in (None, "static")
    if not static:
        ignored = [flag for flag in ("--node-rank", "--master-addr", "--master-port")
                   if getattr(args, flag[2:].replace("-", "_")) is not None]
        if ignored:
            return (f"{' and '.join(ignored)} only apply to the static rendezvous, but "
                    f"--rdzv-backend is {args.rdzv_backend}, which ranks the hosts itself "
                    f"at --rdzv-endpoint; drop {' and '.join(ignored)}")
        if args.nnodes > 1 and args.rdzv_endpoint is None:
            return (f"--rdzv-backend {args.rdzv_backend} over --nnodes {args.nnodes} hosts "
                    "needs --rdzv-endpoint HOST:PORT, the same on every host")
        return None
    if args.rdzv_endpoint is not None and (args.master_addr or args.master_port):
        return ("give the static rendezvous's address once: either --rdzv-endpoint "
                "HOST:PORT or --master-addr HOST --master-port PORT")
    if args.nnodes > 1 and (args.node_rank is None or
                            (args.master_addr is None and args.rdzv_endpoint is None)):
        return (f"--nnodes {args.nnodes} with the static rendezvous needs --node-rank (0 to "
                f"{args.nnodes - 1}, a different one on each host) and --master-addr HOST "
                "--master-port PORT of host 0; or use --rdzv-backend c10d --rdzv-endpoint "
                "HOST:PORT --rdzv-id ID, the same on every host")
    return None


def exit_status(error: ChildFailedError) -> int:
    """The first failed instance's exit status, 128 + N for signal N (as a shell says)."""
    _, failure = error.get_first_failure()
    return 128 - failure.exitcode if failure.exitcode < 0 else failure.exitcode or 1


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status."""
    args, command = parse(sys.argv[1:] if argv is None else argv)
    os.environ[NUM_REPLICAS_VAR] = str(args.num_replicas)
    os.environ[IPUS_PER_REPLICA_VAR] = str(args.ipus_per_replica)
    try:
        torchrun.run(torchrun.parse_args(command))
    except ChildFailedError as error:
        rank, failure = error.get_first_failure()
        print(error.format_msg(), file=sys.stderr)
        print(f"{PROG}: error: instance {rank} of {args.num_instances} failed with exit "
              f"status {exit_status(error)}", file=sys.stderr)
        return exit_status(error)
    except SignalException as error:  # poptorch-run itself was told to stop
        print(f"{PROG}: stopped by {error.sigval.name}; the instances were stopped too",
              file=sys.stderr)
        return 128 + int(error.sigval)
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 - no traceback unless asked for
        if os.environ.get("POPTORCH_RUN_TRACEBACK") == "1":
            traceback.print_exc()
        print(f"{PROG}: error: {type(error).__name__}: {error} (rerun with "
              "POPTORCH_RUN_TRACEBACK=1 for the traceback)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
