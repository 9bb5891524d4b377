"""poptorch.CPU (spec 11): host callbacks inside a compiled inference model, after
PopTorch's tests/cpu_op_test.py; with device iterations and replicas; the machine
model's charge; a saved executable loaded in a new process; errors.
"""

import math
import subprocess
import sys

import pytest
import torch
from numerics import assert_close, check
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.machine.cost import op_cost
from poptorch.runtime.machine.cost_user import HOST_CALL_LATENCY
from poptorch.runtime.machine.system import GC200
from poptorch.runtime.user_code import HOST_CALLBACKS


@pytest.fixture(autouse=True)
def forget_callbacks():
    yield
    HOST_CALLBACKS.clear()


class SpecExample(torch.nn.Module):  # the API reference's example
    def __init__(self):
        super().__init__()
        self.cpu = poptorch.CPU(self.myCpuOp, "MyCPUOp")
        self.calls = []

    def myCpuOp(self, x):  # noqa: N802 - the spec's name
        assert x.device.type == "cpu"
        self.calls.append(x.clone())
        return x * 2.0

    def forward(self, x):
        out = self.cpu(x)
        out = self.cpu(out)
        out = self.cpu(out)
        return out


def test_spec_example_calls_the_host_in_order():
    model = SpecExample()
    x = torch.randn(5, 2, 3)
    out = poptorch.inferenceModel(model)(x)
    assert_close(out, x * 8.0)
    # one call at capture on zeros per use (to learn the shapes, as PopTorch), then the run
    runs = model.calls[3:]
    assert len(runs) == 3
    for k, seen in enumerate(runs):
        assert_close(seen, x * 2.0 ** k)


def test_several_inputs_outputs_and_a_module_on_the_host():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.matmul = [torch.nn.Linear(4, 3)]
            self.cpu = poptorch.CPU(lambda x, y: (x * y, x + y), "Pair")
            self.linear = poptorch.CPU(self.matmul[0], "MatMulOnCPU")

        def forward(self, x, y):
            w, z = self.cpu(x, y)
            return self.linear(w * 3.0), z

    check(Model(), torch.randn(6, 4), torch.tensor([2.0]))


def test_device_iterations_and_replicas_call_once_each_with_their_data():
    seen = []

    def record(x):
        seen.append(x.clone())
        return x.sum(dim=1, keepdim=True)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cpu = poptorch.CPU(record, "Record")

        def forward(self, x):
            return self.cpu(x) + 1

    options = poptorch.Options().deviceIterations(3).replicationFactor(2)
    x = torch.arange(24.0).reshape(12, 2)
    out = poptorch.inferenceModel(Model(), options)(x)
    assert_close(out, x.sum(dim=1, keepdim=True) + 1)
    runs = seen[1:]  # after the call at capture
    # 3 iterations x 2 replicas, each a micro-batch of 2 rows, in the order of the batch
    assert [tuple(r.shape) for r in runs] == [(2, 2)] * 6
    assert_close(torch.cat(runs), x)


def test_training_is_an_error():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.cpu = poptorch.CPU(lambda x: x * 2, "Doubler")

        def forward(self, x):
            y = self.cpu(self.fc(x))
            return y, poptorch.identity_loss(y.sum(), "none")

    with pytest.raises(poptorch.Error) as err:
        poptorch.trainingModel(Model())(torch.randn(3, 2))
    assert err.value.message == ("poptorch.CPU op 'Doubler': CPU ops are only supported in "
                                 "inference graphs (spec 11, poptorch.CPU); use it in a "
                                 "model wrapped with poptorch.inferenceModel")
    assert err.value.location.endswith("test_host_call.py:107")


def test_results_of_other_shapes_are_an_error():
    calls = []

    def changing(x):
        calls.append(1)
        return x if len(calls) == 1 else x[:1]

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cpu = poptorch.CPU(changing, "Changing")

        def forward(self, x):
            return self.cpu(x)

    with pytest.raises(poptorch.Error) as err:
        poptorch.inferenceModel(Model())(torch.randn(3))
    assert err.value.message == ("the host callback 'Changing' returned output 0 of shape "
                                 "[1] and dtype float32; expected shape [3] and dtype float32")


def test_bad_arguments_are_an_error():
    with pytest.raises(poptorch.Error, match="poptorch.CPU: layer_to_call must be callable"):
        poptorch.CPU(3, "A")
    with pytest.raises(poptorch.Error, match="poptorch.CPU: ID must be a non-empty string"):
        poptorch.CPU(abs, "")


MODEL = """
import torch, poptorch

class Doubling(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cpu = poptorch.CPU(self.double, "Double")

    def double(self, x):
        return x * 2.0

    def forward(self, x):
        return self.cpu(x) + 1
"""

LOADED = """
import sys, torch, poptorch
from poptorch.runtime.user_code import HOST_CALLBACKS
sys.path.insert(0, sys.argv[2])
import cpu_model
x = torch.ones(2, 3)
model = poptorch.inferenceModel(cpu_model.Doubling())  # registers its CPU layer
model.loadExecutable(sys.argv[1])
print("OUT", model(x).sum().item())
HOST_CALLBACKS.clear()
try:
    model(x)
except poptorch.Error as err:
    print("ERROR", err.message)
poptorch.CPU(lambda t: t * 10.0, "Double")  # what the program calls is what is registered
print("OUT", model(x).sum().item())
"""


def test_a_loaded_executable_calls_the_callbacks_registered_in_its_process(tmp_path):
    (tmp_path / "cpu_model.py").write_text(MODEL)
    sys.path.insert(0, str(tmp_path))
    try:
        import cpu_model  # noqa: PLC0415 - written by this test
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("cpu_model", None)
    path = str(tmp_path / "model.poptorch")
    model = poptorch.inferenceModel(cpu_model.Doubling())
    model.compileAndExport(path, torch.ones(2, 3), export_model=False)
    HOST_CALLBACKS.clear()
    run = subprocess.run([sys.executable, "-c", LOADED, path, str(tmp_path)],
                         capture_output=True, text=True, check=True, timeout=300)
    lines = [line for line in run.stdout.splitlines() if line.startswith(("ERROR", "OUT"))]
    assert lines == [
        "OUT 18.0",
        "ERROR the program calls the host callback 'Double', which is not registered in "
        "this process (a loaded executable holds no Python code): create "
        "poptorch.CPU(<the function>, 'Double') before running it",
        "OUT 66.0"]


def test_the_machine_model_charges_transfers_and_the_host_turnaround():
    context = make_context()
    with context:
        module = ir.Module.parse(f"""
func.func @f(%x: tensor<1024xf32>) -> tensor<256xf32> {{
  %0 = "ipu.host_call"(%x) {{callback = "MyCPUOp",
      operandSegmentSizes = array<i32: 1{", 0" * 23}>,
      resultSegmentSizes = array<i32: 1{", 0" * 23}>}} : (tensor<1024xf32>) -> tensor<256xf32>
  return %0 : tensor<256xf32>
}}""")
        cost = op_cost(module.body.operations[0].regions[0].blocks[0].operations[0])
    m = GC200
    latency = math.ceil(m.hostLinkLatency * m.tileClockFrequency)  # 1.2 us: 1596 cycles
    transfers = [latency + math.ceil(n * m.tileClockFrequency / m.hostLinkBandwidth)
                 for n in (4096, 1024)]  # the operand to the host, the result back
    expected = sum(transfers) + math.ceil(HOST_CALL_LATENCY * m.tileClockFrequency)
    assert (cost.compute, cost.exchange, cost.sync) == (0, expected, 0)


def test_the_timeline_charges_the_host_call():
    class Model(torch.nn.Module):
        def __init__(self, host):
            super().__init__()
            self.host = host
            self.cpu = poptorch.CPU(lambda t: t * 2, "Doubler")

        def forward(self, x):
            return (self.cpu(x) if self.host else x) + 1

    x = torch.randn(4, 256)
    cycles = []
    for host in (True, False):
        model = poptorch.inferenceModel(Model(host))
        model(x)
        cycles.append(model.cycleCount())
    m = GC200
    latency = math.ceil(m.hostLinkLatency * m.tileClockFrequency)
    # 4 KiB to the host and back, and the host's turnaround
    host_call = 2 * (latency + math.ceil(4096 * m.tileClockFrequency / m.hostLinkBandwidth)) \
        + math.ceil(HOST_CALL_LATENCY * m.tileClockFrequency)
    assert cycles[0] - cycles[1] == host_call


def test_pipelined_over_two_ipus():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.cpu = poptorch.CPU(torch.nn.functional.softplus, "Softplus")

        def forward(self, x):
            with poptorch.Block(ipu_id=0):
                x = self.fc(x)
            with poptorch.Block(ipu_id=1):
                x = self.cpu(x) * 2
            return x

    options = poptorch.Options().deviceIterations(2)
    options.setExecutionStrategy(poptorch.PipelinedExecution())
    check(Model(), torch.randn(8, 4), options=options)
