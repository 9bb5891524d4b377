"""The cost rule of `ipu.ctc_beam_search_decoder` (popnn::ctc_infer).

popnn's plan spreads the batch entries over tiles (graphcore/poplibs,
include/popnn/CTCPlan.hpp: the batch, time and classes partitions), one batch entry a
tile here, and steps through time: each of the T steps is a BSP step in which a tile
scores its entry's beam_width x classes candidate extensions (a log-add-exp each, at
popops' exp rate, `plan.VECTOR_RATES`), then merges and ranks them (a sort of the
candidates: log2(n) passes at the max rate, as `cost_families.scan` charges popops'
sort) before keeping beam_width. The tile receives its entry's log probabilities once.
The candidates (two fp32 probabilities and a label each) are the temporary memory.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from poptorch.dialects.elementwise import UNARY_OPS
from poptorch.runtime.machine import cost_families as family
from poptorch.runtime.machine.plan import OpCost, Plan, vector_cycles, vector_rate

CANDIDATE_BYTES = 12  # two fp32 log probabilities (blank- and label-ending) and a label


def ctc_beam_search_decoder(p: Plan) -> OpCost:
    time, batch, classes = p.shapes[0]
    width = ir.IntegerAttr(p.op.attributes["beam_width"]).value
    tiles = max(1, min(batch, p.available))
    entries = math.ceil(batch / tiles)
    candidates = width * classes
    exp = vector_rate(UNARY_OPS["exp"], p.element, p.machine)
    rank = vector_rate(family.MAX, p.element, p.machine)
    per_step = (vector_cycles(candidates, exp, p.machine)
                + vector_cycles(candidates * max(1, math.ceil(math.log2(candidates))), rank,
                                p.machine))
    received = entries * time * classes * p.bytes
    return OpCost(entries * time * per_step,
                  math.ceil(received / p.machine.exchangeBytesPerCycle),
                  time * p.machine.globalSyncCycles,
                  tiles * entries * candidates * CANDIDATE_BYTES)
