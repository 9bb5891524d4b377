"""Compilation: captured program -> torch dialect -> ipu dialect -> JIT program.

The pipeline is a list of steps, each a textual pipeline element (ipu passes, upstream
and torch-mlir passes alike, parsed by `poptorch.passes`). Steps run one at a time so
that the IR can be dumped after each (`Options.dumpIR` / `POPTORCH_DUMP_IR`); every
dumped file runs through `ipu-opt` unchanged. A failing step becomes a `poptorch.Error`
at the user's source line, naming the `ipu-opt` command that reproduces it.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field

from torch_mlir import ir

from poptorch._frontend import capture, model_code
from poptorch._logging import TRACE_ALL, CompileProgress, logger
from poptorch.dialects import make_context
from poptorch.dialects.placement import unplaced
from poptorch.errors import Error
from poptorch.passes import build_pass_manager, parse_pipeline
from poptorch.passes.import_annotations import children as location_children
from poptorch.runtime.jit.program import Program, compile_module
from poptorch.runtime.machine.cost import CostMemo
from poptorch.runtime.machine.memory import MemoryEstimate
from poptorch.runtime.machine.timeline import Timeline

PIPELINE = (
    "ipu-mark-overlapped-io",
    "ipu-convert-poptorch-ops",
    "ipu-check-torch-ops",
    # Kept whole for the ipu lowerings: torch-mlir's decomposition of adaptive_max_pool2d
    # fails on uneven bins, and its convolution_backward rewrite breaks grouped convs.
    "torchdynamo-export-to-torch-backend-pipeline"
    "{backend-legal-ops=aten.adaptive_max_pool2d,aten.convolution_backward}",
    "ipu-import-annotations",
    "torch-func-backend-type-conversion",
    "ipu-convert-torch-to-ipu",
    "canonicalize",
    "func.func(torch-finalizing-backend-type-conversion)",
    "ipu-import-annotations",
    "ipu-narrow-f64",
    "ipu-simplify",
    "cse",
)


@dataclass
class Compiled:
    """What the executor needs: the program and how to feed it."""

    captured: capture.Captured
    program: Program
    module_text: str
    timings: dict[str, float] = field(default_factory=dict)
    module: ir.Module | None = None  # the lowered module, for the machine model
    context: ir.Context | None = None  # keeps `module` alive
    timeline: Timeline | None = None  # one call's simulated run on the machine model
    memory: MemoryEstimate | None = None  # the machine model's memory estimate
    costs: CostMemo = field(default_factory=CostMemo)  # op costs of `module`, shared


def frames(loc: ir.Location) -> list[ir.FileLineColLoc]:
    """The file locations in `loc`, innermost call first (walked with a stack of its own:
    locations may nest deeper than Python's recursion limit)."""
    found, todo = [], [loc]
    while todo:
        loc = todo.pop()
        if type(loc) is ir.Location:
            loc = ir.Location.from_attr(loc.attr)
        if isinstance(loc, ir.FileLineColLoc):
            found.append(loc)
        else:
            todo.extend(reversed(location_children(loc)))
    return found


def user_location(loc: ir.Location) -> str:
    """`file:line` of the innermost frame in the user's code (not torch's, not ours)."""
    found = frames(loc)
    for frame in found:
        if not model_code.library_file(frame.filename):
            return f"{frame.filename}:{frame.start_line}"
    return f"{found[0].filename}:{found[0].start_line}" if found else ""


def trap_location(loc: ir.Location) -> str:
    """Where a floating-point exception points: the user's line, else the location."""
    return user_location(loc) or str(loc)


def _step_name(step: str) -> str:
    """The pass a pipeline step runs, without options or anchors (for file names)."""
    name = re.sub(r"\{[^}]*\}", "", step)
    return re.sub(r"^[\w.]+\((.*)\)$", r"\1", name)


def _dump(module: ir.Module, directory: str, index: int, step: str) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{index:02d}-{_step_name(step)}.mlir")
    with open(path, "w", encoding="utf-8") as f:
        f.write(module.operation.get_asm(enable_debug_info=True))
    return path


def lower(module: ir.Module, context: ir.Context, dump_dir: str | None,
          timings: dict[str, float], multi_ipu: tuple[str, ...] = (),
          progress: CompileProgress | None = None, log_dir: str | None = None) -> None:
    """Run PIPELINE, then the multi-IPU steps of the execution strategy, on `module` in
    place, dumping, timing and logging each step (the IR after it at TRACE_ALL)."""
    if dump_dir:
        _dump(module, dump_dir, 0, "import")
    gaps = unplaced(module.operation)
    for index, step in enumerate(PIPELINE + tuple(multi_ipu), start=1):
        name = _step_name(step)
        if progress:
            progress.start(name)
        # the IR before the step, for the reproducer if it fails: a clone costs 0.2 ms
        # where printing (which verifies every op) took 23 ms for an LSTM, every step
        before = module.operation.clone()
        start = time.perf_counter()
        try:
            build_pass_manager(parse_pipeline(step), context).run(module.operation)
        except ir.MLIRError as err:
            raise _pipeline_error(err, before.get_asm(enable_debug_info=True), step,
                                  log_dir) from None
        else:
            gaps = _check_placement(module, gaps, before, step, log_dir)
        finally:
            before.erase()
        timings[name] = time.perf_counter() - start
        logger.debug("%s: %.3f s", name, timings[name])
        if logger.isEnabledFor(TRACE_ALL):
            logger.log(TRACE_ALL, "IR after %s:\n%s", name, module)
        if dump_dir:
            _dump(module, dump_dir, index, step)
        if progress:
            progress.done()


def _check_placement(module: ir.Module, gaps_before, before: ir.Operation, step: str,
                     log_dir: str | None):
    """What `unplaced` says of the module after `step`; an error when the step took a
    module whose every op was placed and left an op without a placement (a compiler
    bug: every op a pass creates inherits the placement of the ops it replaces)."""
    gaps = unplaced(module.operation)
    if gaps and gaps_before == []:
        op = gaps[0]
        message = (f"internal error: step '{_step_name(step)}' created '{op.name}' without "
                   f"the placement (block, stage, IPU) of the op it replaces")
        path = _reproducer(before.get_asm(enable_debug_info=True), log_dir)
        raise Error(f"{message}; reproduce with: ipu-opt {path} "
                    f"--pass-pipeline='builtin.module({step}, ipu-verify-placement)'",
                    type="compiler", location=user_location(op.location))
    return gaps


def _reproducer(before: str, log_dir: str | None) -> str:
    """Write the IR a step failed on to `log_dir` (or the system's temporary directory)."""
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", prefix="poptorch-repro-",
                                     dir=log_dir or None, delete=False,
                                     encoding="utf-8") as f:
        f.write(before)
    return f.name


def _pipeline_error(err: ir.MLIRError, before: str, step: str,
                    log_dir: str | None = None) -> Error:
    """A user-facing Error for a failed step, with a reproducer written to `log_dir` (or
    the system's temporary directory)."""
    command = f"ipu-opt {_reproducer(before, log_dir)} --pass-pipeline='builtin.module({step})'"
    diagnostics = err.error_diagnostics
    if not diagnostics:
        return Error(f"{err}; reproduce with: {command}", type="compiler")
    first = diagnostics[0]
    location = user_location(first.location)
    more = f" (and {len(diagnostics) - 1} more errors)" if len(diagnostics) > 1 else ""
    return Error(f"{first.message}{more}; reproduce with: {command}", type="compiler",
                 location=location)


def weight_arguments(captured) -> frozenset[int]:
    """The program's arguments (by index) holding weights, buffers and tensor constants
    (the JIT runs the ops reading only those again only when they change, `hoist`)."""
    return frozenset(index for index, arg in enumerate(captured.arguments)
                     if arg.kind in ("parameter", "buffer", "constant"))


def compile_captured(captured, dump_dir: str | None = None,
                     module_namescope: bool = True, multi_ipu: tuple[str, ...] = (),
                     progress: CompileProgress | None = None,
                     log_dir: str | None = None) -> Compiled:
    """Import, lower and JIT-compile a captured model (anything with a `graph_module`:
    an inference `capture.Captured` or a training `_training.TrainingCaptured`).

    `multi_ipu` are the execution strategy's pipeline steps. The lowered module stays
    alive in the result for the machine model (`_executor/figures.py`), which the executor
    runs. `progress` advances once for the import, each pipeline step and the JIT."""
    timings: dict[str, float] = {}
    context = make_context()
    with context, ir.Location.unknown():
        if progress:
            progress.start("import")
        start = time.perf_counter()
        module = capture.import_to_mlir(captured.graph_module, context, module_namescope)
        timings["import"] = time.perf_counter() - start
        if progress:
            progress.done()
        lower(module, context, dump_dir, timings, multi_ipu, progress, log_dir)
        if progress:
            progress.start("jit")
        start = time.perf_counter()
        text = module.operation.get_asm(enable_debug_info=True)
        program = compile_module(module, key=text, locate=trap_location,
                                 weights=weight_arguments(captured),
                                 persistent=isinstance(captured, capture.Captured))
        timings["jit"] = time.perf_counter() - start
        if progress:
            progress.done()
    if dump_dir:
        with open(os.path.join(dump_dir, "program.py"), "w", encoding="utf-8") as f:
            f.write(program.source)
        if program.kernels:
            with open(os.path.join(dump_dir, "kernels.mlir"), "w", encoding="utf-8") as f:
                f.write(program.kernels)
    return Compiled(captured, program, text, timings, module, context)
