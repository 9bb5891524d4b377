"""BERT-Large pretraining, phase 1 (sequence 128), on an IPU-POD16, as Graphcore wrote it.

The configuration is Graphcore's public PopTorch example, graphcore/examples
``nlp/bert/pytorch``: ``configs_pretraining.yml`` entry ``pretrain_large_128``
(micro-batch 8, replication 4, gradient accumulation 2048, device iterations 1,
``layers_per_ipu [3, 7, 7, 7]``, ``matmul_proportion [0.15, 0.25, 0.25, 0.25]``,
LAMB, loss scaling 4096, half partials, recomputation checkpoint after every
layer, replicated tensor sharding, optimizer state off chip), its options
(``ipu_options.py: get_options``), its pipelining (``modeling.py:
PipelinedBertForPretraining.parallelize``: embeddings, pooler and classifier on
IPU 0 -- the MLM decoder shares the word embedding, so the tied weight is read
by the first and the last stage, both on IPU 0 -- and one ``BeginBlock`` per
encoder layer) and its optimizer (``optimization.py: get_optimizer``: three
parameter groups, fp16 accumulators, fp32 second moment).

The model is Hugging Face's ``BertForPreTraining`` with Graphcore's sizes and
random weights, wrapped as Graphcore's ``forward`` is: masked positions gathered
by a one-hot matmul, MLM and NSP cross entropies, their sum the loss
(``poptorch.identity_loss``). What differs from the example, and why:

* attention is Hugging Face's (eager), not Graphcore's fused-QKV
  ``BertFusedSelfAttention``: the same maths (three matmuls vs one
  concatenated one);
* the MLM decoder is the tied ``nn.Linear``, not ``SerializedLinear``
  (``embedding_serialization_factor: 2``); the serialisation is a memory
  trade-off the machine model does not yet distinguish;
* the PopART-only settings of ``get_options`` (``opts._Popart.set(...)``:
  ``disableGradAccumulationTensorStreams``, the outer-fragment schedule,
  ``subgraphCopyingStrategy``, PopART patterns, engine options) and the custom
  op ``residual_add_inplace_pattern`` have no counterpart here and are left out;
* ``autoRoundNumIPUs``, ``useOfflineIpuTarget`` and executable caching are the
  example's compile-only settings; caching stays off so a compile is measured.

``build(layers)`` gives the uncompiled ``poptorch.trainingModel`` and its
inputs; fewer layers keep the first IPU's 3 and spread the rest as evenly as
the example's ``layers_per_ipu`` does (``layers_per_ipu(layers)``).
``python bench/fidelity/configs/bert_large_pod16.py [layers]`` compiles it and
prints the compile time, the simulated cycles of a step (the timeline) and the memory
estimate per IPU.
"""

from __future__ import annotations

import pathlib
import sys
import time

import torch
import torch.nn.functional as F  # noqa: N812 - torch's convention

import poptorch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "test" / "models"))
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))  # bench/fidelity, last
__import__("zoo").import_torchvision()  # transformers imports torchvision (a CUDA build here)
import transformers  # noqa: E402 - after torchvision's schemas are defined
from common import Published  # noqa: E402 - after bench/fidelity is on the path

NAME = "BERT-Large pretraining phase 1 (seq 128), IPU-POD16, 4 stages x 4 replicas, fp16, LAMB"
# Graphcore lists this configuration's throughput on its performance-results page
# (IPU-POD16, PyTorch, "BERT Large Ph1 Pre-Training (SL128)"), but the page's tables are
# not in any copy reachable from the development VM, nor in the example's README; its
# row in FIDELITY.md checks the memory verdict and shows the simulated figure.
PUBLISHED = Published(
    figure=None, unit="sequences/s",
    source="Graphcore, Performance Results, IPU-POD16 training table, BERT-Large Ph1 "
           "Pre-Training (SL128) (https://www.graphcore.ai/performance-results): its "
           "tables are not in the copies of the page reachable here",
    measures="phase 1 pretraining throughput, sequence length 128, PyTorch")
QUICK_LAYERS = 4
REASON = ("no published figure reachable. Fits: IPU 1 850 of 897 MiB (temporary 183, "
          "weights 168). Matmuls as poplin's 1x1 conv vertices (4,597 sequences/s before); "
          "the attention's softmax and its gradient in fp16 as PopART's (popnn: f16 "
          "exponentials and products, the sum into f32)")

# configs_pretraining.yml, pretrain_large_128 (with the defaults it inherits)
MICRO_BATCH = 8
REPLICAS = 4
GRADIENT_ACCUMULATION = 2048
DEVICE_ITERATIONS = 1
SEQUENCE = 128
MASK_TOKENS = 20
VOCAB = 30522
HIDDEN = 1024
HEADS = 16
INTERMEDIATE = 4 * HIDDEN
LAYERS = 24
LAYERS_PER_IPU = (3, 7, 7, 7)
MATMUL_PROPORTION = (0.15, 0.25, 0.25, 0.25)
LOSS_SCALING = 4096.0
LEARNING_RATE = 0.006
WEIGHT_DECAY = 0.01
LAYER_NORM_EPS = 0.001
RANDOM_SEED = 5

SAMPLES_PER_STEP = MICRO_BATCH * GRADIENT_ACCUMULATION * REPLICAS * DEVICE_ITERATIONS


def layers_per_ipu(layers: int = LAYERS) -> tuple[int, ...]:
    """Encoder layers per IPU: Graphcore's [3, 7, 7, 7] for 24, else the same shape scaled down.

    IPU 0 also holds the embeddings and the heads, so it takes fewer layers:
    a quarter of the layers less one (at least none), the rest evenly over
    IPUs 1-3, the remainder on the last ones.
    """
    if layers == LAYERS:
        return LAYERS_PER_IPU
    first = max(0, layers // 8)
    rest = layers - first
    per, extra = divmod(rest, 3)
    return (first, *(per + (1 if i >= 3 - extra else 0) for i in range(3)))


class OnehotGather(torch.nn.Module):
    """Graphcore's gather of the masked positions: a one-hot matrix times the sequence."""

    def forward(self, sequence: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        one_hot = F.one_hot(positions, int(sequence.shape[1])).to(dtype=sequence.dtype)
        return torch.matmul(one_hot.detach(), sequence)


class PipelinedBertForPretraining(torch.nn.Module):
    """BertForPreTraining with Graphcore's pipeline annotations and loss (modeling.py)."""

    def __init__(self, config: transformers.BertConfig, per_ipu: tuple[int, ...]):
        super().__init__()
        self.config = config
        self.model = transformers.BertForPreTraining(config)
        self.gather_indices = OnehotGather()
        bert = self.model.bert
        bert.embeddings = poptorch.BeginBlock(bert.embeddings, "Embedding", ipu_id=0)
        layer_ipu = [ipu for ipu, n in enumerate(per_ipu) for _ in range(n)]
        for index, layer in enumerate(bert.encoder.layer):
            layer.register_forward_hook(_recomputation_checkpoint)
            bert.encoder.layer[index] = poptorch.BeginBlock(layer, f"Encoder{index}",
                                                            ipu_id=layer_ipu[index])
        bert.pooler = poptorch.BeginBlock(bert.pooler, "Pooler", ipu_id=0)
        self.model.cls = poptorch.BeginBlock(self.model.cls, "Classifier", ipu_id=0)

    def forward(self, input_ids, attention_mask, token_type_ids, masked_lm_positions,
                masked_lm_labels, next_sentence_label):
        outputs = self.model.bert(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids)
        sequence_output, pooled_output = outputs[0], outputs[1]
        masked_output = self.gather_indices(sequence_output, masked_lm_positions)
        prediction_scores, nsp_scores = self.model.cls(masked_output, pooled_output)
        masked_lm_loss = F.cross_entropy(prediction_scores.view(-1, self.config.vocab_size),
                                         masked_lm_labels.view(-1), ignore_index=0).float()
        next_sentence_loss = F.cross_entropy(nsp_scores.view(-1, 2),
                                             next_sentence_label.view(-1)).float()
        total_loss = poptorch.identity_loss(masked_lm_loss + next_sentence_loss, reduction="none")
        return total_loss, masked_lm_loss, next_sentence_loss


def _recomputation_checkpoint(module, inputs, outputs):
    """Graphcore's recompute_checkpoint_every_layer: checkpoint each layer's output."""
    if isinstance(outputs, torch.Tensor):
        return poptorch.recomputationCheckpoint(outputs)
    return tuple(poptorch.recomputationCheckpoint(y) if isinstance(y, torch.Tensor) else y
                 for y in outputs)


def options(per_ipu: tuple[int, ...] = LAYERS_PER_IPU,
            gradient_accumulation: int = GRADIENT_ACCUMULATION,
            replicas: int = REPLICAS) -> poptorch.Options:
    """ipu_options.py get_options with pretrain_large_128's values."""
    opts = poptorch.Options()
    opts.replicationFactor(replicas)
    opts.deviceIterations(DEVICE_ITERATIONS)
    opts.Training.gradientAccumulation(gradient_accumulation)
    opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean)
    opts.outputMode(poptorch.OutputMode.Sum)
    opts.randomSeed(RANDOM_SEED)
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings().useOnChipStorage(False).useReplicatedTensorSharding(True))
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    opts.setAvailableMemoryProportion({f"IPU{i}": MATMUL_PROPORTION[i]
                                       for i in range(len(per_ipu))})
    opts.Precision.enableStochasticRounding(True)
    opts.Precision.setPartialsType(torch.float16)
    return opts


def optimizer(model: torch.nn.Module) -> poptorch.optim.LAMB:
    """optimization.py get_optimizer for optimizer: LAMB."""
    groups = [
        {"params": [], "weight_decay": 0, "max_weight_norm": 0},
        {"params": [], "weight_decay": 0},
        {"params": [], "weight_decay": WEIGHT_DECAY},
    ]
    for name, param in model.named_parameters():
        if param.requires_grad:
            index = 0 if "bias" in name else 1 if param.dim() == 1 else 2
            groups[index]["params"].append(param)
    opt = poptorch.optim.LAMB(
        [g for g in groups if g["params"]], lr=LEARNING_RATE, weight_decay=0, eps=1e-6,
        loss_scaling=LOSS_SCALING, max_weight_norm=None, accum_type=torch.float16,
        first_order_momentum_accum_type=torch.float32,
        second_order_momentum_accum_type=torch.float32, bias_correction=True)
    opt.variable_attrs.markAsConstant("max_weight_norm")
    opt.variable_attrs.markAsConstant("weight_decay")
    return opt


def bert_config(layers: int = LAYERS, hidden: int = HIDDEN, heads: int = HEADS,
                vocab: int = VOCAB) -> transformers.BertConfig:
    """BertConfig with Graphcore's sizes (configs_pretraining.yml, defaults)."""
    return transformers.BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=4 * hidden, max_position_embeddings=512, layer_norm_eps=LAYER_NORM_EPS,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.0, attn_implementation="eager")


def example_inputs(config: transformers.BertConfig, batch: int, sequence: int = SEQUENCE,
                   mask_tokens: int = MASK_TOKENS) -> tuple[torch.Tensor, ...]:
    """One step's inputs: ``batch`` samples of pretraining data (random tokens)."""
    gen = torch.Generator().manual_seed(RANDOM_SEED)
    input_ids = torch.randint(1, config.vocab_size, (batch, sequence), generator=gen)
    attention_mask = torch.ones(batch, sequence, dtype=torch.long)
    half = sequence // 2
    token_type_ids = torch.cat([torch.zeros(batch, half, dtype=torch.long),
                                torch.ones(batch, sequence - half, dtype=torch.long)], dim=1)
    positions = torch.rand(batch, sequence, generator=gen).argsort(dim=1)[:, :mask_tokens]
    labels = torch.randint(1, config.vocab_size, (batch, mask_tokens), generator=gen)
    nsp = torch.randint(0, 2, (batch,), generator=gen)
    return input_ids, attention_mask, token_type_ids, positions, labels, nsp


def build(layers: int = LAYERS):
    """(uncompiled poptorch.trainingModel, its inputs) of the config with ``layers`` encoders."""
    torch.manual_seed(RANDOM_SEED)
    per_ipu = layers_per_ipu(layers)
    config = bert_config(layers)
    model = PipelinedBertForPretraining(config, per_ipu).half().train()
    training_model = poptorch.trainingModel(model, options(per_ipu), optimizer=optimizer(model))
    return training_model, example_inputs(config, MICRO_BATCH * GRADIENT_ACCUMULATION * REPLICAS
                                           * DEVICE_ITERATIONS)


def main(layers: int = LAYERS) -> None:
    """Compile only, as run_pretraining.py --compile-only does; print the figures."""
    training_model, args = build(layers)
    start = time.perf_counter()
    training_model.compile(*args)
    print(f"{NAME}, {layers} layers {layers_per_ipu(layers)}")
    print(f"compile time: {time.perf_counter() - start:.1f} s")
    timeline = training_model.getTimeline()
    print(f"simulated cycles per step: {timeline.total_cycles}")
    print(training_model.getMemoryEstimate())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else LAYERS)
