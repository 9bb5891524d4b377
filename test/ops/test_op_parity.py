"""The representative parity sweep CI runs: every op of PopTorch's supported-ops list
(supported_ops.md), through poptorch and through PyTorch on the CPU.

Each op runs its float32 samples, its gradient samples (or, for random ops, its
distribution samples) and one of its other forms, chosen in turn by the op's position
in the list, so that every form is exercised across the sweep; at most `CAP` samples per
case. `make op-coverage` runs every form of every op with more samples and records every
sample's verdict in coverage.json, from which it writes the README's coverage table: a
sample recorded as failing may fail here (with the recorded reason or another), one
recorded as passing must pass, and one recorded as failing that passes fails this test
until the sweep is run again, so the table stays true.
"""

import functools
import json

import catalogue
import coverage
import parity
import pytest

CAP = 3
OTHER_FORMS = ("float16", "out", "int", "inplace", "noncontiguous", "bool")
SPEC_OPS = [op for _, op in catalogue.spec_ops()]


def representative_forms(op: str) -> tuple[str, ...]:
    other = OTHER_FORMS[SPEC_OPS.index(op) % len(OTHER_FORMS)]
    return ("float32", "grad", "random", other)


@functools.cache
def recorded_failures() -> dict[tuple[str, str, str], str]:
    """(op, form, sample) -> reason, for every sample the last sweep saw fail."""
    return {(r["op"], case["form"], sample): reason
            for r in json.loads(coverage.RESULTS.read_text()) for case in r["cases"]
            for sample, passed, reason in case["verdicts"] if not passed}


@pytest.mark.parametrize("op", SPEC_OPS)
def test_op_matches_pytorch(op):
    if all(source.startswith("absent:") for source in catalogue.sources(op)):
        pytest.skip(catalogue.sources(op)[0].removeprefix("absent:"))
    problems = []
    for case in catalogue.cases(op, forms=representative_forms(op), cap=CAP):
        for verdict in parity.run_case(case).verdicts:
            known = recorded_failures().get((op, case.form, verdict.sample))
            if not verdict.passed and known is None:
                problems.append(f"{case.form} [{verdict.sample}]: {verdict.reason}")
            elif verdict.passed and known is not None:
                problems.append(f"{case.form} [{verdict.sample}] passes now (it failed in "
                                "the last sweep): run `make op-coverage`")
    assert not problems, f"{op}:\n" + "\n".join(problems)


def test_every_op_of_the_spec_list_has_samples_or_a_reason():
    missing = [op for op in SPEC_OPS if not catalogue.sources(op)]
    assert not missing


def test_the_readme_table_is_the_sweep_s():
    """README's coverage section is what coverage.py writes from coverage.json, and the
    sweep covered every op of the list."""
    results = json.loads(coverage.RESULTS.read_text())
    assert [r["op"] for r in results] == SPEC_OPS
    readme = coverage.README.read_text()
    section = readme.split(coverage.BEGIN, 1)[1].split(coverage.END, 1)[0]
    assert section.strip() == coverage.table(results).strip(), (
        "README's op coverage is stale: run `make op-coverage`")
