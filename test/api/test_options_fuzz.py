"""Fuzzing of the two ways options come from outside: config files (Options.loadFromFile)
and the JSON documents of executable files (options_from_json).

Every input either loads or raises poptorch.Error (located at `path:line` for files);
nothing else escapes, nothing named by the input is imported, and no code in it runs:
the payloads below would create SENTINEL or set a flag on `builtins` if evaluated.
"""

import builtins
import copy
import itertools
import os
import re
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_options_file import GOOD_CONFIG
from test_options_json import STRATEGIES, every_option_changed

from poptorch.errors import Error
from poptorch.options import Options
from poptorch.options.serialise import options_from_json, options_to_json

SENTINEL = os.path.join(tempfile.gettempdir(), f"poptorch-fuzz-sentinel-{os.getpid()}")
FLAG = "POPTORCH_FUZZ_FLAG"
PAYLOADS = [
    f"__import__('pathlib').Path({SENTINEL!r}).touch()",
    f"open({SENTINEL!r}, 'w')",
    f"__import__('os').system('touch {SENTINEL}')",
    f"exec('import builtins; builtins.{FLAG} = 1')",
    f"setattr(__import__('builtins'), '{FLAG}', 1)",
    f"eval(\"setattr(__import__('builtins'), '{FLAG}', 1)\")",
    f"[__import__('os').mkdir({SENTINEL!r}) for _ in (1,)]",
    f"(lambda: open({SENTINEL!r}, 'w'))()",
    f"f\"{{open({SENTINEL!r}, 'w')}}\"",
    f"vars(__import__('builtins')).__setitem__('{FLAG}', 1)",
    f"__import__('builtins').__dict__.update({FLAG}=1)",
    f"__import__('sys').modules['builtins'].__setattr__('{FLAG}', 1)",
]
NAMES = ["deviceIterations", "replicationFactor", "outputMode", "anchorTensor", "randomSeed",
         "setAvailableMemoryProportion", "sourceLocationExcludes", "logDir", "useIpuId",
         "setExecutionStrategy", "Training.gradientAccumulation", "TensorLocations.numIOTiles",
         "Precision.setPartialsType", "Distributed.setEnvVarNames", "Distributed.numProcesses",
         "Jit.traceModel", "options.deviceIterations", "loadFromFile", "clone", "_freeze",
         "__init__", "__class__", "toDict", "Training.__class__.__init__", "__import__", "eval",
         "exec", "open", "getattr", "os.system", "poptorch.Options"]
LEAVES = ["True", "False", "None", "...", "1j", "b'x'", "x", "__name__", "torch.half",
          "torch.float", "torch.onnx", "torch.nn", "poptorch.OutputMode.All", "OutputMode.EveryN",
          "poptorch.enums.CommGroupType.Orthogonal", "enums.os", "0x" + "f" * 40,
          "1" + "0" * 5000, "(" * 250 + "1" + ")" * 250, "[" * 150 + "]" * 150, "-" * 3000 + "1",
          "a." * 3000 + "b", "not " * 2000 + "1", "'\\x00'", "'\\ud800'"]
FILE_NUMBERS = itertools.count()
VALID_LINES = [line for line in GOOD_CONFIG.splitlines() if line and not line.startswith("#")]


def no_code_ran(before: set[str]) -> None:
    assert not os.path.exists(SENTINEL) and not hasattr(builtins, FLAG)
    assert set(sys.modules) - before == set()  # nothing imported


def clean_up() -> None:
    if os.path.isdir(SENTINEL):
        os.rmdir(SENTINEL)
    elif os.path.exists(SENTINEL):
        os.remove(SENTINEL)
    if hasattr(builtins, FLAG):
        delattr(builtins, FLAG)


@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"payload{n}" for n in range(len(PAYLOADS))])
def test_the_payloads_would_be_detected_if_they_ran(payload):
    clean_up()
    try:
        eval(payload)  # noqa: S307 - checks that the sentinel sees each payload run
        with pytest.raises(AssertionError):
            no_code_ran(set(sys.modules))
    finally:
        clean_up()
    no_code_ran(set(sys.modules))


def fuzz(examples: int) -> settings:
    """Reproducible settings (CI runs the same inputs every time) for `examples` inputs."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def load_file(directory, content: bytes) -> None:
    path = os.path.join(directory, f"fuzz{next(FILE_NUMBERS)}.conf")  # a new file is faster
    with open(path, "wb") as f:                                    # than truncating one
        f.write(content)
    before = set(sys.modules)
    try:
        Options().loadFromFile(path)
        event("loaded")
    except Error as err:
        event("refused")
        match = re.fullmatch(re.escape(path) + r":(\d+)", err.location)
        assert match, err.location
        assert 1 <= int(match[1]) <= content.count(b"\n") + 1
        assert err.type == "options" and str(err) == f"{err.location}: {err.message}"
    no_code_ran(before)
    os.remove(path)


# ---- option files -----------------------------------------------------------------------
# expression forms: each wraps the expressions drawn for its `{}` (calls in arguments,
# lambdas, comprehensions, f-strings, dunder access, * and **, operators)
FORMS = ["[{}, {}]", "({},)", "{{{}: {}}}", "{name}({})", "{name}({}, {})", "lambda: {}",
         "[x for x in {}]", "f'{{{}}}'", "({}).__class__.__mro__", "-{}", "*{}", "**{}",
         "{} + {}", "{} if 1 else {}", "{}.{name}", "{}[{}]"]
KEYWORDS = ["output_return_period", "ipu_version", "x", "self", "device_iterations", "__class__"]
# strategies made once: hypothesis validates every new strategy object it draws from
LEAF_DRAWS = [st.sampled_from(LEAVES + PAYLOADS), st.integers(-(2**70), 2**70).map(str),
              st.floats().map(repr), st.text(max_size=8).map(repr)]
FORM_CHOICES = [st.integers(0, len(FORMS) + 3), st.integers(0, 3)]
NAME_DRAW, KEYWORD_DRAW = st.sampled_from(NAMES), st.sampled_from(KEYWORDS)
SIZES = [st.integers(0, n) for n in range(6)]
OTHER_LINES = st.sampled_from(VALID_LINES + PAYLOADS + ["", "#"])


@st.composite
def expressions(draw, depth=0):
    """Python source of an expression from a small grammar (cheaper than st.recursive)."""
    choice = draw(FORM_CHOICES[depth == 3])
    if choice < len(LEAF_DRAWS):
        return draw(LEAF_DRAWS[choice])
    form = FORMS[choice - len(LEAF_DRAWS)]
    parts = [draw(EXPRESSIONS[depth + 1]) for _ in range(form.count("{}"))]
    return form.replace("{name}", draw(NAME_DRAW)).format(*parts)


EXPRESSIONS = [expressions(depth) for depth in range(4)]


@st.composite
def call_lines(draw):
    """`name(arguments)`: positional and keyword arguments in any order."""
    arguments = [draw(EXPRESSIONS[0]) if draw(SIZES[1]) else
                 f"{draw(KEYWORD_DRAW)}={draw(EXPRESSIONS[0])}" for _ in range(draw(SIZES[3]))]
    return f"{draw(NAME_DRAW)}({', '.join(arguments)})"


@st.composite
def generated_files(draw):
    lines = [draw(CALL_LINES) if draw(SIZES[3]) else draw(OTHER_LINES)
             for _ in range(1 + draw(SIZES[4]))]
    return "\n".join(lines).encode()


CALL_LINES, GENERATED_FILES = call_lines(), generated_files()


@st.composite
def mutated_files(draw):
    lines = GOOD_CONFIG.encode().split(b"\n")
    for _ in range(draw(st.integers(1, 4))):
        data = b"\n".join(lines)
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "insert", "truncate", "duplicate", "splice"]))
        if kind == "flip" and at < len(data):
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
        elif kind == "insert":
            inserted = draw(st.one_of(st.binary(max_size=8), st.sampled_from(
                [b"\0", b"\xff", b"(", b")", b"\n", b"#", b"__import__", b"0" * 5000])))
            data = data[:at] + inserted + data[at:]
        elif kind == "truncate":
            data = data[:at]
        lines = data.split(b"\n")
        if kind == "duplicate":
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(lines)))
        elif kind == "splice":
            other = draw(GENERATED_FILES).split(b"\n")
            lines = lines[:draw(st.integers(0, len(lines)))] + other
    return b"\n".join(lines)


@fuzz(500)
@given(content=st.binary(max_size=300))
def test_random_bytes(workdir, content):
    load_file(workdir, content)


@fuzz(400)
@given(content=st.text(max_size=200))
def test_random_text(workdir, content):
    load_file(workdir, content.encode("utf-8", "surrogatepass"))


@fuzz(600)
@given(content=mutated_files())
def test_mutated_valid_files(workdir, content):
    load_file(workdir, content)


@fuzz(700)
@given(content=GENERATED_FILES)
def test_generated_call_lines(workdir, content):
    load_file(workdir, content)


# ---- JSON documents ---------------------------------------------------------------------
TAGS = ["tuple", "dict", "enum", "dtype", "tensor_location", "strategy", "type", "stages",
        "blocks", "ipu", "phases", "ipus", "format", "version", "values"]
JSON_STRINGS = ["OutputMode.All", "os.system", "float16", "half", "PipelinedExecution",
                "AutoStage.SameAsIpu", "poptorch.Options", "__import__"]
JSON_LEAVES = [st.none(), st.booleans(), st.integers(), st.floats(), st.integers(2**60, 2**80),
               st.text(max_size=12), st.sampled_from(JSON_STRINGS)]
JSON_CHOICES = [st.integers(0, 9), st.integers(0, 6)]
JSON_KEYS = [st.one_of(st.text(max_size=6), st.sampled_from(TAGS)), st.integers()]


@st.composite
def json_values(draw, depth=0):
    """JSON data (and Python data JSON cannot hold: int keys), biased to the tags and
    names options documents use (cheaper than st.recursive)."""
    choice = draw(JSON_CHOICES[depth == 3])
    if choice < len(JSON_LEAVES):
        return draw(JSON_LEAVES[choice])
    size = draw(SIZES[3])
    if choice == 7:
        return [draw(JSON_VALUES[depth + 1]) for _ in range(size)]
    return {draw(JSON_KEYS[choice == 9]): draw(JSON_VALUES[depth + 1]) for _ in range(size)}


JSON_VALUES = [json_values(depth) for depth in range(4)]
DOCUMENTS = [options_to_json(Options())] + [options_to_json(every_option_changed(make()))
                                            for make in STRATEGIES.values()]


def places(document):
    """Every (container, key) inside `document`, down to 12 levels."""
    found, todo = [], [(document, 0)]
    while todo:
        value, level = todo.pop()
        if isinstance(value, dict | list) and level < 12:
            for key in (list(value) if isinstance(value, dict) else range(len(value))):
                found.append((value, key))
                todo.append((value[key], level + 1))
    return found


def deep(value, levels):
    for _ in range(levels):
        value = [value]
    return value


@st.composite
def mutated_documents(draw):
    document = copy.deepcopy(draw(st.sampled_from(DOCUMENTS)))
    for _ in range(draw(st.integers(1, 3))):
        if not places(document):  # everything deleted
            return document
        container, key = draw(st.sampled_from(places(document)))
        value = container[key]
        kind = draw(st.sampled_from(["replace", "delete", "insert", "copy", "tweak"]))
        if kind == "replace":
            container[key] = draw(JSON_VALUES[0])
        elif kind == "delete":
            del container[key]
        elif kind == "insert" and isinstance(container, dict):
            container[draw(st.sampled_from(TAGS + ["x"]))] = draw(JSON_VALUES[0])
        elif kind == "insert":
            container.insert(key, draw(JSON_VALUES[0]))
        elif kind == "copy":
            source, source_key = draw(st.sampled_from(places(document)))
            container[key] = copy.deepcopy(source[source_key])
        elif isinstance(value, bool):
            container[key] = not value
        elif isinstance(value, int):
            container[key] = draw(st.sampled_from([value + 1, value - 1, -value, value + 2**64,
                                                   float(value), str(value)]))
        elif isinstance(value, str):
            container[key] = draw(st.sampled_from([value + "x", value[:-1], value.upper(), ""]))
    levels = draw(st.sampled_from([0, 0, 0, 1, 20, 3000]))  # last: nothing walks it after
    if levels and places(document):
        container, key = draw(st.sampled_from(places(document)))
        container[key] = deep(container[key], levels)
    return document


def read_document(document) -> None:
    before = set(sys.modules)
    try:
        loaded = options_from_json(document)
    except Error as err:
        event("refused")
        assert err.type == "options" and err.message
    else:
        event("loaded")
        assert options_to_json(loaded) == document
    no_code_ran(before)


@fuzz(400)
@given(document=st.one_of(JSON_VALUES[0], st.fixed_dictionaries(
    {"format": st.just("poptorch.Options"), "version": st.just(1), "values": JSON_VALUES[0]})))
def test_generated_json_values(document):
    read_document(document)


@fuzz(700)
@given(document=mutated_documents())
def test_mutated_valid_documents(document):
    read_document(document)
