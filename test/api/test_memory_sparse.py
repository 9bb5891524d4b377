"""Memory of an embedding's gradient: torch's backward scatters the looked-up rows'
gradients into a dense zeros tensor (`ipu.index_put {accumulate}` of a splat constant,
then a cast to the weight's half type). A splat constant is one value, not a dense
tensor, and with gradient accumulation PopART adds the rows straight into the
accumulator (SparseAccumulateOp): neither dense tensor exists (runtime/machine/liveness.py)."""

import math

import torch

import poptorch

VOCAB, DIM, F16, F32, I64 = 100, 16, 2, 4, 8
BYTES_PER_TILE = 128  # poplibs' linear mapping: at least 128 bytes a tile (system.spread)


class Lookup(torch.nn.Module):
    """An fp16 Embedding(100, 16) and the sum of what it looks up as the loss."""

    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(VOCAB, DIM)

    def forward(self, i):
        return poptorch.identity_loss(self.e(i).sum(), reduction="none")


def estimate(accumulation: int):
    torch.manual_seed(0)
    model = Lookup().half()
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(accumulation)
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    ipu.compile(torch.randint(0, VOCAB, (2 * accumulation, 8)))
    memory = ipu.getMemoryEstimate().ipus[0]
    ipu.destroy()
    return memory


def test_splat_zeros_are_one_value_a_tile():
    """Weights: the fp16 table, the f32 zeros as one element on each of the 50 tiles its
    6,400 bytes would spread over, and the scalar constants of the backward (one f32,
    five i64: the index bounds and the ignore index)."""
    memory = estimate(2)
    zeros = F32 * math.ceil(VOCAB * DIM * F32 / BYTES_PER_TILE)
    assert memory.classes["weights"] == VOCAB * DIM * F16 + zeros + F32 + 5 * I64


def test_accumulated_embedding_gradient_is_added_into_the_accumulator():
    """With accumulation no dense gradient is alive at any moment: the largest activation
    is the 2x8x16 f32 rows; without it the dense f32 sum and its f16 cast (the gradient
    returned to the optimizer) exist."""
    rows = 2 * 8 * DIM * F32
    accumulated = estimate(2)
    assert accumulated.peaks["activations"] < rows + VOCAB * DIM * F16
    assert accumulated.classes["gradients"] == VOCAB * DIM * F16  # the fp16 accumulator
    direct = estimate(1)
    assert direct.peaks["activations"] + direct.peaks["gradients"] >= \
        VOCAB * DIM * (F32 + F16)
