"""What real models needed (issue 20), each as the smallest model that shows it; the
real models themselves run in the zoo tier (test/models)."""

import copy
import re

import pytest
import torch
import torch.nn.functional as F

import poptorch


def train_against_cpu(model, opts, batches, micro_batches, steps=3, lr=0.01):
    """Train `model` with poptorch and a copy on the CPU (per step: the micro-batches'
    gradients averaged, one SGD step); assert the last losses and the weights match."""
    reference = copy.deepcopy(model)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=lr,
                                                              momentum=0.9))
    optimizer = torch.optim.SGD(reference.parameters(), lr=lr, momentum=0.9)
    for inputs in batches[:steps]:
        _, loss = ipu(*inputs)
        optimizer.zero_grad()
        for chunk in zip(*[x.chunk(micro_batches) for x in inputs], strict=True):
            _, expected = reference(*chunk)
            (expected / micro_batches).backward()
        optimizer.step()
        torch.testing.assert_close(loss.reshape(-1)[-1], expected.detach(), rtol=1e-4,
                                   atol=1e-6)
    ipu.copyWeightsToHost()
    for (name, mine), theirs in zip(model.state_dict().items(),
                                    reference.state_dict().values(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5, msg=name)
    return ipu


class ConvNet(torch.nn.Module):
    """Batch norm and a classifier head after the last BeginBlock."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1),
                                        torch.nn.BatchNorm2d(8), torch.nn.ReLU())
        self.body = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1),
                                        torch.nn.BatchNorm2d(8), torch.nn.ReLU6())
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x, labels=None):
        out = self.head(self.body(self.stem(x)).mean((2, 3)))
        return out if labels is None else (out, F.cross_entropy(out, labels))


def test_layers_before_the_first_begin_block_run_on_ipu_0_and_the_head_inherits():
    """Item 1 and 3: batch norm's reshapes merged by ipu-simplify keep their block; the
    stem (before any BeginBlock) is on IPU 0, the head (after the last) on IPU 1."""
    torch.manual_seed(0)
    model = ConvNet().eval()
    poptorch.BeginBlock(model.body, ipu_id=1)
    x = torch.randn(4, 3, 6, 6)
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))
    torch.testing.assert_close(ipu(x), ConvNet.forward(model, x), rtol=1e-5, atol=1e-6)
    text = ipu._compiled.module_text
    stages = dict(re.findall(r"func.func private @(main_stage\d)\(.*ipu.stage = "
                             r"#ipu.stage<\d : i64, (\d) : i64>", text))
    assert stages == {"main_stage0": "0", "main_stage1": "1"}
    stage0 = text.index("func.func private @main_stage0(")
    stage1 = text.index("func.func private @main_stage1(")
    assert '"ipu.matmul"' in text[stage1:]  # the head
    assert '"ipu.conv"' in text[stage0:stage1]  # the stem


def test_pipelined_training_with_cross_entropy_on_class_indices():
    """Items 1-3: batch norm, ReLU6 and cross entropy's backward constants (hoisted to
    the top by canonicalize) in a 2-stage pipeline, against the CPU."""
    torch.manual_seed(0)
    model = ConvNet()
    poptorch.BeginBlock(model.body, ipu_id=1)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(4)
    batches = [(torch.randn(16, 3, 6, 6), torch.randint(0, 5, (16,))) for _ in range(3)]
    train_against_cpu(model, opts, batches, micro_batches=4)


def test_placement_errors_name_the_pass():
    """The compiler checks after every step that a fully placed module stays placed: an
    op without a block from a pass is an internal error naming the step."""
    from torch_mlir import ir

    from poptorch._compiler import driver
    from poptorch.dialects import make_context

    with make_context(), ir.Location.unknown():
        module = ir.Module.parse('''
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%a) {ipu.block = "A"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.relu"(%0) {ipu.block = "A"} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}''')
        before = module.operation.clone()
        relu = module.body.operations[0].regions[0].blocks[0].operations[0]
        del relu.attributes["ipu.block"]  # what a faulty pass would leave
        with pytest.raises(poptorch.Error, match=r"internal error: step 'ipu-simplify' created "
                                                 r"'ipu.relu' without the placement"):
            driver._check_placement(module, [], before, "ipu-simplify", None)
        before.erase()


class DataDependent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, mask):
        if mask.all():
            x = x * 2  # a Python branch on a tensor's value
        return self.linear(x).sum()


class ExportAware(DataDependent):
    """Skips its data-dependent check under torch.export, as transformers does."""

    def forward(self, x, mask):
        if not torch.compiler.is_exporting() and mask.all():
            x = x * 2
        return self.linear(x * mask).sum()


def test_training_capture_runs_in_the_exporting_state():
    """Item 4: a check a library skips under torch.export is skipped in training too."""
    torch.manual_seed(0)
    model = ExportAware()
    x, mask = torch.randn(4, 4), torch.ones(4, 4)
    ipu = poptorch.trainingModel(model, poptorch.Options(),
                                 torch.optim.SGD(model.parameters(), lr=0.0))
    torch.testing.assert_close(ipu(x, mask), model.linear(x * mask).sum().detach())


@pytest.mark.parametrize("training", [False, True])
def test_a_python_branch_on_a_tensor_is_an_error_at_the_model_line(training):
    """Item 4: the error names the construct and the model's source line."""
    model = DataDependent()
    wrap = poptorch.trainingModel if training else poptorch.inferenceModel
    with pytest.raises(poptorch.Error) as info:
        wrap(model)(torch.randn(4, 4), torch.ones(4, 4))
    error = info.value
    line = DataDependent.forward.__code__.co_firstlineno + 1
    assert error.location == f"{__file__}:{line}"
    assert "reads the value of a tensor in Python (`if mask.all():`), which makes its " \
        "control flow depend on the data; compute it with tensor operations" in error.message
    assert "compute it with tensor operations" in error.message


class WithFlags(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, labels=None, use_cache=False, scale=1.0, extra=None):
        out = self.linear(x) * scale
        if use_cache:
            out = out + 1
        if labels is None:
            return out
        return out, F.cross_entropy(out, labels)


def test_non_tensor_inputs_are_compile_time_constants():
    """Item 6: bool, float and None arguments, by position and keyword; another value
    after compilation is an error naming the argument."""
    torch.manual_seed(0)
    model = WithFlags().eval()
    x = torch.randn(2, 4)
    ipu = poptorch.inferenceModel(model)
    torch.testing.assert_close(ipu(x, None, True, scale=2.0), model(x, None, True, scale=2.0))
    torch.testing.assert_close(ipu(x, None, True, scale=2.0), model(x, None, True, scale=2.0))
    with pytest.raises(poptorch.Error, match=r"input scale was 2.0 when the model "
                                             r"was compiled and is 3.0 now; non-tensor"):
        ipu(x, None, True, scale=3.0)

    trained = WithFlags()
    batches = [(torch.randn(4, 4), torch.randint(0, 3, (4,))) for _ in range(3)]
    reference = copy.deepcopy(trained)
    trainer = poptorch.trainingModel(trained, poptorch.Options(),
                                     torch.optim.SGD(trained.parameters(), lr=0.1))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for x, y in batches:
        _, loss = trainer(x, y, use_cache=True)
        optimizer.zero_grad()
        _, expected = reference(x, y, use_cache=True)
        expected.backward()
        optimizer.step()
        torch.testing.assert_close(loss, expected.detach())


def test_structured_outputs_keep_their_type():
    """Item 7: a Hugging Face ModelOutput (an OrderedDict dataclass) comes back as one."""
    from dataclasses import dataclass

    transformers = pytest.importorskip("transformers.utils")

    @dataclass
    class Output(transformers.ModelOutput):
        logits: torch.Tensor = None
        hidden: tuple = None

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.linear(x)
            return Output(logits=h.softmax(-1), hidden=(h, h * 2))

    model = Model()
    x = torch.randn(2, 4)
    out = poptorch.inferenceModel(model)(x)
    expected = model(x)
    assert type(out) is Output and list(out.keys()) == ["logits", "hidden"]
    torch.testing.assert_close(out.hidden[1], expected.hidden[1].detach())


def test_unknown_output_types_are_named():
    """Item 7: an output pytree cannot take apart is an error naming its type."""
    class Box:
        def __init__(self, value):
            self.value = value

    class Model(torch.nn.Module):
        def forward(self, x):
            return Box(x * 2)

    with pytest.raises(poptorch.Error, match=r"the model returns a .*Box, which is not a "
                                             r"tensor nor a structure of tensors"):
        poptorch.inferenceModel(Model())(torch.randn(2))


class Stack(torch.nn.Module):
    def __init__(self, depth=6):
        super().__init__()
        self.embed = torch.nn.Linear(4, 8)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(depth))
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.head(x)


def test_place_layers_pipelines_a_module_list():
    """Beyond PopTorch: layers_per_ipu over a module list, without editing the model."""
    torch.manual_seed(0)
    model = Stack()
    assert poptorch.placeLayers(model.layers, [1, 1, 2, 2]) == ["ipu0", "ipu1", "ipu2", "ipu3"]
    x = torch.randn(8, 4)
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(4))
    torch.testing.assert_close(ipu(x), model(x), rtol=1e-5, atol=1e-6)
    text = ipu._compiled.module_text
    for n in range(4):
        assert f"@main_stage{n}(" in text
    poptorch.removeBlocks(model)
    assert poptorch.placeLayers(model.layers, [0, 6]) == ["ipu1"]  # embeddings alone on 0


def test_place_layers_errors():
    model = Stack()
    with pytest.raises(poptorch.Error, match=r"placeLayers: layers_per_ipu \[3, 2\] places 5 "
                                             r"layers, but there are 6; make the numbers add "
                                             r"up to 6"):
        poptorch.placeLayers(model.layers, [3, 2])
    with pytest.raises(poptorch.Error, match=r"layers_per_ipu must be a list of numbers of "
                                             r"layers \(integers >= 0\), one per IPU, got 6"):
        poptorch.placeLayers(model.layers, 6)
    with pytest.raises(poptorch.Error, match=r"placeLayers needs a list of torch.nn.Modules "
                                             r"\(a ModuleList or Sequential\), got Linear"):
        poptorch.placeLayers(model.head, [1])


def test_gpt2_with_use_cache_as_a_forward_argument():
    """Items 6 and 7 on the model that showed them: GPT-2 called with use_cache=False
    (a bool forward argument, a raw TypeError before) returns its ModelOutput; with the
    cache on, its DynamicCache output is an error naming the type and the way out."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
    import zoo

    zoo.import_torchvision()  # transformers imports torchvision
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=64,
                                     n_positions=16, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 64, (2, 8))
    out = poptorch.inferenceModel(model)(ids, use_cache=False)
    assert type(out).__name__ == "CausalLMOutputWithCrossAttentions"
    torch.testing.assert_close(out.logits, model(ids, use_cache=False).logits.detach(),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(poptorch.Error, match=r"the model returns a transformers.cache_utils."
                                             r"DynamicCache, .*register_dynamic_cache_export_"
                                             r"support\(\), or use_cache=False\)"):
        poptorch.inferenceModel(model)(ids, use_cache=True)


class Unsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        values = torch.lgamma(self.linear(x) + y.sum())
        return values, values.sum()


@pytest.mark.parametrize("training", [False, True])
def test_an_unsupported_op_is_reported_at_the_model_line(training):
    """Item 8: in training too (aot_export records no stack traces of its own), the error
    names the op and the line of the model that calls it."""
    wrap = poptorch.trainingModel if training else poptorch.inferenceModel
    named = r"unsupported op ('torch.lgamma' \()?'?torch.aten.lgamma"
    with pytest.raises(poptorch.Error, match=named) as info:
        wrap(Unsupported())(torch.randn(3, 4), torch.randn(5, 4))
    line = Unsupported.forward.__code__.co_firstlineno + 1
    assert info.value.location == f"{__file__}:{line}"
