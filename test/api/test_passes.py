"""The pass registry, typed options and mixed pipelines, through the Python API."""

import pytest
from torch_mlir import ir

from poptorch._compiler.driver import frames, user_location
from poptorch.dialects import make_context, op_class
from poptorch.dialects.ipu import Ipu
from poptorch.passes import (
    Option,
    Pass,
    PassOptionError,
    PipelineError,
    all_passes,
    build_pass_manager,
    get_pass,
    parse_pipeline,
    register,
    simplify,
)
from poptorch.passes.pipeline import split_elements
from poptorch.passes.registry import _REGISTRY

ANNOTATED = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = "A"}>["m.py":1:1])
  %1 = "ipu.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(fused<{ipu.block = "A"}>["m.py":1:1])
  %2 = "ipu.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
"""


def run_pipeline(text: str, source: str = ANNOTATED) -> str:
    with make_context() as ctx:
        module = ir.Module.parse(source)
        build_pass_manager(parse_pipeline(text), ctx).run(module.operation)
        return str(module)


def test_every_pass_is_described_and_named_ipu():
    passes = all_passes()
    assert passes, "no pass registered"
    for cls in passes:
        assert cls.argument.startswith("ipu-")
        assert cls.description and "\n" not in cls.description
        assert get_pass(cls.argument) is cls


def test_simplify_patterns_are_keyed_by_ipu_op_classes():
    roots = [root for root, _ in simplify.PATTERNS]
    assert all(root in Ipu.operations and op_class(root.OPERATION_NAME) is root
               for root in roots)


def test_mixed_pipeline_runs_in_order():
    out = run_pipeline("builtin.module(cse, ipu-import-annotations, func.func(canonicalize))")
    assert out.count('"ipu.exp"') == 1
    assert '{ipu.block = "A"}' in out


def test_parse_pipeline_groups_textual_runs():
    steps = parse_pipeline("cse, canonicalize, ipu-import-annotations{strip-metadata=true}, cse")
    assert steps[0] == "cse,canonicalize"
    assert isinstance(steps[1], Pass) and steps[1].strip_metadata is True
    assert steps[1].option_text() == "{strip-metadata=true}"
    assert steps[2] == "cse"


def test_split_elements_keeps_options_and_nesting():
    elements = split_elements('a{x="1, 2" y=3}, func.func(b, c{z=(1)}), d')
    assert [e.text for e in elements] == ['a{x="1, 2" y=3}', "func.func(b, c{z=(1)})", "d"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cse,", "pipeline 'cse,' ends with ','"),
        ("cse canonicalize", "expected ',' at column 5 of 'cse canonicalize'"),
        ("builtin.module", "'builtin.module' needs a parenthesised list of passes"),
        ("ipu-import-annotations(cse)", "pass 'ipu-import-annotations' takes no nested pipeline"),
        ("a{b", "unbalanced '{' at column 2 of 'a{b'"),
        ("=", "expected a pass name at column 1 of '='"),
    ],
)
def test_bad_pipelines_are_rejected(text, message):
    with pytest.raises(PipelineError) as err:
        parse_pipeline(text)
    assert str(err.value) == message


def test_unknown_textual_pass_is_a_pipeline_error():
    with make_context() as ctx, pytest.raises(PipelineError) as err:
        build_pass_manager(parse_pipeline("no-such-pass"), ctx)
    assert str(err.value) == "'no-such-pass' does not refer to a registered pass or pass pipeline"


class _Example(Pass):
    argument = "ipu-test-example"
    description = "An example"
    options = (
        Option("count", int, 2, "How many"),
        Option("scale", float, 1.0, "How much"),
        Option("label", str, "x", "Which"),
        Option("flag", bool, False, "Whether"),
    )


def test_typed_options_from_text():
    p = _Example.from_text("count=3 scale=0.5 label=abc flag")
    assert (p.count, p.scale, p.label, p.flag) == (3, 0.5, "abc", True)
    assert p.option_text() == "{count=3 scale=0.5 label=abc flag=true}"
    assert _Example().count == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("count=many", "option 'count' of pass 'ipu-test-example' expects an integer, got 'many'"),
        ("scale=big", "option 'scale' of pass 'ipu-test-example' expects a number, got 'big'"),
        ("flag=2", "option 'flag' of pass 'ipu-test-example' expects a boolean (true/false), "
                   "got '2'"),
        ("size=1", "pass 'ipu-test-example' has no option 'size' "
                   "(options: count, scale, label, flag)"),
    ],
)
def test_bad_options_from_text(text, message):
    with pytest.raises(PassOptionError) as err:
        _Example.from_text(text)
    assert str(err.value) == message


def test_bad_options_from_python():
    with pytest.raises(PassOptionError) as err:
        _Example(count="3")
    assert str(err.value) == "option 'count' of pass 'ipu-test-example' expects an integer, got '3'"
    with pytest.raises(PassOptionError):
        _Example(colour="red")


def test_registration_rules():
    class Twice(Pass):
        argument = "ipu-import-annotations"
        description = "clash"

    class Unprefixed(Pass):
        argument = "my-pass"
        description = "no prefix"

    with pytest.raises(ValueError, match="registered twice"):
        register(Twice)
    with pytest.raises(ValueError, match="must start with 'ipu-'"):
        register(Unprefixed)


def test_pass_bug_becomes_a_located_diagnostic(monkeypatch):
    class Broken(Pass):
        argument = "ipu-test-broken"
        description = "raises"

        def run(self, module):
            raise KeyError("oops")

    monkeypatch.setitem(_REGISTRY, Broken.argument, Broken)
    with pytest.raises(ir.MLIRError) as err:
        run_pipeline("ipu-test-broken")
    [diag] = err.value.error_diagnostics
    assert diag.message == "internal error in pass 'ipu-test-broken': KeyError: 'oops'"


def deep_location_source(depth: int) -> str:
    """An op located `depth` call sites around an annotated location, written with
    location aliases: the text nests two levels, the location `depth`."""
    lines = ['#loc0 = loc(fused<{ipu.block = "inner", other = 1 : i64}>["m.py":1:1])']
    lines += [f'#loc{i} = loc(callsite(#loc{i - 1} at "m.py":{i + 1}:1))'
              for i in range(1, depth + 1)]
    return "\n".join(lines) + f"""
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = "ipu.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
      loc(fused<{{ipu.ipu_id = 1 : i64}}>[#loc{depth}])
  return %0 : tensor<4xf32>
}}
"""


def test_import_annotations_walks_locations_deeper_than_the_recursion_limit():
    depth = 5000  # the recursive walk raised RecursionError past about 1000
    with make_context() as ctx:
        module = ir.Module.parse(deep_location_source(depth))
        build_pass_manager(parse_pipeline("ipu-import-annotations{strip-metadata=true}"),
                           ctx).run(module.operation)
        text = module.operation.get_asm(enable_debug_info=True)
    assert ('"ipu.exp"(%arg0) {ipu.block = "inner", ipu.ipu_id = 1 : i64} : '
            "(tensor<4xf32>) -> tensor<4xf32>") in text
    # stripped: the annotations are gone from the location, the rest of it is kept
    assert text.count("ipu.block") == text.count("ipu.ipu_id") == 1
    assert text.count("callsite(") == depth
    assert "= loc(fused<{other = 1 : i64}>[#loc" in text


def test_driver_frames_of_a_deep_location():
    depth = 5000
    with make_context(), ir.Location.unknown():
        loc = ir.Location.file("user.py", 1, 1)
        for line in range(2, depth + 2):
            loc = ir.Location.callsite(loc, [ir.Location.file("lib.py", line, 1)])
        found = frames(ir.Location.name("op", loc))
        assert [(f.filename, f.start_line) for f in found] == [("user.py", 1)] + [
            ("lib.py", line) for line in range(2, depth + 2)]
        assert user_location(loc) == "user.py:1"
