"""Executable caching (spec 4.10.1): hits skip the capture and the compiler, the key sees
every change that changes the program, bad entries are recompiled, concurrent writers
leave one valid entry."""

import os
import re
import subprocess
import sys
import textwrap
import types

import pytest
import torch

import poptorch
from poptorch._compiler import cache, executable_file
from poptorch._frontend import capture
from poptorch.dialects import make_context

SCALE = 2.0


class Net(torch.nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8, eps=eps)

    def forward(self, x):
        return self.norm(self.fc(x)) * SCALE


def _opts(cache, **kw):
    opts = poptorch.Options().showCompilationProgressBar(False).enableExecutableCaching(
        str(cache))
    for name, value in kw.items():
        getattr(opts, name)(value)
    return opts


def _entries(cache):
    return sorted(p for p in os.listdir(cache) if p.endswith(".popexe"))


def test_second_compile_hits_and_skips_capture(tmp_path, monkeypatch, capsys):
    x = torch.randn(4, 8)
    torch.manual_seed(0)
    first = poptorch.inferenceModel(Net(), _opts(tmp_path))
    expected = first(x)
    assert len(_entries(tmp_path)) == 1
    capsys.readouterr()

    def no_capture(*args, **kwargs):
        raise AssertionError("captured although the cache should hit")

    monkeypatch.setattr(capture, "capture", no_capture)
    torch.manual_seed(0)
    second = poptorch.inferenceModel(Net(), _opts(tmp_path, logCycleCount=True))
    torch.testing.assert_close(second(x), expected, rtol=0, atol=0)
    assert "executable cache hit" in capsys.readouterr().out
    assert second.cycleCount() == first.cycleCount()
    # different weights are arguments, not part of the program: still a hit
    other = Net()
    torch.testing.assert_close(poptorch.inferenceModel(other, _opts(tmp_path))(x),
                               other(x), rtol=1e-5, atol=1e-5)
    assert len(_entries(tmp_path)) == 1


def _scaled_forward(self, x):
    return self.norm(self.fc(x)) * 3.0


@pytest.mark.parametrize("change", [
    "shape", "dtype", "option", "hyper-parameter", "forward code", "global", "closure",
    "training",
])
def test_the_key_sees_what_changes_the_program(tmp_path, change, monkeypatch):
    x = torch.randn(4, 8)
    poptorch.inferenceModel(Net(), _opts(tmp_path)).compile(x)
    model, opts, wrap = Net(), _opts(tmp_path), poptorch.inferenceModel
    if change == "shape":
        x = torch.randn(2, 8)
    elif change == "dtype":
        model, x = model.half(), x.half()
    elif change == "option":
        opts.deviceIterations(2)
        x = torch.randn(8, 8)
    elif change == "hyper-parameter":
        model = Net(eps=1e-3)
    elif change == "forward code":
        monkeypatch.setattr(Net, "forward", _scaled_forward)
    elif change == "global":
        monkeypatch.setattr(sys.modules[__name__], "SCALE", 3.0)
    elif change == "closure":
        factor = 5.0
        model.norm.register_forward_hook(lambda m, i, out: out * factor)
    elif change == "training":
        wrap = poptorch.trainingModel

        class WithLoss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = Net()

            def forward(self, x):
                out = self.net(x)
                return out, out.sum()
        model = WithLoss()
    wrap(model, opts).compile(x)
    assert len(_entries(tmp_path)) == 2


def test_tensor_attributes_are_uploaded_not_cached(tmp_path):
    """A plain tensor attribute is frozen into a (non-persistent) buffer that is uploaded
    like a weight: a hit gives each model its own value."""
    class Offset(torch.nn.Module):
        def __init__(self, value):
            super().__init__()
            self.offset = torch.full((8,), value)

        def forward(self, x):
            return x + self.offset * torch.tensor(2.0)

    x = torch.randn(2, 8)
    poptorch.inferenceModel(Offset(1.0), _opts(tmp_path)).compile(x)
    out = poptorch.inferenceModel(Offset(2.0), _opts(tmp_path))(x)
    torch.testing.assert_close(out, x + 4.0)
    assert len(_entries(tmp_path)) == 1


def test_recurrent_models_hit_with_other_weights(tmp_path, capsys):
    """nn.LSTM holds its weights a second time in a list and weakly in weak references;
    the key counts them as weights (metadata only), so an LSTM with other weights hits."""
    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 6, batch_first=True)

        def forward(self, x):
            return self.lstm(x)[0]

    x = torch.randn(2, 3, 4)
    poptorch.inferenceModel(Recurrent(), _opts(tmp_path)).compile(x)
    capsys.readouterr()
    other = Recurrent()
    out = poptorch.inferenceModel(other, _opts(tmp_path))(x)
    assert "executable cache hit" in capsys.readouterr().out
    torch.testing.assert_close(out, other(x), rtol=1e-5, atol=1e-5)
    assert len(_entries(tmp_path)) == 1


def test_training_model_hits_and_trains_identically(tmp_path, capsys):
    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = Net()

        def forward(self, x, y):
            out = self.net(x)
            return out, torch.nn.functional.mse_loss(out, y)

    x, y = torch.randn(4, 8), torch.randn(4, 8)
    losses = []
    for _ in range(2):
        torch.manual_seed(0)
        model = WithLoss()
        trainer = poptorch.trainingModel(model, _opts(tmp_path), torch.optim.SGD(
            model.parameters(), lr=0.1, momentum=0.9))
        losses.append([trainer(x, y)[1] for _ in range(3)])
    assert len(_entries(tmp_path)) == 1
    assert capsys.readouterr().out.count("executable cache hit") == 1
    for a, b in zip(*losses, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_corrupt_entry_is_recompiled_and_replaced(tmp_path, capsys):
    x = torch.randn(4, 8)
    model = Net()
    poptorch.inferenceModel(model, _opts(tmp_path)).compile(x)
    (entry,) = _entries(tmp_path)
    path = tmp_path / entry
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    capsys.readouterr()
    out = poptorch.inferenceModel(model, _opts(tmp_path))(x)
    torch.testing.assert_close(out, model(x))
    log = capsys.readouterr().out
    assert f"executable cache entry {path} is unusable" in log
    assert "compiling the model again" in log
    assert path.read_bytes() == data  # replaced by a complete entry
    executable_file.read(str(path), ("cache entry",))


def test_environment_variable_enables_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POPTORCH_CACHE_DIR", str(tmp_path))
    poptorch.inferenceModel(Net(), poptorch.Options().showCompilationProgressBar(False)
                            ).compile(torch.randn(4, 8))
    assert len(_entries(tmp_path)) == 1


def test_model_without_visible_state_is_compiled_without_cache(tmp_path, capsys):
    model = Net()
    model.lock = __import__("threading").Lock()  # no Python-visible state
    poptorch.inferenceModel(model, _opts(tmp_path)).compile(torch.randn(4, 8))
    assert _entries(tmp_path) == []
    assert "executable cache not used: the model cannot be fingerprinted" in \
        capsys.readouterr().out


OFFSET = torch.tensor(0.5)  # a 0-dim tensor global, read by ScalarNet's forward


class ScalarNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) + OFFSET


def test_zero_dim_tensor_global_is_hashed_by_value(tmp_path, monkeypatch, capsys):
    """A 0-dim tensor named in forward's code is hashed by its value (it used to crash
    the key with a raw RuntimeError): the same value hits, another value misses."""
    x = torch.randn(4, 8)
    model = ScalarNet()
    first = poptorch.inferenceModel(model, _opts(tmp_path))(x)
    torch.testing.assert_close(first, model(x), rtol=1e-5, atol=1e-5)
    assert len(_entries(tmp_path)) == 1
    capsys.readouterr()
    second = poptorch.inferenceModel(model, _opts(tmp_path))(x)
    torch.testing.assert_close(second, first, rtol=0, atol=0)
    assert "executable cache hit" in capsys.readouterr().out
    monkeypatch.setitem(globals(), "OFFSET", torch.tensor(1.5))
    third = poptorch.inferenceModel(model, _opts(tmp_path))(x)
    torch.testing.assert_close(third, first + 1.0, rtol=1e-5, atol=1e-5)
    assert len(_entries(tmp_path)) == 2


@pytest.mark.parametrize("tensor", [
    torch.tensor(3.0), torch.tensor(True), torch.tensor([1, 2])[::2], torch.zeros(2, 3).t(),
    torch.tensor(1 + 2j).conj(), torch.tensor(2.0, dtype=torch.bfloat16), torch.zeros(0, 3),
], ids=["0-dim", "bool", "strided", "transposed", "conj", "bfloat16", "empty"])
def test_fingerprint_hashes_any_dense_tensor_by_value(tensor):
    def digest(value):
        fp = cache.Fingerprint()
        fp.value(value)
        return fp.hexdigest()

    assert digest(tensor) == digest(tensor.clone().contiguous())
    if tensor.numel():
        assert digest(tensor) != digest(tensor + 1)


@pytest.mark.parametrize("value, other", [
    (int | None, str | None), (list[int], list[str]),
    (types.MappingProxyType({"a": 1}), types.MappingProxyType({"a": 2})),
    (re.compile("a+"), re.compile("b+")),
], ids=["union", "generic", "mappingproxy", "pattern"])
def test_fingerprint_sees_what_transformers_models_hold(value, other):
    """A Hugging Face model's config and classes hold type annotations, read-only dicts
    and compiled patterns: each is hashed by what it says (they made every transformers
    model opaque to the key, compiled again in every process)."""
    def digest(value):
        fp = cache.Fingerprint()
        fp.value(value)
        return fp.hexdigest()

    assert digest(value) == digest(value)
    assert digest(value) != digest(other)


def test_packages_on_the_path_are_library_code():
    """Code in any site-packages directory on sys.path (a venv's with system site
    packages, or one a .pth file adds) is hashed by name, not walked: walking a library's
    globals meets its locks (huggingface_hub's token lock) and the model becomes opaque."""
    for module in (torch, pytest, _transformers()):
        assert cache._is_library_file(module.__file__)
    assert not cache._is_library_file(__file__)


def _transformers():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
    from zoo import import_torchvision

    import_torchvision()  # transformers imports torchvision (a CUDA build here)
    return pytest.importorskip("transformers")


def test_a_transformers_model_has_a_key():
    transformers = _transformers()
    config = transformers.BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=16)
    model = transformers.BertModel(config).eval()
    ids = torch.zeros(1, 4, dtype=torch.int32)
    key = cache.key_of(False, poptorch.Options(), {}, model, (ids,), {})
    assert key is not None
    assert key == cache.key_of(False, poptorch.Options(), {}, model, (ids,), {})


def test_unreadable_tensor_falls_back_to_compiling_without_cache(tmp_path, capsys):
    """A tensor whose data cannot be read makes the model opaque to the key: compiled
    without the cache, as the README promises, never a raw exception."""
    with pytest.raises(cache.Opaque, match="cannot be read"):
        cache.Fingerprint().value(torch.empty(2, device="meta"))
    model = Net()
    model.extra = [torch.empty(2, device="meta")]  # state the forward does not use
    poptorch.inferenceModel(model, _opts(tmp_path)).compile(torch.randn(4, 8))
    assert _entries(tmp_path) == []
    assert "executable cache not used: the model cannot be fingerprinted" in \
        capsys.readouterr().out


_WORKER = textwrap.dedent("""
    import os, sys, time, torch, poptorch
    sys.path.insert(0, sys.argv[2])
    from test_cache import Net
    barrier = sys.argv[3]  # both begin compiling when both are ready
    open(f"{barrier}.{sys.argv[4]}", "w").close()
    while not all(os.path.exists(f"{barrier}.{i}") for i in range(2)):
        time.sleep(0.01)
    torch.manual_seed(0)
    opts = poptorch.Options().showCompilationProgressBar(False)
    opts.enableExecutableCaching(sys.argv[1])
    out = poptorch.inferenceModel(Net(), opts)(torch.ones(4, 8))
    print(float(out.sum()))
""")


def test_two_processes_compiling_into_one_cache(tmp_path):
    cache = tmp_path / "cache"
    here = os.path.dirname(__file__)
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, str(cache), here,
                                 str(tmp_path / "ready"), str(i)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for i in range(2)]
    results = [w.communicate(timeout=240) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], results
    sums = [float(out.strip().splitlines()[-1]) for out, _ in results]
    assert sums[0] == sums[1]
    entries = sorted(os.listdir(cache), key=lambda name: name.endswith(".popexe"))
    assert len(entries) == 2, entries  # no temporary file left behind
    assert entries[0].startswith("ipu-dialect-") and entries[0].endswith(".irdl.mlir")
    executable_file.read(str(cache / entries[1]), ("cache entry",))


def test_a_new_process_loads_the_dialect_from_the_cache_directory(tmp_path, monkeypatch,
                                                                  capsys):
    """The cache directory keeps the ipu dialect's IRDL text: a process that has not
    emitted the dialect (here: this one, its text forgotten, with a new loading context)
    parses it on a hit instead of emitting it from the op classes; a damaged file is
    ignored, then replaced."""
    from torch_mlir.dialects.ext import Dialect

    from poptorch.dialects import Ipu

    torch.manual_seed(0)
    model, x = Net(), torch.ones(4, 8)
    poptorch.inferenceModel(model, _opts(tmp_path)).compile(x)
    (irdl,) = [tmp_path / p for p in os.listdir(tmp_path) if p.endswith(".irdl.mlir")]
    kept = irdl.read_text()
    assert kept.startswith("// sha256 ") and "irdl.dialect @ipu" in kept
    emitted = []
    emit = Dialect._emit_module.__func__
    monkeypatch.setattr(Dialect, "_emit_module",
                        classmethod(lambda cls: emitted.append(cls) or emit(cls)))
    for damage, emits in ((False, 0), (True, 1)):
        if damage:
            irdl.write_text(kept.replace("irdl.operation", "irdl.operation_", 1))
        monkeypatch.setattr(Ipu, "_irdl", None)  # as in a new process
        monkeypatch.setattr(executable_file, "_CONTEXT", [])
        capsys.readouterr()
        out = poptorch.inferenceModel(model, _opts(tmp_path))(x)
        assert "executable cache hit" in capsys.readouterr().out
        torch.testing.assert_close(out, model(x))
        assert len(emitted) == emits
    assert irdl.read_text() == kept


def test_later_contexts_parse_the_dialect_this_process_emitted(monkeypatch):
    """Only a process's first context emits the ipu dialect from its op classes; later
    ones parse that IRDL text, and its ops verify as the emitted dialect's do."""
    from torch_mlir import ir
    from torch_mlir.dialects.ext import Dialect

    make_context()
    emitted = []
    emit = Dialect._emit_module.__func__
    monkeypatch.setattr(Dialect, "_emit_module",
                        classmethod(lambda cls: emitted.append(cls) or emit(cls)))
    with make_context():
        module = ir.Module.parse(
            '%0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>'.join(
                ["func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n", "\n"
                 "return %0 : tensor<4xf32>\n}"]))
        assert module.operation.verify()
        with pytest.raises(ir.MLIRError, match="differs from operand type"):
            ir.Module.parse('func.func @f(%x: tensor<4xf32>) {\n%0 = "ipu.relu"(%x) : '
                            '(tensor<4xf32>) -> tensor<2x2xf32>\nreturn\n}')
    assert emitted == []
