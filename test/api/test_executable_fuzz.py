"""Fuzzing executable files (hypothesis, derandomised): corrupted, truncated, spliced and
re-sealed files are refused with poptorch.Error or load as a working model; nothing
else escapes, the interpreter survives, and no payload in a file ever runs."""

import hashlib
import json
import os
import pickle
import struct

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import poptorch
from poptorch._compiler import executable_file

# POPTORCH_FUZZ_SCALE=10 runs ten times as many examples (outside CI)
SCALE = int(os.environ.get("POPTORCH_FUZZ_SCALE", "1"))
SETTINGS = settings(derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """A valid executable (with the model object) and its sections."""
    path = tmp_path_factory.mktemp("fuzz") / "small.poptorch"
    torch.manual_seed(0)
    model = Small().eval()
    opts = poptorch.Options().showCompilationProgressBar(False)
    poptorch.inferenceModel(model, opts).compileAndExport(str(path), torch.randn(2, 4))
    data = path.read_bytes()
    _, sections = executable_file.parse(data, str(path), ("executable",))
    return data, sections, model


MARKER = "/tmp/poptorch-fuzz-payload-ran"
PAYLOADS = [
    f"__import__('os').system('touch {MARKER}')",
    f'exec("open({MARKER!r}, \'w\')")',
    "{{ __import__ }}", "\x00", "'; DROP", "\"$tensor\"",
]


def _seal(sections: dict[str, bytes], header_changes: dict | None = None) -> bytes:
    header = {"format": executable_file.FORMAT_VERSION, **executable_file.versions(),
              "kind": "executable",
              "sections": [[name, len(data)] for name, data in sections.items()],
              **(header_changes or {})}
    text = json.dumps(header).encode()
    body = executable_file.MAGIC + struct.pack("<I", len(text)) + text + b"".join(
        sections.values())
    return body + hashlib.sha256(body).digest()


def _refused_or_loaded(data: bytes, tmp_path, model: Small, via_load: bool) -> None:
    """Loading `data` raises poptorch.Error or gives a model that runs."""
    path = tmp_path / "fuzzed.poptorch"
    path.write_bytes(data)
    try:
        if via_load:
            loaded = poptorch.load(str(path))
        else:
            loaded = poptorch.inferenceModel(model, poptorch.Options()
                                             .showCompilationProgressBar(False))
            loaded.loadExecutable(str(path))
    except poptorch.Error as err:
        assert str(err)
        return
    try:
        loaded(torch.randn(2, 4))
    except poptorch.Error:
        pass  # refused at run time (inputs no longer match the edited metadata)
    finally:
        loaded.destroy()
        assert not os.path.exists(MARKER)


@st.composite
def corruptions(draw, data: bytes):
    """Byte flips, insertions, deletions, truncations and splices of `data`."""
    kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "splice",
                                 "random"]))
    if kind == "random":
        return draw(st.binary(max_size=400))
    at = draw(st.integers(0, len(data) - 1))
    if kind == "flip":
        bit = draw(st.integers(0, 7))
        return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1:]
    if kind == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
    if kind == "delete":
        return data[:at] + data[at + draw(st.integers(1, 64)):]
    if kind == "truncate":
        return data[:at]
    other = draw(st.integers(0, len(data) - 1))
    return data[:at] + data[other:]


def test_fuzz_raw_corruptions_are_refused(valid):
    """3000 corrupted files: every one refused by the signature, header or hash check."""
    data, _, _ = valid

    @settings(SETTINGS, max_examples=3000 * SCALE)
    @given(st.data())
    def run(drawn):
        corrupted = drawn.draw(corruptions(data))
        if corrupted == data:
            return
        with pytest.raises(poptorch.Error) as info:
            executable_file.parse(corrupted, "fuzzed.poptorch", ("executable",))
        assert info.value.type == "executable"

    run()


def _mutate_text(draw, text: bytes) -> bytes:
    if not text:
        return draw(st.binary(max_size=64))
    at = draw(st.integers(0, len(text) - 1))
    choice = draw(st.sampled_from(["flip", "insert", "delete", "payload", "truncate"]))
    if choice == "flip":
        return text[:at] + bytes([text[at] ^ (1 << draw(st.integers(0, 7)))]) + text[at + 1:]
    if choice == "insert":
        return text[:at] + draw(st.binary(min_size=1, max_size=8)) + text[at:]
    if choice == "delete":
        return text[:at] + text[at + draw(st.integers(1, 32)):]
    if choice == "payload":
        return text[:at] + draw(st.sampled_from(PAYLOADS)).encode() + text[at:]
    return text[:at]


def test_fuzz_resealed_sections_are_refused_or_load(valid, tmp_path):
    """1500 files whose sections were edited and the content hash recomputed (what a
    deliberate edit does): the parsers behind the hash refuse them with poptorch.Error or
    the executable loads and runs; loadExecutable never unpickles."""
    data, sections, model = valid
    names = [n for n in sections if n != "model"]

    @settings(SETTINGS, max_examples=1500 * SCALE)
    @given(st.data())
    def run(drawn):
        edited = dict(sections)
        name = drawn.draw(st.sampled_from(names))
        edited[name] = _mutate_text(drawn.draw, edited[name])
        if drawn.draw(st.booleans()):
            del edited[drawn.draw(st.sampled_from(sorted(edited)))]
        _refused_or_loaded(_seal(edited), tmp_path, model, via_load=False)

    run()


def test_fuzz_json_documents(valid, tmp_path):
    """500 structurally valid JSON replacements of the metadata sections."""
    _, sections, model = valid
    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
        | st.sampled_from(PAYLOADS),
        lambda inner: st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

    @settings(SETTINGS, max_examples=500 * SCALE)
    @given(st.sampled_from(["executor", "program"]), st.data())
    def run(name, drawn):
        document = json.loads(sections[name])
        if drawn.draw(st.booleans()) and isinstance(document, dict) and document:
            key = drawn.draw(st.sampled_from(sorted(document)))
            document[key] = drawn.draw(values)
        else:
            document = drawn.draw(values)
        edited = {**sections, name: json.dumps(document).encode()}
        _refused_or_loaded(_seal(edited), tmp_path, model, via_load=False)

    run()


def test_fuzz_model_pickles_never_run_code(valid, tmp_path):
    """300 edited model pickles (the part poptorch.load trusts) re-sealed: refused or
    restored, and the payloads that would run code never do."""
    _, sections, model = valid

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {MARKER}",)

    hostile = [pickle.dumps((Payload(), None)),
               pickle.dumps((eval, ("1",))),  # noqa: S307 - the payload under test
               pickle.dumps(((os.system, MARKER), None))]

    @settings(SETTINGS, max_examples=300 * SCALE)
    @given(st.data())
    def run(drawn):
        if drawn.draw(st.booleans()):
            pickled = drawn.draw(st.sampled_from(hostile))
        else:
            pickled = _mutate_text(drawn.draw, sections["model"])
        edited = {**sections, "model": pickled}
        _refused_or_loaded(_seal(edited), tmp_path, model, via_load=True)

    run()
    assert not os.path.exists(MARKER)


@pytest.mark.parametrize("updated", [[False], [0]])
def test_an_updated_input_needs_a_result_of_its_type(valid, tmp_path, updated):
    """A program document naming input 0 as updated in place by result 0 (3 wide, the
    input 4 wide; False is not an index) is corrupt, not a failure at run time."""
    _, sections, model = valid
    document = json.loads(sections["program"])
    document["mutated_inputs"] = updated
    path = tmp_path / "edited.poptorch"
    path.write_bytes(_seal({**sections, "program": json.dumps(document).encode()}))
    loaded = poptorch.inferenceModel(model)
    with pytest.raises(poptorch.Error, match=r"is corrupt: its program metadata (is "
                                             r"malformed \(ValueError\('False is not an "
                                             r"index'\)\)|does not match its module \(result "
                                             r"0 does not update input 0 in place\))"):
        loaded.loadExecutable(str(path))
