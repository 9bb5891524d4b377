"""Errors name the op the user wrote (issue 23, item 3): an unsupported op by its torch
call (`torch.nonzero`), not by the aten op it decomposed into (`aten.Int.Tensor`); an op
whose output shape depends on its input's values is refused at the user's line, as
PopTorch refuses it, in inference and training."""

import pytest
import torch

import poptorch


class DataDependent(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.weight = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        y = self.fn(x * self.weight)  # the line errors name
        return y, (x * self.weight).sum()


CASES = {
    "torch.nonzero": (lambda x: torch.nonzero(x > 0), "its output's shape depends"),
    "tensor[...]": (lambda x: x[x > 0], "its output's shape depends"),
    "torch.unique": (torch.unique, "its output's shape depends"),
    "torch.masked_select": (lambda x: torch.masked_select(x, x > 0),
                            "its output's shape depends"),
}


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", CASES)
def test_a_data_dependent_shape_is_refused_at_the_users_line(name, training):
    fn, reason = CASES[name]
    model = DataDependent(fn)
    wrap = poptorch.trainingModel if training else poptorch.inferenceModel
    with pytest.raises(poptorch.Error) as err:
        wrap(model)(torch.tensor([1.0, -1.0, 2.0, 0.5]))
    message = err.value.message
    if not training:  # the training graph's nodes record aten ops, not the user's calls
        assert message.startswith(f"unsupported op '{name}': {reason}"), message
    assert "IPU programs have static shapes" in message
    assert "aten.Int" not in message and "sym_size" not in message
    # the forward line, or in training the innermost frame of the user's (the lambda)
    assert err.value.location.startswith(f"{__file__}:")


def test_item_in_forward_is_refused():
    class Model(torch.nn.Module):
        def forward(self, x):
            return x * x.sum().item()

    with pytest.raises(poptorch.Error, match=r"unsupported op 'Tensor.item': its result is a "
                                             r"Python number computed on the device"):
        poptorch.inferenceModel(Model())(torch.ones(3))


def test_an_unsupported_method_is_named_as_a_tensor_method():
    class Model(torch.nn.Module):
        def forward(self, x):
            return x.lgamma()

    with pytest.raises(poptorch.Error) as err:
        poptorch.inferenceModel(Model())(torch.rand(3) + 1)
    assert err.value.message.startswith(
        "unsupported op 'Tensor.lgamma' (torch.aten.lgamma): "), err.value.message
