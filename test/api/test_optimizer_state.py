"""The optimizer's state dict (spec 4.5.5) and setOptimizer's checks.

A poptorch.optim optimizer's state_dict() holds PopTorch's "ipu_state" (the device's state
tensors) and "ipu_param" (the hyper-parameters in force on the device) beside torch's
"state" and "param_groups"; it loads only such state dicts. An optimizer holding a tensor
that is not the model's, or setOptimizer with another kind of optimizer, is refused.
"""

import copy
import gc

import pytest
import torch

import poptorch
from poptorch import Error


class Net(torch.nn.Module):
    def __init__(self, out: int = 2) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.head = torch.nn.Linear(4, out)

    def forward(self, x, t):
        out = self.head(torch.tanh(self.fc(x)))
        return out, torch.nn.functional.mse_loss(out, t)


def batches(n: int, out: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.randn(4, 3), torch.randn(4, out)) for _ in range(n)]


def train(make, steps: int = 2, **wrap):
    torch.manual_seed(0)
    model = Net()
    optimizer = make(model.parameters())
    trainer = poptorch.trainingModel(model, optimizer=optimizer, **wrap)
    for x, t in batches(steps):
        trainer(x, t)
    return model, optimizer, trainer


def cpu_steps(reference, optimizer, data) -> None:
    """One PyTorch step on the CPU per (x, t) of `data`."""
    for x, t in data:
        optimizer.zero_grad()
        reference(x, t)[1].backward()
        optimizer.step()


def assert_same_parameters(model, reference) -> None:
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def adam(params):
    return poptorch.optim.Adam(params, lr=0.1)


NAMES = ["fc.weight", "fc.bias", "head.weight", "head.bias"]
CPU_STATE_MESSAGE = (
    "Only IPU optimizer states can be loaded onto the IPU. This state dictionary has no "
    "'ipu_state' or 'ipu_param': it was not saved by a poptorch.optim optimizer (a CPU "
    "torch.optim optimizer's state_dict(), for one, has a different structure); load the "
    "state_dict() of a poptorch.optim optimizer, or load this one into the torch.optim "
    "optimizer it came from")


def test_no_device_state_before_a_training_model_holds_it():
    model = Net()
    optimizer = adam(model.parameters())
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    state = optimizer.state_dict()
    assert list(state) == ["ipu_state", "ipu_param", "state", "param_groups"]
    assert state["ipu_state"] is None and state["ipu_param"] is None
    assert state["state"] == {} and state["param_groups"][0]["lr"] == 0.1
    trainer.compile(*batches(1)[0])
    assert optimizer.state_dict()["ipu_state"] is not None


def test_state_dict_holds_the_device_state_and_hyper_parameters():
    model, optimizer, trainer = train(lambda ps: poptorch.optim.Adam(ps, lr=0.1,
                                                                     loss_scaling=2.0))
    state = optimizer.state_dict()
    assert list(state["ipu_state"]) == [f"{n}.{k}" for n in NAMES
                                        for k in ("exp_avg", "exp_avg_sq", "step")]
    device = trainer._optimizer_state.arrays
    for name in NAMES:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            value = state["ipu_state"][f"{name}.{key}"]
            assert isinstance(value, torch.Tensor)
            torch.testing.assert_close(value, torch.from_numpy(device[(name, key)]),
                                       rtol=0, atol=0)
    # torch's part holds the same state, by parameter index
    for index, name in enumerate(NAMES):
        for key, value in state["state"][index].items():
            torch.testing.assert_close(value, state["ipu_state"][f"{name}.{key}"],
                                       rtol=0, atol=0)
    assert state["ipu_param"].keys() == {
        "loss_scaling", "max_grad_norm", "param_groups.0.lr", "param_groups.0.beta1",
        "param_groups.0.beta2", "param_groups.0.eps", "param_groups.0.weight_decay"}
    expected = {"loss_scaling": 2.0, "max_grad_norm": float("inf"),
                "param_groups.0.lr": 0.1, "param_groups.0.beta1": 0.9,
                "param_groups.0.beta2": 0.999, "param_groups.0.eps": 1e-8,
                "param_groups.0.weight_decay": 0.0}
    for key, value in expected.items():
        torch.testing.assert_close(state["ipu_param"][key], torch.tensor(value), rtol=0,
                                   atol=0)


def test_state_dict_equals_torch_adams_state():
    """The device's Adam state after two steps is the CPU's (numerical parity)."""
    model, optimizer, trainer = train(adam)
    torch.manual_seed(0)
    reference = Net()
    cpu = torch.optim.Adam(reference.parameters(), lr=0.1)
    cpu_steps(reference, cpu, batches(2))
    ipu_state = optimizer.state_dict()["ipu_state"]
    for name, p in reference.named_parameters():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(ipu_state[f"{name}.{key}"], cpu.state[p][key],
                                       rtol=1e-5, atol=1e-6)


OPTIMIZERS = {
    "sgd": lambda ps: poptorch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd_combined": lambda ps: poptorch.optim.SGD(ps, lr=0.1, momentum=0.9, loss_scaling=4.0,
                                                  velocity_scaling=2.0,
                                                  use_combined_accum=True),
    "adam": lambda ps: poptorch.optim.Adam(ps, lr=0.01),
    "adamw_uncorrected": lambda ps: poptorch.optim.AdamW(ps, lr=0.01, bias_correction=False),
    "rmsprop": lambda ps: poptorch.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    "lamb": lambda ps: poptorch.optim.LAMB(ps, lr=0.01),
}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_a_checkpoint_restores_training_exactly(tmp_path, kind):
    """Spec listing 4.18: save the optimizer's state with torch.save, load it into a new
    optimizer for a new trainingModel: it continues as the first model does."""
    make = OPTIMIZERS[kind]
    torch.manual_seed(0)
    data = batches(6)
    model = Net()
    optimizer = make(model.parameters())
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    for x, t in data[:3]:
        trainer(x, t)
    path = tmp_path / "checkpoint.pt"
    torch.save({"model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict()}, path)
    expected = [trainer(x, t)[1] for x, t in data[3:]]  # the first model continues

    checkpoint = torch.load(path)
    saved = checkpoint["optimizer_state_dict"]
    assert list(saved) == ["ipu_state", "ipu_param", "state", "param_groups"]
    resumed = Net()
    resumed.load_state_dict(checkpoint["model_state_dict"])
    new_optimizer = make(resumed.parameters())
    new_optimizer.load_state_dict(saved)
    assert new_optimizer.state_dict()["ipu_state"] is saved["ipu_state"]  # for the next model
    new_trainer = poptorch.trainingModel(resumed, optimizer=new_optimizer)
    got = [new_trainer(x, t)[1] for x, t in data[3:]]
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    for (name, p), q in zip(resumed.named_parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)
    mine, theirs = new_optimizer.state_dict(), optimizer.state_dict()
    for part in ("ipu_state", "ipu_param"):
        assert mine[part].keys() == theirs[part].keys()
        for key, value in theirs[part].items():
            torch.testing.assert_close(mine[part][key], value, rtol=0, atol=0, msg=key)


def test_destroy_leaves_the_state_with_the_optimizer():
    """Spec listing 4.18 destroys the first model and wraps the model again."""
    torch.manual_seed(0)
    data = batches(4)
    model = Net()
    reference = copy.deepcopy(model)
    optimizer = adam(model.parameters())
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    for x, t in data[:2]:
        trainer(x, t)
    state = optimizer.state_dict()
    trainer.destroy()
    kept = optimizer.state_dict()
    assert kept.keys() == state.keys()
    for key, value in state["ipu_state"].items():
        torch.testing.assert_close(kept["ipu_state"][key], value, rtol=0, atol=0)
    again = poptorch.trainingModel(model, optimizer=optimizer)
    for x, t in data[2:]:
        again(x, t)
    cpu = torch.optim.Adam(reference.parameters(), lr=0.1)
    cpu_steps(reference, cpu, data)
    assert_same_parameters(model, reference)


def test_the_device_loads_ipu_state_and_ipu_param():
    """As PopTorch's test_write_ipu_state: the loaded values are the device's, entries the
    state dict lacks keep theirs; "ipu_param" sets the hyper-parameters in force (lr 0.02)
    while torch's param groups keep theirs (0.1) until setOptimizer."""
    model, optimizer, trainer = train(adam)
    before = optimizer.state_dict()
    state = copy.deepcopy(before)
    torch.manual_seed(1)
    for key, value in state["ipu_state"].items():
        if not key.endswith(".step"):
            state["ipu_state"][key] = torch.rand_like(value)
    del state["ipu_state"]["head.bias.exp_avg_sq"]
    state["ipu_param"]["param_groups.0.lr"] = torch.tensor(0.02)
    del state["ipu_param"]["param_groups.0.eps"]
    optimizer.load_state_dict(state)
    after = optimizer.state_dict()
    for key, value in state["ipu_state"].items():
        torch.testing.assert_close(after["ipu_state"][key], value, rtol=0, atol=0)
    torch.testing.assert_close(after["ipu_state"]["head.bias.exp_avg_sq"],
                               before["ipu_state"]["head.bias.exp_avg_sq"], rtol=0, atol=0)
    assert float(after["ipu_param"]["param_groups.0.lr"]) == pytest.approx(0.02)
    assert float(after["ipu_param"]["param_groups.0.eps"]) == pytest.approx(1e-8)
    assert after["param_groups"][0]["lr"] == 0.1

    # the next step runs from that state with lr 0.02, as torch's Adam does
    reference = Net()
    reference.load_state_dict(model.state_dict())  # reading it syncs the device's weights
    cpu = torch.optim.Adam(reference.parameters(), lr=0.02)
    for name, p in reference.named_parameters():
        cpu.state[p] = {k: after["ipu_state"][f"{name}.{k}"].clone()
                        for k in ("exp_avg", "exp_avg_sq", "step")}
    x, t = batches(1)[0]
    trainer(x, t)
    cpu_steps(reference, cpu, [(x, t)])
    assert_same_parameters(model, reference)


def test_a_cpu_optimizers_state_is_refused():
    model, optimizer, trainer = train(adam)
    torch.manual_seed(0)
    cpu_model = Net()
    cpu = torch.optim.Adam(cpu_model.parameters(), lr=0.1)
    x, t = batches(1)[0]
    cpu_model(x, t)[1].backward()
    cpu.step()
    before = optimizer.state_dict()
    for target in (optimizer, adam(Net().parameters())):  # linked, and not
        with pytest.raises(Error) as err:
            target.load_state_dict(cpu.state_dict())
        assert str(err.value) == CPU_STATE_MESSAGE and err.value.type == "optimizer"
        with pytest.raises(Error, match=r"^Cannot load optimizer state dictionary because "
                                        r"it is empty\.$"):
            target.load_state_dict({})
    after = optimizer.state_dict()  # nothing changed
    for key, value in before["ipu_state"].items():
        torch.testing.assert_close(after["ipu_state"][key], value, rtol=0, atol=0)
    # torch.optim optimizers keep torch's format, with or without a training model
    torch_optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    trainer.setOptimizer(torch_optimizer)
    assert list(torch_optimizer.state_dict()) == ["state", "param_groups"]
    torch_optimizer.load_state_dict(cpu.state_dict())
    cpu.load_state_dict(torch_optimizer.state_dict())


class Other(torch.nn.Module):
    """Net's layout under other names."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(3, 4)
        self.second = torch.nn.Linear(4, 2)

    def forward(self, x, t):
        out = self.second(torch.tanh(self.first(x)))
        return out, torch.nn.functional.mse_loss(out, t)


OTHER_NAMES = ("^ipu_state: the loaded state has 'fc.weight.exp_avg', but parameter "
               r"fc.weight is not a parameter this model trains; load an optimizer state "
               r"saved from the same model \(and options\)$")
OTHER_SHAPE = (r"^ipu_state: 'head.weight.exp_avg' has shape \[2, 4\] in the loaded state, "
               r"but head.weight's exp_avg has shape \[3, 4\] in this model; load an "
               r"optimizer state saved from the same model$")


@pytest.mark.parametrize("other, out, message", [(Other, 2, OTHER_NAMES),
                                                 (lambda: Net(out=3), 3, OTHER_SHAPE)],
                         ids=["other_names", "other_shape"])
def test_the_state_of_another_model_names_the_parameter(other, out, message):
    _, optimizer, _ = train(adam)
    saved = optimizer.state_dict()
    x, t = batches(1, out=out)[0]
    # loaded into a trained model's optimizer: refused at once, nothing changes
    model = other()
    mine = adam(model.parameters())
    trainer = poptorch.trainingModel(model, optimizer=mine)
    trainer(x, t)
    before = mine.state_dict()
    with pytest.raises(Error, match=message):
        mine.load_state_dict(saved)
    assert mine.state_dict()["param_groups"] == before["param_groups"]
    # loaded before compiling: refused when the model compiles, which it then is not
    model = other()
    fresh = adam(model.parameters())
    fresh.load_state_dict(saved)
    trainer = poptorch.trainingModel(model, optimizer=fresh)
    with pytest.raises(Error, match=message):
        trainer(x, t)
    assert not trainer.isCompiled()


def test_a_torch_state_of_another_shape_names_the_parameter():
    """A torch.optim optimizer's torch state of another model: before, NumPy's "cannot
    reshape array" ValueError."""
    torch.manual_seed(0)
    small, big = Net(), Net(out=3)
    cpu = torch.optim.Adam(small.parameters(), lr=0.1)
    x, t = batches(1, out=3)[0]
    small(x, t[:, :2])[1].backward()
    cpu.step()
    optimizer = torch.optim.Adam(big.parameters(), lr=0.1)
    optimizer.load_state_dict(cpu.state_dict())
    trainer = poptorch.trainingModel(big, optimizer=optimizer)
    with pytest.raises(Error, match=r"^the optimizer's state of parameter head.weight "
                                    r"\(exp_avg\) has shape \[2, 4\], but the parameter's "
                                    r"has \[3, 4\]; load an optimizer state saved from the "
                                    r"same model$"):
        trainer(x, t)


def test_a_parameter_not_in_the_model_is_refused():
    torch.manual_seed(0)
    model = Net()
    extra = torch.nn.Parameter(torch.ones(5))
    optimizer = poptorch.optim.SGD(list(model.parameters()) + [extra], lr=0.1)
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    with pytest.raises(Error, match=r"^trainingModel: param group 0, parameter 4 of the "
                                    r"optimizer \(a tensor of shape \[5\]\) is not a "
                                    r"parameter of the model being trained; give the "
                                    r"optimizer only the model's parameters "
                                    r"\(model.parameters\(\)\)$") as err:
        trainer(*batches(1)[0])
    assert err.value.type == "optimizer" and not trainer.isCompiled()
    # frozen parameters of the model are the model's: fine
    model.fc.weight.requires_grad_(False)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.1)
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    trainer(*batches(1)[0])
    other = Net()
    with pytest.raises(Error, match=r"^setOptimizer: param group 1, parameter 0 of the "
                                    r"optimizer \(a tensor of shape \[4, 3\]\) is not a "
                                    r"parameter of the model being trained; give the "
                                    r"optimizer only the model's parameters "
                                    r"\(model.parameters\(\)\)$"):
        trainer.setOptimizer(poptorch.optim.SGD(
            [{"params": model.parameters()}, {"params": other.fc.parameters()}], lr=0.1))


def test_set_optimizer_with_another_kind_says_so():
    model, _, trainer = train(lambda ps: poptorch.optim.SGD(ps, lr=0.1))
    with pytest.raises(Error, match=r"^setOptimizer: the model was compiled with "
                                    r"poptorch.optim.SGD; cannot change to "
                                    r"poptorch.optim.Adam after compilation; wrap the model "
                                    r"again \(poptorch.trainingModel\) with the new "
                                    r"optimizer$") as err:
        trainer.setOptimizer(poptorch.optim.Adam(model.parameters()))
    assert err.value.type == "optimizer"
    model, _, trainer = train(lambda ps: torch.optim.Adam(ps, lr=0.1))
    with pytest.raises(Error, match=r"^setOptimizer: the model was compiled with "
                                    r"torch.optim.Adam; cannot change to "
                                    r"poptorch.optim.AdamW after compilation"):
        trainer.setOptimizer(poptorch.optim.AdamW(model.parameters(), lr=0.1))


def test_set_optimizer_between_torch_and_poptorch_sgd():
    """The program is SGD's either way: torch.optim.SGD and poptorch.optim.SGD (with the
    structure torch's has) replace each other; training goes on as torch's SGD."""
    torch.manual_seed(0)
    data = batches(3)
    model = Net()
    reference = copy.deepcopy(model)
    first = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = poptorch.trainingModel(model, optimizer=first)
    trainer(*data[0])
    second = poptorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    trainer.setOptimizer(second)
    trainer(*data[1])
    trainer.setOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    trainer(*data[2])
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for (x, t), lr in zip(data, (0.1, 0.05, 0.1), strict=True):
        cpu.param_groups[0]["lr"] = lr
        cpu.zero_grad()
        reference(x, t)[1].backward()
        cpu.step()
    assert_same_parameters(model, reference)
    # a structure the program does not have is still refused
    with pytest.raises(Error, match=r"^setOptimizer: use_combined_accum changed from False "
                                    r"to True; it decides the structure of the compiled "
                                    r"optimizer, so it cannot change after compilation$"):
        trainer.setOptimizer(poptorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                                use_combined_accum=True))


def test_set_optimizer_keeps_each_parameter_in_its_group():
    torch.manual_seed(0)
    model = Net()
    optimizer = poptorch.optim.SGD([{"params": model.fc.parameters()},
                                    {"params": model.head.parameters()}], lr=0.1)
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    trainer(*batches(1)[0])
    swapped = poptorch.optim.SGD([{"params": model.head.parameters()},
                                  {"params": model.fc.parameters()}], lr=0.1)
    with pytest.raises(Error, match=r"^setOptimizer: parameter fc.weight is in param group 1 "
                                    r"of the new optimizer, but the model was compiled with "
                                    r"it in param group 0; keep each parameter in its "
                                    r"group, or wrap the model again "
                                    r"\(poptorch.trainingModel\) with the new optimizer$"):
        trainer.setOptimizer(swapped)


def test_set_optimizer_with_a_loaded_optimizer_uses_its_state():
    """As PopTorch: a new optimizer given to setOptimizer brings the state it loaded; the
    previous one keeps the device's last state and no longer reads the device."""
    _, first, first_trainer = train(adam, steps=3)
    saved = first.state_dict()
    model, optimizer, trainer = train(adam, steps=1)
    held = optimizer.state_dict()
    loaded = adam(model.parameters())
    loaded.load_state_dict(saved)
    trainer.setOptimizer(loaded)
    now = loaded.state_dict()
    for key, value in saved["ipu_state"].items():
        torch.testing.assert_close(now["ipu_state"][key], value, rtol=0, atol=0)
    trainer(*batches(1)[0])
    kept = optimizer.state_dict()  # the host's now: what the device had when replaced
    for key, value in held["ipu_state"].items():
        torch.testing.assert_close(kept["ipu_state"][key], value, rtol=0, atol=0)
    assert not torch.equal(loaded.state_dict()["ipu_state"]["fc.weight.exp_avg"],
                           saved["ipu_state"]["fc.weight.exp_avg"])


def test_the_loss_scaling_in_force_is_the_devices():
    """Changing optimizer.loss_scaling without setOptimizer changes nothing (before, the
    loss was scaled by the new value and the gradients divided by the old one)."""
    torch.manual_seed(0)
    data = batches(2)
    model = Net()
    reference = copy.deepcopy(model)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.1, loss_scaling=2.0)
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    trainer(*data[0])
    optimizer.loss_scaling = 8.0
    trainer(*data[1])
    assert float(optimizer.state_dict()["ipu_param"]["loss_scaling"]) == 2.0
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1)
    cpu_steps(reference, cpu, data)
    assert_same_parameters(model, reference)


def test_a_loaded_constant_must_match_the_compiled_one():
    _, first, _ = train(lambda ps: poptorch.optim.Adam(ps, lr=0.1, loss_scaling=0.5))
    saved = first.state_dict()
    model = Net()
    optimizer = adam(model.parameters())  # loss_scaling: the constant 1
    optimizer.load_state_dict(saved)
    trainer = poptorch.trainingModel(model, optimizer=optimizer)
    with pytest.raises(Error, match=r"^ipu_param: 'loss_scaling' is 0.5 in the loaded state, "
                                    r"but loss_scaling is a constant of the compiled model, "
                                    r"1; mark it variable before compiling: "
                                    r"optimizer.variable_attrs.markAsVariable\('loss_scaling'"
                                    r"\)$"):
        trainer(*batches(1)[0])
    optimizer.variable_attrs.markAsVariable("loss_scaling")
    trainer(*batches(1)[0])
    assert float(optimizer.state_dict()["ipu_param"]["loss_scaling"]) == 0.5


def test_automatic_loss_scaling_state_round_trips():
    options = poptorch.Options()
    options.Training.setAutomaticLossScaling(True)
    _, optimizer, trainer = train(adam, steps=3, options=options)
    saved = optimizer.state_dict()
    assert float(saved["ipu_state"]["automatic_loss_scaling.scale"]) == 1.0
    assert int(saved["ipu_state"]["automatic_loss_scaling.good_steps"]) == 3
    model = Net()
    fresh = adam(model.parameters())
    fresh.load_state_dict(saved)
    options = poptorch.Options()
    options.Training.setAutomaticLossScaling(True)
    resumed = poptorch.trainingModel(model, options, fresh)
    resumed.compile(*batches(1)[0])
    assert resumed._optimizer_state.good_steps == 3
    # without automatic loss scaling, that state does not fit
    model = Net()
    plain = adam(model.parameters())
    plain.load_state_dict(saved)
    trainer = poptorch.trainingModel(model, optimizer=plain)
    with pytest.raises(Error, match="^ipu_state: the loaded state has "
                                    "'automatic_loss_scaling.scale', but parameter "
                                    "automatic_loss_scaling is not a parameter this model "
                                    "trains"):
        trainer(*batches(1)[0])


def test_a_deleted_training_model_leaves_a_clear_error():
    """Before: AttributeError ('NoneType' object has no attribute ...)."""
    model = Net()
    optimizer = adam(model.parameters())
    poptorch.trainingModel(model, optimizer=optimizer)(*batches(1)[0])  # not kept
    gc.collect()
    with pytest.raises(Error, match=r"^the training model that held this optimizer's state "
                                    r"on the device was deleted without destroy\(\), and "
                                    r"the state with it; keep the trainingModel, or call "
                                    r"its destroy\(\), which leaves the state with the "
                                    r"optimizer$"):
        optimizer.state_dict()
    assert optimizer.state_dict()["ipu_state"] is None  # the host's again
