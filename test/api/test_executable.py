"""Precompilation (spec 4.10.2): the spec's listings 4.27-4.35, save/load round trips,
and every refusal of a bad executable file."""

import hashlib
import json
import os
import pickle
import struct

import pytest
import torch
from test_training import ExampleModelWithLoss  # spec listings 4.3 and 4.27

import poptorch
from poptorch._compiler import executable_file


def _quiet(opts=None):
    return (opts or poptorch.Options()).showCompilationProgressBar(False)


@pytest.fixture
def inputs():
    torch.manual_seed(0)
    return torch.randn(10), torch.randn(10)


def _export_training(path, inputs, **kwargs):
    torch.manual_seed(1)
    model = ExampleModelWithLoss()
    opts = _quiet()
    opts.useOfflineIpuTarget(poptorch.ipuHardwareVersion())  # listing 4.27
    poptorch_model = poptorch.trainingModel(model, opts)
    poptorch_model.compileAndExport(str(path), *inputs, **kwargs)
    return model


def test_listings_4_27_and_4_28_precompile_offline_then_load_and_run(tmp_path, inputs):
    path = tmp_path / "model.poptorch"
    model = _export_training(path, inputs)
    reference = ExampleModelWithLoss()
    reference.load_state_dict(model.state_dict())
    poptorch_model = poptorch.load(str(path))
    out, loss = poptorch_model(*inputs)  # runs, although compiled for an offline target
    # one SGD(lr=0.01) step on the CPU gives the same loss and weights
    cpu_opt = torch.optim.SGD(reference.parameters(), lr=0.01)
    cpu_out, cpu_loss = reference(*inputs)
    cpu_loss.backward()
    cpu_opt.step()
    torch.testing.assert_close(loss, cpu_loss.detach())
    torch.testing.assert_close(out, cpu_out.detach())
    poptorch_model.copyWeightsToHost()
    torch.testing.assert_close(poptorch_model.model.fc.weight, reference.fc.weight)


def test_listing_4_29_edit_opts_fn_sets_run_time_options(tmp_path, inputs):
    path = tmp_path / "model.poptorch"
    _export_training(path, inputs)
    seen = {}

    def set_ipu_device(opts):
        seen["iterations"] = opts.device_iterations
        opts.useIpuId(1)  # always use IPU 1

    poptorch_model = poptorch.load(str(path), edit_opts_fn=set_ipu_device)
    assert seen == {"iterations": 1}
    assert poptorch_model.options.ipu_id == 1
    assert poptorch_model.options.connection_type == poptorch.ConnectionType.Always
    poptorch_model(*inputs)


def test_edit_opts_fn_cannot_change_compile_time_options(tmp_path, inputs, capsys):
    path = tmp_path / "model.poptorch"
    _export_training(path, inputs)
    poptorch_model = poptorch.load(str(path), edit_opts_fn=lambda o: o.deviceIterations(4))
    assert poptorch_model.options.device_iterations == 1
    assert "are ignored: deviceIterations" in capsys.readouterr().out
    poptorch_model(*inputs)  # a batch for one iteration still fits


def test_listings_4_30_and_4_31_export_only_the_executable(tmp_path, inputs):
    path = tmp_path / "model.poptorch"
    trained = _export_training(path, inputs, export_model=False)
    with pytest.raises(poptorch.Error, match="export_model=False: it holds the executable "
                                             "but not the model; re-create and wrap"):
        poptorch.load(str(path))
    model = ExampleModelWithLoss()
    model.load_state_dict(trained.state_dict())
    poptorch_model = poptorch.trainingModel(model, _quiet())
    poptorch_model.loadExecutable(str(path))
    assert poptorch_model.isCompiled()
    _, loss = poptorch_model(*inputs)
    cpu = ExampleModelWithLoss()
    cpu.load_state_dict(trained.state_dict())
    torch.testing.assert_close(loss, cpu(*inputs)[1].detach())


def _export_pair(tmp_path, inputs):
    torch.manual_seed(2)
    model = ExampleModelWithLoss()
    opts = _quiet()
    training_model = poptorch.trainingModel(model, opts)
    training_model.compileAndExport(str(tmp_path / "training.poptorch"), *inputs)
    model.eval()  # the note under listing 4.33
    validation_model = poptorch.inferenceModel(model, opts)
    validation_model.compileAndExport(str(tmp_path / "validation.poptorch"), inputs[0])
    return model


def _cpu_epochs(model, inputs, epochs):
    model = ExampleModelWithLoss().eval() if model is None else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    predictions = []
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        model(*inputs)[1].backward()
        optimizer.step()
        model.eval()
        predictions.append(model(inputs[0]).detach())
    return predictions


def test_listing_4_34_loaded_models_need_explicit_copies(tmp_path, inputs):
    model = _export_pair(tmp_path, inputs)
    cpu = ExampleModelWithLoss()
    cpu.load_state_dict(model.state_dict())
    training_model = poptorch.load(str(tmp_path / "training.poptorch"))
    validation_model = poptorch.load(str(tmp_path / "validation.poptorch"))
    expected = _cpu_epochs(cpu, inputs, 3)
    stale = validation_model(inputs[0])
    for epoch in range(3):
        training_model(*inputs)
        training_model.copyWeightsToHost()
        # not connected: the validation model's own (loaded) weights must be set
        validation_model.model.load_state_dict(training_model.model.state_dict())
        validation_model.copyWeightsToDevice()
        torch.testing.assert_close(validation_model(inputs[0]), expected[epoch])
    assert not torch.equal(stale, expected[-1])


def test_listing_4_35_reconnect_by_building_validation_from_training(tmp_path, inputs):
    model = _export_pair(tmp_path, inputs)
    cpu = ExampleModelWithLoss()
    cpu.load_state_dict(model.state_dict())
    training_model = poptorch.load(str(tmp_path / "training.poptorch"))
    # Create a validation python model based on the training model
    validation_model = poptorch.inferenceModel(training_model)
    # Load the executable for that model:
    validation_model.loadExecutable(str(tmp_path / "validation.poptorch"))
    expected = _cpu_epochs(cpu, inputs, 3)
    for epoch in range(3):
        training_model(*inputs)
        # Nothing to do: the models are connected and weights sync implicitly
        torch.testing.assert_close(validation_model(inputs[0]), expected[epoch])


class DropoutNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, y):
        out = self.drop(self.fc(x))
        return out, torch.nn.functional.mse_loss(out, y)


def test_save_after_training_keeps_weights_optimizer_state_and_rng(tmp_path):
    torch.manual_seed(3)

    x, y = torch.randn(4, 6), torch.randn(4, 6)
    model = DropoutNet()
    optimizer = poptorch.optim.Adam(model.parameters(), lr=0.01)
    trainer = poptorch.trainingModel(model, _quiet(poptorch.Options().randomSeed(5)),
                                     optimizer)
    for _ in range(3):
        trainer(x, y)
    trainer.save(str(tmp_path / "trained.poptorch"))
    loaded = poptorch.load(str(tmp_path / "trained.poptorch"))
    assert loaded.rng_state == trainer.rng_state
    for _ in range(2):  # both continue identically: same weights, Adam state and dropout
        torch.testing.assert_close(loaded(x, y), trainer(x, y), rtol=0, atol=0)
    loaded.copyWeightsToHost()
    trainer.copyWeightsToHost()
    torch.testing.assert_close(loaded.model.fc.weight, trainer.model.fc.weight, rtol=0, atol=0)
    mine, theirs = loaded._optimizer.state_dict(), optimizer.state_dict()
    for index in theirs["state"]:
        for slot, value in theirs["state"][index].items():
            torch.testing.assert_close(mine["state"][index][slot], value, rtol=0, atol=0)
    assert type(loaded._optimizer) is poptorch.optim.Adam


def test_rng_state_round_trip_and_errors(inputs):
    model = poptorch.inferenceModel(ExampleModelWithLoss(), _quiet())
    with pytest.raises(poptorch.Error, match="no random generator state before it is "
                                             "compiled"):
        _ = model.rng_state
    model.compile(inputs[0])
    state = model.rng_state
    assert len(state) == 5 and all(isinstance(v, int) for v in state)
    model.rng_state = state
    assert model.rng_state == state
    with pytest.raises(poptorch.Error, match=r"rng_state must be a list of 5 ints as "
                                             r"rng_state returns it, got \[1, 2\]"):
        model.rng_state = [1, 2]


def test_save_before_compiling_is_an_error(tmp_path):
    model = poptorch.inferenceModel(ExampleModelWithLoss(), _quiet())
    with pytest.raises(poptorch.Error, match=r"save: the model is not compiled; call it, "
                                             r"compile\(\) or compileAndExport\(\) first"):
        model.save(str(tmp_path / "x"))


def test_unpicklable_model_needs_export_model_false(tmp_path, inputs):
    model = ExampleModelWithLoss().eval()
    model.hook = lambda: None  # a lambda cannot be pickled
    wrapped = poptorch.inferenceModel(model, _quiet())
    with pytest.raises(poptorch.Error, match="cannot export the model object: it is not "
                                             "picklable .*; pass export_model=False"):
        wrapped.compileAndExport(str(tmp_path / "m.poptorch"), inputs[0])
    wrapped.compileAndExport(str(tmp_path / "m.poptorch"), inputs[0], export_model=False)


def _inference_file(tmp_path, inputs, export_model=True):
    path = tmp_path / "inference.poptorch"
    model = ExampleModelWithLoss().eval()
    poptorch.inferenceModel(model, _quiet()).compileAndExport(str(path), inputs[0],
                                                              export_model=export_model)
    return path, model


def test_load_executable_checks_the_wrapper(tmp_path, inputs):
    path, _ = _inference_file(tmp_path, inputs)
    with pytest.raises(poptorch.Error, match="holds a inference executable, but this is an "
                                             "training model; wrap the model with "
                                             "poptorch.inferenceModel"):
        poptorch.trainingModel(ExampleModelWithLoss(), _quiet()).loadExecutable(str(path))

    class Other(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(10, 4)

        def forward(self, x):
            return self.fc(x)

    with pytest.raises(poptorch.Error, match=r"was compiled for a model with the weight "
                                             r"fc.bias \(\[10\], float32\), but the "
                                             r"wrapped model's is \[4\], float32; wrap the "
                                             r"model the executable was compiled from"):
        poptorch.inferenceModel(Other(), _quiet()).loadExecutable(str(path))
    compiled = poptorch.inferenceModel(ExampleModelWithLoss(), _quiet())
    compiled.compile(inputs[0])
    with pytest.raises(poptorch.Error, match="this model is already compiled; wrap the "
                                             "model again"):
        compiled.loadExecutable(str(path))


def test_loaded_inference_model_matches_and_checks_inputs(tmp_path, inputs):
    path, model = _inference_file(tmp_path, inputs)
    loaded = poptorch.load(str(path))
    torch.testing.assert_close(loaded(inputs[0]), model(inputs[0]))
    with pytest.raises(poptorch.Error, match="changed since compilation: shape mismatch"):
        loaded(torch.randn(3))


def _reseal(data: bytes) -> bytes:
    """`data` with its content hash recomputed (what a deliberate edit would do)."""
    body = data[:-32]
    return body + hashlib.sha256(body).digest()


def _rewrite_header(data: bytes, **changes) -> bytes:
    start = len(executable_file.MAGIC)
    (length,) = struct.unpack_from("<I", data, start)
    header = json.loads(data[start + 4:start + 4 + length])
    header.update(changes)
    new = json.dumps(header).encode()
    return _reseal(data[:start] + struct.pack("<I", len(new)) + new
                   + data[start + 4 + length:])


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d[:len(d) // 2], "is corrupt or truncated"),
    (lambda d: d[:20], "is truncated"),
    (lambda d: b"", "does not start with the poptorch-mlir signature"),
    (lambda d: b"PK\x03\x04" + d[4:], "is not a poptorch-mlir executable"),
    (lambda d: d[:-100] + bytes([d[-100] ^ 1]) + d[-99:],
     "content hash does not match; export the model again"),
    (lambda d: _rewrite_header(d, poptorch="0.0.9"),
     r"was written by poptorch-mlir '0.0.9'; this is poptorch-mlir 0.1.0 and the versions "
     r"must match exactly"),
    (lambda d: _rewrite_header(d, format=2), "uses file format 2 .*reads format 1"),
    (lambda d: _rewrite_header(d, kind="cache entry"),
     "holds a 'cache entry', not a 'executable'"),
    (lambda d: _rewrite_header(d, sections=[["module", 3]]),
     "its sections do not add up to its size"),
])
def test_bad_files_are_refused(tmp_path, inputs, mutate, message):
    path, _ = _inference_file(tmp_path, inputs)
    bad = tmp_path / "bad.poptorch"
    bad.write_bytes(mutate(path.read_bytes()))
    for load in (poptorch.load,
                 poptorch.inferenceModel(ExampleModelWithLoss(), _quiet()).loadExecutable):
        with pytest.raises(poptorch.Error, match=message) as info:
            load(str(bad))
        assert info.value.type == "executable"


def test_missing_file(tmp_path):
    with pytest.raises(poptorch.Error, match="cannot read .*nothing.poptorch: No such file"):
        poptorch.load(str(tmp_path / "nothing.poptorch"))


def test_the_model_unpickler_runs_nothing_but_modules(tmp_path, inputs):
    path, _ = _inference_file(tmp_path, inputs)
    _, sections = executable_file.read(str(path), ("executable",))
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    sections["model"] = pickle.dumps((Payload(), None))
    crafted = tmp_path / "crafted.poptorch"
    executable_file.write(str(crafted), "executable", sections)
    with pytest.raises(poptorch.Error, match=r"the model refers to posix.system, which "
                                             r"poptorch.load does not restore"):
        poptorch.load(str(crafted))
    assert not marker.exists()
    # loadExecutable never reads the model section
    wrapper = poptorch.inferenceModel(ExampleModelWithLoss().eval(), _quiet())
    wrapper.loadExecutable(str(crafted))
    assert not marker.exists()


def test_program_reading_a_weight_the_model_lacks_is_refused(tmp_path, inputs):
    path, _ = _inference_file(tmp_path, inputs)
    _, sections = executable_file.read(str(path), ("executable",))
    program = json.loads(sections["program"])
    program["arguments"] = [[k, "fc.other" if n == "fc.bias" else n, p]
                            for k, n, p in program["arguments"]]
    sections["program"] = json.dumps(program).encode()
    crafted = tmp_path / "crafted.poptorch"
    executable_file.write(str(crafted), "executable", sections)
    with pytest.raises(poptorch.Error, match="is corrupt or for another model: its program "
                                             "reads the parameter fc.other, which the wrapped "
                                             "ExampleModelWithLoss or the file's weights do "
                                             "not have"):
        poptorch.inferenceModel(ExampleModelWithLoss(), _quiet()).loadExecutable(str(crafted))


def test_rng_state_cannot_be_set_before_compiling():
    model = poptorch.inferenceModel(ExampleModelWithLoss(), _quiet())
    with pytest.raises(poptorch.Error, match="compile the model before setting its rng_state"):
        model.rng_state = [0, 1, 2, 0, 0]


def test_model_pickle_with_an_impossible_memo_index_is_refused(tmp_path, inputs):
    path, _ = _inference_file(tmp_path, inputs)
    _, sections = executable_file.read(str(path), ("executable",))
    sections["model"] = b"\x80\x04r\xff\xff\xff\x7f."  # LONG_BINPUT 2**31 - 1, STOP
    crafted = tmp_path / "crafted.poptorch"
    executable_file.write(str(crafted), "executable", sections)
    with pytest.raises(poptorch.Error, match="the model object's pickle refers to memo entry "
                                             "2147483647 of a stream of 3 operations"):
        poptorch.load(str(crafted))
