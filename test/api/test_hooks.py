"""Compile hooks, anchors (the debugging example), module_repr, Block.start, destroy()
on the wrapped model, backward() on outputs (issue 22 item 7)."""

import copy

import pytest
import torch

import poptorch


def test_compile_hooks_run_in_order_and_can_be_removed():
    calls = []
    pre = poptorch.registerPreCompileHook(lambda: calls.append("pre"))
    post = poptorch.registerPostCompileHook(lambda: calls.append("post"))
    try:
        pm = poptorch.inferenceModel(torch.nn.Linear(2, 2))
        pm(torch.ones(1, 2))
        assert calls == ["pre", "post"]
        pm(torch.ones(1, 2))
        assert calls == ["pre", "post"]  # not compiled again
    finally:
        pre.remove()
        post.remove()
    poptorch.inferenceModel(torch.nn.Linear(2, 2))(torch.ones(1, 2))
    assert calls == ["pre", "post"]
    with pytest.raises(poptorch.Error, match="callable"):
        poptorch.registerPreCompileHook(3)


class Model(torch.nn.Module):  # PopTorch's debugging example
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 10)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(10, 10)
        self.loss = torch.nn.MSELoss(reduction="mean")

    def forward(self, x, labels=None):
        out = self.fc2(self.relu(self.fc1(x)))
        if self.training:
            return self.loss(out, labels)
        return out


def test_debugging_example_anchors():
    torch.manual_seed(0)
    input = torch.rand(10, 10)
    label = torch.rand(10, 10)
    model = Model()
    poptorch_model = poptorch.trainingModel(model)
    poptorch_model(input, label)
    tensor_names = poptorch_model.getTensorNames()
    assert "Gradient___fc2.bias" in tensor_names and "UpdatedVar___fc2.weight" in tensor_names

    opts = poptorch.Options()
    opts.anchorTensor('grad_bias', 'Gradient___fc2.bias')
    opts.anchorTensor('update_weight', 'UpdatedVar___fc2.weight')
    poptorch_model.destroy()

    ref = copy.deepcopy(model)  # the weights after the first training step
    poptorch_model = poptorch.trainingModel(model, opts)
    poptorch_model(input, label)
    grad = poptorch_model.getAnchoredTensor('grad_bias')
    update = poptorch_model.getAnchoredTensor('update_weight')

    loss = ref(input, label)
    loss.backward()
    torch.testing.assert_close(grad, ref.fc2.bias.grad)
    torch.testing.assert_close(update, ref.fc2.weight - 0.01 * ref.fc2.weight.grad)
    torch.testing.assert_close(update, model.fc2.weight.detach())
    with pytest.raises(poptorch.Error, match="no tensor with name 'nope'"):
        poptorch_model.getAnchoredTensor('nope')


def test_anchoring_an_unknown_tensor_is_an_error():
    opts = poptorch.Options().anchorTensor("x", "no_such_tensor")
    pm = poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)
    with pytest.raises(poptorch.Error, match="not a tensor of the model"):
        pm(torch.ones(1, 2))


def test_inference_anchor_of_a_buffer():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("i", torch.zeros(1))

        def forward(self, x):
            self.i += 1
            return x

    opts = poptorch.Options().deviceIterations(2).anchorTensor("i", "i")
    pm = poptorch.inferenceModel(Counter(), opts)
    pm(torch.ones(2, 1))
    assert pm.getAnchoredTensor("i").flatten().tolist() == [1.0, 2.0]  # All: per iteration


def test_module_repr_and_block_start():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    poptorch.BeginBlock(model[1], "second", ipu_id=1)
    text = poptorch.module_repr(model)
    assert "BeginBlock(user_id=second, ipu_id=1) Linear(" in text
    assert repr(poptorch.inferenceModel(model)) == text

    class TwoStages(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)

        def forward(self, x):
            poptorch.Block.start("first", ipu_id=0)
            x = self.a(x)
            poptorch.Block.start("second", ipu_id=1)
            return self.b(x)

    model = TwoStages()
    assert torch.equal(model(torch.ones(1, 2)), model.b(model.a(torch.ones(1, 2))))  # CPU
    pm = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))
    torch.testing.assert_close(pm(torch.ones(2, 2)), model(torch.ones(2, 2)))
    assert max(pm.getMemoryEstimate().ipus) == 1  # the second block is on IPU 1


def test_destroy_through_the_wrapped_model():
    model = torch.nn.Sequential(torch.nn.Linear(2, 1))

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, x):
            y = self.net(x)
            return y, y.sum()

    user = WithLoss()
    pm = poptorch.trainingModel(user, optimizer=torch.optim.SGD(user.parameters(), lr=0.1))
    pm(torch.ones(1, 2))
    user.destroy()
    assert not pm.isCompiled()
    with pytest.raises(poptorch.Error, match="destroyed"):
        pm(torch.ones(1, 2))
    assert user.net[0].bias.item() == pytest.approx(
        poptorch.inferenceModel(user).model.net[0].bias.item())


def test_backward_on_outputs_is_poptorchs_error():
    pm = poptorch.inferenceModel(torch.nn.Linear(2, 2))
    out = pm(torch.ones(1, 2))
    with pytest.raises(poptorch.Error, match="backward\\(\\) cannot be called explicitly"):
        out.backward()
