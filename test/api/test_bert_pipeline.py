"""Graphcore's BERT pretraining configuration (bench/fidelity/configs/bert_large_pod16.py)
cut down to a small BERT (4 layers, hidden 64) that runs: the same model wrapper,
pipeline (embeddings, pooler and classifier on IPU 0 -- the tied word embedding read by
the first and the last stage --, one BeginBlock per encoder layer over IPUs 1-3,
AutoStage.AutoIncrement), recomputation checkpoints, LAMB with its three parameter
groups, replicated tensor sharding, off-chip optimizer state, half partials, stochastic
rounding, outputMode Sum and replicas. In float32 without dropout it runs the CPU's
maths: one step's losses and updated weights match PyTorch's."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch

import poptorch

_CONFIG = Path(__file__).parents[2] / "bench" / "fidelity" / "configs" / "bert_large_pod16.py"
LAYERS, HIDDEN, HEADS, VOCAB, SEQUENCE, MASKED = 4, 64, 4, 256, 16, 4
PER_IPU = (0, 1, 1, 2)  # encoder layers per IPU (IPU 0 holds embeddings and heads)
MICRO_BATCH, ACCUMULATION, REPLICAS = 2, 16, 2  # 7 forward stages: 13 with backward


def _config():
    spec = importlib.util.spec_from_file_location("bert_large_pod16", _CONFIG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _small(cfg, dropout: float = 0.0):
    torch.manual_seed(0)
    config = cfg.bert_config(LAYERS, HIDDEN, HEADS, VOCAB)
    config.hidden_dropout_prob = dropout
    model = cfg.PipelinedBertForPretraining(config, PER_IPU)
    inputs = cfg.example_inputs(config, MICRO_BATCH * ACCUMULATION * REPLICAS, SEQUENCE,
                                MASKED)
    return model, inputs


def _cpu_step(cfg, model, inputs):
    """The reference: the mean loss over every micro-batch of every replica (Mean
    reduction of equal micro-batches), one LAMB step (poptorch.optim.LAMB's CPU step)."""
    optimizer = cfg.optimizer(model)
    losses = []
    for start in range(0, len(inputs[0]), MICRO_BATCH):
        total, _, _ = model(*[t[start:start + MICRO_BATCH] for t in inputs])
        losses.append(total)
    (torch.stack(losses).mean() * cfg.LOSS_SCALING).backward()
    for p in model.parameters():
        p.grad /= cfg.LOSS_SCALING
    optimizer.step()
    return torch.stack(losses)


def test_small_bert_with_graphcore_options_trains_like_the_cpu():
    cfg = _config()
    model, inputs = _small(cfg)
    reference = copy.deepcopy(model)
    word = model.model.bert.embeddings.word_embeddings.weight
    assert model.model.cls.predictions.decoder.weight is word  # tied
    opts = cfg.options(PER_IPU, ACCUMULATION, REPLICAS)
    opts.outputMode(poptorch.OutputMode.All)  # every micro-batch's loss, to compare
    trainer = poptorch.trainingModel(model, opts, optimizer=cfg.optimizer(model))
    total, mlm, nsp = trainer(*inputs)
    expected = _cpu_step(cfg, reference, inputs)
    torch.testing.assert_close(total.reshape(-1), expected.detach(), rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(total, mlm + nsp)
    trainer.copyWeightsToHost()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-4, atol=1e-5, msg=name)
    assert model.model.cls.predictions.decoder.weight is word


def test_small_bert_half_with_graphcore_options_runs():
    """model.half(), dropout, outputMode Sum, as Graphcore's run: the loss summed over the
    step's micro-batches is finite and near the float32 CPU loss of the same weights."""
    cfg = _config()
    model, inputs = _small(cfg, dropout=0.1)
    reference = copy.deepcopy(model).eval()
    trainer = poptorch.trainingModel(model.half().train(),
                                     cfg.options(PER_IPU, ACCUMULATION, REPLICAS),
                                     optimizer=cfg.optimizer(model))
    total, _, _ = trainer(*inputs)
    assert total.dtype == torch.float32 and total.numel() == REPLICAS
    with torch.no_grad():
        expected = _cpu_step_losses(reference, inputs).sum() / REPLICAS
    assert torch.isfinite(total).all()
    torch.testing.assert_close(total.mean(), expected, rtol=0.05, atol=0.0)


def test_graphcore_options_stash_a_bounded_number_of_micro_batches():
    """Graphcore's options name no schedule and no recomputation: as in PopTorch (PopART's
    pipeline, recomputation on when pipelining), the stash does not grow with the
    gradient accumulation, and recomputation keeps it to the layers' checkpoints."""
    cfg = _config()
    stashes = []
    for accumulation in (16, 32):
        model, inputs = _small(cfg)
        trainer = poptorch.trainingModel(model.half().train(),
                                         cfg.options(PER_IPU, accumulation, REPLICAS),
                                         optimizer=cfg.optimizer(model))
        trainer.compile(*[t.repeat(accumulation // ACCUMULATION, *[1] * (t.dim() - 1))
                          for t in inputs])
        timeline = trainer.getTimeline()
        assert timeline.schedule == "1f1b"
        # one stage per change of IPU, as PopTorch merges consecutive blocks on one IPU:
        # embeddings; layer 0; layer 1; layers 2-3; pooler and classifier on IPU 0
        stages = {(e.stage, ipu) for ipu, events in timeline.events.items() for e in events
                  if e.kind == "compute" and e.stage is not None}
        assert sorted(stages) == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 0),
                                  (5, 3), (6, 2), (7, 1), (8, 0)]
        stashes.append(timeline.stash_bytes)
    assert stashes[0] == stashes[1] and sum(stashes[0].values()) > 0
    model, inputs = _small(cfg)
    opts = cfg.options(PER_IPU, ACCUMULATION, REPLICAS)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(
        poptorch.AutoStage.AutoIncrement).useRecomputation(False))
    trainer = poptorch.trainingModel(model.half().train(), opts, optimizer=cfg.optimizer(model))
    trainer.compile(*inputs)
    without = trainer.getTimeline().stash_bytes
    assert all(stashes[0][ipu] <= without[ipu] for ipu in without)
    assert sum(stashes[0].values()) < sum(without.values())


def _cpu_step_losses(model, inputs):
    return torch.stack([model(*[t[s:s + MICRO_BATCH] for t in inputs])[0]
                        for s in range(0, len(inputs[0]), MICRO_BATCH)])


if __name__ == "__main__":
    pytest.main([__file__])
