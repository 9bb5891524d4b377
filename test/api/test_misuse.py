"""Misuse of the Python API: each is a poptorch.Error naming the problem in the user's
terms (which argument, what was given, what to do), never a raw Python exception."""

import numpy as np
import pytest
import torch

import poptorch
from poptorch import Error


class WithLoss(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x, target=None):
        y = self.lin(x)
        return y if target is None else (y, torch.nn.functional.mse_loss(y, target))


class NoParameters(torch.nn.Module):
    def forward(self, x):
        return poptorch.identity_loss(x.sum(), reduction="sum")


def test_wrapping_something_that_is_not_a_module():
    with pytest.raises(Error, match=r"^inferenceModel: model must be a torch.nn.Module \(or "
                                    r"a model wrapped by poptorch\), got 'x'$"):
        poptorch.inferenceModel("x")
    with pytest.raises(Error, match="^trainingModel: model must be a torch.nn.Module"):
        poptorch.trainingModel(lambda x: x)


def test_an_optimizer_that_is_not_one():
    with pytest.raises(Error) as info:
        poptorch.trainingModel(WithLoss(), optimizer="sgd")
    assert str(info.value) == (
        "trainingModel: optimizer must be a torch.optim.Optimizer (poptorch.optim or "
        "torch.optim) or None for SGD(lr=0.01), got 'sgd'")


def test_training_a_model_without_parameters():
    # before: torch's raw ValueError from the default SGD ("optimizer got an empty
    # parameter list")
    with pytest.raises(Error, match=r"^trainingModel: the model has no parameters, so there "
                                    r"is nothing to train; use inferenceModel to run it$"):
        poptorch.trainingModel(NoParameters())


def test_set_optimizer_on_an_inference_model():
    model = poptorch.inferenceModel(WithLoss())
    with pytest.raises(Error, match=r"^setOptimizer: this is an inferenceModel, which has no "
                                    r"optimizer; wrap the model with poptorch.trainingModel "
                                    r"to train it$"):
        model.setOptimizer(torch.optim.SGD(WithLoss().parameters(), lr=0.1))


def test_a_call_that_does_not_fit_forward_names_the_users_line():
    model = poptorch.inferenceModel(WithLoss())
    with pytest.raises(Error) as info:
        model()  # before: a capture error located in Python's inspect.py
    line = info.value.location
    assert line.startswith(__file__ + ":")
    assert info.value.message == ("the model's forward(x, target=None) cannot take the "
                                  "inputs given: missing a required argument: 'x'")
    with pytest.raises(Error, match="cannot take the inputs given: got an unexpected keyword "
                                    "argument 'y'$"):
        model(torch.ones(2, 2), y=torch.ones(2, 2))
    with pytest.raises(Error, match="cannot take the inputs given: too many positional "
                                    "arguments$"):
        model(torch.ones(2, 2), None, torch.ones(2, 2))


def test_inputs_of_types_a_model_cannot_take():
    model = poptorch.inferenceModel(WithLoss())
    with pytest.raises(Error) as info:
        model(np.ones((2, 2), dtype=np.float32))
    assert info.value.location.startswith(__file__ + ":")
    assert info.value.message == (
        "input x has type numpy.ndarray; a model's inputs are tensors (or bool, int, float, str "
        "or None, which become constants of the program) in tuples, lists and dicts: "
        "torch.from_numpy() makes a tensor of it")
    with pytest.raises(Error) as info:
        model(torch.ones(2, 2), target=[torch.ones(2), object()])
    assert info.value.message.startswith("input target[1] has type object; ")
    assert info.value.message.endswith(": register a poptorch.ICustomArgParser for its type "
                                       "to say which tensors it holds")
    torch.testing.assert_close(model(torch.ones(2, 2)), model.model(torch.ones(2, 2)))


@pytest.mark.parametrize("make", [
    lambda user_id, ipu_id: poptorch.Block(user_id, ipu_id),
    lambda user_id, ipu_id: poptorch.BeginBlock(torch.nn.Linear(2, 2), user_id, ipu_id)])
def test_block_ids_are_checked_when_given(make):
    with pytest.raises(Error, match=r"user_id must be a str \(or None\), got 3.5$"):
        make(3.5, None)
    for ipu_id in (-1, 65536, 2**70, 1.0, "x"):
        # before: 2**70 was a raw std::bad_cast RuntimeError from the capture
        with pytest.raises(Error, match=rf"ipu_id must be an int from 0 to 65535 \(or None\), "
                                        rf"got {ipu_id!r}$"):
            make("a", ipu_id)
    make("a", 65535)
    make("a", "3")  # ids written as f-strings
