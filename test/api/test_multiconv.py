"""poptorch.MultiConv (spec 4.6.4): the spec's example runs; results and gradients are
the plain convolutions'; the group and its options reach the ipu conv ops; the machine
model charges a Parallel group the longest of its convolutions on shared-out tiles and a
Serial one their sum; PopTorch's option checks."""

import copy

import pytest
import torch
from numerics import assert_close
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.machine.cost import op_cost


class Two(torch.nn.Module):
    """The spec's example: `with poptorch.MultiConv(): y = self.convA(x); v = self.convB(u)`."""

    def __init__(self, multi=None):
        super().__init__()
        self.convA = torch.nn.Conv2d(3, 16, 3)
        self.convB = torch.nn.Conv2d(4, 8, 5, padding=1)
        self.multi = multi

    def forward(self, x, u):
        if self.multi is None:
            return self.convA(x), self.convB(u)
        with self.multi():
            y = self.convA(x)
            v = self.convB(u)
        return y, v


def _inputs():
    return torch.randn(2, 3, 32, 32), torch.randn(2, 4, 32, 32)


def test_spec_example_runs_and_matches_the_plain_convolutions():
    torch.manual_seed(0)
    model = Two(poptorch.MultiConv)
    x, u = _inputs()
    ipu = poptorch.inferenceModel(model)
    for got, want in zip(ipu(x, u), model(x, u), strict=True):
        assert_close(got, want, rtol=1e-4, atol=1e-5)
    convs = [line for line in ipu._compiled.module_text.splitlines() if '"ipu.conv"' in line]
    assert len(convs) == 2 and all("ipu.multiconv = " in line for line in convs)


def _options():
    return (poptorch.MultiConv().availableMemoryProportions([0.5, 0.3])
            .partialsTypes(torch.float).planType(poptorch.MultiConvPlanType.Serial)
            .perConvReservedTiles(100).cycleBackOff(0.2).enableConvDithering(False))


def test_options_reach_the_conv_ops():
    ipu = poptorch.inferenceModel(Two(_options))
    ipu(*_inputs())
    text = ipu._compiled.module_text
    assert ('ipu.multiconv_options = "{\\22available_memory_proportions\\22: [0.5, 0.3], '
            '\\22partials_types\\22: [\\22float\\22], \\22plan_type\\22: \\22serial\\22, '
            '\\22per_conv_reserved_tiles\\22: 100, \\22cycle_back_off\\22: 0.2, '
            '\\22enable_conv_dithering\\22: [false]}"') in text


def test_training_matches_the_plain_convolutions():
    torch.manual_seed(0)

    class Loss(Two):
        def forward(self, x, u):
            y, v = super().forward(x, u)
            return y, poptorch.identity_loss(y.square().mean() + v.square().mean(), "sum")

    model = Loss(poptorch.MultiConv)
    reference = copy.deepcopy(model)
    reference.multi = None
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(2)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    cpu = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        x, u = _inputs()
        ipu(x, u)
        cpu.zero_grad()
        for i in range(2):
            (reference(x[i:i + 1], u[i:i + 1])[1] / 2).backward()
        cpu.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)


def _cycles(multi):
    ipu = poptorch.inferenceModel(Two(multi))
    ipu(*_inputs())
    return ipu.getTimeline().total_cycles


def test_parallel_takes_the_longest_serial_the_sum():
    plain = _cycles(None)
    serial = _cycles(lambda: poptorch.MultiConv().planType(poptorch.MultiConvPlanType.Serial)
                     .cycleBackOff(0.0))
    parallel = _cycles(lambda: poptorch.MultiConv().cycleBackOff(0.0))
    assert serial == plain  # one after the other, each on all tiles
    assert parallel < serial  # at once, on disjoint tile sets
    # reserving more tiles than the IPU has makes poplin plan the group serially
    assert _cycles(lambda: poptorch.MultiConv().perConvReservedTiles(1000)
                   .cycleBackOff(0.0)) == serial
    # the default cycle back-off (0.1) may trade a few cycles for temporary memory
    assert serial <= _cycles(lambda: poptorch.MultiConv().planType(
        poptorch.MultiConvPlanType.Serial)) <= 1.1 * serial


def test_the_group_cost_sits_on_its_first_convolution():
    ipu = poptorch.inferenceModel(Two(poptorch.MultiConv))
    ipu(*_inputs())
    module = ir.Module.parse(ipu._compiled.module_text, make_context())
    func = next(op for op in module.body.operations if "sym_name" in op.attributes)
    with module.context:
        convs = [op for op in func.regions[0].blocks[0].operations
                 if op.operation.name == "ipu.conv"]
        first, second = (op_cost(op) for op in convs)
    assert first.cycles > 0 and second.cycles == 0


def _raises(fn, message):
    with pytest.raises(poptorch.Error, match=message) as info:
        fn()
    assert f"{__file__}:" in str(info.value), str(info.value)


def test_option_checks():
    multi = poptorch.MultiConv()
    _raises(lambda: multi.availableMemoryProportions("0.5"), "Invalid available memory proportion!")
    _raises(lambda: multi.availableMemoryProportions([1.5]), r"Each must be in \[0, 1\)")
    _raises(lambda: multi.partialsTypes(torch.int32), "Invalid partials types. Expecting "
                                                      "torch.float or torch.half")
    _raises(lambda: multi.partialsTypes(torch.half), "half partials .* are not modelled")
    _raises(lambda: multi.planType(0), "Invalid plan type!")
    _raises(lambda: multi.perConvReservedTiles(2.0), "Invalid per-convolution reserved tiles!")
    _raises(lambda: multi.cycleBackOff(1), "Invalid cycle back off!")
    _raises(lambda: multi.enableConvDithering("yes"), "Invalid conv dithering!")
    _raises(lambda: multi.enableConvDithering(True), "conv dithering is not modelled")


def test_a_list_must_have_one_value_per_convolution():
    model = Two(lambda: poptorch.MultiConv().availableMemoryProportions([0.1, 0.2, 0.3]))
    with pytest.raises(poptorch.Error, match=r"available_memory_proportions has 3 values for "
                                             r"the 2 convolutions of this MultiConv") as info:
        poptorch.inferenceModel(model)(*_inputs())
    assert f"{__file__}:" in str(info.value)


def test_nested_multiconv_is_refused():
    with poptorch.MultiConv(), pytest.raises(poptorch.Error, match="Nested poptorch.MultiConv "
                                                                   "is not supported") as info:
        with poptorch.MultiConv():
            pass
    assert f"{__file__}:" in str(info.value)
