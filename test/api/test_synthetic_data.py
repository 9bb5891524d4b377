"""Synthetic data (spec 11.1 Options.enableSyntheticData): no host transfers. The
device reads standard normal draws instead of the inputs (PopART's RandomNormal mode,
which PopTorch selects), nothing is streamed back (outputs read as zeros, inputs
updated in place keep their values), the timeline has no host I/O and the host-IPU
latencies are 0."""

from __future__ import annotations

import numpy as np
import torch

import poptorch


class Stats(torch.nn.Module):
    """Keeps the mean and standard deviation of what it reads in a buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(2))

    def forward(self, x, counter):
        self.seen.copy_(torch.stack([x.mean(), x.std()]))
        counter += 1
        return x * 2.0, x.sum(dim=1).long()


def run(synthetic: bool, iterations: int = 4):
    opts = poptorch.Options().deviceIterations(iterations).randomSeed(7)
    opts.enableSyntheticData(synthetic)
    model = poptorch.inferenceModel(Stats(), opts)
    x, counter = torch.full((iterations * 256, 64), 3.0), torch.zeros(iterations)
    out = model(x, counter)
    model.copyWeightsToHost()
    return model, out, counter, model.model.seen.clone()


def test_outputs_are_not_streamed_back():
    model, (doubled, sums), counter, seen = run(True)
    assert doubled.shape == (1024, 64) and doubled.dtype == torch.float32
    assert sums.dtype == torch.int32  # the device's int64 as int32, as always
    assert not doubled.any() and not sums.any()
    assert not counter.any()  # the in-place update stays on the device
    _, (real, _), real_counter, real_seen = run(False)
    assert torch.equal(real, torch.full((1024, 64), 6.0)) and real_counter.eq(1).all()
    # the device read normal draws, not the host's 3.0s: the last iteration's 256 x 64
    assert abs(seen[0]) < 0.05 and abs(seen[1] - 1.0) < 0.05
    assert real_seen.tolist() == [3.0, 0.0]


def test_same_draws_every_call():
    _, _, _, first = run(True)
    model, _, _, _ = run(True)
    model(torch.zeros(1024, 64), torch.zeros(4))
    model.copyWeightsToHost()
    assert torch.equal(model.model.seen, first)


def test_no_host_transfers_on_the_timeline():
    synthetic, *_ = run(True)
    real, *_ = run(False)
    kinds = {e.kind for events in synthetic.getTimeline().events.values() for e in events}
    assert kinds == {"compute"}
    assert synthetic.getHostIpuLatency() == (0.0, 0.0, 0.0)
    assert synthetic.getIpuHostLatency() == (0.0, 0.0, 0.0)
    assert real.getHostIpuLatency()[0] > 0.0
    assert synthetic.cycleCount() < real.cycleCount()
    assert synthetic.getPerfCounters()["input"] == []


class Squares(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.lin(x).pow(2).mean()


def train(synthetic: bool, seed: int = 3) -> tuple[torch.Tensor, np.ndarray]:
    torch.manual_seed(0)
    model = Squares()
    opts = poptorch.Options().randomSeed(seed).enableSyntheticData(synthetic)
    opts.Training.gradientAccumulation(2)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.5))
    loss = ipu(torch.ones(8, 16))
    ipu.copyWeightsToHost()
    return loss, model.lin.weight.detach().numpy().copy()


def test_training_trains_on_the_draws():
    (loss, synthetic), (_, again) = train(True), train(True)
    (_, other), (real_loss, real) = train(True, 4), train(False)
    assert loss.item() == 0.0 and real_loss.item() > 0.0  # the loss is not streamed back
    assert np.array_equal(synthetic, again)  # seeded by the model's random seed
    assert not np.array_equal(synthetic, other)
    assert not np.array_equal(synthetic, real)


class Lookup(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 3)
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, ids):
        self.seen.copy_(ids.float().sum())
        return self.embedding(ids)


def test_integer_inputs_read_zeros_with_replicas():
    """Indices and labels stay valid: integer inputs read as zeros (normal draws for floats
    only), here an embedding lookup on 2 replicas."""
    opts = poptorch.Options().replicationFactor(2).deviceIterations(2).broadcastBuffers(False)
    opts.enableSyntheticData(True)
    model = poptorch.inferenceModel(Lookup(), opts)
    out = model(torch.full((8, 5), 9))
    assert out.shape == (8, 5, 3) and not out.any()
    model.copyWeightsToHost()
    assert model.model.seen.item() == 0.0  # the host's 9s never reached the device
