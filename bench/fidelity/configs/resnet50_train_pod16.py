"""ResNet-50 v1.5 training on an IPU-POD16: Graphcore's MLPerf Training v1.0 closed
submission (TensorFlow 1), ported to PopTorch as its options read:
one IPU per replica, 16 replicas, micro-batch 20, gradient accumulation 6 (global batch
1920, `global_batch_size` and `gradient_accumulation_steps` of its MLPerf log), fp16
weights and activations with fp16 partials ("16.16"), SGD with momentum 0.9 and weight
decay 2.5e-5 (the log's sgd_opt_* keys), stochastic rounding, loss scaling.

Left out (no PopTorch counterpart here): batch-norm statistics shared by pairs of IPUs
(`model_bn_span` 40), label smoothing (changes no cost), the host's JPEG pipeline.
"""

from __future__ import annotations

import cnn
import torch
from common import Published

import poptorch

NAME = "ResNet-50 v1.5 training, IPU-POD16 (16 replicas x 20, GA 6, fp16)"
REPLICAS, MICRO_BATCH, ACCUMULATION = 16, 20, 6
SAMPLES_PER_STEP = REPLICAS * MICRO_BATCH * ACCUMULATION
# epoch_start of epoch 1 (time_ms 1623875894523) to epoch_stop of epoch 29
# (1623877260314): 1365.791 s for 29 x 1,281,167 train_samples (no evaluation in
# between: each epoch_start follows the previous epoch_stop within 1 ms)
PUBLISHED = Published(
    figure=round(29 * 1_281_167 / 1365.791, 0), unit="images/s",
    source="MLCommons training_results_v1.0, Graphcore/results/ipu-pod16-TF1/resnet/"
           "result_0.txt (MLPerf Training v1.0 closed, IPU-POD16, TF1)",
    measures="training throughput over epochs 1-29 of run 0: 29 x train_samples / "
             "(epoch_stop 29 - epoch_start 1), host data pipeline included")
REASON = ("the model is too fast: 54.9M cycles a call against the 93.9M the published "
          "rate implies. Convolutions (forward, input and weight gradients) are 56% of "
          "the step and their AMP compute is the MACs at the peak fp16.16 rate (1.1x the "
          "ideal over 1472 tiles), none of poplin's conv-vertex overheads "
          "(PerformanceEstimation.hpp); hardware reached 17% of that peak on this model. "
          "Not modelled: the host JPEG pipeline the published figure includes, batch norm "
          "over pairs of IPUs. Found here: batch-norm statistics gathered 47k partials on "
          "one tile (63% of the step; PopLibs adds an intermediate stage, fixed). Memory "
          "refused: activations 836 MiB. Port: TF1 run in PopTorch")


def build(layers: int | None = None):
    if layers is not None:
        raise ValueError("ResNet-50 compiles in seconds: it has no cut-down `layers`")
    model = cnn.resnet50(training=True)
    opts = poptorch.Options().replicationFactor(REPLICAS)
    opts.Training.gradientAccumulation(ACCUMULATION)
    opts.Precision.setPartialsType(torch.half)
    opts.Precision.enableStochasticRounding(True)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=3.824, momentum=0.9,
                                   weight_decay=2.5e-5, loss_scaling=128.0)
    training = poptorch.trainingModel(model, opts, optimizer)
    return training, (cnn.images(SAMPLES_PER_STEP), cnn.labels(SAMPLES_PER_STEP))
