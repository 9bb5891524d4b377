"""ResNet-50 v1.5 inference on one IPU, as Graphcore's PyTorch CNN inference benchmark
runs it (graphcore/examples vision/cnns/pytorch/inference, configs.yml `resnet50` and
benchmarks.yml `pytorch_resnet50_infer_gen_pod4`): batch 80 per IPU (the largest of the
benchmark's batch sizes), device iterations 128, fp16 weights and activations with fp16
partials ("16.16", half_partial), 64 IO tiles with overlapped host I/O (--num-io-tiles
64). The benchmark runs 4 such replicas, one per IPU of an IPU-M2000, each its own
process (poprun --num-instances 4): per-IPU throughput is a quarter of its figure.

Left out: 8-bit image input normalised on the IPU (eight_bit_io: the model reads fp16
images here; the host link carries twice the bytes).
"""

from __future__ import annotations

import cnn
import torch
from common import Published

import poptorch

NAME = "ResNet-50 v1.5 inference, 1 IPU (batch 80, 128 device iterations, fp16)"
BATCH, DEVICE_ITERATIONS, IO_TILES = 80, 128, 64
SAMPLES_PER_STEP = BATCH * DEVICE_ITERATIONS
PUBLISHED = Published(
    figure=None, unit="images/s",
    source="Graphcore, Performance Results, IPU-M2000 inference table "
           "(https://www.graphcore.ai/performance-results): its tables are not in the "
           "copies of the page reachable here",
    measures="PyTorch, ResNet-50 v1.5, IPU-M2000 (4 replicas, one per IPU), generated "
             "data, per-IPU figure = a quarter of the M2000's")
REASON = ("no published figure reachable. Fits (807 of 858 MiB; temporary 468 MiB: the "
          "conv plans' input windows and partials). Step: convolutions 83% as poplin's conv "
          "vertices run them (vertex compute 63%, the input window's exchange 20%; "
          "runtime/machine/cost_conv.py), batch norm in fp16 with f32 statistics about "
          "10% (24% when torch's decomposition ran it in f32), host input 31% overlapped "
          "on the IO tiles")


class Overlapped(torch.nn.Module):
    """The examples' wrapper with IO tiles: images and logits stream on the IO tiles,
    overlapping the previous (next) device iteration's compute."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, images):
        mode = poptorch.OverlapMode.OverlapDeviceIterationLoop
        logits = self.model(poptorch.set_overlap_for_input(images, mode))
        return poptorch.set_overlap_for_output(logits, mode)


def build(layers: int | None = None):
    if layers is not None:
        raise ValueError("ResNet-50 compiles in seconds: it has no cut-down `layers`")
    model = Overlapped(cnn.resnet50(training=False))
    opts = poptorch.Options().deviceIterations(DEVICE_ITERATIONS)
    opts.Precision.setPartialsType(torch.half)
    opts.TensorLocations.numIOTiles(IO_TILES)
    # overlapped I/O needs it on one IPU (PopTorch refuses PipelinedExecution)
    opts.setExecutionStrategy(poptorch.ShardedExecution())
    inference = poptorch.inferenceModel(model, opts)
    return inference, (cnn.images(SAMPLES_PER_STEP),)
