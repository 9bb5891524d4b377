"""Every code example of the spec's 4-features.txt and 11-api-reference.txt runs and its
result is checked (issue 24).

The examples are extracted from the spec files at collection time (extract.py), so an
example the spec gains is a new test, which fails until the tables (table_features.py,
table_api.py) say how to run and check it. Each runs in a fresh namespace in a fresh
temporary directory: PRELUDE's imports, the examples it continues (`after`), its
context, then its source with its patches applied and its output captured; then its
check. Examples needing a feature other engineers are building are strict xfails.
"""

from __future__ import annotations

import contextlib
import gc
import io
import sys
import types

import pytest
from extract import examples
from harness import PRELUDE, Entry, apply, forward_model
from table_api import ENTRIES as API_ENTRIES
from table_features import ENTRIES as FEATURE_ENTRIES

import poptorch

EXAMPLES = {example.key: example for example in examples()}
ENTRIES: dict[str, Entry] = {**FEATURE_ENTRIES, **API_ENTRIES}
# counted by hand: 35 captioned listings, 2 numbered snippets without a caption,
# 1 unnumbered class, 3 `export` lines; 35 `>>>` blocks and 3 unnumbered `def`s
COUNTS = {"4-features.txt": 41, "11-api-reference.txt": 38}


def test_every_example_is_found():
    """The extractor finds the number of examples counted by hand in each file."""
    found = {file: 0 for file in COUNTS}
    for example in EXAMPLES.values():
        found[example.file] += 1
    assert found == COUNTS


def test_every_entry_names_an_example():
    """No table entry is left over from an example the spec no longer has."""
    assert sorted(set(ENTRIES) - set(EXAMPLES)) == []


def _source(key: str) -> str:
    entry = ENTRIES[key]
    source = apply(EXAMPLES[key].source, entry.patches)
    return forward_model(source) if entry.forward else source


def _run(key: str, namespace: dict) -> str:
    """Run example `key` (and its `after` examples) in `namespace`; what it printed."""
    entry = ENTRIES[key]
    for previous in entry.after:
        _run(previous, namespace)
    exec(entry.context, namespace)  # noqa: S102 - the table's context
    source = _source(key)
    namespace["__source__"] = source
    if not entry.python:
        return ""
    code = compile(source, f"<spec {key}>", "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if entry.raises:
            kind, message = entry.raises
            with pytest.raises(kind, match=message):
                exec(code, namespace)  # noqa: S102 - the spec's example
        else:
            exec(code, namespace)  # noqa: S102 - the spec's example
    # poptorch's log lines go to stdout too: the example's own output is the rest
    return "".join(line for line in out.getvalue().splitlines(keepends=True)
                   if "] [poptorch] [" not in line)


def _params():
    for key in EXAMPLES:
        entry = ENTRIES.get(key)
        marks = []
        if entry and entry.xfail:
            marks.append(pytest.mark.xfail(strict=True,
                                           reason=f"issue 24: {entry.xfail} being built"))
        yield pytest.param(key, id=key, marks=marks)


@pytest.fixture
def clean(tmp_path, monkeypatch):
    """A fresh directory; the log level and the annotations' state as they were."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    poptorch.setLogLevel("WARN")
    gc.collect()


@pytest.mark.parametrize("key", list(_params()))
def test_spec_example(key, clean, monkeypatch):
    """The example runs and its check passes."""
    assert key in ENTRIES, f"{key}: add an entry (context, patches, check) to the tables"
    # a module of its own, so that pickle finds the example's classes (compileAndExport)
    module = types.ModuleType("spec_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    exec(PRELUDE, namespace)  # noqa: S102
    out = _run(key, namespace)
    try:
        ENTRIES[key].check(namespace, out)
    finally:  # free the example's devices for the next example in this process
        for value in list(namespace.values()):
            if isinstance(value, poptorch.PoplarExecutor):
                value.destroy()
