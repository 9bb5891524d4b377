"""Multi-IPU cost: a model pipelined over 2 and 4 IPUs, sharded over 2, replicated 2 and
4 times, against the single-IPU run of the same total batch.

Both sides run the same micro-batches (MICRO_BATCH samples each) per call: a pipeline
of n IPUs runs n micro-batches a call in inference (deviceIterations(n)) and 2n - 1 in
training (gradientAccumulation, the fewest that fill it), R replicas run one each; the
single-IPU run makes the same number of micro-batches a call by device iterations
(inference) or gradient accumulation (training), so both do the same work and the ratio
is what simulating several IPUs costs. Blocks begin at the model's `Spec.stages`, split
evenly, as a user places `poptorch.BeginBlock` (the test zoo's `place`); a model with
fewer stages than IPUs is not run in that mode. Both sides are poptorch: single calls
alternate (`harness.pair(settle=False)`).
"""

from __future__ import annotations

import harness
import torch
from models import Spec
from throughput import describe, options, wrap

import poptorch

MICRO_BATCH = 16
TARGET = 1.1
# mode -> (IPUs, replicas, strategy)
MODES = {"pipelined2": (2, 1, "pipelined"), "pipelined4": (4, 1, "pipelined"),
         "sharded2": (2, 1, "sharded"), "replicated2": (1, 2, None),
         "replicated4": (1, 4, None)}


def micro_batches(mode: str, train: bool) -> int:
    """Micro-batches a replica runs a call in `mode`."""
    ipus, _, strategy = MODES[mode]
    if strategy == "pipelined":
        return 2 * ipus - 1 if train else ipus
    return 1


def _place(net: torch.nn.Module, spec: Spec, ipus: int, strategy: str | None,
           opts: poptorch.Options) -> None:
    """Blocks b0..b{ipus-1} beginning at `spec`'s stages split evenly; the strategy."""
    if ipus == 1:
        return
    stages = spec.stages(net)
    firsts = [stages[len(stages) * n // ipus] for n in range(ipus)]
    if strategy != "pipelined":  # a pipeline starts on IPU 0 unnamed
        poptorch.BeginBlock(firsts[0], "b0", ipu_id=0)
    for n, module in enumerate(firsts[1:], start=1):
        poptorch.BeginBlock(module, f"b{n}", ipu_id=n)
    if strategy == "sharded":
        opts.setExecutionStrategy(poptorch.ShardedExecution(
            *[poptorch.Stage(f"b{n}").ipu(n) for n in range(ipus)]))


def _counted(opts: poptorch.Options, count: int, train: bool) -> poptorch.Options:
    if train:
        opts.Training.gradientAccumulation(count)
    else:
        opts.deviceIterations(count)
    return opts


def measure(spec: Spec, mode: str, train: bool, **timing) -> dict[str, object]:
    """Median seconds of a call in `mode` and of the single-IPU call of the same
    micro-batches, and their ratio; or why the mode was not run."""
    ipus, replicas, strategy = MODES[mode]
    count = micro_batches(mode, train)
    total = MICRO_BATCH * count * replicas
    row: dict[str, object] = {"mode": "training" if train else "inference",
                              "model": spec.name, "run": mode, "micro_batch": MICRO_BATCH,
                              "total_batch": total}
    net = spec.make()
    if ipus > 1 and len({id(m) for m in spec.stages(net)}) < ipus:
        row["skipped"] = f"{len(spec.stages(net))} stages for {ipus} IPUs"
        return row
    x, labels = spec.inputs(total)
    args = (x, labels) if train else (x,)
    single_net = spec.make()
    compiled = []
    try:
        opts = _counted(options(replicas), count, train)
        _place(net, spec, ipus, strategy, opts)
        multi = wrap(spec.loss(net) if train else net.eval(), opts, train)
        compiled.append(multi)
        single = wrap(spec.loss(single_net) if train else single_net.eval(),
                      _counted(options(), count * replicas, train), train)
        compiled.append(single)
        first, second = multi(*args), single(*args)
        if not train and not torch.allclose(first, second, rtol=1e-3, atol=1e-4):
            raise AssertionError(f"{spec.name} {mode}: the multi-IPU and single-IPU "
                                 "results differ")
        multi_s, single_s, row["repeats"] = harness.pair(
            lambda: multi(*args), lambda: single(*args), settle=False, **timing)
        row.update(multi_s=multi_s, single_s=single_s, ratio=multi_s / single_s)
    except Exception as error:  # noqa: BLE001 (a failing mode is a row of the report)
        row["error"] = describe(error)
    for model in compiled:
        model.destroy()
    return row
