"""Fault injection (poptorch.runtime.machine.faults) and what a failed call leaves behind
(spec 4.3): nothing is lost after a RecoverableError, detach + attach + rerun; an UnrecoverableError
stops the model but its last weights can still be read."""

import copy

import numpy as np
import pytest
import torch

import poptorch
from poptorch.runtime.machine import faults


@pytest.fixture(autouse=True)
def disarmed(monkeypatch):
    monkeypatch.delenv(faults.VARIABLE, raising=False)
    faults.clear()
    yield
    faults.clear()


class Net(torch.nn.Module):
    """Batch-norm buffers, dropout (the device RNG) and weights all change each step."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.drop = torch.nn.Dropout(0.2)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x, y):
        out = self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))
        return out, torch.nn.functional.mse_loss(out, y)


def assert_same(a, b):
    """Nested dicts / lists of tensors and values, exactly equal."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert a == b


def train(optimizer_type, kwargs, fault=None, scaling=False):
    """Three calls of 2 device iterations x gradient accumulation 2 (4 program steps);
    `fault` (kind, step) fails the second call, which is rerun after detach + attach."""
    torch.manual_seed(0)
    model = Net()
    optimizer = optimizer_type(model.parameters(), **kwargs)
    opts = poptorch.Options().deviceIterations(2).randomSeed(7)
    opts.Training.gradientAccumulation(2).setAutomaticLossScaling(scaling)
    trainer = poptorch.trainingModel(model, opts, optimizer)
    data = [(torch.randn(8, 6), torch.randn(8, 2)) for _ in range(3)]
    outputs = []
    for call, (x, y) in enumerate(data):
        if fault is not None and call == 1:
            with faults.inject(fault[0], step=fault[1]):
                with pytest.raises(poptorch.RecoverableError) as err:
                    trainer(x, y)
            assert err.value.recovery_action == fault[0]
            trainer.detachFromDevice()
            trainer.attachToDevice()
        outputs.append(trainer(x, y))
    return model.state_dict(), optimizer.state_dict(), outputs


@pytest.mark.parametrize("optimizer_type, kwargs, scaling", [
    (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9}, False),
    (poptorch.optim.Adam, {"lr": 0.01, "loss_scaling": 8.0}, True),
])
def test_training_recovers_with_nothing_lost(optimizer_type, kwargs, scaling):
    """Acceptance: a RecoverableError in the middle of a call (after the first device
    iteration's weight update), detach, attach, rerun: weights, buffers, optimizer state
    and outputs exactly those of an uninterrupted run."""
    weights, state, outputs = train(optimizer_type, kwargs, scaling=scaling)
    recovered = train(optimizer_type, kwargs, ("LINK_RESET", 3), scaling)
    assert_same(recovered[0], weights)
    assert_same(recovered[1], state)
    assert_same(recovered[2], outputs)
    assert state["state"]  # the optimizer really has state to lose


def test_without_the_restore_the_rerun_differs(monkeypatch):
    """The acceptance test can fail: if a failed call kept its partial updates, the rerun
    would give other weights."""
    weights, _, _ = train(torch.optim.SGD, {"lr": 0.05, "momentum": 0.9})
    monkeypatch.setattr(poptorch._executor.executor.PoplarExecutor, "_restore",
                        lambda self, saved: None)
    broken, _, _ = train(torch.optim.SGD, {"lr": 0.05, "momentum": 0.9}, ("IPU_RESET", 3))
    assert not torch.equal(broken["fc1.weight"], weights["fc1.weight"])


class Accumulate(torch.nn.Module):
    """Inference with a buffer that persists between calls (spec 4.8)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x):
        self.total += x.sum(0)
        return self.total * 2


def test_inference_buffers_recover():
    x = torch.arange(12.0).reshape(4, 3)
    reference = Accumulate()
    runner = poptorch.inferenceModel(reference, poptorch.Options().deviceIterations(4))
    expected = [runner(x), runner(x)]
    model = Accumulate()
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(4))
    with faults.inject("PARTITION_RESET", step=2):
        with pytest.raises(poptorch.RecoverableError):
            ipu(x)
    ipu.detachFromDevice()
    assert torch.equal(model.total, torch.zeros(3))  # the failed call's partial sums are gone
    ipu.attachToDevice()
    assert_same([ipu(x), ipu(x)], expected)
    ipu.copyWeightsToHost()
    runner.copyWeightsToHost()
    assert torch.equal(model.total, reference.total)


def test_calls_replace_device_arrays():
    """What the snapshot of a call relies on: a call replaces the device's arrays (weights,
    buffers, optimizer state) and never writes into them."""
    torch.manual_seed(0)
    model = Net()
    opts = poptorch.Options().deviceIterations(2)
    opts.Training.gradientAccumulation(2)
    trainer = poptorch.trainingModel(model, opts, poptorch.optim.Adam(model.parameters()))
    x, y = torch.randn(8, 6), torch.randn(8, 2)
    trainer(x, y)
    device, state = dict(trainer._device_weights.arrays), dict(trainer._optimizer_state.arrays)
    copies = copy.deepcopy((device, state))
    trainer(x, y)
    for before, after in zip((device, state), copies, strict=True):
        for key, value in before.items():
            np.testing.assert_array_equal(value, after[key])
    assert not all(trainer._device_weights.arrays[k] is v for k, v in device.items())


class Add(torch.nn.Module):
    """Spec listing 4.6's model."""

    def forward(self, a, b):
        return a + b


def listing_4_6(inference_model):
    """Spec listing 4.6's handler, returning the branch taken and the exception. (The
    listing spells one action "PARITION_RESET"; the recovery action is PARTITION_RESET.)"""
    try:
        t1 = torch.tensor([1.])
        t2 = torch.tensor([2.])
        assert inference_model(t1, t2) == 3.0
    except poptorch.RecoverableError as e:
        if e.recovery_action == "FULL_RESET":
            return "reboot_server", e
        elif e.recovery_action == "IPU_RESET":
            return "reset the IPU", e
        elif e.recovery_action == "PARTITION_RESET":
            return "reset the partition", e
        return "recoverable", e
    except poptorch.UnrecoverableError as e:
        return "shutdown_system", e
    except poptorch.Error as e:
        return "error", e
    return "ran", None


def where(kind, ipu):
    return (f"IPU {ipu} failed at program step 0 of this call of the inference model (call 1 "
            f"on this IPU since the fault was armed): an injected {kind} fault")


@pytest.mark.parametrize("kind, branch", [
    ("FULL_RESET", "reboot_server"), ("IPU_RESET", "reset the IPU"),
    ("PARTITION_RESET", "reset the partition"), ("LINK_RESET", "recoverable")])
def test_listing_4_6_recoverable(kind, branch):
    model = poptorch.inferenceModel(Add(), poptorch.Options().useIpuId(5))
    with faults.inject(kind, ipu=5):
        taken, e = listing_4_6(model)
    assert taken == branch and type(e) is poptorch.RecoverableError
    assert e.recovery_action == kind and e.type == "fault_injection" and e.location == "IPU 5"
    assert e.message == (
        f"{where(kind, 5)} (poptorch.runtime.machine.faults); the call did not complete and the "
        "device state is as it was before it: detach and reattach the model "
        "(detachFromDevice(); attachToDevice()), then run the call again")
    assert str(e) == f"IPU 5: {e.message}"
    taken, again = listing_4_6(model)  # still attached, not recovered
    assert taken == "error" and again.type == "executor" and again.message == (
        f"this model's last call failed ({kind} on IPU 5) and it cannot run until it is "
        "recovered: detach and reattach it (detachFromDevice(); attachToDevice()), then run "
        "the call again")
    model.detachFromDevice()
    model.attachToDevice()
    assert listing_4_6(model) == ("ran", None)


def test_listing_4_6_unrecoverable():
    model = poptorch.inferenceModel(Add(), poptorch.Options().useIpuId(6))
    faults.arm("UNRECOVERABLE", ipu=6)
    taken, e = listing_4_6(model)
    assert taken == "shutdown_system" and type(e) is poptorch.UnrecoverableError
    assert (e.type, e.location) == ("fault_injection", "IPU 6")
    assert e.message == (
        f"{where('unrecoverable', 6)} (poptorch.runtime.machine.faults); take the machine out of "
        "operation for analysis and repair; the weights of the last completed call can "
        "still be copied to the host (copyWeightsToHost())")
    assert faults.armed() is None  # spent
    refused = ("this model's IPU 6 failed with an unrecoverable error, so it cannot {} again: "
               "take the machine out of operation; copyWeightsToHost() still gives the "
               "weights of the last completed call, and destroy() releases the model")
    taken, again = listing_4_6(model)
    assert taken == "error" and again.message == refused.format("run")
    model.copyWeightsToHost()
    model.detachFromDevice()
    with pytest.raises(poptorch.Error) as err:
        model.attachToDevice()
    assert err.value.message == refused.format("attach")


def test_unrecoverable_keeps_the_last_completed_weights():
    torch.manual_seed(0)
    model = Net()
    opts = poptorch.Options().deviceIterations(2)
    trainer = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    x, y = torch.randn(4, 6), torch.randn(4, 2)
    trainer(x, y)
    trainer.copyWeightsToHost()
    after_one = copy.deepcopy(model.state_dict())
    with faults.inject("UNRECOVERABLE", step=1):
        with pytest.raises(poptorch.UnrecoverableError):
            trainer(x, y)
    trainer.copyWeightsToHost()
    assert_same(model.state_dict(), after_one)


def test_faults_count_calls_on_their_ipu():
    ipu = poptorch.inferenceModel(Add(), poptorch.Options().useIpuId(9))
    ones = (torch.ones(1), torch.ones(1))
    with faults.inject("IPU_RESET", call=2, ipu=10):  # another IPU: never fires here
        ipu(*ones)
        ipu(*ones)
        assert faults.armed() == faults.Fault("IPU_RESET", 2, 0, 10)
    with faults.inject("IPU_RESET", call=2, ipu=9):
        ipu(*ones)
        with pytest.raises(poptorch.RecoverableError) as err:
            ipu(*ones)
    assert "(call 2 on this IPU since the fault was armed)" in err.value.message


def test_fault_beyond_the_steps_of_a_call():
    ipu = poptorch.inferenceModel(Add(), poptorch.Options().deviceIterations(2))
    faults.arm("FULL_RESET", step=2)
    with pytest.raises(poptorch.Error) as err:
        ipu(torch.ones(2), torch.ones(2))
    assert err.value.message == (
        "the injected FULL_RESET fault is armed for program step 2, but this call of the "
        "inference model has 2 program steps (0 to 1); it was disarmed: arm it for an "
        "earlier step")
    assert faults.armed() is None
    assert torch.equal(ipu(torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))


@pytest.mark.parametrize("args, message", [
    (("IPU_REST",), "unknown fault kind 'IPU_REST'; use one of IPU_RESET, LINK_RESET, "
     "PARTITION_RESET, FULL_RESET, UNRECOVERABLE"),
    (("IPU_RESET", 0), "fault call must be an int >= 1, got 0"),
    (("IPU_RESET", 1, -1), "fault step must be an int >= 0, got -1"),
    (("IPU_RESET", 1, True), "fault step must be an int >= 0, got True"),
    (("IPU_RESET", 1, 0, 64), "fault ipu must be an IPU of the simulated IPU-POD64, 0 to 63, "
     "got 64"),
])
def test_arm_refuses_bad_faults(args, message):
    with pytest.raises(poptorch.Error) as err:
        faults.arm(*args)
    assert err.value.message == message and err.value.type == "fault_injection"


def test_environment_variable_injects_a_fault(monkeypatch):
    ipu = poptorch.inferenceModel(Add(), poptorch.Options().deviceIterations(2).useIpuId(11))
    twos = (torch.ones(2), torch.ones(2))
    monkeypatch.setenv(faults.VARIABLE, "IPU_RESET:call=2,step=1")
    ipu(*twos)
    with pytest.raises(poptorch.RecoverableError) as err:
        ipu(*twos)
    assert err.value.message.startswith("IPU 11 failed at program step 1 of this call")
    ipu.detachFromDevice()
    ipu(*twos)  # spent; an unchanged variable does not arm it again
    monkeypatch.setenv(faults.VARIABLE, "UNRECOVERABLE:ipu=0")
    assert faults.armed() is None  # read when a call starts
    monkeypatch.delenv(faults.VARIABLE)
    ipu(*twos)  # the variable's fault is gone with the variable


FORMAT = ("expected KIND[:call=N,step=N,ipu=N] with KIND one of IPU_RESET, LINK_RESET, "
          "PARTITION_RESET, FULL_RESET, UNRECOVERABLE, for example "
          "POPTORCH_FAULT_INJECTION=IPU_RESET:call=2,step=1")


@pytest.mark.parametrize("value, problem", [
    ("ipu_reset", "unknown fault kind 'ipu_reset'"),
    ("IPU_RESET:", "'' is not call=N, step=N or ipu=N"),
    ("IPU_RESET:call", "'call' is not call=N, step=N or ipu=N"),
    ("IPU_RESET:cal=2", "'cal=2' is not call=N, step=N or ipu=N"),
    ("IPU_RESET:call=2,call=3", "call is given twice"),
    ("IPU_RESET:step=-1", "step must be a whole number, got '-1'"),
    ("IPU_RESET:step=1.5", "step must be a whole number, got '1.5'"),
    ("IPU_RESET:ipu=\u00b2", "ipu must be a whole number, got '\u00b2'"),
    ("IPU_RESET:call=0", "fault call must be an int >= 1, got 0"),
    ("IPU_RESET:ipu=64", "fault ipu must be an IPU of the simulated IPU-POD64, 0 to 63, got 64"),
])
def test_environment_variable_is_parsed_strictly(monkeypatch, value, problem):
    ipu = poptorch.inferenceModel(Add())
    monkeypatch.setenv(faults.VARIABLE, value)
    for _ in range(2):  # refused at every call until it is fixed
        with pytest.raises(poptorch.Error) as err:
            ipu(torch.ones(1), torch.ones(1))
        assert err.value.message == f"POPTORCH_FAULT_INJECTION={value!r}: {problem}; {FORMAT}"
        assert err.value.type == "fault_injection"
    monkeypatch.setenv(faults.VARIABLE, "")
    assert ipu(torch.ones(1), torch.ones(1)).item() == 2.0
