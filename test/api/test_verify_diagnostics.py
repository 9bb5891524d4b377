"""Tests for poptorch.tools.verify_diagnostics (mlir-opt --verify-diagnostics in Python)."""

from poptorch.tools.verify_diagnostics import Diagnostic, format_diagnostic, verify

FILE = "in.mlir"


def err(message: str, line: int | None, col: int = 3, filename: str | None = FILE) -> Diagnostic:
    """An error diagnostic at `line` of FILE (no location when `line` is None)."""
    if line is None:
        return Diagnostic("error", message, None, None, None)
    return Diagnostic("error", message, filename, line, col)


def test_no_designator_matches_own_line() -> None:
    source = "op1\nop2 // expected-error {{bad op}}\n"
    assert verify(source, FILE, 1, [err("bad op", 2)]) == []


def test_above_skips_other_expectations() -> None:
    source = "op\n// expected-error@above {{first}}\n// expected-note @above {{second}}\n"
    diagnostics = [err("first", 1), Diagnostic("note", "second", FILE, 1, 1)]
    assert verify(source, FILE, 1, diagnostics) == []


def test_below_skips_other_expectations() -> None:
    source = "// expected-error @below {{first}}\n// expected-remark @below {{second}}\nop\n"
    diagnostics = [err("first", 3), Diagnostic("remark", "second", FILE, 3, 1)]
    assert verify(source, FILE, 1, diagnostics) == []


def test_relative_designators() -> None:
    source = "a\n// expected-error @+2 {{plus}}\n// expected-error @-1 {{minus}}\nb\n"
    assert verify(source, FILE, 1, [err("plus", 4), err("minus", 2)]) == []


def test_relative_designator_wrong_line() -> None:
    source = "a\n// expected-error @+1 {{plus}}\nb\n"
    assert verify(source, FILE, 1, [err("plus", 2, col=7)]) == [
        "in.mlir:2:7: error: unexpected error: plus",
        'in.mlir:2:4: error: expected error "plus" was not produced',
    ]


def test_substring_match() -> None:
    source = "op // expected-error {{must be}}\n"
    assert verify(source, FILE, 1, [err("'op' must be a tensor", 1)]) == []


def test_substring_is_not_a_regex() -> None:
    source = "op // expected-error {{a.c}}\n"
    assert verify(source, FILE, 1, [err("abc", 1)]) == [
        "in.mlir:1:3: error: unexpected error: abc",
        'in.mlir:1:7: error: expected error "a.c" was not produced',
    ]


def test_regex_match() -> None:
    source = "op // expected-error-re {{got {{[0-9]+}} operands (a.b)}}\n"
    assert verify(source, FILE, 1, [err("op got 12 operands (a.b) here", 1)]) == []


def test_regex_literal_parts_are_escaped() -> None:
    source = "op // expected-error-re {{got {{[0-9]+}} operands (a.b)}}\n"
    assert verify(source, FILE, 1, [err("got 12 operands (axb)", 1)]) == [
        "in.mlir:1:3: error: unexpected error: got 12 operands (axb)",
        'in.mlir:1:7: error: expected error "got {{[0-9]+}} operands (a.b)" was not produced',
    ]


def test_missing_diagnostic() -> None:
    source = "op\n  // expected-warning @above {{slow}}\n"
    assert verify(source, FILE, 1, []) == [
        'in.mlir:2:6: error: expected warning "slow" was not produced',
    ]


def test_unexpected_diagnostics_keep_their_location_and_order() -> None:
    diagnostics = [
        Diagnostic("warning", "w", FILE, 2, 5),
        Diagnostic("note", "n", FILE, 1, 1),
        Diagnostic("remark", "r", None, None, None),
    ]
    assert verify("a\nb\n", FILE, 1, diagnostics) == [
        "in.mlir:2:5: error: unexpected warning: w",
        "in.mlir:1:1: error: unexpected note: n",
        "in.mlir: error: unexpected remark: r",
    ]


def test_duplicates_need_one_expectation_each() -> None:
    one = "op // expected-error {{dup}}\n"
    two = "// expected-error @below {{dup}}\nop // expected-error {{dup}}\n"
    assert verify(one, FILE, 1, [err("dup", 1), err("dup", 1)]) == [
        "in.mlir:1:3: error: unexpected error: dup",
    ]
    assert verify(two, FILE, 1, [err("dup", 2), err("dup", 2)]) == []


def test_severity_mismatch() -> None:
    source = "op // expected-warning {{oops}}\n"
    assert verify(source, FILE, 1, [err("oops", 1)]) == [
        "in.mlir:1:3: error: unexpected error: oops",
        'in.mlir:1:7: error: expected warning "oops" was not produced',
    ]


def test_chunk_offset() -> None:
    source = "// expected-error @below {{bad}}\nop\nop // expected-note {{here}}\n"
    diagnostics = [err("bad", 11), Diagnostic("note", "here", FILE, 12, 1)]
    assert verify(source, FILE, 10, diagnostics) == []
    assert verify(source, FILE, 10, [err("bad", 2)]) == [
        "in.mlir:2:3: error: unexpected error: bad",
        'in.mlir:10:4: error: expected error "bad" was not produced',
        'in.mlir:12:7: error: expected note "here" was not produced',
    ]


def test_unknown_location() -> None:
    source = "// expected-error @unknown {{nowhere}}\nop\n"
    assert verify(source, FILE, 5, [err("nowhere", None)]) == []
    assert verify(source, FILE, 5, [err("nowhere", 6)]) == [
        "in.mlir:6:3: error: unexpected error: nowhere",
        'in.mlir:5:4: error: expected error "nowhere" was not produced',
    ]


def test_other_file_is_unexpected() -> None:
    source = "op // expected-error {{bad}}\n"
    assert verify(source, FILE, 1, [err("bad", 1, filename="-")]) == [
        "-:1:3: error: unexpected error: bad",
        'in.mlir:1:7: error: expected error "bad" was not produced',
    ]


def test_out_of_range_designators() -> None:
    source = (
        "// expected-error @above {{a}}\n"
        "op // expected-error @-2 {{b}}\n"
        "// expected-error @+2 {{c}}\n"
        "// expected-error @below {{d}}\n"
    )
    assert verify(source, FILE, 7, []) == [
        "in.mlir:7:4: error: invalid expected diagnostic: '@above' refers to a line outside"
        " the input",
        "in.mlir:8:7: error: invalid expected diagnostic: '@-2' refers to a line outside the input",
        "in.mlir:9:4: error: invalid expected diagnostic: '@+2' refers to a line outside the input",
        "in.mlir:10:4: error: invalid expected diagnostic: '@below' refers to a line outside"
        " the input",
    ]


def test_malformed_expectations() -> None:
    source = (
        "a // expected-error {{no end\n"
        "b // expected-error @+x {{bad designator}}\n"
        "c // expected-error {{trailing}} text\n"
        "d // expected-error-re {{open {{[0-9]}}\n"
        "e // expected-error-re {{{{(}}}}\n"
        "f // the expected-error directive is prose\n"
    )
    malformed = (
        "invalid expected diagnostic: expected "
        "'expected-<severity>[-re] [@<designator>] {{<message>}}' ending the line"
    )
    failures = verify(source, FILE, 1, [])
    assert failures[:3] == [
        f"in.mlir:1:6: error: {malformed}",
        f"in.mlir:2:6: error: {malformed}",
        f"in.mlir:3:6: error: {malformed}",
    ]
    assert failures[3] == (
        "in.mlir:4:6: error: invalid expected diagnostic: found start of regex with no end '}}'"
    )
    assert failures[4].startswith(
        "in.mlir:5:6: error: invalid expected diagnostic: invalid regex: "
    )
    assert len(failures) == 5


def test_format_diagnostic() -> None:
    located = Diagnostic("warning", "slow op", "x.mlir", 4, 9)
    unlocated = Diagnostic("remark", "done", None, None, None)
    assert format_diagnostic(located, "in.mlir") == "x.mlir:4:9: warning: slow op"
    assert format_diagnostic(unlocated, "in.mlir") == "in.mlir: remark: done"


def test_above_does_not_skip_code_lines() -> None:
    source = "a\nop // expected-error {{one}}\n// expected-error @above {{two}}\n"
    assert verify(source, FILE, 1, [err("one", 2), err("two", 2)]) == []
