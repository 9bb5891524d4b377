"""PoplarExecutor behaviour from spec 4.2 and 4.8: weights, buffers, inputs, errors."""

import glob
import os
import subprocess
import sys

import pytest
import torch
from numerics import check

import poptorch


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


class Counter(torch.nn.Module):
    """Spec listing 4.22: a registered buffer persists between runs."""

    def __init__(self):
        super().__init__()
        self.register_buffer("i", torch.tensor([0.0]))

    def forward(self):
        self.i += 1
        return self.i


class FrozenCounter(torch.nn.Module):
    """Spec listing 4.21: a plain tensor attribute is frozen as a constant."""

    def __init__(self):
        super().__init__()
        self.i = torch.tensor([0.0])

    def forward(self):
        self.i += 1
        return self.i


def test_buffers_persist_and_reach_the_host_only_when_copied():
    model = Counter()
    ipu = poptorch.inferenceModel(model)
    assert ipu().item() == 1.0
    assert ipu().item() == 2.0
    assert model.i.item() == 0.0  # inference does not copy buffers back implicitly
    ipu.copyWeightsToHost()
    assert model.i.item() == 2.0


def test_plain_tensor_attributes_are_frozen():
    model = FrozenCounter()
    ipu = poptorch.inferenceModel(model)
    assert ipu().item() == 1.0
    assert ipu().item() == 1.0
    assert model.i.item() == 0.0


def test_shallow_copy_shares_parameters_and_host_changes_need_copy_weights_to_device():
    # spec 4.2.3: "you also need to explicitly copy the weights if you alter an already
    # wrapped model parameter by some other means" (PopTorch uploads on attach only)
    torch.manual_seed(0)
    model = Linear()
    ipu = poptorch.inferenceModel(model)
    x = torch.randn(2, 4)
    before = model(x)
    torch.testing.assert_close(ipu(x), before)
    assert ipu.model.fc.weight is model.fc.weight
    with torch.no_grad():
        model.fc.weight.mul_(2)  # changed on the host: the device keeps its copy
        model.fc.bias.data = torch.zeros(3)  # replaced: the same
    torch.testing.assert_close(ipu(x), before)
    ipu.copyWeightsToDevice()
    torch.testing.assert_close(ipu(x), model(x))
    model.train()
    assert not ipu.model.training  # primitive attributes are not shared


def test_inference_model_follows_a_training_model_of_the_same_module():
    # spec 4.11 (listing 4.33): weights are implicitly copied from the training model
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    loss_model = _WithLoss(model)
    trainer = poptorch.trainingModel(
        loss_model, optimizer=torch.optim.SGD(loss_model.parameters(), lr=0.5))
    validator = poptorch.inferenceModel(loss_model)
    x, t = torch.randn(2, 4), torch.randn(2, 3)
    first = validator(x)
    trainer(x, t)
    second = validator(x)
    assert not torch.equal(first, second)
    torch.testing.assert_close(second, model(x))  # the trained weights
    trainer(x, t)
    torch.testing.assert_close(validator(x), model(x))


class _WithLoss(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x, target=None):
        y = self.inner(x)
        return y if target is None else (y, torch.nn.functional.mse_loss(y, target))


def test_load_state_dict_uploads():
    model = Linear()
    ipu = poptorch.inferenceModel(model)
    x = torch.randn(2, 4)
    ipu(x)
    other = Linear()
    ipu.load_state_dict(other.state_dict())
    torch.testing.assert_close(ipu(x), other(x))


def test_changed_input_shape_is_an_error():
    ipu = poptorch.inferenceModel(Linear())
    ipu(torch.randn(2, 4))
    with pytest.raises(poptorch.Error) as err:
        ipu(torch.randn(3, 4))
    assert err.value.message == (
        "input x changed since compilation: shape mismatch, expected torch.Size([2, 4]) but "
        "got torch.Size([3, 4]); wrap the model again to compile it for the new inputs")
    with pytest.raises(poptorch.Error, match="data type mismatch, expected torch.float32 but "
                                             "got torch.float16"):
        ipu(torch.randn(2, 4).half())


def test_batch_not_a_multiple_is_an_error():
    opts = poptorch.Options().deviceIterations(2).replicationFactor(2)
    ipu = poptorch.inferenceModel(Linear(), opts)
    with pytest.raises(poptorch.Error) as err:
        ipu(torch.randn(6, 4))
    assert err.value.message == (
        "input 0 has a batch of 6, which is not a multiple of deviceIterations(2) x "
        "replicationFactor(2) / input group size (1) = 4; give a batch of a multiple of 4")


def test_unsupported_op_names_the_op_and_the_users_line():
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.lgamma(x)  # the line the error must name

    with pytest.raises(poptorch.Error) as err:
        poptorch.inferenceModel(Model())(torch.rand(3))
    # the torch call the user wrote, then the op torch-mlir made of it
    assert err.value.message.startswith("unsupported op 'torch.lgamma' (torch.aten.lgamma)")
    line = test_unsupported_op_names_the_op_and_the_users_line.__code__.co_firstlineno + 3
    assert err.value.location == f"{__file__}:{line}"
    assert err.value.type == "compiler"
    assert "reproduce with: ipu-opt " in err.value.message


@pytest.mark.parametrize("iterations", [1, 4])
@pytest.mark.parametrize("replicas", [1, 4])
@pytest.mark.parametrize("mode", [poptorch.OutputMode.All, poptorch.OutputMode.Final,
                                  poptorch.OutputMode.Sum, poptorch.OutputMode.EveryN])
def test_output_modes(iterations, replicas, mode):
    if mode == poptorch.OutputMode.EveryN and iterations == 1:
        opts = poptorch.Options().outputMode(mode, 2)
        with pytest.raises(poptorch.Error, match="with a period of 2 needs the 1 batches of a "
                                                 "call to be a multiple of it"):
            poptorch.inferenceModel(Linear(), opts)(torch.randn(2, 4))
        return
    torch.manual_seed(0)
    model = Linear()
    opts = poptorch.Options().deviceIterations(iterations).replicationFactor(replicas)
    opts.outputMode(mode, 2 if mode == poptorch.OutputMode.EveryN else None)
    x = torch.randn(iterations * replicas * 2, 4)
    out = poptorch.inferenceModel(model, opts)(x)
    expected = model(x).detach().reshape(iterations, replicas * 2, 3)
    if mode == poptorch.OutputMode.Final:
        expected = expected[-1]
    elif mode == poptorch.OutputMode.Sum:
        expected = expected.sum(0)
    elif mode == poptorch.OutputMode.EveryN:
        expected = expected[1::2].reshape(-1, 3)
    torch.testing.assert_close(out, expected.reshape(out.shape), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("group_type", [poptorch.CommGroupType.Consecutive,
                                        poptorch.CommGroupType.Orthogonal])
def test_input_replica_grouping(group_type):
    model = Linear()
    opts = poptorch.Options().replicationFactor(4)
    opts.input_group_size, opts.input_group_type = 2, group_type
    x = torch.randn(4, 4)  # 2 input groups x micro-batch 2
    out = poptorch.inferenceModel(model, opts)(x)
    halves = model(x).detach().reshape(2, 2, 3)
    order = [0, 0, 1, 1] if group_type == poptorch.CommGroupType.Consecutive else [0, 1, 0, 1]
    torch.testing.assert_close(out, halves[order].reshape(8, 3))


def test_structured_inputs_and_outputs():
    class Model(torch.nn.Module):
        def forward(self, pair, scale=None, table=None):
            a, b = pair
            out = a + b * table["w"]
            if scale is not None:
                out = out * scale
            return {"sum": out, "parts": (a, b.mean())}

    a, b, w = torch.randn(2, 3), torch.randn(2, 3), torch.randn(3)
    check(Model(), (a, b), table={"w": w})
    check(Model(), [a, b], scale=torch.tensor(2.0), table={"w": w})


def test_is_running_on_ipu():
    class Model(torch.nn.Module):
        def forward(self, x):
            return x + 1 if poptorch.isRunningOnIpu() else x - 1

    x = torch.zeros(2)
    assert not poptorch.isRunningOnIpu()
    torch.testing.assert_close(poptorch.inferenceModel(Model())(x), x + 1)
    torch.testing.assert_close(Model()(x), x - 1)


def test_half_model_returns_half():
    """Spec listing 4.4 (inference_half): half weights and inputs give a half result."""
    model = torch.nn.Linear(1, 10).half()
    out = poptorch.inferenceModel(model, poptorch.Options())(torch.tensor([1.0]).half())
    assert out.dtype == torch.half
    torch.testing.assert_close(out, model(torch.tensor([1.0]).half()), rtol=1e-2, atol=1e-2)


def test_mixed_precision_follows_torch_promotion():
    check(lambda a, b: (a + b, a * 2.5), torch.randn(3).half(), torch.randn(3))


def test_64_bit_inputs_are_narrowed():
    out = poptorch.inferenceModel(Linear().double())(torch.randn(2, 4, dtype=torch.float64))
    assert out.dtype == torch.float32
    out = check(lambda i: i * 3, torch.tensor([1, 2], dtype=torch.int64))
    assert out.dtype == torch.int32


def test_executor_lifecycle():
    ipu = poptorch.inferenceModel(Linear())
    assert not ipu.isCompiled()
    ipu.compile(torch.randn(2, 4))
    assert ipu.isCompiled() and ipu.isAttachedToDevice()
    assert ipu.getTensorNames() == ["fc.weight", "fc.bias", "input0"]
    ipu.detachFromDevice()
    assert not ipu.isAttachedToDevice()
    with pytest.raises(poptorch.Error, match="the model is not attached to a device"):
        ipu.detachFromDevice()
    ipu(torch.randn(2, 4))  # attaches again
    assert ipu.isAttachedToDevice()
    ipu.destroy()
    with pytest.raises(poptorch.Error, match="^Model has been destroyed"):
        ipu(torch.randn(2, 4))


def test_buffers_with_replicas():
    """Replicas updating buffers need broadcastBuffers(False), as PopTorch says (it does not
    support broadcasting buffers); then each replica keeps its own (spec 4.8)."""
    class Sum(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(1))

        def forward(self, x):
            self.total += x.sum()
            return self.total

    x = torch.tensor([[1.0], [2.0]])  # replica 0 gets 1, replica 1 gets 2
    opts = poptorch.Options().replicationFactor(2)
    shared = poptorch.inferenceModel(Sum(), opts)
    with pytest.raises(poptorch.Error, match=r"broadcastBuffers\(False\)"):
        shared(x)
    own = poptorch.inferenceModel(Sum(), poptorch.Options().replicationFactor(2)
                                  .broadcastBuffers(False))
    own(x)
    assert own(x).tolist() == [2.0, 4.0]


def test_ir_dumps_run_through_ipu_opt(tmp_path):
    opts = poptorch.Options().dumpIR(str(tmp_path))
    poptorch.inferenceModel(Linear(), opts)(torch.randn(2, 4))
    files = sorted(glob.glob(os.path.join(tmp_path, "[0-9][0-9]-*.mlir")))
    assert [os.path.basename(f).split("-", 1)[1] for f in files] == [
        "import.mlir", "ipu-mark-overlapped-io.mlir", "ipu-convert-poptorch-ops.mlir",
        "ipu-check-torch-ops.mlir",
        "torchdynamo-export-to-torch-backend-pipeline.mlir", "ipu-import-annotations.mlir",
        "torch-func-backend-type-conversion.mlir", "ipu-convert-torch-to-ipu.mlir",
        "canonicalize.mlir", "torch-finalizing-backend-type-conversion.mlir",
        "ipu-import-annotations.mlir", "ipu-narrow-f64.mlir", "ipu-simplify.mlir", "cse.mlir",
        # the Precision options' step, the execution strategy's (nothing to do without
        # blocks; ipu-recompute as PopTorch's pipeline recomputation is on by default)
        "ipu-precision.mlir", "ipu-assign-stages.mlir", "ipu-recompute.mlir",
        "ipu-outline-stages.mlir",
        "ipu-insert-copies.mlir", "ipu-schedule.mlir"]
    # every dump parses and prints back as it was: one ipu-opt over all of them, each
    # its own chunk (`--split-input-file`), as lit tests run it
    texts = []
    for path in files:
        with open(path) as f:
            texts.append(f.read().strip())
    joined = tmp_path / "all.mlir"
    joined.write_text("\n// -----\n".join(texts) + "\n")
    exe = os.path.join(os.path.dirname(sys.executable), "ipu-opt")
    result = subprocess.run([exe, str(joined), "--split-input-file", "--mlir-print-debuginfo"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert [t.strip() for t in result.stdout.split("// -----")] == texts
    assert os.path.exists(os.path.join(tmp_path, "program.py"))


def test_poptorch_ops_reach_the_ipu_dialect(capfd):
    """Spec 4.6.2's example: the print's result is used; nop stays in the program."""
    class ExampleModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.zeros(()))

        def forward(self, x):
            x = x + 1
            x = poptorch.ipu_print_tensor(x, "summation")
            return poptorch.nop(x) + self.bias

    model = ExampleModel()
    ipu = poptorch.inferenceModel(model)
    out = ipu(torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(out, torch.tensor([2.0, 3.0]))
    printed = [line for line in capfd.readouterr().out.splitlines() if "[poptorch]" not in line]
    assert printed == ["summation: [2. 3.]"]
    text = ipu._compiled.module_text
    assert '"ipu.print"' in text and 'title = "summation"' in text and '"ipu.nop"' in text
    torch.testing.assert_close(model(torch.tensor([1.0, 2.0])).detach(), out)


def test_block_annotations_reach_the_ipu_ops():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

        def forward(self, x):
            with poptorch.Block("encoder", ipu_id=0):
                x = torch.relu(self.a(x))
            with poptorch.Block("head", ipu_id=1):
                return self.b(x)

    ipu = poptorch.inferenceModel(Model(), poptorch.Options().deviceIterations(2))
    ipu(torch.randn(4, 4))
    lines = [line for line in ipu._compiled.module_text.splitlines() if '"ipu.' in line]
    assert any('"ipu.relu"' in line and 'ipu.block = "encoder"' in line for line in lines)
    assert all("ipu.block" in line for line in lines if '"ipu.matmul"' in line)
    assert any('"ipu.matmul"' in line and 'ipu.block = "head"' in line
               and "ipu.ipu_id = 1" in line for line in lines)


def test_random_ops_use_the_seed_and_differ_per_replica():
    class Noise(torch.nn.Module):
        def forward(self, x):
            return x + torch.rand(3), torch.randn(2000).std(), torch.bernoulli(x * 0 + 0.5)

    def run(seed):
        opts = poptorch.Options().replicationFactor(2).randomSeed(seed)
        return poptorch.inferenceModel(Noise(), opts)(torch.zeros(2, 3))

    first, std, coin = run(7)
    assert ((first >= 0) & (first < 1)).all() and not torch.equal(first[0], first[1])
    assert torch.allclose(std, torch.ones(2), atol=0.1)
    assert set(coin.flatten().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(run(7)[0], first)
    assert not torch.equal(run(8)[0], first)
