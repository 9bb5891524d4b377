"""Inputs updated in place, `out=` arguments and exceptions raised in forward, as PopTorch
has them (its tests/inplace_test.py): an input the model updates in place is written
back into the user's tensor after each call; `out=` on an input is such an update; the
model's own exceptions reach the user with their type. Each model also runs on the CPU
on clones of the inputs, and both the outputs and the updated inputs must match."""

import copy

import pytest
import torch
from numerics import assert_close
from torch.utils import _pytree as pytree

import poptorch


def _quiet(opts=None):
    return (opts or poptorch.Options()).showCompilationProgressBar(False)


def check_updates(model, *inputs, calls=2):
    """Run `model` `calls` times with poptorch and on the CPU, each on its own copy of
    `inputs` (updated in place call after call); outputs and inputs must match."""
    ipu_inputs, cpu_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
    reference = copy.deepcopy(model)
    ipu = poptorch.inferenceModel(model, _quiet())
    for _ in range(calls):
        actual = ipu(*ipu_inputs)
        with torch.no_grad():
            expected = reference(*cpu_inputs)
        assert_close(actual, expected)
        for a, e in zip(pytree.tree_leaves(ipu_inputs), pytree.tree_leaves(cpu_inputs),
                        strict=True):
            torch.testing.assert_close(a, e)  # dtypes included
    return ipu


# ---- PopTorch's tests/inplace_test.py -----------------------------------------------------
class AddInPlace(torch.nn.Module):
    def forward(self, x):
        if isinstance(x, tuple | list):
            x[0] += 4
        elif isinstance(x, dict):
            x["input"] += 3
        else:
            x += 1


def test_an_input_updated_in_place_is_written_back():
    """PopTorch's test_inplace_add: the model returns None; the update reaches the
    tensor given, call after call, and no other."""
    ipu = poptorch.inferenceModel(AddInPlace(), _quiet())
    tensor_in = torch.Tensor([1.0])
    assert ipu(tensor_in) is None
    assert tensor_in == 2.0
    assert ipu(tensor_in) is None
    assert tensor_in == 3.0
    assert ipu(torch.Tensor([1.0])) is None
    assert tensor_in == 3.0


def test_a_0d_input_updated_in_place_keeps_its_shape():
    """A 0-d input comes back from the device as one element; it is written back 0-d."""
    tensor_in = torch.tensor(1.0)
    assert poptorch.inferenceModel(AddInPlace(), _quiet())(tensor_in) is None
    assert tensor_in.shape == () and tensor_in == 2.0


@pytest.mark.parametrize("structure", [list, lambda t: {"input": t[0]}], ids=["list", "dict"])
def test_an_input_in_a_structure_updated_in_place(structure):
    """(As on the CPU, `x[0] += 4` on a tuple raises: the tuple's item cannot be set.)"""
    check_updates(AddInPlace(), structure([torch.Tensor([1.0])]))


def test_a_dict_input_given_in_another_order_updates_the_right_tensor():
    """Dict inputs are matched by key: the update goes to the tensor under its key."""

    class Model(torch.nn.Module):
        def forward(self, x):
            x["b"] += x["a"]

    ipu = poptorch.inferenceModel(Model(), _quiet())
    a, b = torch.ones(2), torch.zeros(2)
    ipu({"a": a, "b": b})
    ipu({"b": b, "a": a})
    assert a.tolist() == [1.0, 1.0] and b.tolist() == [2.0, 2.0]


def test_one_of_several_inputs_updated_in_place():
    """PopTorch's test_inplace_add_multi_elements: nested inputs before the updated one."""

    class Model(torch.nn.Module):
        def forward(self, _x, y):
            y += 1

    ipu = poptorch.inferenceModel(Model(), _quiet())
    nested_tuple_in = ((torch.Tensor([1.0]), torch.Tensor([1.0])), (torch.Tensor([1.0])))
    tensor_in = torch.Tensor([1.0])
    assert ipu(nested_tuple_in, tensor_in) is None
    assert tensor_in == 2.0
    assert all(t == 1.0 for t in pytree.tree_leaves(nested_tuple_in))


OPS = {
    "sub": lambda x: x.sub_(1),
    "div": lambda x: x.div_(2),
    "mul": lambda x: x.mul_(2),
    "masked_fill": lambda x: x.masked_fill_(x > 0.5, 1.0),
    "zero": lambda x: x.add_(torch.sum(x) - x.zero_()),
    "fill": lambda x: x.add_(torch.sum(x) - x.fill_(1.0)),
    "copy": lambda x: x.copy_(torch.full(x.shape, 3.0)),
}


class Op(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        self.op(x)
        return x * 1


@pytest.mark.parametrize("name", OPS)
def test_in_place_ops_on_an_input(name):
    check_updates(Op(OPS[name]), torch.tensor([[0, 0.7], [0.2, 3.5]]))


def test_chained_updates_of_an_input():
    """PopTorch's test_chained_inplace."""

    class Model(torch.nn.Module):
        def forward(self, x, y):
            x += y
            x += 2.0
            x += y

    t1 = torch.tensor([1.0])
    assert poptorch.inferenceModel(Model(), _quiet())(t1, torch.tensor([2.0])) is None
    assert t1 == 7.0


def test_an_input_updated_then_returned():
    """PopTorch's test_two_inplace_copies: the output is the input's last value."""

    class Model(torch.nn.Module):
        def forward(self, x):
            res = torch.full((1, 2), 3.0)
            x.copy_(res)
            res += 3
            x.copy_(res)
            return x

    check_updates(Model(), torch.ones(1, 2))


def test_an_input_and_a_buffer_updated_in_place():
    """PopTorch's test_inplace_on_buffer_and_input."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buffer", torch.ones(1, 2))

        def forward(self, x):
            x.fill_(3)
            self.buffer.copy_(self.buffer + x)
            return self.buffer * 1, x * 1

    ipu = check_updates(Model(), torch.ones(1, 2))
    ipu.copyWeightsToHost()
    torch.testing.assert_close(ipu.model.buffer, torch.full((1, 2), 7.0))


# PopTorch refuses slices with a step other than 1 ("In-place modification of slices with
# step size other than 1 is not supported."); here they work as on the CPU.
def direct_assign(x, step):
    x[0:2:step] = x[0:2:step] * 0


def direct_assign_inplace(x, step):
    x[0:2:step] *= 0


def direct_fill(x, step):
    x[0:2:step] = 0


def chained_slice(x, step):
    x[:, :2:step].mul_(0)


def modify_before_assign(x, step):
    x *= 2
    x[0:2:step] = x[0:2:step] * 0


def modify_region(x, step):
    x[1:x.shape[0]:step, :] += 1


def select_and_fill(x, _):
    x[0:2] += 1
    x[1] = 0
    x[:, 1].fill_(2)


@pytest.mark.parametrize("step", [1, 2, 3])
@pytest.mark.parametrize("op", [direct_assign, direct_assign_inplace, direct_fill,
                                chained_slice, modify_before_assign, modify_region,
                                select_and_fill])
def test_slices_of_an_input_updated_in_place(op, step):
    class Model(torch.nn.Module):
        def forward(self, x):
            op(x, step)
            return x + 0

    torch.manual_seed(0)
    check_updates(Model(), torch.rand(4, 4))


def test_an_int64_input_updated_in_place_stays_int64():
    """int64 inputs are int32 on the device; the update is cast back."""

    class Model(torch.nn.Module):
        def forward(self, x):
            x += 3
            return x * 2

    x = torch.arange(6, dtype=torch.int64)
    check_updates(Model(), x)
    ipu = poptorch.inferenceModel(Model(), _quiet())
    out = ipu(x)
    assert x.dtype == torch.int64 and x.tolist() == [3, 4, 5, 6, 7, 8]
    assert out.dtype == torch.int32


def test_one_tensor_given_for_two_inputs_is_updated():
    """The second use of a tensor is streamed as a copy; its update still reaches the
    tensor, as on the CPU (where both inputs are the tensor)."""

    class Model(torch.nn.Module):
        def forward(self, a, b):
            b += 1
            return a * 1

    t = torch.zeros(2)
    poptorch.inferenceModel(Model(), _quiet())(t, t)
    assert t.tolist() == [1.0, 1.0]


def test_non_tensor_outputs_are_returned_as_they_are():
    class Model(torch.nn.Module):
        def forward(self, x):
            x += 1
            return None, x * 2, 3, 2.5, "a", True

    check_updates(Model(), torch.ones(2))


# ---- out= -----------------------------------------------------------------------------------
class OutInside(torch.nn.Module):
    """`out=` tensors made in forward."""

    def forward(self, a, b):
        o1, o2, o3, o4 = torch.empty(3, 4), torch.zeros(4), torch.empty(3, 3), torch.empty(3, 4)
        torch.add(a, b, out=o1)
        torch.sum(a, 0, out=o2)
        torch.matmul(a, b.t(), out=o3)
        torch.mul(a, 2, out=o4)
        return o1, o2, o3, o4


class OutInputs(torch.nn.Module):
    """`out=` tensors given as inputs: each is an in-place update of that input."""

    def forward(self, a, b, o1, o2, o3):
        torch.add(a, b, out=o1)
        torch.sum(a, 0, out=o2)
        torch.matmul(a, b.t(), out=o3)
        return o1 * 2


def test_out_tensors_made_in_forward():
    torch.manual_seed(0)
    check_updates(OutInside(), torch.randn(3, 4), torch.randn(3, 4))


def test_out_tensors_given_as_inputs_are_written_back():
    torch.manual_seed(0)
    check_updates(OutInputs(), torch.randn(3, 4), torch.randn(3, 4), torch.zeros(3, 4),
                  torch.zeros(4), torch.zeros(3, 3))


# ---- device iterations, replicas, output modes ------------------------------------------------
class SliceAndCount(torch.nn.Module):
    def forward(self, x, n):
        x[:, 0] = x.sum(dim=1)
        n += 1
        return x * 2


@pytest.mark.parametrize(("iterations", "replicas", "mode"), [
    (3, 1, poptorch.OutputMode.All), (1, 2, poptorch.OutputMode.All),
    (2, 2, poptorch.OutputMode.Final), (2, 2, poptorch.OutputMode.Sum)])
def test_updates_of_every_micro_batch_are_written_back(iterations, replicas, mode):
    """The input holds every micro-batch of the call; its whole update is written back in
    the input's layout, whatever the output mode."""
    opts = poptorch.Options().deviceIterations(iterations).replicationFactor(replicas)
    opts.outputMode(mode)
    batches = iterations * replicas
    torch.manual_seed(0)
    x, n = torch.randn(2 * batches, 3), torch.arange(batches, dtype=torch.int64)
    cpu_x, cpu_n = x.clone(), n.clone()
    ipu = poptorch.inferenceModel(SliceAndCount(), _quiet(opts))
    for _ in range(2):
        ipu(x, n)
        for xs, ns in zip(cpu_x.chunk(batches), cpu_n.chunk(batches), strict=True):
            SliceAndCount()(xs, ns)
        torch.testing.assert_close(x, cpu_x)
        torch.testing.assert_close(n, cpu_n)


def test_replicas_sharing_an_input_group_write_the_update_once():
    opts = poptorch.Options().replicationFactor(2)
    opts.inputReplicaGrouping(2, poptorch.CommGroupType.Consecutive)
    x, n = torch.ones(2, 3), torch.zeros(1, dtype=torch.int64)
    poptorch.inferenceModel(SliceAndCount(), _quiet(opts))(x, n)
    assert n.tolist() == [1]
    torch.testing.assert_close(x[:, 0], torch.full((2,), 3.0))


def test_updated_inputs_are_host_streams():
    ipu = poptorch.inferenceModel(SliceAndCount(), _quiet())
    ipu(torch.ones(2, 3), torch.zeros(1))
    streams = ipu.getTimeline().streams
    assert [name for _, name in streams.outputs] == ["output0", "input0 update",
                                                     "input1 update"]
    assert len(ipu.getPerfCounters()["output"]) == 3


# ---- training -------------------------------------------------------------------------------
class TrainedWithUpdates(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x, y, steps):
        x.mul_(2.0)
        out = self.lin(x)
        y += 1
        torch.add(steps, 1, out=steps)
        return out, torch.nn.functional.mse_loss(out, y)


@pytest.mark.parametrize(("replicas", "accumulation", "iterations"),
                         [(1, 1, 1), (2, 2, 1), (1, 2, 2)])
def test_training_writes_updated_inputs_back(replicas, accumulation, iterations):
    """The updated inputs carry no gradient; the weights train as on the CPU."""
    torch.manual_seed(0)
    model = TrainedWithUpdates()
    reference = copy.deepcopy(model)
    opts = poptorch.Options().replicationFactor(replicas).deviceIterations(iterations)
    opts.Training.gradientAccumulation(accumulation)
    ipu = poptorch.trainingModel(model, _quiet(opts),
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    cpu_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    micro = replicas * accumulation * iterations
    x, y = torch.randn(2 * micro, 3), torch.randn(2 * micro, 2)
    steps = torch.zeros(micro, dtype=torch.int64)
    cpu = [x.clone(), y.clone(), steps.clone()]
    for _ in range(2):
        ipu(x, y, steps)
        for it in range(iterations):
            cpu_optimizer.zero_grad()
            for xs, ys, ss in zip(*(t.chunk(iterations)[it].chunk(replicas * accumulation)
                                    for t in cpu), strict=True):
                _, loss = reference(xs, ys, ss)
                (loss / (replicas * accumulation)).backward()
            cpu_optimizer.step()
        for actual, expected in zip((x, y, steps), cpu, strict=True):
            torch.testing.assert_close(actual, expected)
    assert steps.dtype == torch.int64 and steps.tolist() == [2] * micro
    ipu.copyWeightsToHost()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


# ---- executable files -----------------------------------------------------------------------
@pytest.mark.parametrize("training", [False, True])
def test_a_saved_executable_writes_updated_inputs_back(tmp_path, training):
    path = str(tmp_path / "model.poptorch")
    torch.manual_seed(0)
    model = TrainedWithUpdates()
    args = (torch.randn(2, 3), torch.randn(2, 2), torch.zeros(1, dtype=torch.int64))
    wrap = poptorch.trainingModel if training else poptorch.inferenceModel
    wrap(model, _quiet()).compileAndExport(path, *args)
    loaded = poptorch.load(path)
    x, y, steps = copy.deepcopy(args)
    loaded(x, y, steps)
    torch.testing.assert_close(x, args[0] * 2)
    torch.testing.assert_close(y, args[1] + 1)
    assert steps.tolist() == [1] and steps.dtype == torch.int64
    again = wrap(copy.deepcopy(model), _quiet())
    again.loadExecutable(path)
    again(x, y, steps)
    assert steps.tolist() == [2]
    torch.testing.assert_close(x, args[0] * 4)


@pytest.mark.parametrize("training", [False, True])
def test_a_cached_executable_writes_updated_inputs_back(tmp_path, training):
    """The second wrapper's program comes from the executable cache."""
    wrap = poptorch.trainingModel if training else poptorch.inferenceModel
    opts = _quiet().enableExecutableCaching(str(tmp_path))
    args = (torch.randn(2, 3), torch.randn(2, 2), torch.zeros(1, dtype=torch.int64))
    for _ in range(2):
        x, y, steps = copy.deepcopy(args)
        wrap(TrainedWithUpdates(), opts.clone())(x, y, steps)
        torch.testing.assert_close(x, args[0] * 2)
        assert steps.tolist() == [1]
    assert len([p for p in tmp_path.iterdir() if p.suffix == ".popexe"]) == 1


# ---- exceptions raised in forward -----------------------------------------------------------
class Raises(torch.nn.Linear):
    def __init__(self, raise_):
        super().__init__(2, 2)
        self.raise_ = raise_

    def forward(self, x):
        self.raise_(x)
        return self.weight.sum() * x.sum()


def bad_shape(_):
    raise ValueError("bad shape")


def failing_assert(x):
    assert x.shape[0] == 3, "needs 3 rows"


def missing_key(x):
    return x["missing"]


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize(("raise_", "kind", "text", "dict_input"), [
    (bad_shape, ValueError, "bad shape", False),
    (failing_assert, AssertionError, "needs 3 rows", False),
    (missing_key, KeyError, "'missing'", True)], ids=["raise", "assert", "key"])
def test_the_models_own_exceptions_keep_their_type(training, raise_, kind, text, dict_input):
    """As PopTorch, which traces forward in Python: `except ValueError` works and the
    traceback and a note show the line that raised."""
    wrap = poptorch.trainingModel if training else poptorch.inferenceModel
    ipu = wrap(Raises(raise_), _quiet())
    x = {"present": torch.ones(2)} if dict_input else torch.ones(2)
    with pytest.raises(kind) as info:
        ipu(x)
    assert str(info.value).splitlines()[0] == text  # (pytest adds to an assert's)
    line = raise_.__code__.co_firstlineno + 1
    what = "the training graph" if training else "the model with torch.export"
    assert info.value.__notes__ == [f"raised by the model at {__file__}:{line} while "
                                    f"poptorch captured {what}"]
    assert info.traceback[-1].lineno + 1 == line  # (pytest's are 0-based)
    assert not ipu.isCompiled()


def test_torch_export_errors_stay_poptorch_errors():
    class Model(torch.nn.Module):
        def forward(self, x):
            return x @ torch.ones(3, 3)

    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(Model(), _quiet())(torch.ones(2))
    assert info.value.type == "capture"
    assert info.value.message == ("could not capture the model with torch.export: a and b "
                                  "must have same reduction dim, but got [1, 2] X [3, 3].")
    assert info.value.location.endswith(
        f"test_input_mutation.py:{Model.forward.__code__.co_firstlineno + 1}")


# ---- what remains refused ---------------------------------------------------------------------
SHAPE_CHANGE = ("the model changes the shape or strides of its input '{name}' in place, from "
                "{before} to {after}, as `t_()`, `unsqueeze_()`, `resize_()` or an `out=` "
                "tensor of another shape do; an input keeps its shape on the IPU: compute a "
                "new tensor instead (for example `x = x.t()`)")


def transpose(x, _):
    x.t_()


def unsqueeze(x, _):
    x.unsqueeze_(0)


def out_of_another_shape(x, o):
    torch.add(x, 1, out=o)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize(("change", "name", "before", "after"), [
    (transpose, "x", "[3, 4] (strides [4, 1])", "[4, 3] (strides [1, 4])"),
    (unsqueeze, "x", "[3, 4] (strides [4, 1])", "[1, 3, 4] (strides [12, 4, 1])"),
    (out_of_another_shape, "o[0]", "[2] (strides [1])", "[3, 4] (strides [4, 1])")],
    ids=["t_", "unsqueeze_", "out="])
def test_changing_an_inputs_shape_in_place_is_an_error(training, change, name, before,
                                                       after):
    """torch.export does not record such changes and the input's tensor keeps its shape:
    refused, at the model's forward."""

    class Model(torch.nn.Linear):
        def forward(self, x, o):
            change(x, o[0])
            return self.weight.sum() * x.sum()

    wrap = poptorch.trainingModel if training else poptorch.inferenceModel
    with pytest.raises(poptorch.Error) as info:
        wrap(Model(2, 2), _quiet())(torch.ones(3, 4), [torch.zeros(2)])
    assert info.value.message == SHAPE_CHANGE.format(name=name, before=before, after=after)
    assert info.value.location == f"{__file__}:{Model.forward.__code__.co_firstlineno}"

