"""poptorch.OutOfMemoryError: the compile's out-of-memory refusal is a poptorch.Error
(type "out_of_memory", message as before) that carries the estimate's figures, which
IPUs are out of memory and, per such IPU, its need, its capacity and the class
breakdown of the need, so that code (the planner, the fidelity bench) reads them
instead of parsing the message."""

import pickle

import pytest
import torch

import poptorch
from poptorch.runtime.machine.memory_estimate import IpuMemory, MemoryEstimate, Tensor

MK1 = 1216 * 256 * 1024  # Mk1 compute tiles x memoryBytesPerTile: 304 MiB
WEIGHT = 4096 * 5120 * 4  # a Linear(4096, 5120) f32 weight: 80 MiB


class OverOnIpu0(torch.nn.Module):
    """4 frozen Linear(4096, 5120) on IPU 0 (320 MiB of weights, more than the Mk1's 304)
    and a small Linear(4096, 8) on IPU 1, which fits."""

    def __init__(self):
        super().__init__()
        self.wide = torch.nn.ModuleList(torch.nn.Linear(4096, 5120, bias=False)
                                        for _ in range(4))
        for layer in self.wide:
            layer.weight.requires_grad_(False)
        self.head = poptorch.BeginBlock(torch.nn.Linear(4096, 8), ipu_id=1)

    def forward(self, x):
        for layer in self.wide:
            x = layer(x)[:, :4096]
        return self.head(x)


def test_the_compile_raises_it_with_the_estimates_figures():
    opts = poptorch.Options().useOfflineIpuTarget(1).deviceIterations(2)
    with pytest.raises(poptorch.OutOfMemoryError) as info:
        poptorch.inferenceModel(OverOnIpu0(), opts).compile(torch.ones(2, 4096))
    error = info.value
    assert isinstance(error, poptorch.Error) and error.type == "out_of_memory"
    assert error.ipus == (0,)  # IPU 1 fits: not named
    assert error.available == {0: MK1}
    assert error.classes[0]["weights"] == 4 * WEIGHT
    assert sum(error.classes[0].values()) == error.needed[0] > MK1
    # the message is as it was, and its figures are the attributes'
    classes = ", ".join(f"{c} {b:,}" for c, b in error.classes[0].items() if b)
    assert error.message.startswith(
        f"out of memory on IPU 0: the model needs {error.needed[0]:,} bytes "
        f"({error.needed[0] / 2**20:.1f} MiB) but the IPU has {MK1:,} bytes (304.0 MiB) on "
        "its compute tiles; by class at its fullest moment (")
    assert f"): {classes}; largest tensors: wide.0.weight (weights, {WEIGHT:,} bytes)" \
        in error.message


def ipu(available: int, **classes: int) -> IpuMemory:
    return IpuMemory(available=available, classes=dict(classes),
                     largest=[Tensor("w", "weights", classes.get("weights", 0))],
                     off_chip=0, per_tile_mean=0, per_tile_max=0, moment="ipu.add %0 in @f")


def test_every_ipu_out_of_memory_is_in_it_in_order():
    estimate = MemoryEstimate(
        ipus={2: ipu(100, weights=90, temporary=30), 0: ipu(100, weights=101),
              1: ipu(100, weights=40, activations=10)},
        off_chip_bytes=0, tiles=1, memory_bytes_per_tile=100)
    with pytest.raises(poptorch.OutOfMemoryError) as info:
        estimate.check()
    error = info.value
    assert error.ipus == (0, 2)
    assert error.needed == {0: 101, 2: 120}
    assert error.available == {0: 100, 2: 100}
    assert error.classes == {0: {"weights": 101}, 2: {"weights": 90, "temporary": 30}}
    assert error.message.startswith("out of memory on IPU 0: the model needs 101 bytes "
                                    "(0.0 MiB) but the IPU has 100 bytes (0.0 MiB) on its "
                                    "compute tiles (IPU 2 also out of memory); by class at "
                                    "its fullest moment (ipu.add %0 in @f): weights 101; ")


def test_it_pickles_with_its_figures():
    """A compile in another process (the fidelity bench's) raises it across."""
    error = poptorch.OutOfMemoryError("out of memory on IPU 1: ...", needed={1: 5},
                                      available={1: 4}, classes={1: {"weights": 5}},
                                      location="model.py:3")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is poptorch.OutOfMemoryError and str(copy) == str(error)
    assert (copy.message, copy.type, copy.location) == (error.message, "out_of_memory",
                                                         "model.py:3")
    assert (copy.ipus, copy.needed, copy.available, copy.classes) == \
        ((1,), {1: 5}, {1: 4}, {1: {"weights": 5}})


def test_its_figures_name_the_same_ipus():
    with pytest.raises(ValueError, match="needed, available and classes must name the "
                                         "same IPUs, at least one"):
        poptorch.OutOfMemoryError("x", needed={0: 5}, available={1: 4}, classes={0: {}})
