"""Spec 4.4.1's annotations reach the ipu IR as attributes on every op, forward and
backward: Block (useAutoId, string ids), BlockFunction, BeginBlock, removeBlocks,
NameScope and the module name scope."""

import re

import torch

import poptorch


def ipu_ops(executor):
    """(op name, attributes text) of every ipu op of the compiled model."""
    return [(m.group(1), m.group(2) or "") for m in re.finditer(
        r'"(ipu\.\w+)"\([^)]*\)(?: \{([^}]*)\})?', executor._compiled.module_text)]


class Network(torch.nn.Module):
    """Spec listing 4.8."""

    def __init__(self):
        super().__init__()
        self.layer1 = torch.nn.Linear(5, 10)
        self.layer2 = torch.nn.Linear(10, 5)
        self.layer3 = torch.nn.Linear(5, 5)
        self.layer4 = torch.nn.Linear(5, 5)
        self.act = torch.nn.ReLU()
        self.softmax = torch.nn.Softmax(dim=1)

    def forward(self, x):
        poptorch.Block.useAutoId()
        with poptorch.Block(ipu_id=0):
            x = self.act(self.layer1(x))
        with poptorch.Block(ipu_id=1):
            x = self.act(self.layer2(x))
        with poptorch.Block(ipu_id=2):
            x = self.act(self.layer3(x))
            x = self.act(self.layer4(x))
        with poptorch.Block(ipu_id=3):
            x = self.softmax(x)
        return x


def test_block_with_auto_ids():
    model = Network()
    # a 4-stage pipeline needs deviceIterations >= 4 (test_strategies checks the error)
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(4))
    x = torch.rand((16, 5))
    torch.testing.assert_close(ipu(x), model(x))
    blocks = {re.search(r'ipu.block = "(\d)"', a).group(1) for _, a in ipu_ops(ipu)
              if "ipu.block" in a}
    assert blocks == {"0", "1", "2", "3"}
    relu_blocks = [re.search(r'ipu.ipu_id = (\d)', a).group(1) for op, a in ipu_ops(ipu)
                   if op == "ipu.relu"]
    assert relu_blocks == ["0", "1", "2", "2"]


class FunctionNetwork(Network):
    """Spec listing 4.9."""

    def forward(self, x):
        poptorch.Block.useAutoId()
        return self.final_activation(self.block_two(self.block_one(x)))

    @poptorch.BlockFunction(ipu_id=0)
    def block_one(self, x):
        return self.act(self.layer2(self.act(self.layer1(x))))

    @poptorch.BlockFunction(ipu_id=1)
    def block_two(self, x):
        return self.act(self.layer4(self.act(self.layer3(x))))

    @poptorch.BlockFunction(ipu_id=1)
    def final_activation(self, x):
        return self.softmax(x)


def test_block_function():
    model = FunctionNetwork()
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))
    x = torch.rand((4, 5))
    torch.testing.assert_close(ipu(x), model(x))
    ops = ipu_ops(ipu)
    assert all("ipu.ipu_id" in a for op, a in ops if op not in ("ipu.constant", "ipu.copy"))
    assert [a.count('ipu.block = "2"') for op, a in ops if op == "ipu.exp"] == [1]


def test_begin_block_on_sub_modules_and_remove_blocks():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4),
                                torch.nn.Tanh(), torch.nn.Linear(4, 2))
    model[2] = poptorch.BeginBlock(model[2], "second", ipu_id=1)
    model[4] = poptorch.BeginBlock(model[4], ipu_id=2)
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(3)
                                  .autoRoundNumIPUs(True))
    x = torch.randn(3, 4)
    torch.testing.assert_close(ipu(x), model(x))
    placed = {op: re.search(r"ipu.ipu_id = (\d)", a).group(1) for op, a in ipu_ops(ipu)
              if op in ("ipu.relu", "ipu.tanh")}
    assert placed == {"ipu.relu": "0", "ipu.tanh": "1"}  # first layers on IPU 0; inherited
    poptorch.removeBlocks(model)
    assert not hasattr(model[2], "_poptorch_block")
    plain = poptorch.inferenceModel(model)
    plain(x)
    assert not any("ipu.ipu_id" in a for _, a in ipu_ops(plain))


def test_annotations_reach_backward_ops_and_name_scopes():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(4, 2)

        def forward(self, x, y):
            with poptorch.Block("enc", ipu_id="0"):
                with poptorch.NameScope("features"):
                    h = torch.relu(self.encoder(x))
            with poptorch.Block("head", ipu_id=1):
                out = self.head(h)
                return out, torch.nn.functional.mse_loss(out, y)

    opts = poptorch.Options()
    opts.Training.gradientAccumulation(3)  # 2N-1 pipeline stages for N = 2 IPUs
    ipu = poptorch.trainingModel(Model(), opts)
    ipu(torch.randn(6, 4), torch.randn(6, 2))
    ops = [a for op, a in ipu_ops(ipu) if op not in ("ipu.constant", "ipu.copy")]
    assert ops and all("ipu.block" in a for a in ops)  # forward and backward ops
    assert sum('ipu.block = "enc"' in a for a in ops) >= 4
    assert any('ipu.name_scope = "features"' in a for a in ops)  # (no module path in
    # the joint graph: aot_export keeps no nn_module_stack)
    assert any('ipu.ipu_id = "0"' in a for a in ops)  # string ids are kept


def test_disable_module_namescope():
    opts = poptorch.Options().disableModuleNamescope()
    ipu = poptorch.inferenceModel(torch.nn.Sequential(torch.nn.Linear(2, 2)), opts)
    ipu(torch.randn(1, 2))
    assert not any("ipu.name_scope" in a for _, a in ipu_ops(ipu))
    ipu = poptorch.inferenceModel(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    ipu(torch.randn(1, 2))
    assert any('ipu.name_scope = "0"' in a for _, a in ipu_ops(ipu))


def test_training_layers_before_the_first_begin_block_stay_on_ipu_0():
    """torch runs a training model's forward twice while capturing it; the BeginBlock
    left open by the first run must not claim the layers before it in the second."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(4, 8)
            self.fc2 = poptorch.BeginBlock(torch.nn.Linear(8, 2), ipu_id=1)

        def forward(self, x, y):
            out = self.fc2(self.fc1(x))
            return out, torch.nn.functional.mse_loss(out, y)

    opts = poptorch.Options()
    opts.Training.gradientAccumulation(3)
    model = poptorch.trainingModel(Model(), opts)
    model(torch.ones(3, 4), torch.ones(3, 2))
    calls = re.findall(r"call @(\w+)\(.*\{ipu.kind = \"(\w+)\", "
                       r"ipu.stage = #ipu.stage<(\d+) : i64, (\d+) : i64>\}",
                       model._compiled.module_text)
    assert calls == [("main_stage0", "forward", "0", "0"),
                     ("main_stage1", "forward_backward", "1", "1"),
                     ("main_stage2", "backward", "2", "0")]
