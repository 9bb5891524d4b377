"""ResNet-50 v1.5 as Graphcore's CNN examples run it, for the fidelity configurations:
torchvision's resnet50 (v1.5: stride 2 in the 3x3 convolution of each downsampling
bottleneck) with random weights, in half precision, with a classification loss for
training (the shape PopTorch's trainingModel wants: forward(images, labels) returns
(logits, loss)).

Training is Graphcore's MLPerf Training v1.0 closed submission (TensorFlow 1), ported
to PopTorch as its options read (`build_training`): one IPU per replica, fp16 weights
and activations with fp16 partials ("16.16"), SGD with momentum 0.9 and weight decay
2.5e-5 (its log's sgd_opt_* keys), stochastic rounding, loss scaling 128. What differs
between the IPU-POD16 and IPU-POD64 submissions (replicas, micro-batch, gradient
accumulation: the log's `global_batch_size` and `gradient_accumulation_steps`; the
learning rate, available memory proportion) is a `Training`, and the published throughput
comes from the log's epoch timestamps (`mlperf_published`).

Recomputation as the submission ran it (configs.yml `mk2_resnet50_mlperf_pod16_bs20`:
`pipeline: True, shards: 1`, Sequential schedule, `enable_recomputation: True`): one IPU
whose "pipeline stages" end at `pipeline_splits`, each recomputed in the backward from
its stage's input. Graphcore's own PopTorch port of ResNet-50 training (graphcore/examples
vision/cnns/pytorch: utils/ipu_settings.py `train_settings`, models/models.py) says the
same on one IPU with `_Popart.set("autoRecomputation", RecomputeAll)` plus
`poptorch.recomputationCheckpoint` at its checkpoints, as `build_training` does at the
submission's splits. TF1's names (Models/resnet_base.py `_build_function_list`): `b0` is
the stem, `b{n}/{i}` the i-th bottleneck of the n-th group (block_counts 3, 4, 6, 3) and
`b{n}/{i}/relu` its final ReLU, after the residual add: torchvision's `layer{n}[i]`
output. `stable_norm: True` is `enableStableNorm(True)`.
Left out (no PopTorch counterpart here): batch-norm statistics shared by pairs of IPUs
(`model_bn_span` 40), label smoothing (changes no cost), the host's JPEG pipeline.

torchvision comes through test/models/zoo.py's `import_torchvision`, which works around
the registry serving only a CUDA build (README, "The model zoo").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from common import Published

import poptorch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "models"))
from zoo import WithLoss, import_torchvision  # noqa: E402

__all__ = ["Checkpointed", "Training", "WithLoss", "build_training", "images",
           "import_torchvision", "labels", "mlperf_published", "resnet50"]

IMAGE = (3, 224, 224)
CLASSES = 1000
# the submission's pipeline_splits, b{n}/{i}/relu as (n, i): torchvision's layer{n}[i]
CHECKPOINTS = ((1, 0), (1, 2), (2, 0), (2, 2), (3, 0), (3, 3))
RECOMPUTE_ALL = 4  # PopART's RecomputationType::RecomputeAll
TRAIN_SAMPLES = 1_281_167  # ImageNet's training set, the log's train_samples


def resnet50(training: bool) -> torch.nn.Module:
    """fp16 ResNet-50 (with its loss when `training`), random weights, seed 0."""
    torch.manual_seed(0)
    model = import_torchvision().models.resnet50(num_classes=CLASSES)
    model = WithLoss(model) if training else model
    return model.half().train(training)


def images(count: int) -> torch.Tensor:
    """`count` random fp16 images (the examples' --data generated / synthetic)."""
    return torch.randn(count, *IMAGE, generator=torch.Generator().manual_seed(1)).half()


def labels(count: int) -> torch.Tensor:
    return torch.randint(0, CLASSES, (count,), generator=torch.Generator().manual_seed(2))


@dataclass(frozen=True)
class Training:
    """What one MLPerf ResNet-50 submission sets that another does not."""

    replicas: int
    micro_batch: int
    accumulation: int
    learning_rate: float
    memory_proportion: float  # the config's available_memory_proportion

    @property
    def samples_per_call(self) -> int:
        return self.replicas * self.micro_batch * self.accumulation


def build_training(setup: Training, layers: int | None = None):
    """The uncompiled trainingModel of `setup` and its inputs for one call."""
    if layers is not None:
        raise ValueError("ResNet-50 compiles in seconds: it has no cut-down `layers`")
    model = resnet50(training=True)
    for group, index in CHECKPOINTS:
        layer = getattr(model.model, f"layer{group}")
        layer[index] = Checkpointed(layer[index])
    opts = poptorch.Options().replicationFactor(setup.replicas)
    opts._Popart.set("autoRecomputation", RECOMPUTE_ALL)
    opts.setAvailableMemoryProportion({"IPU0": setup.memory_proportion})
    opts.enableStableNorm(True)
    opts.Training.gradientAccumulation(setup.accumulation)
    opts.Precision.setPartialsType(torch.half)
    opts.Precision.enableStochasticRounding(True)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=setup.learning_rate, momentum=0.9,
                                   weight_decay=2.5e-5, loss_scaling=128.0)
    training = poptorch.trainingModel(model, opts, optimizer)
    count = setup.samples_per_call
    return training, (images(count), labels(count))


class Checkpointed(torch.nn.Module):
    """`block`, its output a recomputation checkpoint (a `pipeline_splits` entry)."""

    def __init__(self, block: torch.nn.Module):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return poptorch.recomputationCheckpoint(self.block(x))


def mlperf_published(pod: str, start_ms: int, stop_ms: int, epochs: int = 29) -> Published:
    """The training throughput of run 0 of Graphcore's MLPerf Training v1.0 ResNet-50 log
    on `pod` ("IPU-POD16"): `epochs` x train_samples from the time_ms of epoch_start of
    epoch 1 (`start_ms`) to that of epoch_stop of epoch `epochs` (`stop_ms`). No
    evaluation falls in between: each epoch_start follows the previous epoch_stop within
    1 ms."""
    folder = f"{pod.lower()}-TF1"
    return Published(
        figure=round(epochs * TRAIN_SAMPLES / ((stop_ms - start_ms) / 1000), 0),
        unit="images/s",
        source=f"MLCommons training_results_v1.0, Graphcore/results/{folder}/resnet/"
               f"result_0.txt (MLPerf Training v1.0 closed, {pod}, TF1)",
        measures=f"training throughput over epochs 1-{epochs} of run 0: {epochs} x "
                 f"train_samples / (epoch_stop {epochs} - epoch_start 1), host data "
                 "pipeline included")
