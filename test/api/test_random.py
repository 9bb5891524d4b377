"""Random draws on the device (`ipu.random_uniform`, `ipu.random_normal` and what is
composed of them): Options.randomSeed makes a run reproducible, replicas draw their own
numbers, and each sampler has the support and moments of PyTorch's."""

import numpy as np
import pytest
import torch

import poptorch
from poptorch.runtime.jit.kernels.creation import random_uniform
from poptorch.runtime.jit.random import device_random


class Samplers(torch.nn.Module):
    """One draw of each sampler torch offers, as a model's outputs."""

    def forward(self, x):
        d = torch.distributions
        return {
            "randn": torch.randn(2000) + x,
            "normal": torch.normal(x.expand(2000), 2.0),
            "normal_": torch.zeros(2000).normal_(1.0, 0.5) + x,
            "exponential_": torch.zeros(2000).exponential_(2.0) + x,
            "bernoulli": torch.bernoulli(torch.full((2000,), 0.25) + x),
            "randperm": torch.randperm(64),
            "Normal": d.Normal(x.expand(2000), 3.0).sample(),
            "Exponential": d.Exponential(x.expand(2000) + 4.0).sample(),
        }


def run(seed: int, replicas: int = 1) -> dict:
    opts = poptorch.Options().replicationFactor(replicas).randomSeed(seed)
    return poptorch.inferenceModel(Samplers(), opts)(torch.zeros(replicas))


def test_each_sampler_draws_as_pytorch_does():
    out = run(0)
    assert abs(out["randn"].mean()) < 0.15 and abs(out["randn"].std() - 1) < 0.1
    assert abs(out["normal"].std() - 2) < 0.2
    assert abs(out["normal_"].mean() - 1) < 0.1 and abs(out["normal_"].std() - 0.5) < 0.05
    assert (out["exponential_"] >= 0).all() and abs(out["exponential_"].mean() - 0.5) < 0.05
    assert set(out["bernoulli"].tolist()) == {0.0, 1.0}
    assert abs(out["bernoulli"].mean() - 0.25) < 0.05
    assert sorted(out["randperm"].tolist()) == list(range(64))
    assert abs(out["Normal"].std() - 3) < 0.3
    assert abs(out["Exponential"].mean() - 0.25) < 0.03


def test_the_seed_makes_draws_reproducible():
    first, again, other = run(5), run(5), run(6)
    for name, value in first.items():
        torch.testing.assert_close(again[name], value, msg=name)
        assert not torch.equal(other[name], value), name


def test_replicas_draw_their_own_numbers():
    out = run(5, replicas=2)
    for name, value in out.items():
        halves = value.reshape(2, -1)
        assert not torch.equal(halves[0], halves[1]), name


def test_distributions_keep_their_argument_checks_outside_the_capture():
    before = torch.distributions.Distribution._validate_args
    run(1)
    assert torch.distributions.Distribution._validate_args == before


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_uniform_draws_stay_below_high_in_narrow_types(dtype):
    with device_random(np.random.default_rng(0), 1):
        draws = random_uniform(0.0, 1.0, (1 << 16,), np.dtype(dtype))
    assert draws.dtype == dtype and draws.min() >= 0 and draws.max() < 1


def test_empty_results_run_end_to_end():
    class Empty(torch.nn.Module):
        def forward(self, x):
            conv = torch.nn.functional.conv2d(torch.zeros(1, 0, 4, 4), torch.zeros(2, 0, 3, 3))
            return (torch.arange(1, 1) + x.sum(), torch.zeros(2, 0), torch.full((0, 3), 2.0),
                    torch.cat([torch.zeros(0, 3), x.expand(2, 3)]), conv)

    model = Empty()
    x = torch.ones(3)
    out = poptorch.inferenceModel(model)(x)
    for actual, expected in zip(out, model(x), strict=True):
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, check_dtype=False)
