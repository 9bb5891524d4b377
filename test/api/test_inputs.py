"""Inputs (issue 22 item 4): non-tensor arguments, None, dicts matched by key, an empty
batch, `poptorch.ICustomArgParser`, and errors naming the changed input in PyTorch's
terms (PopTorch 3.4's `validateInputs`)."""

import collections
import copy

import pytest
import torch

import poptorch


class WithFlags(torch.nn.Module):
    """Tensor, None, float, int and bool arguments, by position and keyword."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, y=None, z=None, scale=1.0, n=2, flag=True, target=None):
        out = self.fc(x) * scale * n
        if y is not None:
            out = out + y
        if z is not None:
            out = out - z
        if flag:
            out = out + 1
        if target is None:
            return out
        return out, torch.nn.functional.mse_loss(out, target)


CALLS = [
    ((None, "z"), {}),                                  # None before a tensor, by position
    ((None, None, 2.0, 3, False), {}),                  # every kind, by position
    ((), {"y": None, "z": "z", "scale": 0.5, "n": 4, "flag": True}),  # by keyword
    (("z",), {"flag": False, "n": 1}),                  # a tensor where the default is None
]


def _bind(call, x):
    args, kwargs = call
    return (tuple(x if a == "z" else a for a in args),
            {k: (x if v == "z" else v) for k, v in kwargs.items()})


@pytest.mark.parametrize("call", CALLS)
def test_non_tensor_arguments_in_inference(call):
    torch.manual_seed(0)
    model = WithFlags().eval()
    x, other = torch.randn(2, 4), torch.randn(2, 4)
    args, kwargs = _bind(call, other)
    ipu = poptorch.inferenceModel(model)
    for _ in range(2):
        torch.testing.assert_close(ipu(x, *args, **kwargs), model(x, *args, **kwargs))


@pytest.mark.parametrize("call", CALLS)
def test_non_tensor_arguments_in_training(call):
    torch.manual_seed(0)
    model = WithFlags()
    reference = copy.deepcopy(model)
    x, other, target = torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4)
    args, kwargs = _bind(call, other)
    trainer = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(),
                                                                       lr=0.1))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        _, loss = trainer(x, *args, target=target, **kwargs)
        optimizer.zero_grad()
        _, expected = reference(x, *args, target=target, **kwargs)
        expected.backward()
        optimizer.step()
        torch.testing.assert_close(loss, expected)
    trainer.copyWeightsToHost()
    torch.testing.assert_close(model.fc.weight, reference.fc.weight)


def test_none_where_a_tensor_was_compiled_is_an_error_naming_it():
    ipu = poptorch.inferenceModel(WithFlags().eval())
    x = torch.randn(2, 4)
    ipu(x, x)
    with pytest.raises(poptorch.Error) as err:
        ipu(x, None)
    assert err.value.message == (
        "input y changed since compilation: it was a tensor of shape (2, 4) and dtype "
        "torch.float32 and is None now; wrap the model again to compile it for the new "
        "inputs")
    with pytest.raises(poptorch.Error, match=r"input y changed since compilation: it was a "
                                             r"tensor .* and is 3 now"):
        ipu(x, 3)


def test_another_non_tensor_value_is_an_error_naming_the_argument():
    ipu = poptorch.inferenceModel(WithFlags().eval())
    x = torch.randn(2, 4)
    ipu(x, None, scale=2.0)
    with pytest.raises(poptorch.Error, match=r"^input scale was 2.0 when the model was "
                                             r"compiled and is 3.0 now; non-tensor"):
        ipu(x, None, scale=3.0)
    with pytest.raises(poptorch.Error, match=r"^input y was None when the model was compiled "
                                             r"and is a tensor of shape \(2, 4\) and dtype "
                                             r"torch.float32 now"):
        ipu(x, x, scale=2.0)


def test_keyword_and_position_are_the_same_argument():
    """PopTorch binds the call to forward's signature: `y=t` and `t` by position are the
    same input, and an omitted argument is its default."""
    torch.manual_seed(0)
    model = WithFlags().eval()
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    ipu = poptorch.inferenceModel(model)
    expected = model(x, y, scale=2.0)
    torch.testing.assert_close(ipu(x, y=y, scale=2.0), expected)
    torch.testing.assert_close(ipu(x, y, None, 2.0), expected)
    torch.testing.assert_close(ipu(scale=2.0, y=y, x=x), expected)
    with pytest.raises(poptorch.Error, match="^input y was given when the model was compiled "
                                             "and is missing now"):
        ipu(x, scale=2.0)


class DictModel(torch.nn.Module):
    def forward(self, batch):
        return batch["ids"] * 2 + batch["mask"], batch["mask"] - batch["ids"]


def test_dicts_are_matched_by_key_not_order():
    model = DictModel()
    ipu = poptorch.inferenceModel(model)
    ids, mask = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(ipu({"ids": ids, "mask": mask}), model({"ids": ids,
                                                                       "mask": mask}))
    ids, mask = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(ipu({"mask": mask, "ids": ids}), model({"ids": ids,
                                                                       "mask": mask}))


def test_keyword_arguments_in_another_order_run():
    model = WithFlags().eval()
    ipu = poptorch.inferenceModel(model)
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    torch.testing.assert_close(ipu(x, y=y, z=x), model(x, y=y, z=x))
    torch.testing.assert_close(ipu(x, z=y, y=x), model(x, y=x, z=y))


def test_structure_changes_name_the_argument_and_what_changed():
    ipu = poptorch.inferenceModel(DictModel())
    ids, mask = torch.randn(2, 3), torch.randn(2, 3)
    ipu({"ids": ids, "mask": mask})
    with pytest.raises(poptorch.Error) as err:
        ipu({"ids": ids, "labels": mask})
    assert err.value.message == (
        "input batch changed since compilation: its keys changed (missing key(s) 'mask'; "
        "unexpected key(s) 'labels'); wrap the model again to compile it for the new inputs")
    with pytest.raises(poptorch.Error, match="^input batch changed since compilation: it was "
                                             "a dict and is a tuple now"):
        ipu((ids, mask))
    assert "TreeSpec" not in err.value.message


def test_shape_and_dtype_changes_name_the_tensor_in_pytorchs_terms():
    class Model(torch.nn.Module):
        def forward(self, batch):
            return batch["ids"] * 2

    ipu = poptorch.inferenceModel(Model())
    ipu({"ids": torch.ones(2, 3, dtype=torch.int64)})
    with pytest.raises(poptorch.Error) as err:
        ipu({"ids": torch.ones(2, 3)})
    assert err.value.message == (
        "input batch['ids'] changed since compilation: data type mismatch, expected "
        "torch.int64 but got torch.float32; wrap the model again to compile it for the new "
        "inputs")
    with pytest.raises(poptorch.Error) as err:
        ipu({"ids": torch.ones(4, 3, dtype=torch.int64)})
    assert err.value.message == (
        "input batch['ids'] changed since compilation: shape mismatch, expected "
        "torch.Size([2, 3]) but got torch.Size([4, 3]); wrap the model again to compile it "
        "for the new inputs")


def test_shape_errors_give_the_whole_batch_with_device_iterations():
    ipu = poptorch.inferenceModel(torch.nn.Linear(4, 4),
                                  poptorch.Options().deviceIterations(2))
    ipu(torch.randn(8, 4))
    with pytest.raises(poptorch.Error, match=r"^input input changed since compilation: shape "
                                             r"mismatch, expected torch.Size\(\[8, 4\]\) but "
                                             r"got torch.Size\(\[6, 4\]\)"):
        ipu(torch.randn(6, 4))


def test_an_empty_batch_is_a_clear_error():
    ipu = poptorch.inferenceModel(torch.nn.Linear(4, 4))
    with pytest.raises(poptorch.Error, match=r"^input 0 has an empty batch \(shape \(0, 4\)\)"):
        ipu(torch.randn(0, 4))


class MyArg:
    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            setattr(self, key, value)


class MyArgParser(poptorch.ICustomArgParser):
    def yieldTensors(self, struct):  # noqa: N802 - PopTorch's interface
        for key in sorted(struct.__dict__):
            if isinstance(struct.__dict__[key], torch.Tensor):
                yield struct.__dict__[key]

    def reconstruct(self, original_structure, tensor_iterator):
        return MyArg(**{key: next(tensor_iterator) if isinstance(value, torch.Tensor)
                        else value
                        for key, value in sorted(original_structure.__dict__.items())})


@pytest.fixture
def my_arg_parser():
    poptorch.registerCustomArgParser(MyArg, MyArgParser())
    yield
    poptorch.registerCustomArgParser(MyArg, None)


@pytest.mark.parametrize("iterations", [1, 3])
@pytest.mark.usefixtures("my_arg_parser")
def test_custom_arg_parser(iterations):
    """PopTorch's test_custom_input: the object's tensors are inputs, split over the
    device iterations, and the model may return the object."""
    class Adder(torch.nn.Module):
        def forward(self, custom_input):
            assert custom_input.tensor.shape[0] == 2
            custom_input.result = custom_input.tensor + custom_input.tensor * custom_input.k
            return custom_input

    ipu = poptorch.inferenceModel(Adder(), poptorch.Options().deviceIterations(iterations))
    for i in range(3):
        tensor = torch.full((2 * iterations, 1), float(i))
        result = ipu(MyArg(tensor=tensor, k=3))
        assert isinstance(result, MyArg)
        torch.testing.assert_close(result.tensor, tensor)
        torch.testing.assert_close(result.result, tensor * 4)
    with pytest.raises(poptorch.Error, match=r"^input custom_input\[0\] changed since "
                                             r"compilation: shape mismatch"):
        ipu(MyArg(tensor=torch.ones(2 * iterations, 2), k=3))


@pytest.mark.usefixtures("my_arg_parser")
def test_custom_arg_parser_subclass_and_training():
    class Sub(MyArg):
        pass

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, data):
            out = self.fc(data.x)
            return out, torch.nn.functional.mse_loss(out, data.y)

    torch.manual_seed(0)
    model = Model()
    reference = copy.deepcopy(model)
    trainer = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(),
                                                                       lr=0.1))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        data = Sub(x=torch.randn(2, 3), y=torch.randn(2, 3))
        _, loss = trainer(data)
        optimizer.zero_grad()
        _, expected = reference(data)
        expected.backward()
        optimizer.step()
        torch.testing.assert_close(loss, expected)


def test_register_custom_arg_parser_checks_and_removes():
    class Thing:
        def __init__(self, t):
            self.t = t

    class Parser(poptorch.ICustomArgParser):
        def yieldTensors(self, struct):  # noqa: N802
            yield struct.t

        def reconstruct(self, original_structure, tensor_iterator):
            return Thing(next(tensor_iterator))

    with pytest.raises(poptorch.Error, match="arg_parser must inherit from ICustomArgParser"):
        poptorch.registerCustomArgParser(Thing, object())
    poptorch.registerCustomArgParser(Thing, Parser())
    try:
        model = poptorch.inferenceModel(torch.nn.Identity())
        torch.testing.assert_close(model(Thing(torch.ones(2))).t, torch.ones(2))
    finally:
        poptorch.registerCustomArgParser(Thing, None)
    from torch.utils import _pytree as pytree  # noqa: PLC0415 - only this test uses it
    assert Thing not in pytree.SUPPORTED_NODES


def test_ordered_dict_input_subclass():
    class Args(collections.OrderedDict):
        pass

    class Model(torch.nn.Module):
        def forward(self, args):
            return args["a"] * 2 + args["b"]

    model = Model()
    ipu = poptorch.inferenceModel(model)
    for _ in range(2):
        args = Args()
        args["b"] = torch.randn(2, 2)
        args["a"] = torch.randn(2, 2)
        torch.testing.assert_close(ipu(args), model(args))
