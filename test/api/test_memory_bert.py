"""Memory figures of BERT-style training as Graphcore ran it: the optimizer state in its
own types, and the fitting verdict of a cut-down BERT-Large IPU-POD16 configuration
(bench/fidelity/configs/bert_large_pod16.py; the whole 24 layers take minutes)."""

import pathlib
import sys

import pytest
import torch

import poptorch

F16, F32 = 2, 4
VOCAB, DIM, ACCUMULATE = 500, 32, 6  # the tied-embedding model's sizes


class Summed(torch.nn.Module):
    """Linear(64, 32) and its summed output, in fp32, as the loss."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 32)

    def forward(self, x):
        return poptorch.identity_loss(self.fc(x).float().sum(), reduction="none")


def lamb_state(weight_dtype: torch.dtype, **accum) -> int:
    """The optimizer class of the memory estimate of LAMB on `Summed` in `weight_dtype`."""
    torch.manual_seed(0)
    model = Summed().to(weight_dtype)
    opt = poptorch.optim.LAMB(model.parameters(), lr=0.01, **accum)
    ipu = poptorch.trainingModel(model, poptorch.Options(), opt)
    ipu.compile(torch.rand(4, 64).to(weight_dtype))
    state = ipu.getMemoryEstimate().ipus[0].classes["optimizer"]
    ipu.destroy()
    return state


def test_lamb_state_of_half_weights_is_fp32():
    """LAMB's two moments are fp32 by default (first/second_order_momentum_accum_type),
    so an fp16 Linear(64, 32) keeps 2 x 4 bytes of state per parameter, not 2 x 2."""
    params = 64 * 32 + 32
    assert lamb_state(torch.float16) == 2 * F32 * params
    assert lamb_state(torch.float32) == 2 * F32 * params
    assert lamb_state(torch.float16, first_order_momentum_accum_type=torch.float16,
                      second_order_momentum_accum_type=torch.float16) == 2 * F16 * params
    assert lamb_state(torch.float16, first_order_momentum_accum_type=torch.float16) == \
        (F16 + F32) * params


class Tied(torch.nn.Module):
    """BERT's tied word embedding in miniature: Embedding(500, 32) on IPU 0, a Linear on
    IPU 1, the decoder (the embedding's weight transposed) and the loss back on IPU 0."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.mid = torch.nn.Linear(DIM, DIM)

    def forward(self, ids):
        with poptorch.Block("Embedding", ipu_id=0):
            h = self.embed(ids)
        with poptorch.Block("Middle", ipu_id=1):
            h = torch.tanh(self.mid(h))
        with poptorch.Block("Head", ipu_id=0):
            logits = h @ self.embed.weight.t()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1))
        return loss


def test_tied_weight_partial_gradient_is_accumulated_not_stashed():
    """The decoder's partial gradient of the tied weight (500 x 32 f32) is added into the
    accumulator in the head's stage (PopART accumulates each gradient as it is made): IPU
    0 stashes nothing of that size for the embedding's backward stage; the run still
    trains the tied weight with both partials (checked against CPU)."""
    torch.manual_seed(0)
    model = Tied()
    cpu = Tied()
    cpu.load_state_dict(model.state_dict())
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(ACCUMULATE)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    ipu = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.5))
    ids = torch.randint(0, VOCAB, (ACCUMULATE * 2, 6))
    ipu(ids)
    ipu.copyWeightsToHost()
    stash = ipu._compiled.timeline.stash_bytes
    ipu.destroy()
    assert stash[0] < VOCAB * DIM * F32
    sgd = torch.optim.SGD(cpu.parameters(), lr=0.5)
    (sum(cpu(ids[k * 2:(k + 1) * 2]) for k in range(ACCUMULATE)) / ACCUMULATE).backward()
    sgd.step()
    torch.testing.assert_close(model.embed.weight, cpu.embed.weight, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def bert_pod16():
    """bench/fidelity's BERT-Large IPU-POD16 configuration (Graphcore's pretrain_large_128)."""
    configs = pathlib.Path(__file__).resolve().parents[2] / "bench" / "fidelity" / "configs"
    sys.path.insert(0, str(configs))
    try:
        return __import__("bert_large_pod16")
    finally:
        sys.path.remove(str(configs))


def test_bert_large_pod16_cut_down_fits(bert_pod16):
    """Graphcore's configuration, full widths (hidden 1024, vocabulary 30522, micro-batch
    8, sequence 128, fp16, LAMB, RTS, optimizer state off chip, 1F1B with
    recomputation) cut to 4 encoder layers (0, 1, 1, 2 per IPU): it compiles through the
    public API with the out-of-memory check on (the 24 layers, which ran on hardware,
    fit too: bench/fidelity/configs/bert_large_pod16.py, minutes). On IPU 0 the tied
    embedding's gradient is added into its fp16 accumulator: no dense fp32 zeros or sum,
    no stashed partial; LAMB's state is fp32 (2 x 4 bytes a parameter) sharded over the
    4 replicas; IPUs 1-3 stash, per micro-batch in flight, what they received from the
    IPU before (the hidden states and the fp16 [8, 1, 128, 128] attention mask, read again
    by the backward stage's recomputation) and their checkpoints, not the dropout
    masks."""
    model, args = bert_pod16.build(4)
    model.compile(*args)
    estimate = model.getMemoryEstimate()
    model.destroy()
    vocab, hidden = bert_pod16.VOCAB, bert_pod16.HIDDEN
    table = vocab * hidden * F16
    ipu0 = estimate.ipus[0]
    assert all(t.bytes <= table for t in ipu0.largest)
    # IPU 0 (stage 0 of N = 5, 2N - 1 = 9 micro-batches in flight) keeps only an
    # [8, 128] int64 host input of each, which its backward stage reads again
    assert ipu0.classes["stash"] == 9 * bert_pod16.MICRO_BATCH * bert_pod16.SEQUENCE * 8
    assert ipu0.classes["gradients"] < 2 * table  # the accumulators, not a dense sum
    checkpoint = bert_pod16.MICRO_BATCH * bert_pod16.SEQUENCE * hidden * F16
    mask = bert_pod16.MICRO_BATCH * bert_pod16.SEQUENCE * bert_pod16.SEQUENCE * F16
    for ipu, layers in ((1, 1), (2, 1), (3, 2)):
        # 1F1B keeps 2(N - s) - 1 micro-batches of stage s (of N = 5) in flight, each
        # with its received hidden states and mask and a checkpoint a layer but the last
        in_flight = 2 * (5 - ipu) - 1
        assert estimate.ipus[ipu].classes["stash"] == in_flight * (
            checkpoint + mask + (layers - 1) * checkpoint)
    for mem in estimate.ipus.values():
        assert mem.total <= mem.available
