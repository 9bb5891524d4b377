"""ipu-opt: an mlir-opt-style driver for the ipu dialect and its passes.

    ipu-opt [input] [-o out] [--pass-pipeline=PIPELINE | --<pass>[=OPTIONS] ...]
            [--split-input-file] [--verify-diagnostics] [--mlir-print-ir-after-all]

The input (a file, or stdin when absent or "-") is parsed in a context holding the
torch and ipu dialects, run through the pipeline and printed. Passes come from
`--pass-pipeline` (ipu, upstream and torch-mlir passes mixed) or from one flag per pass
(`--ipu-import-annotations`, `--canonicalize`, ... in command-line order). Every problem
is reported as `file:line:col: error: message` or a one-line `ipu-opt: error: ...`, with
exit status 1; a Python traceback is shown only when IPU_OPT_TRACEBACK=1.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from poptorch.dialects import make_context
from poptorch.passes import (
    Pass,
    PassOptionError,
    PipelineError,
    all_passes,
    build_pass_manager,
    get_pass,
    parse_pipeline,
)
from poptorch.passes.pipeline import add_textual
from poptorch.tools.diagnostics import Collector, relocate_module
from poptorch.tools.nesting import find_too_deep
from poptorch.tools.verify_diagnostics import Diagnostic, format_diagnostic, verify

SPLIT_MARKER = "// -----"
PROG = "ipu-opt"


# The driver's on/off flags, as mlir-opt spells them.
SWITCHES = {
    "--split-input-file": f"process each '{SPLIT_MARKER}' separated chunk on its own",
    "--verify-diagnostics": "check diagnostics against expected-* comments in the input",
    "--mlir-print-ir-after-all": "print the IR to stderr after every pass",
    "--mlir-print-ir-before-all": "print the IR to stderr before every pass",
    "--mlir-print-debuginfo": "print locations in the output",
    "--mlir-print-op-generic": "print every op in generic form",
    "--allow-unregistered-dialect": "accept ops of dialects that are not loaded",
    "--list-passes": "list the ipu passes and their options, then exit",
}


class UsageError(Exception):
    """A bad command line, file or pipeline: reported as one `ipu-opt: error:` line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would exit 2 with a usage block
        raise UsageError(message)


def make_parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Parse, transform and print MLIR holding torch and ipu dialect ops.",
        epilog="Any other --NAME[=OPTIONS] flag adds the upstream or torch-mlir pass NAME.",
    )
    parser.add_argument("input", nargs="?", default="-", help="input file (default: stdin)")
    parser.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    parser.add_argument("--pass-pipeline", help="textual pipeline, e.g. "
                        "'builtin.module(ipu-import-annotations, canonicalize)'")
    for flag, help_text in SWITCHES.items():
        parser.add_argument(flag, action="store_true", help=help_text)
    group = parser.add_argument_group("ipu passes (run in command-line order)")
    for cls in all_passes():
        group.add_argument(f"--{cls.argument}", metavar="OPTIONS", nargs="?",
                           help=cls.description)
    return parser


@dataclass
class Chunk:
    """One piece of the input, starting at 1-based line `first_line` of the file."""

    text: str
    first_line: int


def split_chunks(text: str, split: bool) -> list[Chunk]:
    if not split:
        return [Chunk(text, 1)]
    chunks, lines, start = [], [], 1
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if line.strip().startswith(SPLIT_MARKER):
            chunks.append(Chunk("".join(lines), start))
            lines, start = [], number + 1
        else:
            lines.append(line)
    chunks.append(Chunk("".join(lines), start))
    return chunks


def split_pass_flags(argv: list[str], parser: _Parser) -> tuple[list[str], list[tuple[str, str]]]:
    """Separate pass flags (`--name[=options]`, in order) from the driver's own arguments."""
    pass_names = {f"--{cls.argument}" for cls in all_passes()}
    driver_args, passes, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        name, has_value, value = arg.partition("=")
        action = parser._option_string_actions.get(name)
        if arg == "--":
            driver_args += argv[i:]
            break
        if name.startswith("--") and (name in pass_names or action is None):
            passes.append((name[2:], value if has_value else ""))
        else:
            driver_args.append(arg)
            if action is not None and action.nargs is None and not has_value and i + 1 < len(argv):
                driver_args.append(argv[i + 1])
                i += 1
        i += 1
    return driver_args, passes


def pipeline_steps(args: argparse.Namespace, flags: list[tuple[str, str]]) -> list[Pass | str]:
    """The pipeline from --pass-pipeline or the pass flags, as parse_pipeline gives it."""
    if args.pass_pipeline is not None and flags:
        raise UsageError("--pass-pipeline cannot be combined with individual pass flags "
                         f"(got --{flags[0][0]})")
    if args.pass_pipeline is not None:
        return parse_pipeline(args.pass_pipeline)  # anchored as written: no implicit nesting
    steps: list[Pass | str] = []
    for name, options in flags:
        cls = get_pass(name)
        if cls is not None:
            steps.append(cls.from_text(options))
        else:
            steps.append(name + ("{" + options + "}" if options else ""))
    return steps


def nest_flag_passes(steps: list[Pass | str], context: ir.Context) -> list[Pass | str]:
    """Nest function passes given as flags under func.func, as mlir-opt's flags do.

    A pass restricted to functions is found by running it alone on an empty module:
    MLIR refuses it there, either when it is added or when it is scheduled.
    """
    nested = []
    for step in steps:
        if isinstance(step, str):
            try:
                pm = PassManager("builtin.module", context=context)
                add_textual(pm, step)
                with context, ir.Location.unknown():
                    pm.run(ir.Module.create().operation)
            except (PipelineError, ir.MLIRError) as err:
                if not _NEEDS_NESTING.search(str(err)):
                    raise
                step = f"func.func({step})"
        nested.append(step)
    return nested


_NEEDS_NESTING = re.compile(r"did you intend to nest|unable to schedule pass")


def list_passes(out) -> None:
    out.write("ipu passes (use as --NAME[=OPTIONS] or in --pass-pipeline):\n")
    for cls in all_passes():
        out.write(f"  --{cls.argument:<30} {cls.description}\n")
        for opt in cls.options:
            default = str(opt.default).lower() if opt.type is bool else opt.default
            kind = {bool: "bool", int: "int", float: "number", str: "string"}[opt.type]
            out.write(f"      {opt.name}=<{kind}>{'':<{max(1, 22 - len(opt.name) - len(kind))}}"
                      f"{opt.description} (default: {default})\n")
    out.write("Upstream MLIR and torch-mlir passes (canonicalize, cse, "
              "torch-backend-to-linalg-on-tensors-backend-pipeline, ...) are accepted too.\n")


def process_chunk(chunk: Chunk, filename: str, args: argparse.Namespace,
                  steps: list[Pass | str]) -> tuple[str | None, list[str], bool]:
    """Parse, transform and print one chunk: (output or None, messages, failed)."""
    context = make_context()
    context.allow_unregistered_dialects = args.allow_unregistered_dialect
    collector = Collector(context, filename, op_notes=not args.verify_diagnostics)
    output = None
    too_deep = find_too_deep(chunk.text)  # before MLIR's parser can overflow its stack
    with context, collector.warnings():
        if too_deep is not None:
            collector.diagnostics.append(Diagnostic(
                "error", too_deep.message, filename, chunk.first_line + too_deep.line - 1,
                too_deep.col))
            return _finish(chunk, filename, args, collector, None)
        try:
            module = ir.Module.parse("\n" * (chunk.first_line - 1) + chunk.text)
        except ir.MLIRError as err:
            collector.add_error(err)
        else:
            relocate_module(module, filename)
            pm = build_pass_manager(steps, context)
            if args.mlir_print_ir_after_all or args.mlir_print_ir_before_all:
                pm.enable_ir_printing(print_before_all=args.mlir_print_ir_before_all,
                                      print_after_all=args.mlir_print_ir_after_all)
            try:
                pm.run(module.operation)
            except ir.MLIRError as err:
                collector.add_error(err)
            else:
                output = module.operation.get_asm(
                    enable_debug_info=args.mlir_print_debuginfo,
                    print_generic_op_form=args.mlir_print_op_generic)
    return _finish(chunk, filename, args, collector, output)


def _finish(chunk: Chunk, filename: str, args: argparse.Namespace, collector: Collector,
            output: str | None) -> tuple[str | None, list[str], bool]:
    """process_chunk's result: checked against expectations or formatted."""
    if args.verify_diagnostics:
        failures = verify(chunk.text, filename, chunk.first_line, collector.diagnostics)
        return output, failures, bool(failures)
    messages = [format_diagnostic(d, filename) for d in collector.diagnostics]
    return output, messages, collector.has_errors


def read_input(path: str) -> tuple[str, str]:
    """(text, name used in diagnostics) of the input file or stdin."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except OSError as err:
        raise UsageError(f"could not open input file '{path}': {err.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"input file '{path}' is not UTF-8 text") from None


def run(argv: list[str]) -> int:
    parser = make_parser()
    driver_args, flags = split_pass_flags(argv, parser)
    args = parser.parse_args(driver_args)
    if args.list_passes:
        list_passes(sys.stdout)
        return 0
    try:
        steps = pipeline_steps(args, flags)
        with make_context() as context:  # check every pass and option before any input
            if flags:
                steps = nest_flag_passes(steps, context)
            build_pass_manager(steps, context)
    except (PipelineError, PassOptionError) as err:
        raise UsageError(str(err)) from None
    text, filename = read_input(args.input)
    outputs, failed = [], False
    for chunk in split_chunks(text, args.split_input_file):
        output, messages, chunk_failed = process_chunk(chunk, filename, args, steps)
        for message in messages:
            print(message, file=sys.stderr)
        failed |= chunk_failed
        if output is not None:
            outputs.append(output)
    write_output(args.output, f"{SPLIT_MARKER}\n".join(outputs))
    return 1 if failed else 0


def write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        raise UsageError(f"could not open output file '{path}': {err.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status."""
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except Exception as err:  # noqa: BLE001 - no traceback unless asked for
        if os.environ.get("IPU_OPT_TRACEBACK") == "1":
            traceback.print_exc()
        print(f"{PROG}: error: internal error: {type(err).__name__}: {err} "
              "(rerun with IPU_OPT_TRACEBACK=1 for the traceback)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
