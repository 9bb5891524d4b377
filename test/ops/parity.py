"""The op parity engine: run samples of an op through poptorch and through PyTorch on the
CPU, and say for each whether they agree.

A `Sample` is one call of an op: a function and the (args, kwargs) it is called with,
whose tensor leaves become the model's inputs (or, to test gradients, its parameters).
A `Case` is one op in one form (a dtype, an in-place or `out=` form, non-contiguous
inputs, gradients) with its samples. `run_case` compiles all the samples of a case as one
model (one compile per case, not per sample) and, when that model fails, runs each sample
alone, so that every sample gets its own verdict.

The forms, as in PyTorch's OpInfo tests:
- `float32`, `float16`, `int`, `bool`: the op's function on inputs of that dtype;
- `inplace`: the op's in-place method on the model's first input (PopTorch writes the
  update back to the host tensor); `out`: the `out=` form, into a tensor made in forward;
- `noncontiguous`: float32 inputs that are not contiguous;
- `grad`: one SGD step with learning rate 1 on a loss that weighs every floating output
  by a fixed random tensor: the floating inputs the sample differentiates are parameters,
  and their update must be PyTorch's gradient;
- `random`: ops that draw random numbers, compared by their distribution (shape, dtype,
  support, mean and standard deviation) instead of their values.
"""

from __future__ import annotations

import contextlib
import copy
import faulthandler
import math
import os
import signal
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

import poptorch

# (rtol, atol) by the dtype of the compared output; gradients use `GRAD_TOLERANCE`, with
# atol relative to the largest gradient of the case
TOLERANCES = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2),
              torch.bfloat16: (2e-2, 2e-2)}
GRAD_TOLERANCE = (1e-4, 1e-4)
NARROWED = {torch.int64: torch.int32, torch.float64: torch.float32}


@dataclass
class Sample:
    """One call of an op: `fn(*args, **kwargs)`. Tensor leaves of args and kwargs are the
    model's inputs; with `parameters`, the floating leaves that require grad are the
    model's parameters instead (the `grad` form). `fn` may be an nn.Module (a layer
    whose own parameters are trained with it)."""

    fn: Callable
    args: tuple
    kwargs: dict
    label: str
    reference: Callable | None = None  # what the CPU runs instead of `fn`, if not `fn`


@dataclass
class Case:
    """One op in one form, with its samples; `check` replaces the value comparison (the
    `random` form compares distributions)."""

    op: str       # the name users write, as spec/supported-ops.md lists it
    source: str   # where the samples come from: "opinfo:add", "module:Conv2d", "hand:..."
    form: str
    samples: list[Sample]
    check: Callable | None = None


@dataclass
class Verdict:
    """What one sample of a case gave: `passed`, or the first line of why not."""

    sample: str
    passed: bool
    reason: str = ""


@dataclass
class Outcome:
    case: Case
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)


class _Bound(torch.nn.Module):
    """One sample as a module: `forward(*inputs)` calls the op with the sample's
    arguments, its tensor leaves taken from `inputs` and its parameters."""

    def __init__(self, sample: Sample, train: bool):
        super().__init__()
        self.fn = sample.fn  # registered when a module: its parameters are the model's
        self.reference = sample.reference
        leaves, self.spec = pytree.tree_flatten((sample.args, sample.kwargs))
        self.slots = []  # per leaf: ("input", i), ("param", name) or ("value", v)
        self.examples = []
        for index, leaf in enumerate(leaves):
            if not isinstance(leaf, torch.Tensor):
                self.slots.append(("value", leaf))
            elif train and leaf.requires_grad and leaf.is_floating_point():
                name = f"p{index}"
                self.register_parameter(name, torch.nn.Parameter(leaf.detach().clone()))
                self.slots.append(("param", name))
            else:
                self.slots.append(("input", len(self.examples)))
                self.examples.append(leaf.detach())

    def forward(self, *inputs):
        leaves = []
        for kind, value in self.slots:
            if kind == "value":
                leaves.append(value)
            elif kind == "param":
                leaves.append(getattr(self, value))
            else:
                leaves.append(inputs[value])
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(*args, **kwargs)

    def on_the_cpu(self) -> None:
        """Run `reference` instead of `fn` (in the CPU's copy of the program)."""
        if self.reference is not None:
            self._modules.pop("fn", None)
            self.fn = self.reference


class Program(torch.nn.Module):
    """The samples of a case as one model: each sample's inputs in turn, each sample's
    output in a tuple. With `train`, it also returns a loss: every floating output
    weighed by a fixed random tensor, summed."""

    def __init__(self, samples: list[Sample], train: bool):
        super().__init__()
        self.bound = torch.nn.ModuleList(_Bound(s, train) for s in samples)
        self.counts = [len(b.examples) for b in self.bound]
        self.train_loss = train
        self.weights: list[str] = []

    def on_the_cpu(self) -> Program:
        for bound in self.bound:
            bound.on_the_cpu()
        return self

    def example_inputs(self) -> list[torch.Tensor]:
        return [t.clone() for b in self.bound for t in b.examples]

    def add_loss_weights(self, outputs) -> None:
        """Fix the loss's random weights from the shapes of the CPU's outputs."""
        generator = torch.Generator().manual_seed(0)
        for index, out in enumerate(_floating(outputs)):
            name = f"w{index}"
            self.register_buffer(name, torch.randn(out.shape, generator=generator))
            self.weights.append(name)

    def forward(self, *inputs):
        outputs, start = [], 0
        for bound, count in zip(self.bound, self.counts, strict=True):
            outputs.append(bound(*inputs[start:start + count]))
            start += count
        outputs = tuple(outputs)
        if not self.train_loss:
            return outputs
        loss = sum((out.float() * getattr(self, w)).sum()
                   for out, w in zip(_floating(outputs), self.weights, strict=True))
        return outputs, poptorch.identity_loss(loss, reduction="none")


def _floating(outputs) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(outputs)
            if isinstance(t, torch.Tensor) and t.is_floating_point()]


TIMEOUT = 120  # seconds a case may take (compile and run) before it counts as failed


class CaseTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: int):
    """Raise CaseTimeout in this (main) thread after `seconds`: a lowering that does not
    terminate is a verdict, not a hung sweep. A loop the alarm cannot interrupt ends the
    process after three times as long, with its stack on stderr (pytest-xdist reports
    the test as crashed; coverage.py's own deadline records a timeout)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum, _frame):
        raise CaseTimeout(f"no result within {seconds} s")

    def give_up():  # the alarm cannot interrupt a loop inside MLIR's C++: end the process
        faulthandler.dump_traceback()
        os._exit(70)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    watchdog = threading.Timer(3 * seconds, give_up)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_case(case: Case) -> Outcome:
    """Run `case` as one model; if it fails, run each sample alone to say which fail."""
    outcome = Outcome(case)
    reason = _run(case, case.samples)
    if reason is None:
        outcome.verdicts = [Verdict(s.label, True) for s in case.samples]
    elif len(case.samples) == 1:
        outcome.verdicts = [Verdict(case.samples[0].label, False, reason)]
    else:
        for sample in case.samples:
            alone = _run(case, [sample])
            outcome.verdicts.append(Verdict(sample.label, alone is None, alone or ""))
    return outcome


def _run(case: Case, samples: list[Sample]) -> str | None:
    """None when poptorch agrees with PyTorch on `samples`, else why not (one line)."""
    try:
        with _time_limit(TIMEOUT):
            if case.form == "grad":
                _check_training(samples)
            else:
                _check_inference(samples, case.check)
    except CaseTimeout as err:
        return f"timeout: {err}"
    except AssertionError as err:
        return "wrong values: " + _first_line(err)
    except poptorch.Error as err:
        return f"poptorch.Error: {_first_line(err)}"
    except Exception as err:  # noqa: BLE001 - any other failure is the verdict
        frame = traceback.extract_tb(err.__traceback__)[-1]
        return (f"{type(err).__name__}: {_first_line(err)} "
                f"({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})")
    return None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


def _check_inference(samples: list[Sample], check: Callable | None) -> None:
    program = Program(samples, train=False).eval()
    reference = copy.deepcopy(program).on_the_cpu()
    cpu_inputs, ipu_inputs = program.example_inputs(), program.example_inputs()
    with torch.no_grad():
        expected = reference(*cpu_inputs)
    actual = poptorch.inferenceModel(program)(*ipu_inputs)
    (check or assert_close)(actual, expected)
    # an input the op updates in place is updated on the host as on the CPU (random
    # draws into it, `x.normal_()`, compared as the outputs are)
    (check or assert_close)(ipu_inputs, cpu_inputs)


def _check_training(samples: list[Sample]) -> None:
    program = Program(samples, train=True).train()
    probe = copy.deepcopy(program).on_the_cpu()
    probe.train_loss = False
    with torch.no_grad():
        program.add_loss_weights(probe(*program.example_inputs()))
    reference = copy.deepcopy(program).on_the_cpu()
    if not list(program.parameters()):
        raise poptorch.Error("nothing to differentiate: no floating input requires grad")
    before = {n: p.detach().clone() for n, p in program.named_parameters()}
    trainer = poptorch.trainingModel(program, poptorch.Options(),
                                     torch.optim.SGD(program.parameters(), lr=1.0))
    try:
        actual, loss = trainer(*program.example_inputs())
    finally:
        trainer.destroy()
    expected, expected_loss = reference(*program.example_inputs())
    expected_loss.backward()
    assert_close(actual, _detach(expected))
    rtol, atol = GRAD_TOLERANCE
    assert_close(loss, expected_loss.detach(), rtol=rtol, atol=atol)
    grads = {n: torch.zeros_like(p) if p.grad is None else p.grad
             for n, p in reference.named_parameters()}
    scale = max([g.abs().max().item() for g in grads.values() if g.numel()] + [1e-30])
    if not math.isfinite(scale):
        scale = 1.0
    for name, p in program.named_parameters():
        # a step from a non-finite value (OpInfo's NaN inputs) says nothing of the gradient
        known = torch.isfinite(before[name])
        torch.testing.assert_close((before[name] - p.detach())[known], grads[name][known],
                                   rtol=rtol, atol=atol * scale, equal_nan=True,
                                   msg=lambda m, name=name: f"gradient of {name}: {m}")


def _detach(value):
    return pytree.tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, value)


def assert_close(actual, expected, rtol: float | None = None,
                 atol: float | None = None) -> None:
    """Outputs agree: same structure, tensors within the dtype's tolerance (int64 and
    float64 compared as the int32 and float32 poptorch computes), other leaves equal."""
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    actual_leaves, actual_spec = pytree.tree_flatten(actual)
    assert len(actual_leaves) == len(expected_leaves), (
        f"{len(actual_leaves)} outputs instead of {len(expected_leaves)}")
    for a, e in zip(actual_leaves, expected_leaves, strict=True):
        if not isinstance(e, torch.Tensor):
            assert a == e or (a != a and e != e), f"{a!r} instead of {e!r}"
            continue
        assert isinstance(a, torch.Tensor), f"{type(a).__name__} instead of a tensor"
        e = e.to(NARROWED.get(e.dtype, e.dtype))
        a = a.to(NARROWED.get(a.dtype, a.dtype))
        default_rtol, default_atol = TOLERANCES.get(e.dtype, (0, 0))
        torch.testing.assert_close(a, e, rtol=default_rtol if rtol is None else rtol,
                                   atol=default_atol if atol is None else atol,
                                   equal_nan=True, check_device=False)


def same_distribution(actual, expected) -> None:
    """Random outputs agree in shape and dtype and, over 100 draws or more, in support,
    and in mean and standard deviation within 6 standard errors of the draws (both sides
    drew their own)."""
    actual_leaves = pytree.tree_leaves(actual)
    expected_leaves = pytree.tree_leaves(expected)
    assert len(actual_leaves) == len(expected_leaves)
    for a, e in zip(actual_leaves, expected_leaves, strict=True):
        e = e.to(NARROWED.get(e.dtype, e.dtype))
        a = a.to(NARROWED.get(a.dtype, a.dtype))  # (an int64 input written back as int64)
        assert a.shape == e.shape and a.dtype == e.dtype, (
            f"{a.dtype}{list(a.shape)} instead of {e.dtype}{list(e.shape)}")
        if not a.numel():
            continue
        a, e = a.double(), e.double()
        assert torch.isfinite(a).all() or not torch.isfinite(e).all(), "non-finite draws"
        if a.numel() < 100:  # too few draws to say more
            continue
        slack = 6 * e.std() + 1e-6
        assert e.min() - slack <= a.min() and a.max() <= e.max() + slack, (
            f"draws in [{a.min():.3g}, {a.max():.3g}] instead of [{e.min():.3g}, {e.max():.3g}]")
        error = 6 * max(e.std().item(), 1e-6) / math.sqrt(a.numel())
        assert abs(a.mean() - e.mean()) <= 2 * error, (
            f"mean {a.mean():.4g} instead of {e.mean():.4g}")
        assert abs(a.std() - e.std()) <= 0.1 * e.std() + 1e-6, (
            f"standard deviation {a.std():.4g} instead of {e.std():.4g}")
