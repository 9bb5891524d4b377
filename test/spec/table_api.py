"""The table of 11-api-reference.txt's examples (issue 24): context, patches, check.

Most are `>>>` fragments of a model's forward or of the options code: those annotating
a model run through harness.forward_model's SpecModel, against the CPU.
"""

from __future__ import annotations

import contextlib
import io
import textwrap

import pytest
import torch
from harness import Entry, Patch, close, run_blocks, run_inference

import poptorch
from poptorch import profiling

BLOCK_ERROR = (poptorch.Error, "")


def _check_training_options(ns: dict, out: str) -> None:
    opts = ns["opts"]
    assert opts.device_iterations == 10 and opts.Training.gradient_accumulation == 4


def _check_group_norm(ns: dict, out: str) -> None:
    x = torch.randn(2, 4, 3)
    run_inference(ns["Model"](2, 4), None, x)
    run_inference(ns["Model"](2, 4), poptorch.Options().disableModuleNamescope(), x)


def _check_output_mode(ns: dict, out: str) -> None:
    opts = ns["opts"]
    assert (opts.output_mode, opts.output_return_period) == (poptorch.OutputMode.EveryN, 10)


def _check_channel(ns: dict, out: str) -> None:
    names = [event["name"] for event in profiling._recorder.events()
             if event["channel"] == "MyApp"]
    assert ns["calls"] == ["timed"], ns["calls"]
    assert "TimeThis" in names, names
    assert ns["myobj"].methodName() == 1 and ns["myobj"].otherMethod() == 2
    names = [event["name"] for event in profiling._recorder.events()]
    assert "MyObject.methodName" in names and "MyObject.otherMethod" in names, names


def _check_doing_something(ns: dict, out: str) -> None:
    names = [event["name"] for event in profiling._recorder.events()]
    assert ns["calls"] == ["expensive"] and "DoingSomething" in names


def _check_forward(expected: str):
    """ipu_print_tensor's `forward` examples: the method of a Module, against the CPU;
    `expected` is what the IPU prints (nothing when the print is not used)."""
    def check(ns: dict, out: str) -> None:
        model = type("Model", (torch.nn.Module,), {"forward": ns["forward"]})()
        c, d, b = torch.tensor([1.0]), torch.tensor([2.0]), torch.tensor([4.0])
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            run_inference(model, None, c, d, b)
        assert printed.getvalue() == expected, printed.getvalue()
    return check


def _check_cpu_op(ns: dict, out: str) -> None:
    x = torch.randn(3)
    close(poptorch.inferenceModel(ns["Model"]())(x), x * 8)


def _check_spec_model(ns: dict, out: str) -> None:
    run_blocks(ns, 1)


def _check_multi_conv(ns: dict, out: str) -> None:
    run_inference(ns["SpecConvs"](), None, torch.randn(1, 2, 5, 5), torch.randn(1, 2, 5, 5))


def _check_basic_network(ns: dict, out: str) -> None:
    run_inference(ns["BasicNetwork"](), None, torch.randn(1, 4, 9, 9))


def _check_export(ns: dict, out: str) -> None:
    close(ns["model"](ns["my_input"]), ns["original"](ns["my_input"]))


def _check_begin_block(ns: dict, out: str) -> None:
    model = ns["myModel"]
    x = torch.randn(2, 4)
    run_inference(model, None, x)


def _check_decoder(ns: dict, out: str) -> None:
    class Model(torch.nn.Module):
        decoder = ns["decoder"]

        def __init__(self):
            super().__init__()
            self.decoder_b1 = torch.nn.Linear(4, 4)
            self.outputs = []

        def forward(self, x):
            with poptorch.Block("Encoder", ipu_id=0):
                x = torch.relu(x)
            return self.decoder(x)

    opts = poptorch.Options().deviceIterations(2)
    run_inference(Model(), opts, torch.randn(4, 4))


def _check_blocks_error(ns: dict, out: str) -> None:
    """Blocks on IPUs 0, 1, 0 with stage = ipu: the last block's stage goes back."""
    with pytest.raises(poptorch.Error, match="stage"):
        run_blocks(ns, 3)


def _check_auto_increment(ns: dict, out: str) -> None:
    run_blocks(ns, 3)


def _check_phase(ns: dict, out: str) -> None:
    opts = poptorch.Options().setExecutionStrategy(poptorch.SerialPhasedExecution(ns["p"]))
    run_blocks(ns, 1, opts)


def _check_blocks(device_iterations: int):
    def check(ns: dict, out: str) -> None:
        run_blocks(ns, device_iterations)
    return check


def _check_three_shards(ns: dict, out: str) -> None:
    """Three shards on IPUs 0-2: IPUs are reserved in powers of 2 (spec 4.4.1) unless
    autoRoundNumIPUs(True)."""
    with pytest.raises(poptorch.Error, match="not a power of 2"):
        run_blocks(ns, 1)
    run_blocks(ns, 1, ns["opts"].clone().autoRoundNumIPUs(True))


def _check_sgd(ns: dict, out: str) -> None:
    assert ns["opt"].variable_attrs.isConstant("lr") is False


def _check_optimizer_location(ns: dict, out: str) -> None:
    location = ns["opts"].TensorLocations.optimizer_location
    assert location.on_chip is False


def _check_activation_location(ns: dict, out: str) -> None:
    location = ns["opts"].TensorLocations.activation_location
    assert location.on_chip is False


def _check_is_running(ns: dict, out: str) -> None:
    assert ns["path"] == "cpu"
    model = type("Model", (torch.nn.Module,), {"forward": ns["forward"]})()
    assert poptorch.inferenceModel(model)(torch.ones(1)) == 1.0
    assert model(torch.ones(1)) == 0.0


MULTI_CONV = "with poptorch.MultiConv():\n    y = self.convA(x)\n    v = self.convB(u)\n"
CONVS = "self.convA = torch.nn.Conv2d(2, 3, 3)\nself.convB = torch.nn.Conv2d(2, 3, 3)\n"
NAME_SCOPE = ('with poptorch.NameScope("CustomString"):\n    y = self.bmm(a, b)\n'
              "    z = torch.relu(y)\n")
BMM = "self.bmm = torch.bmm\n"


def method(name: str, init: str, args: str, body: str, result: str) -> str:
    """A Module class `name` whose __init__ runs `init` and whose forward(self, `args`)
    runs the fragment `body` and returns `result`."""
    return (f"class {name}(torch.nn.Module):\n    def __init__(self):\n"
            f"        super().__init__()\n{textwrap.indent(init, ' ' * 8)}"
            f"    def forward(self, {args}):\n{textwrap.indent(body, ' ' * 8)}"
            f"        return {result}\n")


def _equal(actual, expected) -> None:
    assert actual == expected, (actual, expected)


def _fail(value):
    raise AssertionError(value)


def _check_distributed(ns: dict, out: str) -> None:
    """Process 0 of 2: a DataLoader gives each process a different half of the data
    (spec 11.4 DataLoader: "each process uses a different subset of the dataset")."""
    distributed = ns["opts"].Distributed
    assert (distributed.processId, distributed.numProcesses) == (0, 2)
    dataset = torch.utils.data.TensorDataset(torch.arange(8.0))
    halves = []
    for process in range(2):
        opts = poptorch.Options().randomSeed(0)
        opts.Distributed.configureProcessId(process, 2)
        halves.append({float(x) for (batch,) in poptorch.DataLoader(opts, dataset)
                       for x in batch.flatten()})
    assert len(halves[0]) == len(halves[1]) == 4 and not halves[0] & halves[1], halves


def _check_fpe(ns: dict, out: str) -> None:
    class Divide(torch.nn.Module):
        def forward(self, x, y):
            return x / y

    with pytest.raises(poptorch.Error, match=r"floating-point exception \(divide by zero\)"):
        poptorch.inferenceModel(Divide(), ns["opts"])(torch.ones(2), torch.zeros(2))


def _check_trace_model(ns: dict, out: str) -> None:
    """PopTorch 3 refuses traceModel(True) (the example raises); the options keep the
    dispatcher capture, which refuses a branch on the data rather than tracing one."""
    assert ns["opts"].Jit.trace_model is False

    class Branch(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x * 3

    with pytest.raises(poptorch.Error):
        poptorch.inferenceModel(Branch(), ns["opts"])(torch.ones(2))


def _check_name_scope(ns: dict, out: str) -> None:
    run_inference(ns["NameScoped"](), None, torch.randn(2, 3, 4), torch.randn(2, 4, 5))


ENTRIES = {
    "11-api-reference:line 11": Entry(_check_training_options),
    "11-api-reference:line 129": Entry(
        lambda ns, out: _equal(ns["opts"].connection_type, poptorch.ConnectionType.OnDemand)),
    "11-api-reference:line 158": Entry(
        _check_group_norm,
        patches=(Patch("self.gn2(x)", "self.gn(x)",
                       "a typo in the spec: the module is self.gn"),)),
    "11-api-reference:line 348": Entry(_check_output_mode),
    "11-api-reference:line 540": Entry(_check_distributed),
    "11-api-reference:line 600": Entry(_check_fpe),
    "11-api-reference:line 703": Entry(
        _check_trace_model,
        raises=(poptorch.Error, r"traceModel\(True\) is no longer supported: PopTorch 3")),
    "11-api-reference:line 723": Entry(_check_activation_location),
    "11-api-reference:line 780": Entry(_check_activation_location),
    "11-api-reference:line 869": Entry(
        lambda ns, out: _equal(ns["opts"].Training.gradient_accumulation, 4)),
    "11-api-reference:line 1049": Entry(
        _check_channel,
        context="calls = []\ndef functionToTime():\n    calls.append('timed')\n"
                "class MyObject:\n    def methodName(self):\n        return 1\n"
                "    def otherMethod(self):\n        return 2\nmyobj = MyObject()\n"),
    "11-api-reference:line 1066": Entry(
        _check_doing_something,
        context="calls = []\ndef expensiveCall():\n    calls.append('expensive')\n"
                "channel = poptorch.profiling.Channel('MyApp')\n"),
    "11-api-reference:line 1112": Entry(
        _check_forward(""),
        patches=(Patch("def forward(self, c, d, b)\n", "def forward(self, c, d, b):\n",
                       "the `:` is missing in the spec"),)),
    "11-api-reference:line 1120": Entry(
        _check_forward("[3.]\n"),
        patches=(Patch("def forward(self, c, d, b)\n", "def forward(self, c, d, b):\n",
                       "the `:` is missing in the spec"),)),
    "11-api-reference:line 1127": Entry(
        _check_forward("summation: [3.]\n"),
        patches=(Patch("def forward(self, c, d, b)\n", "def forward(self, c, d, b):\n",
                       "the `:` is missing in the spec"),
                 Patch('"summation"))', '"summation")', "an extra `)` in the spec"))),
    "11-api-reference:line 1217": Entry(
        _check_multi_conv,
        patches=(Patch(MULTI_CONV, method("SpecConvs", CONVS, "x, u", MULTI_CONV, "y, v"),
                       "the fragment is the forward of a model with convA and convB"),)),
    "11-api-reference:line 1333": Entry(_check_cpu_op),
    "11-api-reference:line 1373": Entry(
        _check_name_scope,
        patches=(Patch(NAME_SCOPE, method("NameScoped", BMM, "a, b", NAME_SCOPE, "z"),
                       "the fragment is the forward of a model with bmm"),)),
    "11-api-reference:line 1507": Entry(_check_basic_network),
    "11-api-reference:line 1846": Entry(
        _check_is_running,
        patches=(Patch("     # IPU path", "     path = 'ipu'  # IPU path",
                       "a comment alone is no body: the branch records its path"),
                 Patch("    # CPU path", "    path = 'cpu'  # CPU path",
                       "a comment alone is no body: the branch records its path")),
        context="def forward(self, x):\n"
                "    return x * 0 + float(poptorch.isRunningOnIpu())\n"),
    "11-api-reference:line 1874": Entry(
        _check_export,
        context="model = torch.nn.Linear(3, 2)\noriginal = model\nmy_input = torch.randn(4, 3)\n",
        patches=(Patch('compileAndExport("my_model.poptorch")',
                       'compileAndExport("my_model.poptorch", my_input)',
                       "the inputs compileAndExport compiles for (its signature: "
                       "compileAndExport(filename, *args, ...))"),)),
    "11-api-reference:line 1888": Entry(
        _check_spec_model, forward=True,
        context="def MyLayer(x):\n    return torch.tanh(x)\n",
        patches=(Patch("    self.layer = MyLayer(x)", "    self.layer = MyLayer(x)\n"
                       "    acts.append(self.layer)",
                       "the block's result becomes SpecModel's output"),)),
    "11-api-reference:line 1906": Entry(_check_blocks(1), forward=True),
    "11-api-reference:line 1919": Entry(
        _check_begin_block,
        context="class MyNewLayer(torch.nn.Linear):\n    def __init__(self):\n"
                "        super().__init__(4, 4)\n"
                "class MyModel(torch.nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.a_layer = torch.nn.Linear(4, 4)\n"
                "    def forward(self, x):\n        return self.a_layer(x)\n"
                "myModel = MyModel()\n"),
    "11-api-reference:line 1943": Entry(
        _check_decoder, context="from poptorch import BlockFunction\n",
        patches=(Patch("    self.decoder_b1(encoder_output)",
                       "    return self.decoder_b1(encoder_output)",
                       "the decoder's result is its output"),)),
    "11-api-reference:line 2009": Entry(_check_blocks_error, forward=True),
    "11-api-reference:line 2021": Entry(
        _check_blocks_error, after=("11-api-reference:line 2009",),
        context="opts = poptorch.Options()\n"),
    "11-api-reference:line 2034": Entry(
        _check_auto_increment, after=("11-api-reference:line 2009",),
        context="opts = poptorch.Options()\n"),
    "11-api-reference:line 2065": Entry(
        _check_phase, forward=True, context="from poptorch import Phase\n"),
    "11-api-reference:line 2083": Entry(_check_three_shards, forward=True),
    "11-api-reference:line 2111": Entry(_check_blocks(4), forward=True),
    "11-api-reference:line 2126": Entry(
        _check_blocks(2), after=("11-api-reference:line 2111",)),
    "11-api-reference:line 2133": Entry(
        _check_blocks(4), forward=True, context="opts = poptorch.Options()\n"),
    "11-api-reference:line 2149": Entry(
        _check_blocks(3), forward=True, context="opts = poptorch.Options()\n"),
    "11-api-reference:line 2183": Entry(_check_blocks(1), forward=True),
    "11-api-reference:line 2291": Entry(_check_blocks(1), forward=True),
    "11-api-reference:line 2443": Entry(
        _check_sgd, context="params = torch.nn.Linear(2, 2).parameters()\n"),
    "11-api-reference:line 2520": Entry(
        _check_optimizer_location, context="opts = poptorch.Options()\n"),
}
