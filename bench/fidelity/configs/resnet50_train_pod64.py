"""ResNet-50 v1.5 training on an IPU-POD64: Graphcore's MLPerf Training v1.0 closed
submission (TensorFlow 1), ported to PopTorch as its options read: one IPU per replica,
64 replicas over 16 IPU-M2000s, micro-batch 20, gradient accumulation 2 (global batch
2560, `global_batch_size` and `gradient_accumulation_steps` of its MLPerf log), fp16
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

NAME = "ResNet-50 v1.5 training, IPU-POD64 (64 replicas x 20, GA 2, fp16)"
REPLICAS, MICRO_BATCH, ACCUMULATION = 64, 20, 2
SAMPLES_PER_STEP = REPLICAS * MICRO_BATCH * ACCUMULATION
# epoch_start of epoch 1 (time_ms 1623810485623) to epoch_stop of epoch 29
# (1623810952580): 466.957 s for 29 x 1,281,167 train_samples (no evaluation in
# between: each epoch_start follows the previous epoch_stop within 1 ms)
PUBLISHED = Published(
    figure=round(29 * 1_281_167 / 466.957, 0), unit="images/s",
    source="MLCommons training_results_v1.0, Graphcore/results/ipu-pod64-TF1/resnet/"
           "result_0.txt (MLPerf Training v1.0 closed, IPU-POD64, TF1)",
    measures="training throughput over epochs 1-29 of run 0: 29 x train_samples / "
             "(epoch_stop 29 - epoch_start 1), host data pipeline included")
REASON = ("the model is too fast, as on the POD16 (convolutions at the peak AMP rate, no "
          "host pipeline), and scales better than hardware: per IPU it loses 9% from the "
          "POD16 (the gradient all-reduce every 40 images is 13% of the step), hardware "
          "27%. Memory refused: activations 836 MiB. Port: TF1 run in PopTorch")


def build(layers: int | None = None):
    if layers is not None:
        raise ValueError("ResNet-50 compiles in seconds: it has no cut-down `layers`")
    model = cnn.resnet50(training=True)
    opts = poptorch.Options().replicationFactor(REPLICAS)
    opts.Training.gradientAccumulation(ACCUMULATION)
    opts.Precision.setPartialsType(torch.half)
    opts.Precision.enableStochasticRounding(True)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=5.098, momentum=0.9,
                                   weight_decay=2.5e-5, loss_scaling=128.0)
    training = poptorch.trainingModel(model, opts, optimizer)
    return training, (cnn.images(SAMPLES_PER_STEP), cnn.labels(SAMPLES_PER_STEP))
