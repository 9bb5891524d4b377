"""Weight-only work (runtime/jit/hoist.py): the entry's ops reading only weights and
constants run in `prepare_main`, again only when a weight array changes; an op reading an
input, a random draw or a returned value stays in the entry. Models give PyTorch's
numbers after weights change, in training, with replicas and from a saved executable."""

import numpy as np
import pytest
import torch
from numerics import assert_close
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.jit.program import compile_module

W, X = "tensor<8x4xf32>", "tensor<2x4xf32>"
MODULE = f"""
func.func @main(%x: {X}, %w: {W}, %b: tensor<8xf32>)
    -> (tensor<2x8xf32>, {W}, tensor<8xf32>, tensor<8xf32>, tensor<2x8xf32>) {{
  %c = "ipu.constant"() {{value = dense<2.0> : tensor<f32>}} : () -> tensor<f32>
  %t = "ipu.permute"(%w) {{dims = array<i64: 1, 0>}} : ({W}) -> tensor<4x8xf32>
  %y = "ipu.matmul"(%x, %t) : ({X}, tensor<4x8xf32>) -> tensor<2x8xf32>
  %s = "ipu.mul"(%b, %c) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %z = "ipu.add"(%y, %s) : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %n = "ipu.neg"(%w) : ({W}) -> {W}
  %r = "ipu.random_uniform"() {{low = 0.0 : f64, high = 1.0 : f64, shape = array<i64: 8>}}
      : () -> tensor<8xf32>
  %m = "ipu.mul"(%r, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %e = "ipu.exp"(%b) : (tensor<8xf32>) -> tensor<8xf32>
  %f = "ipu.mul"(%y, %b) : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %z, %n, %m, %e, %f
      : tensor<2x8xf32>, {W}, tensor<8xf32>, tensor<8xf32>, tensor<2x8xf32>
}}
"""


def _compiled(persistent: bool = True, module: str = MODULE):
    with make_context(), ir.Location.unknown():
        return compile_module(ir.Module.parse(module), fuse=False, weights=(1, 2),
                              persistent=persistent)


def _body(source: str, name: str) -> list[str]:
    lines = source.splitlines() + [""]
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    end = lines.index("", start)
    return [line.strip() for line in lines[start:end]]


def test_weight_only_ops_run_in_prepare_and_the_entry_reads_their_results():
    program = _compiled()
    assert _body(program.source, "prepare_main") == [
        "def prepare_main(v0, v1):",
        "v2 = np.ascontiguousarray(ipu_permute(v0, dims=(1, 0)))",  # a product reads it
        "v3 = ipu_constant(value=C[0])",                             # copied in
        "v4 = ipu_mul(v1, v3, ranks=(1, 0), out_rank=1)",
        "return (v2, v4)",
    ]
    # an op returned (neg, exp: the caller would get the kept array), one of a random
    # draw and one reading an input stay; hoisted values (v3, v4) are never `out=`
    # targets; the constant only the hoisted mul read left
    assert _body(program.source, "main") == [
        "def main(v0, v1, v2, v3, v4):",
        "v5 = ipu_matmul(v0, v3)",
        "v6 = ipu_add(v5, v4, ranks=(2, 1), out_rank=2)",
        "v7 = ipu_neg(v1)",
        "v8 = ipu_random_uniform(low=0.0, high=1.0, shape=(8,), dtype=np.float32, "
        "modifier=None)",
        "v9 = ipu_mul(v8, v2, out=v8)",
        "v10 = ipu_exp(v2)",
        "v11 = ipu_mul(v5, v2, ranks=(2, 1), out_rank=2, out=v5)",  # reads an input
        "return (v6, v7, v9, v10, v11)",
    ]


def test_a_transposed_weight_is_copied_in_training_only_for_many_rows():
    assert _body(_compiled(persistent=False).source, "prepare_main")[1] == \
        "v2 = ipu_permute(v0, dims=(1, 0))"


def test_a_transposed_weight_a_one_row_product_reads_stays_a_view():
    one_row = MODULE.replace("2x4xf32", "1x4xf32").replace("2x8xf32", "1x8xf32")
    assert _body(_compiled(module=one_row).source, "prepare_main")[1] == \
        "v2 = ipu_permute(v0, dims=(1, 0))"


def test_prepare_runs_again_only_for_new_weight_arrays():
    program = _compiled()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4), dtype=np.float32)
    w = rng.standard_normal((8, 4), dtype=np.float32)
    b = rng.standard_normal(8, dtype=np.float32)
    first = program.run(x, w, b)[0]
    np.testing.assert_allclose(first, x @ w.T + 2 * b, rtol=1e-6)
    np.testing.assert_array_equal(program.run(x, w, b)[0], first)
    w2 = w * 3
    np.testing.assert_allclose(program.run(x, w2, b)[0], x @ w2.T + 2 * b, rtol=1e-6)
    np.testing.assert_allclose(program.run(x, w2, b + 1)[0], x @ w2.T + 2 * b + 2,
                               rtol=1e-6)


class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(6, 16), torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) + self.fc1.weight.sum() * 0.5


def test_inference_gives_the_new_weights_results_after_copy_weights_to_device():
    torch.manual_seed(0)
    model = _MLP().eval()
    ipu = poptorch.inferenceModel(model)
    x = torch.randn(4, 6)
    assert_close(ipu(x), model(x))
    assert "def prepare_main(" in ipu._compiled.program.source
    with torch.no_grad():
        model.fc1.weight.mul_(-2)
        model.fc2.weight.add_(1)
    ipu.copyWeightsToDevice()
    with torch.no_grad():
        assert_close(ipu(x), model(x))
        assert_close(ipu(x), model(x))


def test_replicated_inference_with_prepared_weights():
    torch.manual_seed(0)
    model = _MLP().eval()
    ipu = poptorch.inferenceModel(model, poptorch.Options().replicationFactor(2))
    x = torch.randn(8, 6)
    with torch.no_grad():
        assert_close(ipu(x), model(x))


def test_training_steps_match_torch_with_prepared_weights():
    torch.manual_seed(0)
    model = _MLP()
    reference = _MLP()
    reference.load_state_dict(model.state_dict())

    class WithLoss(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x, t):
            out = self.inner(x)
            return out, torch.nn.functional.mse_loss(out, t)

    ipu = poptorch.trainingModel(WithLoss(model),
                                 optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    x, t = torch.randn(4, 6), torch.randn(4, 3)
    for step in range(3):
        out, _ = ipu(x, t)
        if step == 0:
            assert "def prepare_main(" in ipu._compiled.program.source
        optimizer.zero_grad()
        expected = reference(x)
        torch.nn.functional.mse_loss(expected, t).backward()
        optimizer.step()
        assert_close(out, expected.detach())
    ipu.copyWeightsToHost()
    for mine, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        assert_close(mine.detach(), theirs.detach())


@pytest.mark.parametrize("how", ["load", "loadExecutable"])
def test_a_saved_executable_prepares_the_weights_it_is_given(tmp_path, how):
    torch.manual_seed(0)
    model = _MLP().eval()
    x = torch.randn(4, 6)
    path = str(tmp_path / "mlp.popef")
    poptorch.inferenceModel(model).compileAndExport(path, x)
    with torch.no_grad():
        model.fc1.weight.mul_(-2)
    if how == "load":
        loaded = poptorch.load(path)  # the file's weights
        with torch.no_grad():
            model.fc1.weight.div_(-2)
    else:
        loaded = poptorch.inferenceModel(model)
        loaded.loadExecutable(path)  # this model's weights
    assert "def prepare_main(" in loaded._compiled.program.source
    with torch.no_grad():
        assert_close(loaded(x), model(x))


def test_stages_read_the_transposed_weights_prepared_for_them():
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(6, 6) for _ in range(4)]).eval()
    for n in (1, 2, 3):
        model[n] = poptorch.BeginBlock(model[n], ipu_id=n)
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(4))
    x = torch.randn(8, 6)
    with torch.no_grad():
        assert_close(ipu(x), model(x))
        source = ipu._compiled.program.source
        stages = source[source.index("def main_stage0("):]
        assert "ipu_permute" in _body(source, "prepare_main")[1] and "ipu_permute" not in stages
        model[2].weight.mul_(-1)
        ipu.copyWeightsToDevice()
        assert_close(ipu(x), model(x))
