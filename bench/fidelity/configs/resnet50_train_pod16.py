"""ResNet-50 v1.5 training on an IPU-POD16: Graphcore's MLPerf Training v1.0 closed
submission as cnn.py ports it, 16 replicas x micro-batch 20 x gradient accumulation 6
(global batch 1920)."""

from __future__ import annotations

import cnn

NAME = "ResNet-50 v1.5 training, IPU-POD16 (16 replicas x 20, GA 6, fp16)"
SETUP = cnn.Training(replicas=16, micro_batch=20, accumulation=6, learning_rate=3.824,
                     memory_proportion=0.15)
SAMPLES_PER_STEP = SETUP.samples_per_call
PUBLISHED = cnn.mlperf_published("IPU-POD16", start_ms=1623875894523, stop_ms=1623877260314)
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
    return cnn.build_training(SETUP, layers)
