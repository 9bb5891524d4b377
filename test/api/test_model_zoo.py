"""The inference model zoo against PyTorch on CPU, over device iterations, replicas and
output modes (issue 3's acceptance)."""

import pytest
import torch
from numerics import TOLERANCES

import poptorch

MICRO_BATCH = 2


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(),
                                          torch.nn.Linear(32, 16), torch.nn.GELU(),
                                          torch.nn.Linear(16, 5))

    def forward(self, x):
        return self.layers(x).softmax(-1)


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, stride=2, groups=2),
            torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class Transformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 16)
        self.layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, tokens):
        return self.head(self.norm(self.layer(self.embed(tokens))).mean(1))


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, batch_first=True)
        self.gru = torch.nn.GRU(8, 5, batch_first=True)

    def forward(self, x):
        out, _ = self.lstm(x)
        out, hidden = self.gru(out)
        return out[:, -1], hidden.transpose(0, 1)


class Indexing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(10, 6))

    def forward(self, x, idx):
        rows = self.table[idx]                              # advanced indexing
        picked = torch.gather(x, 1, idx % x.shape[1])      # gather
        values, positions = torch.topk(x, 3, dim=1)         # topk
        clipped = torch.where(x > 0, x, 0.1 * x)            # where
        joined = torch.cat([clipped[:, :2], values], 1)     # cat + slicing
        return rows.sum(1), picked, positions, joined.cumsum(1)  # cumsum


def inputs(name, batch):
    torch.manual_seed(1)
    if name == "mlp":
        return (torch.randn(batch, 12),)
    if name == "cnn":
        return (torch.randn(batch, 3, 8, 8),)
    if name == "transformer":
        return (torch.randint(0, 20, (batch, 5)),)
    if name == "recurrent":
        return (torch.randn(batch, 4, 6),)
    return torch.randn(batch, 7), torch.randint(0, 10, (batch, 4))


MODELS = {"mlp": MLP, "cnn": CNN, "transformer": Transformer, "recurrent": Recurrent,
          "indexing": Indexing}
# (device iterations, replicas, output mode): every combination of 1 and 4 with the
# default mode, and every other mode once with 4 x 4.
CONFIGS = [(1, 1, "All"), (4, 1, "All"), (1, 4, "All"), (4, 4, "All"),
           (4, 4, "Final"), (4, 4, "Sum"), (4, 4, "EveryN")]


def expected_for(mode, out, iterations):
    per_iteration = out.reshape(iterations, -1, *out.shape[1:])
    if mode == "Final":
        return per_iteration[-1]
    if mode == "Sum":
        return per_iteration.sum(0, dtype=out.dtype)
    if mode == "EveryN":
        return per_iteration[1::2].reshape(-1, *out.shape[1:])
    return out


@pytest.mark.parametrize(("iterations", "replicas", "mode"), CONFIGS)
@pytest.mark.parametrize("name", list(MODELS))
def test_zoo(name, iterations, replicas, mode):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    batch = iterations * replicas * MICRO_BATCH
    args = inputs(name, batch)
    opts = poptorch.Options().deviceIterations(iterations).replicationFactor(replicas)
    opts.outputMode(getattr(poptorch.OutputMode, mode), 2 if mode == "EveryN" else None)
    with torch.no_grad():
        expected = model(*args)
    actual = poptorch.inferenceModel(model, opts)(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    for a, e in zip(actual, expected, strict=True):
        e = e.to(torch.int32) if e.dtype == torch.int64 else e
        rtol, atol = (1e-4, 1e-5) if name in ("transformer", "recurrent") else \
            TOLERANCES[torch.float32]
        torch.testing.assert_close(a, expected_for(mode, e, iterations), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_zoo_half(name):
    torch.manual_seed(0)
    model = MODELS[name]().eval().half()
    args = tuple(a.half() for a in inputs(name, MICRO_BATCH))
    with torch.no_grad():
        expected = model.float()(*(a.float() for a in args)).half()
    model.half()
    actual = poptorch.inferenceModel(model)(*args)
    assert actual.dtype == torch.half
    torch.testing.assert_close(actual, expected, rtol=1e-2, atol=1e-2)


