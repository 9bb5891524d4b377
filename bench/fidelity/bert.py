"""BERT-Large pretraining as Graphcore's MLPerf Training v1.0 submissions configure it
(PopART; Graphcore/benchmarks/bert/implementations/popart/configs/mk2/*.json), written
in PopTorch the way Graphcore's PyTorch BERT example pipelines it (graphcore/examples,
applications/pytorch/bert/modeling.py, `PipelinedBertForPretraining`), for the fidelity
configurations: Hugging Face `BertForPreTraining` with random weights, fp16, sequence
length 512 in packs (2 sequences a pack on average, `avg_seq_per_pack`), one
`BeginBlock` per encoder layer on the IPUs of `layers_per_ipu` from `encoder_start_ipu`,
the embeddings and the tied masked-LM head on IPU 0, recomputation in the backward
stages, LAMB without bias correction, stochastic rounding, fp16 partials.

As the submission builds it (training_results_v1.0, Graphcore/benchmarks/bert/
implementations/popart/bert_model.py):

- a recomputation checkpoint on every encoder layer's output but the last on each IPU
  (`recompute_checkpoint_every_layer`, default True; `should_checkpoint`: "only
  checkpoint tensors that are not to be copied to the next pipelineStage"), here
  `poptorch.recomputationCheckpoint` in a forward hook, as the PyTorch example's
  `recomputation_checkpoint` does;
- the masked tokens (`mask_tokens` of a pack) gathered by a matmul with their one-hot
  positions (`projection`: onehot of masked_lm_positions, then matmul; the PyTorch
  example's `OnehotGather`), so their gradient is a matmul too, not a scatter;
- the tied masked-LM projection over the vocabulary serialised in
  `embedding_serialization_vocab_steps` (5) slices of output channels (`projection`:
  setSerializeMatMul 'output_channels'), here `poptorch.serializedMatMul` with
  `MatMulSerializationMode.OutputChannels`, as the PyTorch example's `SerializedLinear`
  decoder does.

Each configuration is a `Setup` (the fields of its config json) and the throughput its
MLPerf log shows (`mlperf_published`).

Left out: the packed attention mask (a block-diagonal mask per pack costs what the
padding mask costs), one next-sentence head per sequence of a pack (one per pack here),
the split QKV and the serialised embedding lookup (PopART graph options), the
submission's MLM transform over all 512 tokens before the gather (the PyTorch example,
followed here, transforms the 76 gathered ones) and its 3 extra gathered positions a
pack (`max_lm_predictions` = mask_tokens + max_sequences_per_pack).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from cnn import import_torchvision
from common import Published

import poptorch

SEQUENCE, MASK_TOKENS, VOCAB, LAYERS = 512, 76, 30400, 24
SEQUENCES_PER_PACK = 2  # avg_seq_per_pack of the submissions' configs


@dataclass(frozen=True)
class Setup:
    """The fields of a submission's config json this port uses."""

    layers_per_ipu: tuple[int, ...]
    encoder_start_ipu: int
    replicas: int
    micro_batch: int  # packs
    accumulation: int
    memory_proportions: tuple[float, ...]  # per IPU
    optimizer_off_chip: bool
    beta1: float
    vocab_steps: int = 5  # embedding_serialization_vocab_steps

    @property
    def packs_per_call(self) -> int:
        return self.replicas * self.micro_batch * self.accumulation

    @property
    def sequences_per_call(self) -> int:
        return self.packs_per_call * SEQUENCES_PER_PACK


class SerializedDecoder(torch.nn.Module):
    """The tied masked-LM projection (`decoder`, weight shared with the word embedding)
    as `steps` slices of the vocabulary, one after the other (`serializedMatMul`)."""

    def __init__(self, decoder: torch.nn.Linear, steps: int):
        super().__init__()
        self.decoder, self.steps = decoder, steps

    def forward(self, x):
        out = poptorch.serializedMatMul(x, self.decoder.weight.t(),
                                        poptorch.MatMulSerializationMode.OutputChannels,
                                        self.steps)
        return out + self.decoder.bias


def _checkpoint(module, inputs, output):
    """A forward hook: the layer's output is a recomputation checkpoint."""
    if isinstance(output, torch.Tensor):
        return poptorch.recomputationCheckpoint(output)
    return (poptorch.recomputationCheckpoint(output[0]), *output[1:])


class Pretraining(torch.nn.Module):
    """Graphcore's pretraining wrapper: the encoder, the masked tokens gathered (a matmul
    by their one-hot positions) before the (tied) masked-LM head, the next-sentence head;
    returns the summed loss."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.bert, self.cls = model.bert, model.cls

    def forward(self, input_ids, attention_mask, token_type_ids, masked_positions,
                masked_labels, nsp_labels):
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                        token_type_ids=token_type_ids)
        hidden = out.last_hidden_state
        onehot = torch.nn.functional.one_hot(masked_positions, SEQUENCE).to(hidden.dtype)
        scores, nsp = self.cls(torch.matmul(onehot.detach(), hidden), out.pooler_output)
        mlm = torch.nn.functional.cross_entropy(scores.float().flatten(0, 1),
                                                masked_labels.flatten())
        nsp_loss = torch.nn.functional.cross_entropy(nsp.float(), nsp_labels)
        return poptorch.identity_loss(mlm + nsp_loss, reduction="none")


def layers_per_ipu(setup: Setup, layers: int) -> tuple[int, ...]:
    """The submission's split, or `layers` spread evenly over its encoder IPUs."""
    if layers == LAYERS:
        return setup.layers_per_ipu
    ipus = len(setup.layers_per_ipu)
    per = math.ceil(layers / ipus)
    counts = tuple(min(per, max(0, layers - per * i)) for i in range(ipus))
    if not all(counts):
        raise ValueError(f"{layers} layers do not fill {ipus} IPUs; use at least {ipus}")
    return counts


def model(setup: Setup, layers: int) -> tuple[torch.nn.Module, list[poptorch.Stage]]:
    """The blocked model and its pipeline stages: the embeddings (with IPU 0's layers),
    one stage per further encoder IPU, then the heads back on IPU 0; every layer's
    output but the last on its IPU checkpointed, the vocabulary projection serialised
    (module docstring)."""
    import_torchvision()  # transformers imports torchvision when it is installed
    import transformers  # optional dependency: only the BERT configurations need it

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=1024, num_hidden_layers=layers,
        num_attention_heads=16, intermediate_size=4096, max_position_embeddings=SEQUENCE,
        attention_probs_dropout_prob=0.0)
    wrapped = Pretraining(transformers.BertForPreTraining(config))
    predictions = wrapped.cls.predictions
    predictions.decoder = SerializedDecoder(predictions.decoder, setup.vocab_steps)
    wrapped = wrapped.half()
    poptorch.BeginBlock(wrapped.bert.embeddings, "Embedding", ipu_id=0)
    stages, layer = [(0, ["Embedding"])], 0
    for offset, count in enumerate(layers_per_ipu(setup, layers)):
        ipu = setup.encoder_start_ipu + offset
        if ipu:
            stages.append((ipu, []))
        for index in range(count):
            if index < count - 1:
                wrapped.bert.encoder.layer[layer].register_forward_hook(_checkpoint)
            poptorch.BeginBlock(wrapped.bert.encoder.layer[layer], f"Layer{layer}",
                                ipu_id=ipu)
            stages[-1][1].append(f"Layer{layer}")
            layer += 1
    poptorch.BeginBlock(wrapped.bert.pooler, "Pooler", ipu_id=0)
    poptorch.BeginBlock(wrapped.cls, "Classifier", ipu_id=0)
    stages.append((0, ["Pooler", "Classifier"]))
    return wrapped.train(), [poptorch.Stage(*ids).ipu(ipu) for ipu, ids in stages]


def inputs(packs: int) -> tuple[torch.Tensor, ...]:
    """Random packs: token ids, mask, token types, masked positions and labels, NSP."""
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, VOCAB, (packs, SEQUENCE), generator=g),
            torch.ones(packs, SEQUENCE, dtype=torch.long),
            torch.randint(0, 2, (packs, SEQUENCE), generator=g),
            torch.randint(0, SEQUENCE, (packs, MASK_TOKENS), generator=g),
            torch.randint(0, VOCAB, (packs, MASK_TOKENS), generator=g),
            torch.randint(0, 2, (packs,), generator=g))


def build(setup: Setup, layers: int | None = None):
    """The uncompiled trainingModel of `setup` and its inputs for one call."""
    wrapped, stages = model(setup, LAYERS if layers is None else layers)
    opts = poptorch.Options().replicationFactor(setup.replicas)
    opts.Training.gradientAccumulation(setup.accumulation)
    opts.Precision.setPartialsType(torch.half)
    opts.Precision.enableStochasticRounding(True)
    opts.setAvailableMemoryProportion(
        {f"IPU{ipu}": p for ipu, p in enumerate(setup.memory_proportions)})
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings().useOnChipStorage(not setup.optimizer_off_chip)
        .useReplicatedTensorSharding(True))
    opts.setExecutionStrategy(poptorch.PipelinedExecution(*stages).useRecomputation(True))
    optimizer = poptorch.optim.LAMB(wrapped.parameters(), lr=2e-3, betas=(setup.beta1, 0.998),
                                    weight_decay=0.01, bias_correction=False,
                                    loss_scaling=64.0)
    return poptorch.trainingModel(wrapped, opts, optimizer), inputs(setup.packs_per_call)


def mlperf_published(pod: str, start_ms: int, stop_ms: int, done_before: int,
                     done_after: int) -> Published:
    """The throughput of run 0 of Graphcore's MLPerf Training v1.0 BERT log on `pod`
    ("IPU-POD16"), over one of its blocks (one "epoch" each, `epoch_num` counting
    training sequences): from block_start at time_ms `start_ms`, with `done_before`
    sequences done, to block_stop at `stop_ms`, with `done_after` (the evaluation after
    it excluded). The second block is the one to take: the first has the warm-up in it."""
    return Published(
        figure=round((done_after - done_before) / ((stop_ms - start_ms) / 1000), 0),
        unit="sequences/s",
        source=f"MLCommons training_results_v1.0, Graphcore/results/{pod.lower()}-POPART-"
               f"closed/bert/result_0.txt (MLPerf Training v1.0 closed, {pod}, PopART)",
        measures="the run's second block: sequences (epoch_num) over block_start to "
                 "block_stop")
