"""Achieved FLOP/s of a matmul-heavy model against NumPy's own matmul on this machine.

The model is four bias-free 1024x1024 linear layers on a micro-batch of 512 rows:
4 x 2 x 512 x 1024 x 1024 = 4.3 GFLOP a call, all of it in matmuls. NumPy's figure is
the same four products (`x @ w.T`, float32, the weights torch stores) timed in the same
process, in blocks alternating with the poptorch calls (`harness.pair`).
"""

from __future__ import annotations

import numpy as np
import torch
from harness import pair

import poptorch

LAYERS, WIDTH, ROWS = 4, 1024, 512


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH, bias=False)
                                 for _ in range(LAYERS))).eval()


def measure() -> dict[str, float]:
    net = model()
    x = torch.randn(ROWS, WIDTH)
    ipu = poptorch.inferenceModel(net, poptorch.Options().showCompilationProgressBar(False))
    ipu(x)
    weights = [layer.weight.detach().numpy() for layer in net]
    rows = x.numpy()

    def numpy_products():
        h = rows
        for w in weights:
            h = h @ w.T
        return h

    np.testing.assert_allclose(ipu(x).numpy(), numpy_products(), rtol=1e-3, atol=1e-3)
    ipu_s, numpy_s, repeats = pair(lambda: ipu(x), numpy_products)
    ipu.destroy()
    flops = LAYERS * 2 * ROWS * WIDTH * WIDTH
    return {"flops_per_call": flops, "poptorch_s": ipu_s, "numpy_s": numpy_s,
            "poptorch_gflops": flops / ipu_s / 1e9, "numpy_gflops": flops / numpy_s / 1e9,
            "fraction_of_numpy": numpy_s / ipu_s, "repeats": repeats}
