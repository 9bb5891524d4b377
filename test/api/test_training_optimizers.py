"""N training steps on the machine model match N steps of the same optimizer in PyTorch
on the CPU (issue 4's acceptance): MLP, CNN with batch norm and a transformer encoder
layer, with gradient accumulation and replicas, for each supported optimizer."""

import copy

import pytest
import torch

import poptorch

ACCUMULATION, REPLICAS, MICRO_BATCH, STEPS = 2, 2, 3, 3


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(),
                                       torch.nn.Linear(16, 3))

    def forward(self, x, y):
        out = self.net(x)
        return out, torch.nn.functional.cross_entropy(out, y)


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # (no bias before batch norm: its gradient is 0 up to rounding, ~1e-9, which
        # LAMB's trust ratio scales up to a whole step in a direction rounding picks)
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(2, 4, 3, padding=1, bias=False), torch.nn.BatchNorm2d(4),
            torch.nn.ReLU(),
            torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 5, 3))

    def forward(self, x, y):
        out = self.net(x)
        return out, torch.nn.functional.cross_entropy(out, y)


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(11, 8)
        self.layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, tokens, y):
        out = self.head(self.layer(self.embed(tokens)).mean(1))
        return out, torch.nn.functional.cross_entropy(out, y)


def data(name, batch):
    torch.manual_seed(1)
    labels = torch.randint(0, 3, (batch,))
    if name == "mlp":
        return torch.randn(batch, 6), labels
    if name == "cnn":
        return torch.randn(batch, 2, 5, 5), labels
    return torch.randint(0, 11, (batch, 4)), labels


MODELS = {"mlp": MLP, "cnn": CNN, "encoder": Encoder}
# Some parameters have an exactly zero gradient: the encoder's attention key bias
# (softmax ignores a shift of every score) and the CNN's conv bias (batch norm removes
# it). Adaptive optimizers turn the rounding noise left in such a gradient into +-lr
# steps whose sign depends on summation order, so their eps is raised to damp that noise.
OPTIMIZERS = {
    "sgd": lambda p, eps: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                          weight_decay=0.01),
    "adam": lambda p, eps: torch.optim.Adam(p, lr=0.01, eps=eps),
    "adamw": lambda p, eps: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05, eps=eps),
    "rmsprop": lambda p, eps: torch.optim.RMSprop(p, lr=0.005, centered=True, momentum=0.5,
                                                  eps=eps),
    "lamb": lambda p, eps: poptorch.optim.LAMB(p, lr=0.01, weight_decay=0.01, eps=eps),
}


def cpu_steps(model, optimizer, batches):
    for x, y in batches:
        optimizer.zero_grad()
        xs = x.reshape(ACCUMULATION, REPLICAS, MICRO_BATCH, *x.shape[1:])
        ys = y.reshape(ACCUMULATION, REPLICAS, MICRO_BATCH)
        for g in range(ACCUMULATION):
            for r in range(REPLICAS):
                (model(xs[g, r], ys[g, r])[1] / (ACCUMULATION * REPLICAS)).backward()
        optimizer.step()


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("name", list(MODELS))
def test_steps_match_the_cpu(name, optimizer):
    torch.manual_seed(0)
    model = MODELS[name]()
    reference = copy.deepcopy(model)
    opts = poptorch.Options().replicationFactor(REPLICAS).broadcastBuffers(True)
    opts.Training.gradientAccumulation(ACCUMULATION)
    eps = 1e-3 if name in ("encoder", "cnn") else 1e-8
    ipu = poptorch.trainingModel(model, opts, OPTIMIZERS[optimizer](model.parameters(), eps))
    batch = ACCUMULATION * REPLICAS * MICRO_BATCH
    batches = [data(name, batch) for _ in range(STEPS)]
    for x, y in batches:
        ipu(x, y)
    cpu_steps(reference, OPTIMIZERS[optimizer](reference.parameters(), eps), batches)
    for (key, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=lambda m, k=key: f"{k}: {m}")
