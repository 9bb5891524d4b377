"""The full parity sweep and the coverage table it writes.

    python test/ops/coverage.py [--jobs N] [--cap K] [--ops REGEX] [--readme] [--show]

runs every form of every op of `supported_ops.md` (at most K samples per case), one
process per job, and writes `coverage.json` beside this file: per op, per form, every
sample's verdict. With `--readme` it also rewrites the op-coverage section of README.md
(between the `op-coverage` markers) from it. `make op-coverage` runs it with --readme.
With `--show` it prints every failing sample instead, and records nothing (for working on
an op: `--ops '^torch.median$' --show`).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import catalogue  # noqa: E402 - after the path above
import parity  # noqa: E402

RESULTS = HERE / "coverage.json"
README = HERE.parents[1] / "README.md"
BEGIN, END = "<!-- op-coverage: begin -->", "<!-- op-coverage: end -->"
HARD_TIMEOUT = 600  # seconds an op's cases may take together before the op is given up

def _sweep(ops: list[str], cap: int, jobs: int):
    """Yield each op's result as it ends, `jobs` ops at a time. An op still running
    `HARD_TIMEOUT` seconds after it started (a lowering looping inside MLIR, where
    parity's SIGALRM cannot reach it) is a "timeout" verdict: the pool is replaced and
    the other ops go on."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        started = manager.dict()  # op -> when a worker began it
        pending = list(ops)
        while pending:
            with context.Pool(jobs, maxtasksperchild=8) as pool:
                running = {op: pool.apply_async(sweep_op, ((op, cap, started),))
                           for op in pending}
                hung = None
                while running and hung is None:
                    time.sleep(0.5)
                    for op, result in list(running.items()):
                        if result.ready():
                            del running[op]
                            yield result.get()
                        elif time.time() - started.get(op, time.time()) > HARD_TIMEOUT:
                            hung = op
                            del running[op]
                            yield {"op": op, "sources": catalogue.sources(op), "cases": [{
                                "source": "", "form": "float32", "verdicts": [[
                                    "(all samples)", False,
                                    f"timeout: no result within {HARD_TIMEOUT} s"]]}]}
                pending = [op for op in running if op != hung]
                for op in pending:
                    started.pop(op, None)
                pool.terminate()


def sweep_op(args: tuple) -> dict:
    """Every case of one op: {"op", "sources", "cases": [...]}."""
    op, cap, started = args
    started[op] = time.time()
    logging.getLogger("poptorch").setLevel(logging.WARNING)
    result = {"op": op, "sources": catalogue.sources(op), "cases": []}
    try:
        found = catalogue.cases(op, cap=cap)
    except Exception as err:  # noqa: BLE001 - a broken sample source is a verdict too
        result["error"] = f"{type(err).__name__}: {err}"[:300]
        return result
    for case in found:
        outcome = parity.run_case(case)
        result["cases"].append({
            "source": case.source, "form": case.form,
            "verdicts": [[v.sample, v.passed, v.reason] for v in outcome.verdicts]})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cap", type=int, default=4)
    parser.add_argument("--ops", default="", help="a regular expression of op names")
    parser.add_argument("--readme", action="store_true")
    parser.add_argument("--show", action="store_true",
                        help="print every failing sample and why, and record nothing")
    parser.add_argument("--table-only", action="store_true",
                        help="rewrite README's table from coverage.json without a sweep")
    options = parser.parse_args()
    if not options.table_only:
        ops = [op for _, op in catalogue.spec_ops() if re.search(options.ops, op)]
        start = time.monotonic()
        for result in _sweep(ops, options.cap, options.jobs):
            if options.show:
                _show(result)
            else:  # as each op ends: an interrupted sweep keeps its results
                _record(result)
            print(_summary_line(result), flush=True)
        print(f"swept {len(ops)} ops in {time.monotonic() - start:.0f} s")
    if options.readme or options.table_only:
        write_readme(json.loads(RESULTS.read_text()))


def _record(result: dict) -> None:
    """Merge one op's result into coverage.json, in the spec list's order."""
    merged = {r["op"]: r for r in (json.loads(RESULTS.read_text())
                                   if RESULTS.exists() else [])}
    merged[result["op"]] = result
    order = [op for _, op in catalogue.spec_ops()]
    RESULTS.write_text(json.dumps([merged[op] for op in order if op in merged], indent=1)
                       + "\n")


def _show(result: dict) -> None:
    for case in result["cases"]:
        for sample, passed, reason in case["verdicts"]:
            if not passed:
                print(f"{result['op']} {case['form']} {case['source']} [{sample}]: {reason}")


def _summary_line(result: dict) -> str:
    counts = _counts(result)
    return (f"{result['op']}: forward {_fraction(counts['forward'])}, "
            f"backward {_fraction(counts['backward'])}")


# A sample poptorch refuses as PopTorch itself refuses it, with a poptorch.Error that
# says so (reason pattern -> what PopTorch does): not a failure to match PyTorch that we
# owe a fix, but counted apart from the samples that match.
REFUSALS = {
    r"has an empty batch": "PopTorch refuses zero-sized inputs (\"Zero-sized tensors are "
                           "unsupported\")",
    r"as in PopTorch|PopTorch does not support|\(PopTorch: |Bincount `minlength` must|"
    r"OneHot num classes must": "PopTorch refuses it too; the error says what to write "
                                "instead",
    r"Invalid serialisation factor .* should be a multple": "PopART refuses a "
        "serialisation factor that does not divide the dimension, with this message",
    r"Overlapped IO is not supported with poptorch.PipelinedExecution": "PopTorch refuses "
        "overlapped I/O under its default PipelinedExecution, with this message",
    r"is not registered in this process: register its implementation": "PopTorch cannot "
        "run a custom op whose library is not loaded; ours are registered from Python",
}


def refused(reason: str) -> str | None:
    """What PopTorch does, when `reason` is a refusal PopTorch makes too, else None."""
    return next((why for pattern, why in REFUSALS.items() if re.search(pattern, reason)),
                None)


def _counts(result: dict) -> dict:
    """Per kind (forward, backward): [matching PyTorch, refused as PopTorch, samples]."""
    counts = {"forward": [0, 0, 0], "backward": [0, 0, 0]}
    for case in result["cases"]:
        kind = "backward" if case["form"] == "grad" else "forward"
        for _, passed, reason in case["verdicts"]:
            counts[kind][0] += passed
            counts[kind][1] += not passed and refused(reason) is not None
            counts[kind][2] += 1
    return counts


def table(results: list[dict]) -> str:
    """The README section: totals, one row per op, then every failing sample with why."""
    rows, failures, refusals = [], [], []
    totals = {"forward": [0, 0, 0], "backward": [0, 0, 0]}
    group_of = dict((op, group) for group, op in catalogue.spec_ops())
    for result in results:
        counts = _counts(result)
        for kind in totals:
            totals[kind] = [a + b for a, b in zip(totals[kind], counts[kind], strict=True)]
        forms = sorted({c["form"] for c in result["cases"]
                        if c["form"] not in ("grad", "float32", "random")})
        absent = [s.split(":", 1)[1] for s in result["sources"] if s.startswith("absent:")]
        note = "; ".join(absent) or result.get("error", "")
        rows.append(f"| {group_of.get(result['op'], '')} | `{result['op']}` | "
                    f"{_fraction(counts['forward'])} | {_fraction(counts['backward'])} | "
                    f"{', '.join(forms)} | {note} |")
        for case in result["cases"]:
            for sample, passed, reason in case["verdicts"]:
                if passed:
                    continue
                row = (f"| `{result['op']}` | {case['source']} | {case['form']} "
                       f"| {_cell(sample)} | {_cell(reason)} |")
                (refusals if refused(reason) else failures).append(row)
    fwd, bwd = totals["forward"], totals["backward"]
    lines = [
        "Generated by `make op-coverage` (test/ops/coverage.py) from the parity harness: "
        "every sample of every op of PopTorch's supported-ops list, run through poptorch and "
        "compared with PyTorch on the CPU. Samples come from PyTorch's OpInfo and "
        "ModuleInfo where they exist (test/ops/catalogue.py says which).",
        "",
        f"**Forward: {_totals(fwd)}. Backward: {_totals(bwd)}.**",
        "",
        "Counts are samples matching PyTorch of samples run, with `+N refused` for samples "
        "refused with a poptorch.Error as PopTorch refuses them (zero-sized inputs, "
        "`bincount` without `minlength`, `one_hot` without `num_classes`, nuclear norms, "
        "the upsampling modes PopTorch lacks, data-dependent shapes); both lists of "
        "samples follow the table.",
        "",
        "| group | op | forward | backward | other forms | notes |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"Samples that fail ({len(failures)}):",
        "",
        "| op | source | form | sample | why |",
        "|---|---|---|---|---|",
        *failures,
        "",
        f"Samples refused as PopTorch refuses them ({len(refusals)}):",
        "",
        "| op | source | form | sample | the refusal |",
        "|---|---|---|---|---|",
        *refusals,
    ]
    return "\n".join(lines)


def _fraction(count: list[int]) -> str:
    matched, refusals, total = count
    if not total:
        return "-"
    return f"{matched}/{total}" + (f" +{refusals} refused" if refusals else "")


def _totals(count: list[int]) -> str:
    matched, refusals, total = count
    share = 100 / max(total, 1)
    return (f"{matched} of {total} samples match PyTorch ({share * matched:.1f}%), "
            f"{refusals} more are refused as PopTorch refuses them "
            f"({share * (matched + refusals):.1f}% together)")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:200]


def write_readme(results: list[dict]) -> None:
    text = README.read_text()
    if BEGIN not in text:
        raise SystemExit(f"README.md has no {BEGIN} marker")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{table(results)}\n{END}{tail}")


if __name__ == "__main__":
    main()
