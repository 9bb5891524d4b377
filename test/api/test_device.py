"""Devices of the simulated IPU-POD64 (useIpuId, occupancy, POPTORCH_WAIT_FOR_IPU),
ConnectionType, and what destroyed and detached models refuse (spec 11.1, 11.4, 4.11.4)."""

import gc
import threading
import time
import weakref

import pytest
import torch

import poptorch
from poptorch._executor import device, trainers
from poptorch.runtime.machine.system import DEVICE_COUNT, device_ipus, devices_of_size


class Add(torch.nn.Module):
    def forward(self, a, b):
        return a + b


ONES = (torch.ones(2), torch.ones(2))


def wrap(**options):
    """An inference model of Add with the options named (method=argument)."""
    opts = poptorch.Options()
    for name, value in options.items():
        getattr(opts, name)(value)
    return poptorch.inferenceModel(Add(), opts)


def message_of(call):
    with pytest.raises(poptorch.Error) as err:
        call()
    return err.value.message


# ---- device IDs -----------------------------------------------------------------------
@pytest.mark.parametrize("device_id, ipus", [
    (0, range(0, 1)), (63, range(63, 64)), (64, range(0, 2)), (95, range(62, 64)),
    (96, range(0, 4)), (111, range(60, 64)), (112, range(0, 8)), (119, range(56, 64)),
    (120, range(0, 16)), (123, range(48, 64)), (124, range(0, 32)), (125, range(32, 64)),
    (126, range(0, 64))])
def test_device_ids_as_gc_info_numbers_them(device_id, ipus):
    assert device_ipus(device_id) == ipus


def test_devices_of_each_size():
    assert DEVICE_COUNT == 127
    assert [devices_of_size(n) for n in (1, 2, 4, 8, 16, 32, 64, 3, 128)] == [
        range(0, 64), range(64, 96), range(96, 112), range(112, 120), range(120, 124),
        range(124, 126), range(126, 127), range(0), range(0)]
    assert message_of(lambda: device_ipus(127)) == (
        "no device 127: the simulated IPU-POD64 has devices 0 to 126")


def test_use_ipu_id_range():
    assert poptorch.Options().useIpuId(126).ipu_id == 126
    assert message_of(lambda: poptorch.Options().useIpuId(127)) == (
        "useIpuId: ipu_id must be a device ID of the simulated IPU-POD64, 0 to 126, got 127: "
        "0-63 are single IPUs, 64-95 devices of 2 IPUs, 96-111 of 4, 112-119 of 8, 120-123 "
        "of 16, 124-125 of 32 and 126 all 64 (as gc-info -l numbers them)")
    assert message_of(lambda: poptorch.Options().useIpuId(-1)) == (
        "useIpuId: ipu_id must be an int >= 0, got -1")


# ---- the device a model attaches to ------------------------------------------------
def test_replicas_and_pipelines_take_devices_of_their_size():
    replicated = wrap(replicationFactor=4, useIpuId=97)
    replicated(torch.ones(4, 2), torch.ones(4, 2))
    assert replicated._device.lease.device_id == 97 and replicated._device.lease.ipus == range(4, 8)

    class TwoStages(torch.nn.Module):
        def forward(self, a, b):
            with poptorch.Block(ipu_id=0):
                a = a + b
            with poptorch.Block(ipu_id=1):
                return a * 2

    opts = poptorch.Options().replicationFactor(2).deviceIterations(2)
    pipelined = poptorch.inferenceModel(TwoStages(), opts)
    pipelined(torch.ones(4, 2), torch.ones(4, 2))
    assert pipelined._device.lease.device_id in devices_of_size(4)
    assert pipelined._model_ipus() == 2


def test_a_device_of_the_wrong_size_is_refused():
    model = wrap(useIpuId=64)
    assert message_of(lambda: model(*ONES)) == (
        "useIpuId(64): device 64 (IPUs 0-1) has 2 IPUs, but the model needs 1 IPU (1 IPU x "
        "replicationFactor(1)); use a device ID with 1 IPU (0..63), or no useIpuId to take "
        "a free one")
    assert model.isCompiled() and not model.isAttachedToDevice()
    model = wrap(replicationFactor=4, useIpuId=3)
    assert message_of(lambda: model(torch.ones(4, 2), torch.ones(4, 2))).endswith(
        "but the model needs 4 IPUs (1 IPU x replicationFactor(4)); use a device ID with 4 "
        "IPUs (96..111), or no useIpuId to take a free one")


def test_no_device_has_the_ipus_needed():
    model = wrap(replicationFactor=3)
    assert message_of(lambda: model(torch.ones(3, 2), torch.ones(3, 2))) == (
        "the model needs 3 IPUs (1 IPU x replicationFactor(3)), but the devices of the "
        "simulated IPU-POD64 have 1, 2, 4, 8, 16, 32 or 64 IPUs; change the replication "
        "factor (or the IPUs the model is placed on) so that their product is one of these, "
        "at most 64")


def in_use(device_id, holder="inference"):
    text = device.describe(device_id)
    return (f"useIpuId({device_id}): {text} is in use by the {holder} model on {text}; detach "
            "or destroy that model (detachFromDevice() or destroy()), use another device of "
            "1 IPU (0..63), or set POPTORCH_WAIT_FOR_IPU=1 to wait until it is free")


@pytest.mark.parametrize("release", ["detachFromDevice", "destroy", "del"])
def test_ipus_in_use_until_released(release):
    first = wrap(useIpuId=20)
    first(*ONES)
    second = wrap(useIpuId=20)
    with pytest.raises(poptorch.Error) as err:
        second(*ONES)
    assert err.value.message == in_use(20) and err.value.type == "device"
    assert second.isCompiled() and not second.isAttachedToDevice()
    if release == "del":
        first.cycle = first  # only the garbage collector frees it
        del first
    else:
        getattr(first, release)()
    second(*ONES)
    assert second._device.lease.ipus == range(20, 21)


def test_the_holder_is_named():
    named = poptorch.inferenceModel(Add(), poptorch.Options().useIpuId(21).modelName("encoder"))
    named(*ONES)
    assert message_of(lambda: wrap(useIpuId=21)(*ONES)) == in_use(21, "encoder")
    named.destroy()
    trainer = poptorch.trainingModel(Regressor(), poptorch.Options().useIpuId(21))
    trainer(X, Y)
    assert message_of(lambda: wrap(useIpuId=21)(*ONES)) == in_use(21, "training")


def test_the_first_free_device_is_taken():
    everything = poptorch.inferenceModel(Add(), poptorch.Options().replicationFactor(64))
    everything(torch.ones(64, 2), torch.ones(64, 2))
    assert everything._device.lease.device_id == 126
    assert message_of(lambda: wrap()(*ONES)) == (
        "no device of 1 IPU is free (IDs 0..63): the model needs 1 IPU (1 IPU x "
        "replicationFactor(1)); detach or destroy another model (detachFromDevice() or "
        "destroy()), or set POPTORCH_WAIT_FOR_IPU=1 to wait until one is free")
    everything.detachFromDevice()
    first, second = wrap(), wrap()
    first(*ONES)
    second(*ONES)
    assert first._device.lease.device_id != second._device.lease.device_id


class SpyLogger:
    """The poptorch logger, and an event set when a wait is logged."""

    def __init__(self, logger):
        self.logger, self.waiting = logger, threading.Event()

    def info(self, *args):
        self.logger.info(*args)
        self.waiting.set()


@pytest.mark.parametrize("holding, waiting, log", [
    ({"useIpuId": 30}, {"useIpuId": 30}, "device 30 (IPU 30) to be released"),
    ({"replicationFactor": 64}, {}, "a device of 1 IPU to be free")])
def test_wait_for_ipu(monkeypatch, capsys, holding, waiting, log):
    holder = wrap(**holding)
    rows = holding.get("replicationFactor", 1) * 2
    holder(torch.ones(rows, 2), torch.ones(rows, 2))
    monkeypatch.setenv("POPTORCH_WAIT_FOR_IPU", "1")
    spy = SpyLogger(device.logger)
    monkeypatch.setattr(device, "logger", spy)
    waiter = wrap(**waiting)
    released = threading.Event()

    def release_soon():
        spy.waiting.wait(timeout=120)  # the waiter waits (or is about to: under the lock)
        time.sleep(0.05)
        holder.detachFromDevice()
        released.set()

    thread = threading.Thread(target=release_soon)
    thread.start()
    assert torch.equal(waiter(*ONES), torch.full((2,), 2.0))
    thread.join()
    assert released.is_set() and waiter.isAttachedToDevice()
    out = capsys.readouterr().out
    assert out.count(f"waiting for {log} (POPTORCH_WAIT_FOR_IPU=1)") == 1


def test_wait_for_ipu_is_read_strictly(monkeypatch):
    holder = wrap(useIpuId=31)
    holder(*ONES)
    monkeypatch.setenv("POPTORCH_WAIT_FOR_IPU", "yes")
    assert message_of(lambda: wrap(useIpuId=31)(*ONES)) == (
        "environment variable POPTORCH_WAIT_FOR_IPU must be 0 or 1, got 'yes'")


# ---- ConnectionType -------------------------------------------------------------------
def test_connection_always_attaches_at_compile():
    model = wrap(useIpuId=40)
    model.compile(*ONES)
    assert model.isAttachedToDevice() and model._device.lease.device_id == 40


def test_connection_on_demand_attaches_at_the_first_run():
    model = wrap(connectionType=poptorch.ConnectionType.OnDemand, useIpuId=41)
    model.compile(*ONES)
    assert not model.isAttachedToDevice() and model._device.lease is None
    assert torch.equal(model(*ONES), torch.full((2,), 2.0))
    assert model.isAttachedToDevice() and model._device.lease.device_id == 41


NEVER = ("the options say never to attach to an IPU: connectionType(poptorch.ConnectionType."
         "Never){}; the model compiles but cannot run here: export it with compileAndExport() "
         "and load the file where it will run, or use connectionType(poptorch.ConnectionType."
         "Always) or OnDemand")


@pytest.mark.parametrize("option, how", [
    ("connectionType", ""), ("useOfflineIpuTarget", " (useOfflineIpuTarget(2) sets it)")])
def test_connection_never_compiles_but_does_not_run(option, how):
    opts = (poptorch.Options().connectionType(poptorch.ConnectionType.Never)
            if option == "connectionType" else poptorch.Options().useOfflineIpuTarget(2))
    model = poptorch.inferenceModel(Add(), opts)
    model.compile(*ONES)
    assert model.isCompiled() and not model.isAttachedToDevice()
    assert model.getMemoryEstimate().ipus[0].total > 0  # the compiled model's figures
    for call in (lambda: model(*ONES), model.attachToDevice):
        with pytest.raises(poptorch.Error) as err:
            call()
        assert err.value.message == NEVER.format(how) and err.value.type == "device"


def test_an_offline_target_of_another_ipu_does_not_run_here():
    opts = poptorch.Options().useOfflineIpuTarget(1).connectionType(
        poptorch.ConnectionType.Always)
    model = poptorch.inferenceModel(Add(), opts)
    assert message_of(lambda: model(*ONES)) == (
        "the model was compiled for an offline Mk1 target (useOfflineIpuTarget(1)), but the "
        "simulated IPU-POD64 has Mk2 GC200 IPUs; compile it with useOfflineIpuTarget(2) or "
        "without an offline target to run it")


# ---- destroy and detach ---------------------------------------------------------------
class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x, y):
        out = self.fc(x)
        return out, torch.nn.functional.mse_loss(out, y)


X, Y = torch.ones(2, 3), torch.ones(2, 2)


def trained(optimizer_type, ipu_id, **kwargs):
    torch.manual_seed(0)
    model = Regressor()
    optimizer = optimizer_type(model.parameters(), lr=0.1, **kwargs)
    trainer = poptorch.trainingModel(model, poptorch.Options().useIpuId(ipu_id), optimizer)
    trainer(X, Y)
    return model, optimizer, trainer


def same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("optimizer_type, kwargs", [
    (torch.optim.SGD, {"momentum": 0.9}), (poptorch.optim.Adam, {})])
def test_destroy_releases_everything(optimizer_type, kwargs):
    model, optimizer, trainer = trained(optimizer_type, 50, **kwargs)
    state = optimizer.state_dict()  # the device's
    weight = trainer._device_weights.arrays["fc.weight"].copy()
    compiled = weakref.ref(trainer._compiled)
    trainer.destroy()
    gc.collect()
    assert compiled() is None  # the program, its MLIR module and context
    assert not trainer.isCompiled() and not trainer.isAttachedToDevice()
    assert trainer._device_weights.arrays == {} and trainer._device.lease is None
    assert trainer._random is None
    assert trainer._figures.last_run is None and trainer._figures.report is None
    assert trainer._programs is None and trainer._optimizer_state is None
    assert not trainers.is_registered(model)
    assert getattr(optimizer, "_ipu_link", None) is None and "state_dict" not in vars(optimizer)
    assert same(optimizer.state_dict(), state)  # the device's state is the host's now
    assert torch.equal(model.fc.weight.detach(), torch.from_numpy(weight))  # and the weights
    wrap(useIpuId=50)(*ONES)  # the IPUs are free
    trainer.destroy()  # again: nothing to do


@pytest.fixture(scope="module")
def destroyed():
    _, _, trainer = trained(torch.optim.SGD, 52)
    trainer.destroy()
    return trainer


USES = {
    "call": lambda m: m(X, Y),
    "compile": lambda m: m.compile(X, Y),
    "copyWeightsToHost": lambda m: m.copyWeightsToHost(),
    "copyWeightsToHostIfNeeded": lambda m: m.copyWeightsToHostIfNeeded(),
    "copyWeightsToDevice": lambda m: m.copyWeightsToDevice(),
    "attachToDevice": lambda m: m.attachToDevice(),
    "detachFromDevice": lambda m: m.detachFromDevice(),
    "cycleCount": lambda m: m.cycleCount(),
    "getLatency": lambda m: m.getLatency(),
    "getComputeLatency": lambda m: m.getComputeLatency(),
    "getHostIpuLatency": lambda m: m.getHostIpuLatency(),
    "getIpuHostLatency": lambda m: m.getIpuHostLatency(),
    "getPerfCounters": lambda m: m.getPerfCounters(),
    "getTimeline": lambda m: m.getTimeline(),
    "getMemoryEstimate": lambda m: m.getMemoryEstimate(),
    "getTensorNames": lambda m: m.getTensorNames(),
    "load_state_dict": lambda m: m.load_state_dict(m.model.state_dict()),
    "setOptimizer": lambda m: m.setOptimizer(torch.optim.SGD(m.model.parameters(), lr=0.1)),
}


@pytest.mark.parametrize("use", USES)
def test_a_destroyed_model_refuses_every_use(destroyed, use):
    with pytest.raises(poptorch.Error) as err:
        USES[use](destroyed)
    # "Model has ... been destroyed": PopTorch's words, which users search for
    assert err.value.message == ("Model has been destroyed (destroy()): wrap the model "
                                 "again to use it")
    assert err.value.type == "executor"


def test_a_detached_model():
    host = torch.nn.Linear(2, 2)
    model = poptorch.inferenceModel(host, poptorch.Options().useIpuId(51))
    x = torch.ones(1, 2)
    assert message_of(model.attachToDevice) == "cannot attach a model that is not compiled"
    model(x)
    assert message_of(model.attachToDevice) == "the model is already attached to a device"
    model.detachFromDevice()
    assert model._device.lease is None
    assert message_of(model.detachFromDevice) == "the model is not attached to a device"
    assert message_of(model.copyWeightsToDevice) == (
        "copyWeightsToDevice: the model is not attached to a device; call attachToDevice() "
        "first (attaching uploads the host's weights)")
    with torch.no_grad():
        host.weight.fill_(1.0)
    model.copyWeightsToHost()  # nothing to copy: detaching did, host changes are kept
    assert torch.equal(host.weight.detach(), torch.ones(2, 2))
    model.load_state_dict({"weight": torch.full((2, 2), 2.0), "bias": torch.zeros(2)})
    assert torch.equal(model(x), torch.full((1, 2), 4.0))  # the call attached and uploaded
    assert model.isAttachedToDevice() and model._device.lease.device_id == 51
    model.destroy()
    assert model.weight is host.weight  # the wrapped model's attributes can still be read


def test_a_detached_trainer_keeps_its_optimizer_state():
    model, optimizer, trainer = trained(torch.optim.SGD, 53, momentum=0.9)
    state = optimizer.state_dict()
    weight = trainer._device_weights.arrays["fc.weight"].copy()
    trainer.detachFromDevice()  # copies the trained weights to the host
    assert torch.equal(model.fc.weight.detach(), torch.from_numpy(weight))
    trainer.attachToDevice()
    assert same(optimizer.state_dict(), state)
    assert (trainer._device_weights.arrays["fc.weight"] == weight).all()
