"""BERT-Large pretraining on an IPU-POD64: Graphcore's MLPerf Training v1.0 closed
submission (PopART, configs/mk2/pod64-closed.json), ported to PopTorch (bert.py): the
embeddings and the tied masked-LM head on IPU 0, 24 layers on IPUs 1-7 as 3/3/3/3/4/4/4
(`encoder_start_ipu` 1), 8 replicas of 8 IPUs over 16 IPU-M2000s, micro-batch 2 packs,
gradient accumulation 96 (3072 sequences a step), all memory available to temporaries,
LAMB (beta1 0.80) with its state on chip, sharded over the replicas.
"""

from __future__ import annotations

import bert
from common import Published

NAME = ("BERT-Large pretraining (seq 512, packed), IPU-POD64: 8 IPUs x 8 replicas, "
        "heads on IPU 0 + 3/3/3/3/4/4/4 layers, GA 96, fp16, LAMB + RTS")
SETUP = bert.Setup(layers_per_ipu=(3, 3, 3, 3, 4, 4, 4), encoder_start_ipu=1, replicas=8,
                   micro_batch=2, accumulation=96, memory_proportions=(1.0,) * 8,
                   optimizer_off_chip=False, beta1=0.80)
SAMPLES_PER_ROW = bert.SEQUENCES_PER_PACK
SAMPLES_PER_STEP = SETUP.packs_per_call * SAMPLES_PER_ROW
QUICK_LAYERS = 7
# As for the POD16: the second block, block_start at time_ms 1621537536532 with 175,523
# sequences done, block_stop at 1621537577285 with 350,685: 175,162 sequences in
# 40.753 s.
PUBLISHED = Published(
    figure=round((350_685 - 175_523) / 40.753, 0), unit="sequences/s",
    source="MLCommons training_results_v1.0, Graphcore/results/ipu-pod64-POPART-closed/"
           "bert/result_0.txt (MLPerf Training v1.0 closed, IPU-POD64, PopART)",
    measures="the run's second block: sequences (epoch_num) over block_start to "
             "block_stop")
REASON = ("on main at bcb4ea0: the step is too slow: fp16 Linear "
          "charged at the fp32 AMP rate (issue 25 item 1), every weight slab charged as "
          "an exchange on every use (item 2); memory refused by the stash of all 96 "
          "micro-batches on IPU 0 (the default schedule fills the pipeline with every "
          "micro-batch; PopART bounds the stash by the pipeline depth). Port: PopART "
          "run in PopTorch, 2 sequences a pack")


def build(layers: int | None = None):
    return bert.build(SETUP, layers)
