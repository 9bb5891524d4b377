"""Where a call's time goes, poptorch against torch eager: the remaining cost of a model
by kind of work (issue 27: "what the remaining cost is, measured").

poptorch: every kernel the generated program calls (a NumPy kernel `ipu_<op>`, a helper,
or a compiled kernel `fused_<i>`, named in the program's header) is rebound in the
program's namespace to a timer, for CALLS calls after WARM. Its kind comes from its op:
products (matmul), convolutions (convolution kernels and compiled convolution windows),
compiled kernels (the other `fused_<i>`: elementwise groups, reductions, poolings) and
NumPy kernels (the rest: data movement, gathers, unfused elementwise); the kernels of a
training step's optimizer programs (the gradients' reduction and the update) are
`optimizer`. `program` is the generated code's own Python between kernel calls (the
programs' time less their kernels'); `executor` the rest of a call (input checks,
micro-batch stacking, the machine model's bookkeeping, outputs back to torch).

eager: torch.profiler's self CPU time of each aten op over the same number of calls,
in the same kinds by op name (EAGER_KINDS). The profiler's own cost lands in the op times and
`other` is the unprofiled median less the ops' sum (at least 0), so eager's kinds say
where torch spends its time, not to the microsecond.
"""

from __future__ import annotations

import copy
import re
import time
from collections import defaultdict
from collections.abc import Callable

import torch
from throughput import eager_call, options, wrap

CALLS = 6
WARM = 2
BATCH = 32
PRODUCTS, CONVOLUTIONS, COMPILED, NUMPY = ("products", "convolutions", "compiled kernels",
                                           "NumPy kernels")
OPTIMIZER = "optimizer"
POPTORCH_KINDS = (PRODUCTS, CONVOLUTIONS, COMPILED, NUMPY, OPTIMIZER, "program", "executor")
EAGER_KINDS = (PRODUCTS, CONVOLUTIONS, "other ops", "other")
# aten op names (after "aten::") whose self time is a product; scaled dot-product
# attention (products and a softmax) and oneDNN's recurrent layer (an LSTM's products
# and gates, `mkldnn_rnn_layer`) count as products
_EAGER_PRODUCTS = re.compile(r"^(mm|addmm|bmm|baddbmm|matmul|linear|dot|mv|addmv|"
                             r"_scaled_dot_product.*|_mkl_linear|mkldnn_linear.*|"
                             r"mkldnn_rnn_layer.*)$")
_KERNEL = re.compile(r"^(\w+) = K\['([^']+)'\]\.fn$")
_FUSED = re.compile(r"= (fused_\d+)\(.*\)  # (.*)$")


def _kernel_kinds(source: str) -> dict[str, str]:
    """The program's kernel names -> their kind, from its source."""
    kinds = {}
    for line in source.splitlines():
        kernel = _KERNEL.match(line.strip())
        if kernel:
            name, op = kernel.groups()
            kinds[name] = PRODUCTS if "matmul" in op else \
                CONVOLUTIONS if "conv" in op else NUMPY
        fused = _FUSED.search(line)
        if fused:
            name, ops = fused.groups()
            kinds[name] = CONVOLUTIONS if any(
                op.startswith(("conv", "depthwise")) for op in ops.split()) else COMPILED
    return kinds


def _timed(kernel: Callable, kind: str, spent: dict[str, float]) -> Callable:
    clock = time.perf_counter

    def timed(*args, **kwargs):
        start = clock()
        try:
            return kernel(*args, **kwargs)
        finally:
            spent[kind] += clock() - start
    return timed


def _programs(ipu) -> list[tuple[object, str | None]]:
    """The programs a call of `ipu` runs, each with the kind of all its kernels (None:
    by op): the model's, and a trainer's optimizer programs."""
    # the bench reads its own executor's programs
    programs = [(ipu._main_program(), None)]  # noqa: SLF001
    extra = getattr(ipu, "_programs", None)
    if extra is not None:
        programs += [(extra.reduce, OPTIMIZER), (extra.step, OPTIMIZER)]
    return programs


def poptorch_kinds(ipu, call: Callable[[], object]) -> dict[str, float]:
    """Seconds a call of `ipu` (called by `call`) spends on each kind of work."""
    for _ in range(WARM):
        call()
    spent: dict[str, float] = defaultdict(float)
    undo = []
    for program, kind in _programs(ipu):
        namespace = program.namespace
        for name, by_op in _kernel_kinds(program.source).items():
            undo.append((namespace, name, namespace[name]))
            namespace[name] = _timed(namespace[name], kind or by_op, spent)
        undo.append((program, "run", program.run))
        program.run = _timed(program.run, "program", spent)
    try:
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        total = time.perf_counter() - start
    finally:
        for owner, name, value in reversed(undo):
            if isinstance(owner, dict):
                owner[name] = value
            else:
                setattr(owner, name, value)
    kernels = sum(v for k, v in spent.items() if k != "program")
    spent["executor"] = total - spent["program"]
    spent["program"] -= kernels
    return {kind: spent[kind] / CALLS for kind in POPTORCH_KINDS}


def _eager_kind(name: str) -> str:
    op = name.removeprefix("aten::")
    if _EAGER_PRODUCTS.match(op):
        return PRODUCTS
    return CONVOLUTIONS if "conv" in op else "other ops"


def eager_kinds(call: Callable[[], object]) -> dict[str, float]:
    """Seconds a call of `call` spends on each kind of aten op (torch.profiler's self
    CPU time), and `other`: the unprofiled time less the ops' (at least 0)."""
    for _ in range(WARM):
        call()
    start = time.perf_counter()
    for _ in range(CALLS):
        call()
    total = (time.perf_counter() - start) / CALLS
    kinds = dict.fromkeys(EAGER_KINDS, 0.0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(CALLS):
            call()
    for event in prof.key_averages():
        if event.key.startswith("aten::"):
            kinds[_eager_kind(event.key)] += event.self_cpu_time_total / 1e6 / CALLS
    kinds["other"] = max(0.0, total - sum(kinds.values()))
    return kinds


def measure(spec, train: bool, batch: int = BATCH) -> dict[str, object]:
    """`spec`'s inference or training step at `batch`: seconds a call by kind of work,
    poptorch's and eager's, each side on its own copy of the same model."""
    model = spec.loss(spec.make()) if train else spec.make()
    model.train(train)
    x, labels = spec.inputs(batch)
    args = (x, labels) if train else (x,)
    row: dict[str, object] = {"model": spec.name, "mode": "training" if train else
                              "inference", "batch": batch}
    ipu = wrap(copy.deepcopy(model), options(), train)
    try:
        row["poptorch"] = poptorch_kinds(ipu, lambda: ipu(*args))
    finally:
        ipu.destroy()
    row["eager"] = eager_kinds(eager_call(model, args, train))
    return row
